"""NCCL between the GPUs of a job, through ``cupy.cuda.nccl``.

Device arrays go through NCCL on the current stream (no host round trip); host
arrays (the small control messages, such as the decision to stop) go through
the job's host communicator, which also bootstraps NCCL: rank 0 makes the
unique id and broadcasts it.

A worker keeps its NCCL communicator when a job ends well, and the next job
over the same workers (in the same rank order, on the same GPUs) uses it again:
starting NCCL and connecting its peers takes a few hundred milliseconds, as
long as a job's whole set-up. The ranks agree first: each shows the token of
the communicator it kept (the one its last job made), and only where every rank
shows the same one is it used; otherwise each drops its own and they make a new
one. A job that fails keeps nothing. Set the dask config ``dgboost.keep-nccl``
to False on the client to make a communicator per job.

A collective's output starts zeroed: when NCCL is aborted, the kernels already queued
behind a call still run, on what it left, and zeros (no split, an empty histogram) send
no kernel out of its arrays, where the memory pool's leftovers might.

Every wait is bounded. Initialisation runs in a helper thread joined with the
timeout. Each collective (or replayed round: dgboost/replay.py) records an event on the stream; a watchdog thread
aborts the NCCL communicator when one is still pending after ``timeout``
seconds, when NCCL reports an asynchronous error, or when any rank aborts the
job through the host communicator. Abort makes NCCL's kernels return, so a
rank blocked in a device synchronisation wakes; its next collective raises
CollectiveError. The failing rank waits for its kernels to return, not for
NCCL's teardown after them, which goes on in a thread of its own (``_fail``).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import dataclasses
import hashlib
import logging
import threading
import time

import numpy as np

from .base import CollectiveError, ReduceOp, Traffic, check_root

logger = logging.getLogger("dgboost")

#: Seconds between the watchdog's looks.
_WATCH_SECONDS = 0.25
#: Seconds a failed job's rank waits, at most, for NCCL's kernels to return after abort (``_fail``).
_ABORT_SECONDS = 10.0
#: Seconds between ``_fail``'s looks at the kernels' events.
_ABORT_LOOK_SECONDS = 0.002
_UNIQUE_ID_BYTES = 128
_TOKEN_BYTES = 16


@dataclasses.dataclass
class _Kept:
    """An NCCL communicator a job left for the next one over the same ranks."""

    device: int
    addresses: tuple
    token: bytes  # the same on every rank of the job that made it
    comm: object
    idle: object  # a cupy Event recorded after its last operation


_kept: _Kept | None = None  # a worker owns one GPU: one communicator kept at most
_kept_lock = threading.Lock()
_made = 0  # NCCL communicators this process has made


def communicators_made() -> int:
    """How many NCCL communicators this process has made (each job that could not reuse one)."""
    return _made


class NcclCommunicator:
    """The GPUs of one job; ``host`` carries host arrays and the job's abort signal.

    Parameters
    ----------
    host : DaskCommunicator
        The same ranks over Dask's comms.
    timeout : float
        Seconds initialisation, or any one collective, may take.
    keep : bool
        Keep the NCCL communicator for the next job over the same ranks when this
        one ends well (else it is destroyed). A kept one is used whatever ``keep`` says.
    """

    def __init__(self, host, timeout: float, keep: bool = True):
        import cupy
        from cupy.cuda import nccl

        self.host = host
        self.timeout = float(timeout)
        self._cupy = cupy
        self._nccl = nccl
        self._types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
                       np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.int64): nccl.NCCL_INT64,
                       np.dtype(np.uint32): nccl.NCCL_UINT32, np.dtype(np.uint64): nccl.NCCL_UINT64,
                       np.dtype(np.uint8): nccl.NCCL_UINT8, np.dtype(np.int8): nccl.NCCL_INT8}
        self._ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}
        self._keep = keep
        self._device = cupy.cuda.Device()
        kept = _take_kept(self._device.id, host.addresses)
        # Every rank shows a token, a kept one's or none, so every rank makes the same call.
        shown = _every_rank_shows(host, kept.token if kept is not None else bytes(_TOKEN_BYTES))
        self.reused = kept is not None and shown
        if self.reused:
            self._comm, self._token = kept.comm, kept.token
            cupy.cuda.get_current_stream().wait_event(kept.idle)  # its last job's calls come first
        else:
            if kept is not None:
                _drop(kept)
            unique_id = self._agree_unique_id()
            self._comm = self._initialise(unique_id)
            self._token = hashlib.blake2b(unique_id.tobytes(), digest_size=_TOKEN_BYTES).digest()
        self._pending: collections.deque = collections.deque()
        self.traffic = Traffic()  # the device collectives' (host arrays go through host, counted there)
        self._lock = threading.Lock()  # held through each call: NCCL's enqueue may block in it
        self._calling: tuple | None = None  # (began, what) of the call being made, under _lock
        self._failing = threading.Lock()  # for _failure, set once, never held through a call
        self._failure: str | None = None
        self._closed = threading.Event()
        self._woken = threading.Event()  # the job aborted or this communicator closed: the watchdog looks now
        host.wake_at_abort(self._woken)
        self._watchdog = threading.Thread(target=self._watch, name=f"dgboost-nccl-watchdog-{host.rank}",
                                          daemon=True)
        self._watchdog.start()

    @property
    def rank(self) -> int:
        return self.host.rank

    @property
    def world_size(self) -> int:
        return self.host.world_size

    def allreduce(self, array, op: ReduceOp = "sum"):
        if op not in self._ops:
            raise ValueError(f"op={op!r} must be 'sum', 'max' or 'min'")
        if isinstance(array, np.ndarray):
            return self.host.allreduce(array, op)
        send = self._cupy.ascontiguousarray(array)
        out = self._cupy.zeros_like(send)  # what an aborted call leaves (module text)
        n = self.world_size
        self.traffic.add(2 * (n - 1) / n * send.nbytes)  # a ring's reduce-scatter and all-gather
        self._enqueue("allreduce", lambda stream: self._comm.allReduce(
            send.data.ptr, out.data.ptr, send.size, self._type(send), self._ops[op], stream.ptr))
        return out

    def reduce(self, array, root: int = 0):
        if isinstance(array, np.ndarray):
            return self.host.reduce(array, root)
        check_root(root, self.world_size)
        send = self._cupy.ascontiguousarray(array)
        out = self._cupy.zeros_like(send)  # what an aborted call leaves; off root, what it always leaves
        self.traffic.add(send.nbytes if self.rank != root else 0)  # a chain into root: each other rank sends it all
        self._enqueue("reduce", lambda stream: self._comm.reduce(
            send.data.ptr, out.data.ptr, send.size, self._type(send), self._ops["sum"], root, stream.ptr))
        return out

    def broadcast(self, array, root: int = 0):
        if isinstance(array, np.ndarray):
            return self.host.broadcast(array, root)
        check_root(root, self.world_size)
        send = self._cupy.ascontiguousarray(array)
        out = self._cupy.zeros_like(send)  # what an aborted call leaves (module text)
        self.traffic.add(send.nbytes)  # a ring: every rank but the last passes it on
        self._enqueue("broadcast", lambda stream: self._comm.broadcast(
            send.data.ptr, out.data.ptr, send.size, self._type(send), root, stream.ptr))
        return out

    def allgather(self, array, rows=None) -> list:
        if isinstance(array, np.ndarray):
            return self.host.allgather(array)
        # First dimensions may differ: every rank learns them on the host (they are
        # known there, no device read), unless the caller knows them, then gathers
        # blocks padded to the longest.
        if rows is None:
            rows = [int(r[0]) for r in self.host.allgather(np.array([array.shape[0]], dtype=np.int64))]
        elif len(rows) != self.world_size or rows[self.rank] != array.shape[0]:
            raise ValueError(f"rows={rows} must be every rank's first dimension; this rank's is {array.shape[0]}")
        longest = max(rows)
        block = self._cupy.zeros((longest,) + array.shape[1:], dtype=array.dtype)
        block[:array.shape[0]] = array
        out = self._cupy.zeros((self.world_size,) + block.shape, dtype=array.dtype)
        self.traffic.add((self.world_size - 1) * block.nbytes)  # a ring: each block passed on n - 1 times
        self._enqueue("allgather", lambda stream: self._comm.allGather(
            block.data.ptr, out.data.ptr, block.size, self._type(block), stream.ptr))
        return [out[rank, :n] for rank, n in enumerate(rows)]

    def exchange(self, sends: list, receives: list) -> list:
        """Device arrays as one group of ncclSend and ncclRecv calls (their bytes: any dtype),
        host arrays through the host communicator."""
        sends = [(self.host.check_peer(peer), array) for peer, array in sends]
        receives = [(self.host.check_peer(peer), *rest) for peer, *rest in receives]
        on_host = [(peer, array) for peer, array in sends if isinstance(array, np.ndarray)]
        from_host = iter(self.host.exchange(on_host, [r for r in receives if r[3] is np])
                         if on_host or any(r[3] is np for r in receives) else ())
        cupy = self._cupy
        sent = [(peer, cupy.ascontiguousarray(array)) for peer, array in sends if not isinstance(array, np.ndarray)]
        out = [next(from_host) if xp is np else cupy.zeros(tuple(shape), dtype=dtype)  # an abort leaves zeros
               for peer, shape, dtype, xp in receives]
        got = [(peer, array) for (peer, _, _, xp), array in zip(receives, out) if xp is not np]
        if not sent and not got:
            return out
        self.traffic.add(sum(array.nbytes for _, array in sent))
        nccl, uint8 = self._nccl, self._nccl.NCCL_UINT8

        def call(stream):
            nccl.groupStart()  # every send and receive at once: two ranks may send each other rows
            try:
                for peer, array in sent:
                    if array.nbytes:
                        self._comm.send(array.data.ptr, array.nbytes, uint8, peer, stream.ptr)
                for peer, array in got:
                    if array.nbytes:
                        self._comm.recv(array.data.ptr, array.nbytes, uint8, peer, stream.ptr)
            finally:
                nccl.groupEnd()

        self._enqueue("exchange", call)
        return out

    def abort(self, reason: str) -> None:
        self.host.abort(reason)
        self._fail(reason)

    def check(self) -> None:
        """Raises once NCCL has failed (set before its abort makes the kernels return, so a
        round that ended early is caught) or the job was aborted."""
        failure = self._failure or self.host.aborted()
        if failure is not None:
            raise CollectiveError(failure)

    def close(self) -> None:
        """Stop the watchdog; keep the NCCL communicator for the next job, or free it.

        A job that was aborted keeps nothing: its communicator is aborted here, so no
        NCCL kernel of it is left waiting on the stream for a peer that gave up.

        ncclCommDestroy takes a few hundred milliseconds; it runs in a thread of its
        own once this rank's work on the stream is done, so the task returns at once.
        """
        self._closed.set()
        self._woken.set()
        self._watchdog.join()
        aborted = self.host.aborted()
        if aborted is not None:  # this rank may have stopped before its watchdog saw it
            self._fail(aborted)
        with self._lock:
            if self._failure is None:
                idle = self._cupy.cuda.Event(disable_timing=True)
                idle.record(self._cupy.cuda.get_current_stream())
                kept = _Kept(self._device.id, self.host.addresses, self._token, self._comm, idle)
                if self._keep:
                    _put_kept(kept)
                else:
                    _drop(kept, destroy=True)
        self.host.close()

    # ---- internals ----
    def _type(self, array) -> int:
        dtype = np.dtype(np.uint8) if array.dtype == np.bool_ else array.dtype
        if dtype not in self._types:
            raise TypeError(f"NCCL collectives take {sorted(str(t) for t in self._types)} arrays, got {dtype}")
        return self._types[dtype]

    def _enqueue(self, what: str, call) -> None:
        """``call(stream)`` on the current stream under the lock, refused once NCCL has failed;
        watched (overdue after ``timeout`` seconds) unless captured into a round's graph."""
        with self._lock:
            if self._failure is not None:
                raise CollectiveError(self._failure)
            stream = self._cupy.cuda.get_current_stream()
            self._calling = (time.monotonic(), what)
            try:
                call(stream)
            except Exception as error:
                # A call that blocks the host (an exchange's first send or receive to a peer, which
                # connects it) fails with NCCL's own error once the watchdog or a peer aborted:
                # the group's failure is the cause, not this rank's.
                failure = self._failure or self.host.aborted()
                if failure is not None:
                    raise CollectiveError(failure) from error
                raise
            finally:
                self._calling = None
            if stream.ptr and stream.is_capturing():  # a round's graph: watched as a whole, each replay
                return
            self._watch_stream(stream, what)

    def launch(self, what: str, launch) -> None:
        """``launch(stream)`` on the current stream: a replayed round's graph, whose collectives
        (captured in it) are watched as one, overdue after ``timeout`` seconds. It raises
        CollectiveError, launching nothing, once the communicator has failed."""
        self._enqueue(what, launch)

    def _watch_stream(self, stream, what: str) -> None:
        event = self._cupy.cuda.Event(disable_timing=True)
        event.record(stream)
        self._pending.append((event, time.monotonic(), what))

    def _agree_unique_id(self):
        """Rank 0's new NCCL unique id, on every rank (through the host communicator)."""
        unique_id = np.zeros(_UNIQUE_ID_BYTES, dtype=np.uint8)
        if self.rank == 0:
            made = self._nccl.get_unique_id()  # bytes (cupy >= 14) or a tuple of char values
            made = np.frombuffer(made, np.uint8) if isinstance(made, bytes) else np.array(made).astype(np.uint8)
            unique_id[:len(made)] = made
        return self.host.broadcast(unique_id, root=0)

    def _initialise(self, unique_id):
        """ncclCommInitRank, which blocks until every rank joins, bounded by the timeout."""
        device = self._cupy.cuda.Device()
        made: dict = {}

        def init():
            try:
                with device:
                    try:
                        made["comm"] = self._nccl.NcclCommunicator(self.world_size, unique_id.tobytes(), self.rank)
                    except TypeError:  # cupy < 14 takes the id as a tuple of char values
                        made["comm"] = self._nccl.NcclCommunicator(
                            self.world_size, tuple(unique_id.astype(np.int8).tolist()), self.rank)
            except Exception as error:  # noqa: BLE001 - reported below
                made["error"] = error

        global _made
        thread = threading.Thread(target=init, name="dgboost-nccl-init", daemon=True)
        thread.start()
        thread.join(self.timeout)
        if "comm" in made:
            _made += 1
            return made["comm"]
        reason = (f"rank {self.rank}: NCCL initialisation " + (
            f"failed: {made['error']}" if "error" in made else f"did not finish in {self.timeout:g} s"))
        self.host.abort(reason)
        raise CollectiveError(reason)

    def _fail(self, reason: str) -> None:
        """Abort NCCL once (kernels in flight return), and make every later call raise. It
        takes no lock a call holds: a call blocked in NCCL returns only after the abort."""
        with self._failing:
            if self._failure is not None:
                return
            self._failure = reason
        began = time.perf_counter()

        def abort():
            try:
                self._comm.abort()
            except Exception:  # noqa: BLE001 - already torn down: nothing is left to stop
                logger.debug("rank %d: NCCL abort after %s", self.rank, reason, exc_info=True)

        # ncclCommAbort makes the kernels return at once, then tears NCCL down: half a second
        # with a dead peer, and, since NCCL 2.26, not before every CUDA graph that captured its
        # calls is destroyed (dgboost/replay.py): never, on a device whose context broke. What
        # the rank waits for is its kernels (the watched events done), bounded; the teardown
        # goes on in the abort's thread, and the rank's task ends (a restart starts) meanwhile.
        aborting = threading.Thread(target=abort, name=f"dgboost-nccl-abort-{self.rank}", daemon=True)
        aborting.start()
        deadline = time.monotonic() + _ABORT_SECONDS
        while aborting.is_alive() and not self._kernels_returned() and time.monotonic() < deadline:
            aborting.join(_ABORT_LOOK_SECONDS)
        took = time.perf_counter() - began
        if not aborting.is_alive():
            logger.info("rank %d: NCCL aborted in %.3f s: %s", self.rank, took, reason)
        elif self._kernels_returned():
            logger.info("rank %d: NCCL's kernels returned in %.3f s; its abort goes on in the background: %s",
                        self.rank, took, reason)
        else:
            logger.warning("rank %d: NCCL's kernels did not return in %g s after its abort (a broken device?): %s",
                           self.rank, _ABORT_SECONDS, reason)

    def _kernels_returned(self) -> bool:
        """Whether no call is being made and every watched collective (or replayed round) is
        done: after an abort, NCCL's kernels have returned. A device that cannot say (a broken
        context) has none running."""
        try:
            return self._running(_ABORT_LOOK_SECONDS) is None
        except Exception:  # noqa: BLE001 - a failed device: nothing of it will run
            return True

    def _running(self, wait: float) -> tuple | None:
        """The oldest collective this rank has not seen finish, as (began, what), or None: a call
        being made (NCCL's enqueue, or a graph's launch, can block while a peer is gone; the
        call holds the lock, waited for at most ``wait`` seconds) or a watched event not done.
        Raises what a failed device's event query raises."""
        if not self._lock.acquire(timeout=wait):
            return self._calling or (time.monotonic(), "call")  # ended just now, or still in NCCL
        try:
            while self._pending and self._pending[0][0].done:
                self._pending.popleft()
            return self._pending[0][1:] if self._pending else None
        finally:
            self._lock.release()

    def _watch(self) -> None:
        """Looks every _WATCH_SECONDS for a collective overdue or an NCCL error, and at once
        when the job is aborted (a peer's or the client's message wakes it)."""
        while True:
            self._woken.wait(_WATCH_SECONDS)
            if self._closed.is_set() or self._failure is not None:
                return
            reason = self.host.aborted()
            if reason is None:
                reason = self._overdue()
            if reason is None:
                try:
                    self._comm.check_async_error()
                except Exception as error:  # noqa: BLE001 - NCCL's asynchronous error
                    reason = f"rank {self.rank}: NCCL error: {error}"
            if reason is not None:
                self.host.abort(reason)
                self._fail(reason)
                return

    def _overdue(self) -> str | None:
        try:
            running = self._running(_WATCH_SECONDS)
        except Exception as error:  # noqa: BLE001 - the device failed: abort, as for a dead peer
            return f"rank {self.rank}: its device failed: {type(error).__name__}: {error}"
        if running is None:
            return None
        started, what = running
        if time.monotonic() - started > self.timeout:
            return (f"rank {self.rank} ({self.host.addresses[self.rank]}): an NCCL {what} did not finish "
                    f"in {self.timeout:g} s; a peer died or hung")
        return None


def _every_rank_shows(host, token: bytes) -> bool:
    """Whether every rank of ``host`` kept the communicator ``token`` names (one host gather)."""
    mine = np.frombuffer(token, dtype=np.uint8)
    return all(np.array_equal(theirs, mine) for theirs in host.allgather(mine))


def _swap_kept(new: _Kept | None) -> _Kept | None:
    """Put ``new`` in the kept place and return what was there."""
    global _kept
    with _kept_lock:
        old, _kept = _kept, new
    return old


def _take_kept(device: int, addresses: tuple) -> _Kept | None:
    """The kept communicator, taken out, if it joins ``addresses`` on ``device`` (else dropped)."""
    kept = _swap_kept(None)
    if kept is not None and (kept.device, kept.addresses) != (device, tuple(addresses)):
        _drop(kept)
        kept = None
    return kept


def _put_kept(kept: _Kept) -> None:
    old = _swap_kept(kept)
    if old is not None:
        _drop(old)


def _drop(kept: _Kept, destroy: bool = False) -> None:
    """Free a communicator in a thread of its own, once its last calls are done.

    ``destroy`` where its ranks all ended well together; else abort, which never
    waits for a peer (one may have died since).
    """
    import cupy

    def free():
        try:
            with cupy.cuda.Device(kept.device):
                kept.idle.synchronize()
                if destroy:
                    kept.comm.destroy()
                else:
                    kept.comm.abort()
        except Exception:  # noqa: BLE001 - nothing is left to free
            logger.debug("freeing a kept NCCL communicator failed", exc_info=True)

    threading.Thread(target=free, name="dgboost-nccl-free", daemon=True).start()


@atexit.register
def _free_kept_at_exit() -> None:
    """Abort the kept communicator before the process ends (abort never waits for peers)."""
    kept = _swap_kept(None)
    if kept is not None:
        with contextlib.suppress(Exception):  # the process is ending: nothing to report to
            kept.comm.abort()
