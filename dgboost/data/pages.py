"""Out of core: a rank's compressed matrix in pages outside the training device.

A rank whose compressed matrix is larger than its device budget
(``max_device_matrix_bytes``; on a GPU by default its free memory less a margin)
keeps it as pages of whole rows, all in one layout (``ellpack.matrix_layout`` of
every row: the bins of a row do not depend on its page). A page's life:

1. **Built** once, from the rows it holds: X is read a page of rows at a time
   (on a GPU: quantised there a chunk at a time, never the whole float X on the
   device), packed, and moved out: to pinned host memory on a GPU, or to a file
   in the spill directory where host memory is short (on a CPU, where host memory
   is the device's, always to the file).
2. **Read** each time the grower passes over the rows: ``pages()`` yields each
   page on the device in turn. On a GPU two device buffers take turns: page
   ``i + 1`` is copied on a copy stream while the kernels of page ``i`` run, so
   the copies overlap the histograms (at most two pages on the device: each
   page is at most half the budget).
3. **Removed** when training ends (``close``): its files deleted.

Trees read a paged matrix through the same histogram, partition and route
functions as an in-core one (tree/histogram.py, tree/partition.py): integer
histograms summed page by page are the same integers, so a model trained out of
core is the in-core one, byte for byte. With row sampling, each tree's rows are
gathered into one in-core page instead (``compact``; the out-of-core paper's
Algorithm 7, the gather made on the host so that only the sample crosses to the
device), and every row's leaf found page by page.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import math
import os
import shutil
import tempfile
import uuid
import weakref

import numpy as np

from .. import _settings
from .._dtypes import PACKED_WORD_DTYPE
from ..backend import asarray, cuda_device_count, is_cupy_array, to_numpy
from ..kernels import loops
from ..kernels.cpu import gather_rows
from .ellpack import EllpackLayout, EllpackMatrix, build_ellpack, matrix_layout
from .sketch import Cuts

logger = logging.getLogger("dgboost")

#: The fewest rows a page may hold: a budget that cannot hold two pages of them is refused.
MIN_PAGE_ROWS = 64
#: Of a GPU's free memory, the share the automatic budget leaves to everything but the matrix
#: (gradients, margins, row indices, histograms, the compacted sample's work).
_AUTOMATIC_MARGIN = 0.5


@dataclasses.dataclass
class PagedMatrix:
    """One rank's compressed matrix in pages of whole rows outside the device.

    Attributes
    ----------
    layout : EllpackLayout, every page's
    bin_offsets, host_bin_offsets : as EllpackMatrix's
    starts : tuple of int: each page's first row, then the row count
    where : "pinned host memory", "host memory" or the spill directory
    """

    layout: EllpackLayout
    bin_offsets: object
    host_bin_offsets: np.ndarray
    starts: tuple[int, ...]
    where: str
    _pages: list  # host arrays, or file paths
    _directory: str | None = None  # the spill files' directory, removed by close
    _gpu: object = None  # on a GPU, its _DeviceBuffers, made at the first pass

    def __post_init__(self):
        if self._directory is not None:  # its files go with it, whatever ends the training
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._directory, True)

    @property
    def n_rows(self) -> int:
        return self.starts[-1]

    @property
    def n_pages(self) -> int:
        return len(self.starts) - 1

    @property
    def page_sizes(self) -> tuple[int, ...]:
        return tuple(stop - start for start, stop in zip(self.starts, self.starts[1:]))

    @property
    def n_bins_total(self) -> int:
        return int(self.host_bin_offsets[-1])

    @property
    def nbytes(self) -> int:
        return self.n_rows * self.layout.bytes_per_row

    @property
    def feature_bins(self):
        return self.bin_offsets if self.layout.is_sparse else None

    @property
    def on_gpu(self) -> bool:
        return is_cupy_array(self.bin_offsets)

    def describe(self) -> str:
        """A line of the log: the matrix is out of core, in how many pages of what size, where."""
        largest = max(self.page_sizes) * self.layout.bytes_per_row
        return (f"out of core: the compressed matrix ({self.n_rows} rows, {_mib(self.nbytes)}) in "
                f"{self.n_pages} pages of at most {_mib(largest)}, in {self.where}")

    def summary(self) -> str:
        """A few words for a progress bar: out of core, in how many pages, where."""
        where = "on disk" if self._directory is not None else "in pinned host memory"
        return f"out of core: {self.n_pages} pages {where}"

    def pages(self):
        """Each page on the device in turn: ``(first row, EllpackMatrix)``. A page is valid
        until the next is asked for (on a GPU its buffer is then refilled)."""
        if not self.on_gpu:
            for start, page in zip(self.starts, self._pages):
                yield start, self._matrix(self._host(page))
            return
        yield from self._gpu_pages()

    def compact(self, rows) -> EllpackMatrix:
        """The rows ``rows`` (ascending indices, int, on the device) gathered into one in-core
        matrix, in their order. Gathered on the host, from the pages where they lie, into one
        (on a GPU pinned) buffer that crosses to the device in one copy: the sample's bytes
        cross, not every page's."""
        host_rows = np.ascontiguousarray(to_numpy(rows), dtype=np.int64)
        shape = (host_rows.shape[0], self.layout.n_words)
        if self.on_gpu:
            import cupyx

            gathered = cupyx.empty_pinned(shape, PACKED_WORD_DTYPE)
        else:
            gathered = np.empty(shape, PACKED_WORD_DTYPE)
        bounds = np.searchsorted(host_rows, np.asarray(self.starts, dtype=np.int64)).tolist()
        # A GPU rank's host threads are otherwise idle: its share of the machine's cores.
        threads = max(loops.threads(), loops.cores() // max(1, cuda_device_count())) if self.on_gpu else None
        with loops.using_threads(threads):
            for start, page, begin, end in zip(self.starts, self._pages, bounds, bounds[1:]):
                if end > begin:
                    source = np.load(page, mmap_mode="r") if isinstance(page, str) else page
                    gather_rows(source, host_rows[begin:end], start, gathered, begin)
        return self._matrix(asarray(self._xp, gathered))

    def close(self) -> None:
        """Remove the spill files; the matrix cannot be read after."""
        self._pages = []
        self._gpu = None
        if self._directory is not None:
            self._cleanup()
            self._directory = None

    @property
    def _xp(self):
        if self.on_gpu:
            import cupy

            return cupy
        return np

    def _matrix(self, packed) -> EllpackMatrix:
        return EllpackMatrix(packed, self.layout, self.bin_offsets, self.host_bin_offsets)

    def _host(self, page) -> np.ndarray:
        return np.load(page) if isinstance(page, str) else page

    def _gpu_pages(self):
        """Double-buffered: page i + 1 is copied on a copy stream while page i's kernels run on
        the current stream; a buffer is refilled only after the kernels queued on it (in this
        pass or the one before) are done."""
        import cupy

        if self._gpu is None:
            self._gpu = _DeviceBuffers(max(self.page_sizes), self.layout.n_words)
        buffers = self._gpu
        stream = cupy.cuda.get_current_stream()
        pending = buffers.send(0, self._pages[0])
        for index, start in enumerate(self.starts[:-1]):
            target, copied = pending
            if index + 1 < self.n_pages:
                pending = buffers.send(index + 1, self._pages[index + 1])
            stream.wait_event(copied)
            yield start, self._matrix(target)
            buffers.read[index % 2] = stream.record()


class _DeviceBuffers:
    """A paged matrix's two device buffers, the copy stream that fills them, and (for pages on
    disk) two pinned buffers they are read into."""

    def __init__(self, rows: int, n_words: int):
        import cupy

        self.copies = cupy.cuda.Stream(non_blocking=True)
        self.device = [cupy.empty((rows, n_words), dtype=PACKED_WORD_DTYPE) for _ in range(2)]
        self.shape = (rows, n_words)
        self.staging: list = [None, None]  # pinned buffers, made at the first page on disk
        self.staged: list = [None, None]  # the copy that last read each pinned buffer
        self.read: list = [None, None]  # the kernels' stream after its last use of each device buffer

    def send(self, index: int, page):
        """Queue page ``index``'s copy into buffer ``index % 2``: (that buffer's view, the copy's event)."""
        import cupyx

        slot = index % 2
        if isinstance(page, str):  # from disk, through a pinned buffer
            if self.staging[slot] is None:
                self.staging[slot] = cupyx.empty_pinned(self.shape, PACKED_WORD_DTYPE)
            if self.staged[slot] is not None:
                self.staged[slot].synchronize()  # its last copy has read it
            loaded = np.load(page, mmap_mode="r")
            host = self.staging[slot][:loaded.shape[0]]
            host[...] = loaded
        else:
            host = page
        if self.read[slot] is not None:
            self.copies.wait_event(self.read[slot])
        target = self.device[slot][:host.shape[0]]
        target.set(host, stream=self.copies)
        copied = self.copies.record()
        if isinstance(page, str):
            self.staged[slot] = copied
        return target, copied


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.2f} MiB"


def device_budget(params, xp) -> int:
    """The bytes the compressed matrix may take on the device: ``max_device_matrix_bytes``, or
    (0) on a GPU the share of its free memory _AUTOMATIC_MARGIN leaves; 0 (no limit) on a CPU."""
    if params.max_device_matrix_bytes:
        return int(params.max_device_matrix_bytes)
    if xp is np:
        return 0
    free, _ = xp.cuda.Device().mem_info
    return int(free * (1 - _AUTOMATIC_MARGIN))


def may_page(X, budget: int, max_bin: int) -> bool:
    """Whether ``X``'s compressed matrix might exceed ``budget`` (its dense rows' bytes at the
    widest cells ``max_bin`` makes): then X stays where it is until its pages are built."""
    if not budget:
        return False
    cells_per_word = 32 // max(1, math.ceil(math.log2(max_bin + 1)))
    return int(X.shape[0]) * -(-int(X.shape[1]) // cells_per_word) * 4 > budget


def build_matrix(X, cuts: Cuts, xp, budget: int, *, name: str = "X"):
    """``X``'s compressed matrix on ``xp``'s device: in core (an EllpackMatrix) where it fits
    ``budget`` (0: no limit), else a PagedMatrix of pages of at most half the budget."""
    layout = matrix_layout(X, cuts)
    n_rows = int(X.shape[0])
    if not budget or n_rows * layout.bytes_per_row <= budget:
        return build_ellpack(X, cuts, xp, layout)
    page_rows = budget // (2 * layout.bytes_per_row)
    least = 2 * MIN_PAGE_ROWS * layout.bytes_per_row
    if page_rows < MIN_PAGE_ROWS:
        raise ValueError(f"max_device_matrix_bytes={budget} cannot hold two pages of {MIN_PAGE_ROWS} rows of {name}'s "
                         f"compressed matrix ({layout.bytes_per_row} bytes a row): raise it to at least {least} "
                         "(or 0 for the automatic budget)")
    on_gpu = xp is not np
    room = _host_room()
    spill = not on_gpu or n_rows * layout.bytes_per_row > room
    directory = _spill_directory() if spill else None
    where = directory if spill else "pinned host memory"
    pages, starts = [], []
    try:
        for start in range(0, n_rows, page_rows):
            packed = build_ellpack(X[start:start + page_rows], cuts, xp, layout).packed
            starts.append(start)
            pages.append(_keep(packed, directory, len(pages)))
    except BaseException:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    bin_offsets = asarray(xp, np.asarray(cuts.bin_offsets))
    return PagedMatrix(layout, bin_offsets, np.asarray(cuts.bin_offsets), tuple(starts) + (n_rows,), where, pages,
                       directory)


def _keep(packed, directory: str | None, index: int):
    """A built page moved off the device: a file in ``directory``, else a pinned host array."""
    if directory is None:
        import cupyx

        host = cupyx.empty_pinned(packed.shape, packed.dtype)
        packed.get(out=host)
        return host
    path = os.path.join(directory, f"page-{index:06d}.npy")
    try:
        np.save(path, to_numpy(packed), allow_pickle=False)
    except OSError as error:
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        raise OSError(error.errno, f"could not write a page of the compressed matrix to the spill directory "
                      f"{os.path.dirname(directory)!r}: {error.strerror or error}"
                      + ("; free space there, or set dask config dgboost.spill-directory to a larger disk"
                         if full else ""), path) from error
    return path


def _host_room() -> int:
    """Bytes of host memory pages may take: dask config ``dgboost.host-page-bytes`` if set, else
    half the memory available now."""
    configured = _settings.host_page_bytes()
    if configured is not None:
        return configured
    import psutil

    return int(psutil.virtual_memory().available // 2)


def _spill_directory() -> str:
    """A new directory for one matrix's pages, in the spill directory (_settings.spill_directory)."""
    parent = _settings.spill_directory()
    try:
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix=f"dgboost-pages-{uuid.uuid4().hex[:8]}-", dir=parent)
    except OSError as error:
        raise OSError(error.errno, f"could not make a directory for the compressed matrix's pages in the spill "
                      f"directory {parent!r}: {error.strerror or error}; set dask config "
                      "dgboost.spill-directory to a writable directory", parent) from error
