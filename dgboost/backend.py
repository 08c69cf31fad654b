"""The array module (``xp``): numpy on the CPU, cupy on a CUDA device.

cupy is imported lazily, inside these functions, so a CPU-only install imports
dgboost without it. Everything above this module receives arrays and asks
``get_xp(array)`` which module they belong to; nothing passes device flags down.
"""

from __future__ import annotations

import contextlib
import functools
from types import ModuleType

import numpy as np


def is_cupy_array(array) -> bool:
    """True when ``array`` lives on a CUDA device: a cupy ndarray or a cupyx sparse
    matrix, decided without importing cupy."""
    return type(array).__module__.split(".", 1)[0] in ("cupy", "cupyx")


def get_xp(array) -> ModuleType:
    """The array module that ``array`` belongs to: ``cupy`` or ``numpy``."""
    if is_cupy_array(array):
        import cupy

        return cupy
    return np


@functools.lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """The number of CUDA devices cupy can use; 0 without cupy or a driver."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no cupy, no driver, no device: all mean "no GPU"
        return 0


def xp_for_device(device: str) -> ModuleType:
    """The array module for a validated ``device`` parameter ("cpu" or "cuda[:N]")."""
    if device == "cpu":
        return np
    import cupy

    ordinal = int(device.partition(":")[2] or 0)
    cupy.cuda.Device(ordinal).use()
    return cupy


def join(arrays: list):
    """``xp.concatenate(arrays)`` along the first axis. On a GPU, pieces of one dtype and
    trailing shape, each C-contiguous, are copied device to device one after another on
    the current stream: a copy call a piece, where cupy's concatenate costs some tens of
    microseconds of host time a call (a tree's levels are joined every round)."""
    first = arrays[0]
    if len(arrays) == 1:
        return first
    xp = get_xp(first)
    if xp is np or not all(a.dtype == first.dtype and a.shape[1:] == first.shape[1:] and a.flags.c_contiguous
                           for a in arrays):
        return xp.concatenate(arrays)
    out = xp.empty((sum(int(a.shape[0]) for a in arrays),) + first.shape[1:], dtype=first.dtype)
    stream = xp.cuda.get_current_stream().ptr
    copy, device_to_device = xp.cuda.runtime.memcpyAsync, xp.cuda.runtime.memcpyDeviceToDevice
    at = out.data.ptr
    for a in arrays:
        if a.nbytes:
            copy(at, a.data.ptr, a.nbytes, device_to_device, stream)
            at += a.nbytes
    return out


_host_reads = 0

#: Entered around every device-to-host read; a test swaps in
#: ``cupyx.allow_synchronize(True)`` to forbid every other synchronisation.
read_guard = contextlib.nullcontext


def host_reads() -> int:
    """How many device-to-host reads ``to_numpy`` has made in this process (a debug
    counter: a training round's reads are counted in tests/test_gpu.py)."""
    return _host_reads


def to_numpy(array) -> np.ndarray:
    """A host numpy copy (or view) of a numpy or cupy array.

    The only sanctioned device-to-host read: it is counted (``host_reads``) and
    allowed even inside ``cupyx.allow_synchronize(False)``.
    """
    if is_cupy_array(array):
        return _device_read(array.get)
    return np.asarray(array)


def _device_read(wait):
    """``wait()``, counted as one device-to-host read and allowed by ``read_guard``."""
    global _host_reads
    _host_reads += 1
    with read_guard():
        return wait()


def to_numpy_many(arrays) -> list:
    """Host copies of several arrays of 8-byte dtypes in one device-to-host read."""
    return start_read(arrays).result()


class HostRead:
    """A device-to-host read under way: ``result()`` waits for it and returns the host arrays.

    Made by ``start_read``. On a GPU the copy is queued on the current stream
    into page-locked memory, so the host can go on queueing work and collect
    the copy later (after queueing the next round, say) without draining the
    stream. Host arrays are ready at once.
    """

    def __init__(self, arrays, flat=None, host=None, done=None):
        self._arrays = arrays  # numpy arrays, or the device arrays (dtypes, shapes) read into ``host``
        self._flat, self._host, self._done = flat, host, done  # device source, pinned target, event

    def result(self) -> list:
        if self._done is None:
            return [np.asarray(a) for a in self._arrays]
        _device_read(self._done.synchronize)
        # Views of the page-locked buffer, which they keep alive.
        pieces = np.split(self._host, np.cumsum([a.size for a in self._arrays])[:-1])
        return [piece.view(a.dtype).reshape(a.shape) for piece, a in zip(pieces, self._arrays)]


def start_read(arrays) -> HostRead:
    """Start reading several arrays of 8-byte dtypes to the host in one transfer (HostRead).

    Device arrays are viewed as int64, laid end to end, copied once, and cut
    apart again with their own dtypes and shapes. It is counted as one read
    (``host_reads``) when its result is collected.
    """
    arrays = list(arrays)
    if not arrays or not any(is_cupy_array(a) for a in arrays):
        return HostRead(arrays)
    import cupy

    if any(a.dtype.itemsize != 8 for a in arrays):
        raise TypeError("start_read reads 8-byte dtypes only; cast the others first")
    flat = join([cupy.ascontiguousarray(cupy.asarray(a)).reshape(-1).view(np.int64) for a in arrays])
    pinned = cupy.cuda.alloc_pinned_memory(max(flat.nbytes, 8))
    host = np.frombuffer(pinned, dtype=np.int64, count=flat.size)
    stream = cupy.cuda.get_current_stream()
    if flat.size:
        cupy.cuda.runtime.memcpyAsync(host.ctypes.data, flat.data.ptr, flat.nbytes,
                                      cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
    done = cupy.cuda.Event(block=False, disable_timing=True)
    done.record(stream)
    return HostRead(arrays, flat, host, done)


#: Chunks of column_reduce's first pass on a GPU.
_REDUCE_CHUNKS = 1024


def column_reduce(array, op: str):
    """``op`` ("sum", "max" or "min") over axis 0: (n, k) -> (k,), or (n,) -> ().

    cupy reduces a long axis into few outputs with a handful of blocks (15 ms
    for 10M x 2 on an H100); reducing 1024 chunks first, then their results,
    spreads the work over the whole GPU (0.4 ms). Exact for integer sums and
    for max and min; a float sum is rounded in another order than numpy's.
    """
    xp = get_xp(array)
    reduce = getattr(xp, op)
    n = array.shape[0]
    if xp is np or n < 2 * _REDUCE_CHUNKS * _REDUCE_CHUNKS:
        return reduce(array, axis=0)
    per_chunk = n // _REDUCE_CHUNKS
    body = _REDUCE_CHUNKS * per_chunk
    heads = reduce(array[:body].reshape(_REDUCE_CHUNKS, per_chunk, *array.shape[1:]), axis=1)
    return reduce(xp.concatenate([heads, array[body:]]), axis=0)


def column_max_abs(array):
    """max |x| over axis 0, as max(max x, -min x): no temporary of ``array``'s size."""
    xp = get_xp(array)
    return xp.maximum(column_reduce(array, "max"), -column_reduce(array, "min"))


#: Rows a chunked pass (row_chunks) takes at a time: bounds its temporaries.
ROW_CHUNK = 1 << 21


def row_chunks(array, rows: int = ROW_CHUNK) -> list:
    """Views of ``array``'s rows, ``rows`` at a time (none for an empty array)."""
    return [array[begin:begin + rows] for begin in range(0, array.shape[0], rows)]


def asarray(xp: ModuleType, array, dtype=None):
    """``array`` on ``xp``'s device, copying between host and device if needed."""
    if xp is np:
        return np.asarray(to_numpy(array), dtype=dtype)
    if isinstance(array, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        return _to_device(np.asarray(array, dtype=dtype))
    return xp.asarray(array, dtype=dtype)  # device arrays of any library (__cuda_array_interface__)


def _to_device(host: np.ndarray):
    """A copy of ``host`` on the current device, read straight from its pages.

    ``cupy.asarray`` stages a host array in page-locked memory as large as the
    array, and page-locking memory of a size its pool has not held before is
    slow: 0.27 s for the 400 MB of a 2M x 50 float32 matrix on an H100 host, paid
    by every first call on data of a new size (docs/performance.md). A copy from
    pageable memory needs no such buffer.
    """
    import cupy

    if not (host.flags.c_contiguous and host.dtype.isnative):
        host = np.ascontiguousarray(host, dtype=host.dtype.newbyteorder("="))
    device = cupy.empty(host.shape, dtype=host.dtype)
    if host.size:
        device.set(host)
    return device
