"""NCCL between the GPUs of a job, through ``cupy.cuda.nccl``.

Device arrays go through NCCL on the current stream (no host round trip); host
arrays (the small control messages, such as the decision to stop) go through
the job's host communicator, which also bootstraps NCCL: rank 0 makes the
unique id and broadcasts it.

Every wait is bounded. Initialisation runs in a helper thread joined with the
timeout. Each collective records an event on the stream; a watchdog thread
aborts the NCCL communicator when one is still pending after ``timeout``
seconds, when NCCL reports an asynchronous error, or when any rank aborts the
job through the host communicator. Abort makes NCCL's kernels return, so a
rank blocked in a device synchronisation wakes; its next collective raises
CollectiveError.
"""

from __future__ import annotations

import collections
import logging
import threading
import time

import numpy as np

from .base import CollectiveError, ReduceOp

logger = logging.getLogger("dgboost")

#: Seconds between the watchdog's looks.
_WATCH_SECONDS = 0.25
_UNIQUE_ID_BYTES = 128


class NcclCommunicator:
    """The GPUs of one job; ``host`` carries host arrays and the job's abort signal.

    Parameters
    ----------
    host : DaskCommunicator
        The same ranks over Dask's comms.
    timeout : float
        Seconds initialisation, or any one collective, may take.
    """

    def __init__(self, host, timeout: float):
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
        unique_id = np.zeros(_UNIQUE_ID_BYTES, dtype=np.uint8)
        if host.rank == 0:
            made = nccl.get_unique_id()  # bytes (cupy >= 14) or a tuple of char values
            made = np.frombuffer(made, np.uint8) if isinstance(made, bytes) else np.array(made).astype(np.uint8)
            unique_id[:len(made)] = made
        unique_id = host.broadcast(unique_id, root=0)
        self._comm = self._initialise(unique_id)
        self._pending: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._failure: str | None = None
        self._closed = threading.Event()
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
        out = self._cupy.empty_like(send)
        self._enqueue("allreduce", lambda stream: self._comm.allReduce(
            send.data.ptr, out.data.ptr, send.size, self._type(send), self._ops[op], stream))
        return out

    def broadcast(self, array, root: int = 0):
        if isinstance(array, np.ndarray):
            return self.host.broadcast(array, root)
        if not 0 <= root < self.world_size:
            raise ValueError(f"root={root} is not a rank of this {self.world_size}-rank job")
        send = self._cupy.ascontiguousarray(array)
        out = self._cupy.empty_like(send)
        self._enqueue("broadcast", lambda stream: self._comm.broadcast(
            send.data.ptr, out.data.ptr, send.size, self._type(send), root, stream))
        return out

    def allgather(self, array) -> list:
        if isinstance(array, np.ndarray):
            return self.host.allgather(array)
        # First dimensions may differ: every rank learns them on the host (they are
        # known there, no device read), then gathers blocks padded to the longest.
        rows = [int(r[0]) for r in self.host.allgather(np.array([array.shape[0]], dtype=np.int64))]
        longest = max(rows)
        block = self._cupy.zeros((longest,) + array.shape[1:], dtype=array.dtype)
        block[:array.shape[0]] = array
        out = self._cupy.empty((self.world_size,) + block.shape, dtype=array.dtype)
        self._enqueue("allgather", lambda stream: self._comm.allGather(
            block.data.ptr, out.data.ptr, block.size, self._type(block), stream))
        return [out[rank, :n] for rank, n in enumerate(rows)]

    def abort(self, reason: str) -> None:
        self.host.abort(reason)
        self._fail(reason)

    def close(self) -> None:
        """Stop the watchdog and free NCCL's resources (the host communicator too).

        ncclCommDestroy takes a few hundred milliseconds; it runs in a thread of its
        own once this rank's work on the stream is done, so the task returns at once.
        """
        self._closed.set()
        self._watchdog.join()
        with self._lock:
            if self._failure is None:
                done = self._cupy.cuda.Event(disable_timing=True)
                done.record(self._cupy.cuda.get_current_stream())
                device = self._cupy.cuda.Device()

                def destroy():
                    with device:
                        done.synchronize()
                        self._comm.destroy()

                threading.Thread(target=destroy, name="dgboost-nccl-destroy", daemon=True).start()
        self.host.close()

    # ---- internals ----
    def _type(self, array) -> int:
        dtype = np.dtype(np.uint8) if array.dtype == np.bool_ else array.dtype
        if dtype not in self._types:
            raise TypeError(f"NCCL collectives take {sorted(str(t) for t in self._types)} arrays, got {dtype}")
        return self._types[dtype]

    def _enqueue(self, what: str, call) -> None:
        with self._lock:
            if self._failure is not None:
                raise CollectiveError(self._failure)
            stream = self._cupy.cuda.get_current_stream()
            call(stream.ptr)
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(stream)
            self._pending.append((event, time.monotonic(), what))

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

        thread = threading.Thread(target=init, name="dgboost-nccl-init", daemon=True)
        thread.start()
        thread.join(self.timeout)
        if "comm" in made:
            return made["comm"]
        reason = (f"rank {self.rank}: NCCL initialisation " + (
            f"failed: {made['error']}" if "error" in made else f"did not finish in {self.timeout:g} s"))
        self.host.abort(reason)
        raise CollectiveError(reason)

    def _fail(self, reason: str) -> None:
        """Abort NCCL once (kernels in flight return), and make every later call raise."""
        with self._lock:
            if self._failure is not None:
                return
            self._failure = reason
        try:
            self._comm.abort()
        except Exception:  # noqa: BLE001 - already torn down: nothing is left to stop
            logger.debug("rank %d: NCCL abort after %s", self.rank, reason, exc_info=True)

    def _watch(self) -> None:
        while not self._closed.wait(_WATCH_SECONDS):
            if self._failure is not None:
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
        with self._lock:
            while self._pending and self._pending[0][0].done:
                self._pending.popleft()
            if not self._pending:
                return None
            _, started, what = self._pending[0]
        if time.monotonic() - started > self.timeout:
            return (f"rank {self.rank} ({self.host.addresses[self.rank]}): an NCCL {what} did not finish "
                    f"in {self.timeout:g} s; a peer died or hung")
        return None
