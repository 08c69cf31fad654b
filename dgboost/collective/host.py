"""A host Communicator between Dask workers, over distributed's own comms.

Messages travel worker to worker through distributed's RPC layer: a worker
plugin (``CollectivePlugin``) adds a handler to every worker that files each
incoming array in a mailbox, keyed by (job, call number, sender). A training
task, running in a worker thread, sends on the worker's event loop and waits on
its mailbox. Every wait is bounded by ``timeout``; then, or when any rank
aborts, every rank still waiting raises :class:`CollectiveError` naming the
peer, so no task is left waiting on a dead one.

Arrays go as numpy; a cupy array in gives a cupy array out (through the host).
GPU jobs use ``NcclCommunicator`` for their arrays and this one only for
control messages.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import logging
import threading
import time

import numpy as np
from distributed import WorkerPlugin, get_worker
from distributed.protocol import to_serialize

from ..backend import asarray, get_xp, to_numpy
from .base import CollectiveError, PeerUnreachable, ReduceOp, Traffic, check_root

logger = logging.getLogger("dgboost")

PLUGIN_NAME = "dgboost-collective"
_DELIVER = "dgboost_collective_deliver"
#: The worker handler that aborts a job's waits (the client and the cluster's job table send it).
ABORT_OP = "dgboost_collective_abort"
_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}
#: Bytes from which an all-reduce among three ranks or more goes as a reduce-scatter and an
#: all-gather (each rank sends 2 (n - 1) / n of the array, not n - 1 copies of it, in two
#: exchanges instead of one): a level's histograms do, a round's few scalars do not.
SLICED_BYTES = 1 << 16
#: Jobs whose late messages are dropped rather than filed (a bounded memory of them).
_FORGOTTEN_JOBS = 256
#: Seconds an abort message may take to reach a peer (best effort: the peer may be dead).
_ABORT_SEND_SECONDS = 5.0
#: Seconds between a blocked send's looks at the job's abort flag.
_ABORT_POLL_SECONDS = 0.05


class CollectivePlugin(WorkerPlugin):
    """Gives a worker the mailbox that DaskCommunicator receives through."""

    name = PLUGIN_NAME
    idempotent = True

    def setup(self, worker):
        self._changed = threading.Condition()
        self._mail: dict[str, dict] = collections.defaultdict(dict)
        self._aborted: dict[str, str] = {}
        self._woken: dict[str, list] = collections.defaultdict(list)  # a job's events set at its abort
        self._forgotten: collections.deque = collections.deque(maxlen=_FORGOTTEN_JOBS)
        worker.handlers[_DELIVER] = self.deliver
        worker.handlers[ABORT_OP] = self.abort

    def teardown(self, worker):
        worker.handlers.pop(_DELIVER, None)
        worker.handlers.pop(ABORT_OP, None)

    # Handlers: called on the worker's event loop, so they never block.
    def deliver(self, job: str, call: int, source: int, data=None) -> None:
        with self._changed:
            if job not in self._forgotten and job not in self._aborted:  # no wait would take it
                self._mail[job][(call, source)] = data
                self._changed.notify_all()

    def abort(self, job: str, reason: str) -> None:
        """Make every wait of ``job`` on this worker raise ``reason``; later calls too. Its mail
        goes: a rank that never ran (cancelled after the job failed) would never forget it, and
        it may hold rows another rank sent it."""
        with self._changed:
            if job not in self._forgotten:
                self._aborted.setdefault(job, reason)
                self._mail.pop(job, None)
                self._changed.notify_all()
                for event in self._woken.get(job, ()):
                    event.set()

    def wake_at_abort(self, job: str, event: threading.Event) -> None:
        """Set ``event`` when ``job`` is aborted (at once if it is already)."""
        with self._changed:
            if job in self._aborted:
                event.set()
            elif job not in self._forgotten:
                self._woken[job].append(event)

    # Called from the training task's thread.
    def take(self, job: str, call: int, source: int, deadline: float):
        """The array ``source`` sent for ``call``; raises CollectiveError on abort or at ``deadline``."""
        key = (call, source)
        with self._changed:
            while True:
                if job in self._aborted:
                    raise CollectiveError(self._aborted[job])
                box = self._mail[job]
                if key in box:
                    return box.pop(key)
                left = deadline - time.monotonic()
                if left <= 0:
                    return _TIMED_OUT
                self._changed.wait(left)

    def aborted(self, job: str) -> str | None:
        with self._changed:
            return self._aborted.get(job)

    def forget(self, job: str) -> None:
        """Drop ``job``'s mailbox; its late messages are ignored."""
        with self._changed:
            self._forgotten.append(job)
            self._mail.pop(job, None)
            self._aborted.pop(job, None)
            self._woken.pop(job, None)


_TIMED_OUT = object()


class DaskCommunicator:
    """The ranks of one job, one per Dask worker, talking over distributed's comms.

    Parameters
    ----------
    job : str
        The job's unique name; messages of other jobs never mix with its own.
    rank : int
        This worker's rank; ``addresses[rank]`` must be this worker's address.
    addresses : sequence of str
        Every rank's worker address, in rank order.
    timeout : float
        Seconds any one wait may take before the job is aborted.

    Must be made inside a task running on the worker at ``addresses[rank]``, on a
    worker that has the CollectivePlugin.
    """

    def __init__(self, job: str, rank: int, addresses, timeout: float):
        worker = get_worker()
        addresses = tuple(addresses)
        if worker.address != addresses[rank]:
            raise RuntimeError(f"rank {rank} of dgboost job {job} runs on {worker.address}, but it was "
                               f"sent to {addresses[rank]}: the task must stay on its worker")
        if PLUGIN_NAME not in worker.plugins:
            raise RuntimeError(f"worker {worker.address} lacks the {PLUGIN_NAME} plugin: register "
                               "dgboost.collective.host.CollectivePlugin on the cluster first")
        self.job = job
        self._rank = rank
        self.addresses = addresses
        self.timeout = float(timeout)
        self._worker = worker
        self._mailbox: CollectivePlugin = worker.plugins[PLUGIN_NAME]
        self._calls = 0
        self._sent_to: collections.Counter = collections.Counter()  # point-to-point messages by peer
        self._taken_from: collections.Counter = collections.Counter()
        self.traffic = Traffic()

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return len(self.addresses)

    def allreduce(self, array, op: ReduceOp = "sum"):
        if op not in _REDUCE:
            raise ValueError(f"op={op!r} must be 'sum', 'max' or 'min'")
        return self._reduced(array, op, "allreduce", receivers=None)

    def reduce(self, array, root: int = 0):
        """The sum on ``root``, ``allreduce``'s bits; sliced, each rank sends about one array,
        root (n - 1) / n of one, where a gather would bring root n - 1."""
        check_root(root, self.world_size)
        return self._reduced(array, "sum", "reduce", receivers=[root])

    def _reduced(self, array, op: ReduceOp, what: str, receivers):
        """Every rank's ``array`` reduced in rank order on ``receivers`` (None: every rank; the
        same bits everywhere); a rank that receives nothing gets ``array`` back.

        Among three ranks or more an array of ``SLICED_BYTES`` goes as a reduce-scatter (rank r
        reduces slice r of every rank's array, in rank order) and each slice's sum to the
        receivers; else every rank sends its whole array to them. One collective in the
        traffic count either way."""
        n = self.world_size
        if n > 2 and array.nbytes >= SLICED_BYTES:
            flat = to_numpy(array).reshape(-1)
            mine = self._exchange(flat, f"{what} (its slices)", senders=range(n), receivers=None,
                                  slice_for=self._slicer(flat))
            sums = self._exchange(functools.reduce(_REDUCE[op], mine), f"{what} (their sums)", senders=range(n),
                                  receivers=receivers, counted=False)
            return asarray(get_xp(array), np.concatenate(sums).reshape(array.shape)) if sums else array
        parts = self._exchange(array, what, senders=range(n), receivers=receivers)
        return asarray(get_xp(array), functools.reduce(_REDUCE[op], parts)) if parts else array

    def _slicer(self, flat: np.ndarray):
        """Rank r's slice of ``flat`` (a function of r): as np.array_split cuts it in world_size."""
        n = self.world_size
        edges = np.cumsum([0, *(flat.size // n + (rank < flat.size % n) for rank in range(n))])
        return lambda rank: flat[edges[rank]:edges[rank + 1]]

    def broadcast(self, array, root: int = 0):
        check_root(root, self.world_size)
        parts = self._exchange(array, "broadcast", senders=[root], receivers=None)
        return asarray(get_xp(array), parts[0]) if self.rank != root else array

    def allgather(self, array, rows=None) -> list:  # each part carries its own shape
        parts = self._exchange(array, "allgather", senders=range(self.world_size), receivers=None)
        xp = get_xp(array)
        return [array if rank == self.rank else asarray(xp, part) for rank, part in enumerate(parts)]

    def exchange(self, sends: list, receives: list) -> list:
        """Point to point (``Communicator.exchange``): one message to each peer sent to, holding
        its arrays in order, and one from each peer received from. These messages are numbered
        by pair (negative numbers: the collectives' are not), so the ranks not named go on
        unaware. One collective in the traffic count."""
        reason = self._mailbox.aborted(self.job)
        if reason is not None:
            raise CollectiveError(reason)
        outgoing: dict[int, list] = {}
        for peer, array in sends:
            outgoing.setdefault(self.check_peer(peer), []).append(to_numpy(array))
        calls = {}
        for peer in outgoing:
            calls[peer] = -1 - self._sent_to[peer]
            self._sent_to[peer] += 1
        self.traffic.add(sum(a.nbytes for arrays in outgoing.values() for a in arrays))
        if outgoing:
            self._send(outgoing, calls, "exchange")
        deadline = time.monotonic() + self.timeout
        incoming: dict[int, collections.deque] = {}
        receives = [(self.check_peer(peer), *rest) for peer, *rest in receives]
        for peer, *_ in receives:
            if peer in incoming:
                continue
            call = -1 - self._taken_from[peer]
            self._taken_from[peer] += 1
            arrays = self._mailbox.take(self.job, call, peer, deadline)
            if arrays is _TIMED_OUT:
                self._timed_out(peer, f"exchange #{-call}")
            incoming[peer] = collections.deque(arrays)
        out = []
        for peer, shape, dtype, xp in receives:
            if not incoming[peer]:
                raise RuntimeError(f"rank {self.rank}: rank {peer} sent fewer arrays than it was asked for")
            array = incoming[peer].popleft()
            if array.shape != tuple(shape) or array.dtype != np.dtype(dtype):
                raise RuntimeError(f"rank {self.rank}: rank {peer} sent a {array.dtype} array of shape "
                                   f"{array.shape} where {np.dtype(dtype)} {tuple(shape)} was asked for")
            if xp is np and not array.flags.writeable:  # rows to keep: not a view of the message's frame
                array = array.copy()
            out.append(asarray(xp, array))
        return out

    def check_peer(self, peer: int) -> int:
        """``peer`` as an int, where it is another rank of the job; else ValueError."""
        if not 0 <= peer < self.world_size or peer == self.rank:
            raise ValueError(f"peer={peer} is not another rank of this {self.world_size}-rank job "
                             f"(this is rank {self.rank})")
        return int(peer)

    def abort(self, reason: str) -> None:
        """Tell every rank (this one included) to stop waiting; best effort towards dead peers."""
        message = f"rank {self.rank} ({self.addresses[self.rank]}) aborted dgboost job {self.job}: {reason}"
        self._mailbox.abort(self.job, message)
        peers = [a for rank, a in enumerate(self.addresses) if rank != self.rank]

        async def tell_all():
            async def tell(address):
                try:
                    await asyncio.wait_for(self._worker.rpc(address).dgboost_collective_abort(
                        job=self.job, reason=message), _ABORT_SEND_SECONDS)
                except Exception:  # noqa: BLE001 - a dead peer cannot be told; its own wait times out
                    logger.debug("dgboost job %s: could not tell %s to abort", self.job, address, exc_info=True)
            await asyncio.gather(*(tell(a) for a in peers))

        # Sent from the event loop without waiting: a dead peer must not hold this rank up.
        asyncio.run_coroutine_threadsafe(tell_all(), self._worker.loop.asyncio_loop)

    def aborted(self) -> str | None:
        """Why the job was aborted, or None while it runs."""
        return self._mailbox.aborted(self.job)

    def check(self) -> None:
        aborted = self.aborted()
        if aborted is not None:
            raise CollectiveError(aborted)

    def wake_at_abort(self, event: threading.Event) -> None:
        """Set ``event`` when the job is aborted, by any rank or the client."""
        self._mailbox.wake_at_abort(self.job, event)

    def close(self) -> None:
        """Forget this job's mailbox on this worker."""
        self._mailbox.forget(self.job)

    def _exchange(self, array, what: str, *, senders, receivers, slice_for=None, counted: bool = True) -> list:
        """One collective step: ``senders`` send ``array`` to ``receivers`` (None: all ranks),
        or each receiver ``slice_for(receiver)`` (a numpy array); ``counted``: a collective of
        its own in the traffic count (else the bytes join the last one's).

        Returns the arrays this rank received, in sender order (its own included
        as a numpy array), or [] when it receives nothing.
        """
        reason = self._mailbox.aborted(self.job)
        if reason is not None:
            raise CollectiveError(reason)
        call = self._calls
        self._calls += 1
        senders = list(senders)
        receivers = list(range(self.world_size)) if receivers is None else list(receivers)
        host = to_numpy(array) if self.rank in senders else None
        targets = [r for r in receivers if r != self.rank] if self.rank in senders else []
        sent = {target: host if slice_for is None else slice_for(target) for target in targets}
        self.traffic.add(sum(part.nbytes for part in sent.values()), calls=int(counted))
        if targets:
            self._send(sent, call, what)
        if self.rank not in receivers:
            return []
        if slice_for is not None and self.rank in senders:
            host = slice_for(self.rank)
        deadline = time.monotonic() + self.timeout
        parts = []
        for source in senders:
            if source == self.rank:
                parts.append(host)
                continue
            part = self._mailbox.take(self.job, call, source, deadline)
            if part is _TIMED_OUT:
                self._timed_out(source, f"{what} #{call}")
            parts.append(part)
        return parts

    def _timed_out(self, source: int, what: str):
        message = (f"rank {self.rank} ({self.addresses[self.rank]}) waited {self.timeout:g} s for "
                   f"rank {source} ({self.addresses[source]}) in {what} of dgboost job "
                   f"{self.job}; that worker died, hung or fell behind (raise the timeout with "
                   "dask.config.set({'dgboost.timeout': ...}) if it is only slow)")
        self.abort(message)
        raise CollectiveError(message)

    def _send(self, sent: dict, call, what: str) -> None:
        """Each target rank its array (``sent``: {target: numpy array}, or a list of them), as
        message number ``call`` (or ``call[target]``)."""
        payloads = {target: to_serialize(part) for target, part in sent.items()}
        targets = list(sent)
        number = call if isinstance(call, dict) else dict.fromkeys(targets, call)

        async def send_all():
            await asyncio.gather(*(self._worker.rpc(self.addresses[target]).dgboost_collective_deliver(
                job=self.job, call=number[target], source=self.rank, data=payload)
                for target, payload in payloads.items()))

        try:
            self._run(send_all(), self.timeout)
        except CollectiveError:
            raise
        except Exception as error:
            peers = ", ".join(f"rank {t} ({self.addresses[t]})" for t in targets)
            numbered = what if isinstance(call, dict) else f"{what} #{call}"
            if isinstance(error, (TimeoutError, concurrent.futures.TimeoutError)):  # slow, not unreachable: no retry
                message = (f"rank {self.rank} ({self.addresses[self.rank]}) could not deliver {numbered} of dgboost "
                           f"job {self.job} to {peers} within {self.timeout:g} s (raise the timeout with "
                           "dask.config.set({'dgboost.timeout': ...}) if the network is only slow)")
                self.abort(message)
                raise CollectiveError(message) from error
            message = (f"rank {self.rank} ({self.addresses[self.rank]}) could not send {numbered} of "
                       f"dgboost job {self.job} to {peers}: {type(error).__name__}: {error}")
            self.abort(message)
            raise PeerUnreachable(message) from error

    def _run(self, coroutine, timeout: float):
        """Run ``coroutine`` on the worker's event loop from this (task) thread.

        The wait ends early, raising CollectiveError, when the job is aborted: a
        send to a dead peer would otherwise block until the comm's connect timeout.
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self._worker.loop.asyncio_loop)
        deadline = time.monotonic() + timeout
        while True:
            try:
                return future.result(min(_ABORT_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            except concurrent.futures.TimeoutError:
                reason = self._mailbox.aborted(self.job)
                if reason is not None or time.monotonic() >= deadline:
                    future.cancel()
                    if reason is not None:
                        raise CollectiveError(reason) from None
                    raise
