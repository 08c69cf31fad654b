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
   page is at most half the budget). A pass starts where the last one ended and
   goes the other way, its first two pages those the buffers still hold: at
   four times the budget, a pass copies three quarters of the matrix.
3. **Removed** when training ends (``close``): its files deleted.

A Dask job whose float input is not to be held at once packs each piece of a rank's rows
where it is read (``pack_rows``, with the cuts agreed before: dask/_streamed.py): the pages
come to the rank as ``PackedRows``, a stand-in for X that ``build_matrix`` makes the matrix of,
in core where it fits the budget, else paged as above.

Trees read a paged matrix through the same histogram, partition and route
functions as an in-core one (tree/histogram.py, tree/partition.py): integer
histograms summed page by page are the same integers, so a model trained out of
core is the in-core one, byte for byte. With row sampling, each tree's rows are
gathered into one in-core page instead (``compact``; the out-of-core paper's
Algorithm 7, the gather made on the host so that only the sample crosses to the
device), and every row's leaf found page by page. That pass also gathers the rows
the next tree will likely draw while their pages are on the device (``RowsAhead``,
into a ``SamplePage``): the next sample crosses the bus only for the rows the guess
missed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import itertools
import logging
import math
import os
import shutil
import tempfile
import threading
import weakref

import numpy as np

from .. import _settings
from .._dtypes import MIN_PAGE_ROWS, PACKED_WORD_DTYPE
from ..backend import asarray, get_xp, to_numpy
from ..kernels import loops
from ..kernels import fill_sample_page, gather_page_rows, mask_indices
from .ellpack import EllpackLayout, EllpackMatrix, build_ellpack, matrix_layout
from .sketch import Cuts

logger = logging.getLogger("dgboost")

#: Of a GPU's free memory, the share the automatic budget leaves to everything but the matrix
#: (gradients, margins, row indices, histograms, the compacted sample's work).
_AUTOMATIC_MARGIN = 0.5

_TOKENS = itertools.count()


@dataclasses.dataclass(eq=False)
class PagedMatrix:
    """One rank's compressed matrix in pages of whole rows outside the device.

    Attributes
    ----------
    layout : EllpackLayout, every page's
    bin_offsets, host_bin_offsets : as EllpackMatrix's
    starts : tuple of int: each page's first row, then the row count
    budget : int: the device budget its pages were cut for (each at most half of it)
    where : "pinned host memory", or the directory of its files
    """

    layout: EllpackLayout
    bin_offsets: object
    host_bin_offsets: np.ndarray
    starts: tuple[int, ...]
    budget: int
    where: str
    _pages: list  # each page: a host array (pinned on a GPU), or its .npy file (a path, a PageFile); on a GPU
    # also a list of those: a page of pieces packed apart, consecutive rows (_from_packed)
    _directory: str | None = None  # the files' directory, removed by close
    _buffers: "PageBuffers | None" = None  # on a GPU: the device buffers its pages stream through

    def __post_init__(self):
        self._token = next(_TOKENS)  # names its pages in the buffers (PageBuffers.send)
        self._forward = True  # the next pass's direction (pages)
        if self._directory is not None:  # its files go with it, should close never be called
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
        return self._buffers is not None

    @property
    def pinned(self) -> bool:
        """Whether every page is in pinned host memory on a GPU (the device reads them in place)."""
        return self.on_gpu and not any(_on_disk(part) for page in self._pages for part in _parts(page))

    def describe(self) -> str:
        """A line of the log: the matrix is out of core, in how many pages of what size, where."""
        largest = max(self.page_sizes) * self.layout.bytes_per_row
        return (f"out of core: the compressed matrix ({self.n_rows} rows, {_mib(self.nbytes)}) in "
                f"{self.n_pages} pages of at most {_mib(largest)}, in {self.where}")

    def summary(self) -> str:
        """A few words for a progress bar: out of core, in how many pages, where."""
        return f"out of core: {self.n_pages} pages " + ("in pinned host memory" if self.pinned else "on disk")

    def page_ends(self, xp):
        """Each page's end row, an int64 array of ``xp``'s (on a GPU the current device's)."""
        return _page_ends(xp, self.starts, None if xp is np else xp.cuda.Device().id)

    def fits(self, n_rows: int) -> bool:
        """Whether ``n_rows`` rows gathered into one page fit the device budget."""
        return n_rows * self.layout.bytes_per_row <= self.budget

    def pages(self):
        """Each page on the device in turn: ``(its index, EllpackMatrix)``. A page is valid
        until the next is asked for (on a GPU its buffer is then refilled).

        A pass starts where the last one ended and goes the other way: on a GPU the last two
        pages of a pass are still in the buffers, so the next pass copies two pages fewer
        (a pass over the pages of another matrix sharing the buffers, an eval set's, sends
        them again). Callers keep each page's work at its index: the order they come in is
        not the rows' order."""
        order = range(self.n_pages) if self._forward else range(self.n_pages - 1, -1, -1)
        if not self.on_gpu:
            for index in order:
                yield index, self._matrix(_load(self._pages[index]))
            self._forward = not self._forward
            return
        import cupy

        buffers, stream = self._buffers, cupy.cuda.get_current_stream()
        pending = buffers.send(order[0], self._pages[order[0]], self.layout.n_words, self._token)
        for step, index in enumerate(order):
            target, copied = pending
            if step + 1 < self.n_pages:
                after = order[step + 1]
                pending = buffers.send(after, self._pages[after], self.layout.n_words, self._token)
            stream.wait_event(copied)
            try:
                yield index, self._matrix(target)
            finally:  # also when the pass stops here: the buffer is refilled after what was queued on it
                buffers.read[index % 2] = stream.record()
        self._forward = not self._forward

    def compact(self, rows, out=None) -> EllpackMatrix:
        """The rows ``rows`` (ascending indices, int, on the device) gathered into one in-core
        matrix, in their order: the sample's bytes cross to the device, not every page's. On a
        GPU the device reads them from the pinned pages where they lie (no host work, no wait),
        or from the device buffers for the pages the last pass left there; pages on disk are
        gathered on the host into one pinned buffer that crosses in one copy. ``out``: the
        (n, n_words) device array to gather into, else a new one."""
        if not self._pages:
            raise RuntimeError("this paged matrix was closed: its pages are gone")
        shape = (int(rows.shape[0]), self.layout.n_words)
        xp = get_xp(rows) if self.on_gpu else np
        out = xp.empty(shape, PACKED_WORD_DTYPE) if out is None else out
        if self.pinned:
            import cupy

            stream, held = cupy.cuda.get_current_stream(), self._buffers.holding(self._token)
            parts = []
            for index, page in enumerate(self._pages):
                if index in held:
                    view, copied = held[index]
                    stream.wait_event(copied)
                    parts.append(view)
                else:
                    parts += _parts(page)
            starts = tuple(int(s) for s in np.cumsum([0] + [part.shape[0] for part in parts]))
            gather_page_rows(rows, parts, starts, out)
            for index in held:  # the buffer is refilled after the gather has read it
                self._buffers.read[index % 2] = stream.record()
            return self._matrix(out)
        parts = [_load(part) for page in self._pages for part in _parts(page)]  # files mapped, not read
        starts = tuple(int(s) for s in np.cumsum([0] + [part.shape[0] for part in parts]))
        host_rows = to_numpy(rows)
        gathered = self._buffers.gathered(shape) if self.on_gpu else out
        # On a GPU the host's threads are otherwise idle: every core of the process's affinity
        # (dask-cuda narrows a worker's to its GPU's CPUs).
        with loops.using_threads(loops.cores() if self.on_gpu else None):
            gather_page_rows(host_rows, parts, starts, gathered)
        if self.on_gpu:
            out.set(gathered)  # synchronous: the pinned buffer is free for the next tree's sample
        return self._matrix(out)

    def close(self) -> None:
        """Release the pages (removing their files); the matrix cannot be read after."""
        self._pages = []
        if self._directory is not None:
            self._cleanup()
            self._directory = None

    def _matrix(self, packed) -> EllpackMatrix:
        return EllpackMatrix(packed, self.layout, self.bin_offsets, self.host_bin_offsets)


@dataclasses.dataclass
class SamplePage:
    """A device page of ``capacity`` rows, with a pair and a drawn flag a row, made once (again
    only where a guess outgrows it): the trees grown from gathered guesses (RowsAhead) read
    them at the same addresses every tree, so that they can be replayed from a CUDA graph
    (tree/grower.py PagedGrower)."""

    packed: object  # (capacity, n_words) packed rows
    pairs: object  # (capacity, 2) float32
    drawn: object  # (capacity,) bool

    @classmethod
    def make(cls, xp, capacity: int, n_words: int) -> "SamplePage":
        return cls(xp.empty((capacity, n_words), PACKED_WORD_DTYPE), xp.zeros((capacity, 2), np.float32),
                   xp.zeros(capacity, dtype=bool))

    @property
    def capacity(self) -> int:
        return int(self.drawn.shape[0])


class RowsAhead:
    """Rows of a paged matrix gathered while a pass has their pages on the device: the
    rows the next tree will likely draw (tree/sampling.py ``RowSampler.likely``), so that
    its sample is on the device when it is drawn, but for the few rows the guess missed.
    ``take`` each page as the pass yields it, then ``sample`` the rows drawn.

    Made from ``likely`` (a (n_rows,) bool mask) and ``bounds``, the rows it takes through
    each page's end read to the host (kernels.sample_sizes), into ``page`` (a SamplePage of at
    least the rows guessed and ``room``, the rows kept for those the guess will miss): nothing
    here reads the device, but to gather the missed rows from pages on disk (on the host:
    ``compact``). The next tree's ``sample_sizes`` finds the rows it missed."""

    def __init__(self, matrix: PagedMatrix, likely, bounds, room: int, page: SamplePage):
        self.matrix = matrix
        self.likely = likely
        self.bounds = [int(b) for b in bounds]  # each page's first place among the rows, then their count
        self.n_rows = self.bounds[-1]
        self.rows = mask_indices(likely, self.n_rows)  # int64, ascending
        self.room = room
        if self.n_rows + room > page.capacity:
            raise ValueError(f"{self.n_rows} rows guessed and a room of {room} exceed the page's {page.capacity}")
        self.page = page
        self._taken = set()

    def take(self, index: int, page: EllpackMatrix) -> None:
        """Gather the rows of page ``index`` (the page as the pass yields it)."""
        begin, end = self.bounds[index], self.bounds[index + 1]
        if end > begin:  # rows from the page's first: its table of one address is the same for every page of a buffer
            gather_page_rows(self.rows[begin:end], [page.packed], (0, page.n_rows), self.page.packed[begin:end],
                             base=self.matrix.starts[index])
        self._taken.add(index)

    @property
    def complete(self) -> bool:
        """Whether the pass took every page."""
        return len(self._taken) == self.matrix.n_pages

    def sample(self, drawn, missed: tuple, gpair) -> EllpackMatrix:
        """Ready the page to grow a tree of the rows ``drawn`` (a (n_rows,) bool mask) from,
        reading nothing back (but for pages on disk): the rows gathered, then ``room`` rows
        for those the guess missed (``missed``: their mask and count, as kernels.sample_sizes
        gives them; the first gathered now from the pages, the others repeating the matrix's
        last row), ``gpair`` at its rows (zero for the rows not drawn and past them) and its
        rows drawn (kernels.fill_sample_page); returns its matrix. Where more rows were missed
        than the room holds, some drawn rows are not in it."""
        page, n, end = self.page, self.n_rows, self.n_rows + self.room
        missed, n_missed = missed
        rows = mask_indices(missed, self.room, fill=self.matrix.n_rows - 1)
        self.matrix.compact(rows, out=page.packed[n:end])
        fill_sample_page(gpair, drawn, self.rows, rows, n_missed, page.pairs, page.drawn)
        return self.matrix._matrix(page.packed)


@functools.lru_cache(maxsize=8)
def _page_ends(xp, starts: tuple, device: int | None):
    """Each page's end row (a paged matrix's ``starts`` after the first), on ``device`` (None:
    the host) once, not each tree."""
    return asarray(xp, np.asarray(starts[1:], dtype=np.int64))


def _load(page) -> np.ndarray:
    """A page's rows on the host: its array, or its file mapped."""
    return np.asarray(np.load(os.fspath(page), mmap_mode="r")) if _on_disk(page) else page


def _parts(page) -> list:
    """A page's parts: the page itself, or, for a page of pieces packed apart (a list, on a
    GPU: ``_from_packed``), its pieces in row order, copied into one device buffer together."""
    return page if isinstance(page, list) else [page]


def _on_disk(page) -> bool:
    """Whether a page is a file (its path, or a PageFile), not a host array."""
    return not isinstance(page, np.ndarray)


class PageFile(os.PathLike):
    """A page of packed rows in a file of its own, removed (with its directory, once empty)
    when the last reference to it goes: a page packed by a Dask task lives as long as Dask
    keeps the task's result. Pickled (Dask spilling the result, or sending it), it travels as
    its rows: the copy is a host array, and the file stays this object's alone."""

    def __init__(self, path: str):
        self.path = path
        self._remove = weakref.finalize(self, _remove_page, path)

    def __fspath__(self) -> str:
        return self.path

    def __reduce__(self):
        return np.asarray, (np.load(self.path),)


def _remove_page(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
    with contextlib.suppress(OSError):  # not empty: another page's
        os.rmdir(os.path.dirname(path))


@dataclasses.dataclass(eq=False)
class PackedRows:
    """Rows packed into pages where they were read (``pack_rows``: a Dask worker's pieces of a
    rank's shard, dask/_streamed.py), in order, all in one layout and by one set of cuts. It
    stands for the rank's X (``shape``) until ``build_matrix`` makes its matrix of them.

    Attributes
    ----------
    pages : list of host arrays of packed rows (pinned, packed on a GPU where host memory had
        room) or PageFiles
    page_rows : tuple of int, each page's rows
    layout : EllpackLayout
    cuts : Cuts, the job's
    with_model : whether the rows' base_margin holds init_model's margins (made where the
        rows were read, from their float values)
    budget : the device budget the pages were cut for (0: none), which the rank's matrix keeps
    """

    pages: list
    page_rows: tuple[int, ...]
    layout: EllpackLayout
    cuts: Cuts
    with_model: bool = False
    budget: int = 0

    ndim = 2

    @property
    def shape(self) -> tuple[int, int]:
        return sum(self.page_rows), self.layout.n_features

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.layout.bytes_per_row

    @property
    def largest_page_bytes(self) -> int:
        return max(self.page_rows, default=0) * self.layout.bytes_per_row

    def matrices(self, xp):
        """Each page, one at a time, as (its first row, an EllpackMatrix of its rows on
        ``xp``'s device)."""
        host_offsets = np.asarray(self.cuts.bin_offsets)
        offsets = asarray(xp, host_offsets)
        first = 0
        for page, n_rows in zip(self.pages, self.page_rows):
            yield first, EllpackMatrix(asarray(xp, _load(page)), self.layout, offsets, host_offsets)
            first += n_rows

    @staticmethod
    def join(parts: list["PackedRows"]) -> "PackedRows":
        """One rank's pieces, in order, as one."""
        first = parts[0]
        if any((p.layout, p.with_model, p.budget) != (first.layout, first.with_model, first.budget) for p in parts):
            raise ValueError("pieces packed in different layouts or budgets, or with and without init_model's margins")
        return PackedRows([page for p in parts for page in p.pages], tuple(n for p in parts for n in p.page_rows),
                          first.layout, first.cuts, first.with_model, first.budget)


class PageBuffers:
    """The device side of a GPU rank's paging, shared by its paged matrices (training and eval
    sets): two device buffers of ``page_bytes`` that pages take turns in, the copy stream that
    fills them, the events after the kernels of each buffer's last use, two pinned buffers
    that pages on disk are read into, and the pinned buffer of a tree's gathered sample. Each
    made at its first use; ``close`` gives the pinned memory back."""

    def __init__(self, page_bytes: int):
        self.words = -(-page_bytes // 4)
        self.copies = None
        self.device: list = [None, None]
        self.staging: list = [None, None]  # pinned, for pages on disk
        self.staged: list = [None, None]  # the copy that last read each staging buffer
        self.read: list = [None, None]  # the current stream after the kernels of each device buffer's last use
        self.held: list = [None, None]  # ((owner, page index), (its view, its copy's event)) of each buffer
        self._gathered = None

    def send(self, index: int, page, n_words: int, owner: int):
        """Queue page ``index``'s copy into buffer ``index % 2`` (each of its parts in turn, one
        after the other): (the page's view of it, the copy's event). Where that buffer still
        holds the page (``owner``'s page ``index``, sent last into it), nothing is copied."""
        import cupy
        import cupyx

        slot = index % 2
        if self.held[slot] is not None and self.held[slot][0] == (owner, index):
            return self.held[slot][1]
        self.held[slot] = None  # until the page is queued whole: a copy that fails leaves no page named here
        if self.copies is None:
            self.copies = cupy.cuda.Stream(non_blocking=True)
        hosts, staged = [], False
        for part in _parts(page):
            if not _on_disk(part):
                hosts.append(part)
                continue
            if not staged:  # from disk, through a pinned buffer
                if self.staging[slot] is None:
                    self.staging[slot] = cupyx.empty_pinned(self.words, PACKED_WORD_DTYPE)
                if self.staged[slot] is not None:
                    self.staged[slot].synchronize()  # its last copy has read it
                staged, offset = True, sum(host.size for host in hosts)
            loaded = _load(part)
            host = self.staging[slot][offset:offset + loaded.size].reshape(loaded.shape)
            host[...] = loaded
            hosts.append(host)
            offset += loaded.size
        if self.device[slot] is None:
            self.device[slot] = cupy.empty(self.words, dtype=PACKED_WORD_DTYPE)
            # Its memory may be a block the pool took back from arrays that kernels (or an NCCL
            # call) queued on the current stream still read: the copy stream, which waits on no
            # other, copies into it only after them.
            self.read[slot] = cupy.cuda.get_current_stream().record()
        self.copies.wait_event(self.read[slot])
        n_rows = sum(int(host.shape[0]) for host in hosts)
        target = self.device[slot][:n_rows * n_words].reshape(n_rows, n_words)
        row = 0
        for host in hosts:
            target[row:row + host.shape[0]].set(host, stream=self.copies)
            row += int(host.shape[0])
        copied = self.copies.record()
        if staged:
            self.staged[slot] = copied
        self.held[slot] = ((owner, index), (target, copied))
        return target, copied

    def holding(self, owner: int) -> dict:
        """``owner``'s pages in the buffers: {page index: (its view, its copy's event)}."""
        return {held[0][1]: held[1] for held in self.held if held is not None and held[0][0] == owner}

    def gathered(self, shape) -> np.ndarray:
        """A pinned host buffer of ``shape`` for a gathered sample (grown as samples need; its
        last copy to the device was synchronous)."""
        import cupyx

        size = shape[0] * shape[1]
        if self._gathered is None or self._gathered.size < size:
            self._gathered = cupyx.empty_pinned(max(size, 1), PACKED_WORD_DTYPE)
        return self._gathered[:size].reshape(shape)

    def close(self) -> None:
        """Give back the device and pinned buffers, and the pinned pool's unused blocks (the
        pages' too, once their matrices are closed)."""
        import cupy

        if self.copies is not None:
            self.copies.synchronize()
        self.device, self.staging, self.staged, self.read, self.held = ([None] * 2 for _ in range(5))
        self._gathered = None
        cupy.get_default_pinned_memory_pool().free_all_blocks()


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


def stays_on_host(n_rows: int, n_features: int, value_bytes: int, budget: int, max_bin: int) -> bool:
    """Whether a host X of ``n_rows`` rows of ``n_features`` (``value_bytes`` of values) stays
    there while its matrix is built a chunk at a time: where the matrix might exceed ``budget``
    (its dense rows' bytes at the widest cells ``max_bin`` makes: it may be paged), or where X's
    values would not fit beside it within the budget (data larger than the device whose matrix
    fits it: the matrix is in core, the values never on the device whole). With
    ``value_bytes`` 0: whether the matrix alone might exceed the budget."""
    return bool(budget) and _widest_matrix_bytes(n_rows, n_features, max_bin) + int(value_bytes) > budget


def _widest_matrix_bytes(n_rows: int, n_features: int, max_bin: int) -> int:
    cells_per_word = 32 // max(1, math.ceil(math.log2(max_bin + 1)))
    return int(n_rows) * -(-int(n_features) // cells_per_word) * 4


def build_matrix(X, cuts: Cuts, xp, budget: int, *, name: str = "X", automatic: bool = False,
                 buffers: PageBuffers | None = None):
    """``X``'s compressed matrix on ``xp``'s device: in core (an EllpackMatrix) where it fits
    ``budget`` (0: no limit), else a PagedMatrix of pages of at most half the budget, streamed on
    a GPU through ``buffers`` (of half the budget). ``automatic``: the budget was not given but
    derived from the device's free memory (the error says so). X may be PackedRows, packed
    where its rows were read: its pages are the matrix's."""
    on_gpu = xp is not np
    if on_gpu and buffers is None:  # made at their first use: nothing is taken for an in-core matrix
        buffers = PageBuffers(buffer_bytes(X, budget))
    if isinstance(X, PackedRows):
        return _from_packed(X, xp, budget, buffers)
    layout = matrix_layout(X, cuts)
    n_rows = int(X.shape[0])
    if not budget or n_rows * layout.bytes_per_row <= budget:
        return build_ellpack(X, cuts, xp, layout)
    directory = _spill_directory() if not on_gpu or n_rows * layout.bytes_per_row > _host_room() else None
    pages, starts = _pack_pages(X, cuts, xp, layout, rows_per_page(layout, budget, name, automatic), directory)
    return PagedMatrix(layout, asarray(xp, np.asarray(cuts.bin_offsets)), np.asarray(cuts.bin_offsets),
                       tuple(starts) + (n_rows,), budget, directory or "pinned host memory", pages, directory,
                       buffers if on_gpu else None)


def pack_rows(X, cuts: Cuts, xp, layout: EllpackLayout, budget: int, *, name: str = "X",
              automatic: bool = False) -> PackedRows:
    """``X``'s rows packed in ``layout`` on ``xp``'s device into pages of at most half of
    ``budget`` (0: one page, in pageable host memory: the rank joins it into its in-core
    matrix), for a rank to train on (PackedRows): on a GPU moved to pinned host memory while
    it has room (``dgboost.host-page-bytes``, else half the memory available), else to files in
    the spill directory; on a CPU to files where a budget is given (its memory is the
    device's)."""
    n_rows = int(X.shape[0])
    on_gpu = xp is not np
    spill = bool(budget) and (not on_gpu or n_rows * layout.bytes_per_row > _host_room())
    directory = _spill_directory() if spill else None
    page_rows = rows_per_page(layout, budget, name, automatic) if budget else max(n_rows, 1)
    pages, starts = _pack_pages(X, cuts, xp, layout, page_rows, directory, keep=spill or (on_gpu and bool(budget)))
    if directory is not None:
        pages = [PageFile(page) for page in pages]  # each removes its file (and the directory, once empty)
    sizes = tuple(stop - start for start, stop in zip(starts, starts[1:] + [n_rows]))
    return PackedRows(pages, sizes, layout, cuts)


def buffer_bytes(X, budget: int) -> int:
    """Bytes of each of a GPU's two page buffers for X's pages: half the budget, or a page packed
    elsewhere (PackedRows) that is larger."""
    return max(budget // 2, X.largest_page_bytes if isinstance(X, PackedRows) else 0)


def rows_per_page(layout: EllpackLayout, budget: int, name: str, automatic: bool) -> int:
    """Rows a page of at most half ``budget``; a budget too small for two pages of
    MIN_PAGE_ROWS rows is an error naming the least that would do."""
    page_rows = budget // (2 * layout.bytes_per_row)
    least = 2 * MIN_PAGE_ROWS * layout.bytes_per_row
    if page_rows >= MIN_PAGE_ROWS:
        return page_rows
    if automatic:
        raise ValueError(f"the device's free memory leaves {name}'s compressed matrix {budget} bytes, too few for "
                         f"two pages of {MIN_PAGE_ROWS} rows ({layout.bytes_per_row} bytes a row, {least} bytes): "
                         "free device memory, or set max_device_matrix_bytes")
    raise ValueError(f"max_device_matrix_bytes={budget} cannot hold two pages of {MIN_PAGE_ROWS} rows of {name}'s "
                     f"compressed matrix ({layout.bytes_per_row} bytes a row): raise it to at least {least} "
                     "(or 0 for the automatic budget)")


def _pack_pages(X, cuts: Cuts, xp, layout: EllpackLayout, page_rows: int, directory: str | None,
                keep: bool = True) -> tuple[list, list[int]]:
    """X's rows packed a page of ``page_rows`` at a time: (the pages, each page's first row).
    ``keep``: each page moved off the device (``_keep``: to a file in ``directory``, else to
    pinned host memory); else to (or left in) pageable host memory. A failure removes the
    directory, with the pages written."""
    pages, starts = [], []
    try:
        for start in range(0, max(int(X.shape[0]), 1), page_rows):
            packed = build_ellpack(X[start:start + page_rows], cuts, xp, layout).packed
            starts.append(start)
            pages.append(_keep(packed, directory, len(pages)) if keep else to_numpy(packed))
    except BaseException:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return pages, starts


def _from_packed(X: PackedRows, xp, budget: int, buffers: PageBuffers | None):  # buffers: a GPU's
    """The matrix of rows packed elsewhere: one in-core matrix where they fit ``budget`` (0:
    no limit), else a PagedMatrix of their pages (on a GPU, a page that came unpinned, from
    Dask's spill say, is copied into pinned memory)."""
    n_rows, layout = X.shape[0], X.layout
    host_offsets = np.asarray(X.cuts.bin_offsets)
    starts = tuple(int(s) for s in np.cumsum((0,) + X.page_rows))
    if not budget or X.nbytes <= budget:
        packed = xp.empty((n_rows, layout.n_words), dtype=PACKED_WORD_DTYPE)
        for start, stop, page in zip(starts, starts[1:], X.pages):
            packed[start:stop] = asarray(xp, _load(page))
        return EllpackMatrix(packed, layout, asarray(xp, host_offsets), host_offsets)
    on_gpu = xp is not np
    pages = [_pinned(page) if on_gpu and not _on_disk(page) else page for page in X.pages]
    spill = sorted({os.path.dirname(os.path.dirname(os.fspath(page))) for page in pages if _on_disk(page)})
    where = " and ".join((["pinned host memory"] if not all(map(_on_disk, pages)) else []) + spill)
    if not on_gpu:
        return PagedMatrix(layout, host_offsets, host_offsets, starts, budget, where, pages, None, None)
    # Pieces smaller than a buffer (a partition's rows, where partitions are small) go to the
    # device together, as one page: a pass's copies and kernels a page are as many as the
    # in-core-built matrix's.
    groups, sizes = [], []
    for page, n in zip(pages, X.page_rows):
        if groups and (sizes[-1] + n) * layout.bytes_per_row <= buffers.words * 4:
            groups[-1].append(page)
            sizes[-1] += n
        else:
            groups.append([page])
            sizes.append(n)
    starts = tuple(int(s) for s in np.cumsum([0] + sizes))
    return PagedMatrix(layout, asarray(xp, host_offsets), host_offsets, starts, budget, where,
                       [group[0] if len(group) == 1 else group for group in groups], None, buffers)


def _pinned(page: np.ndarray) -> np.ndarray:
    """``page`` in pinned host memory: itself where it is, else a pinned copy."""
    import cupy

    if not page.size or cupy.cuda.runtime.pointerGetAttributes(page.ctypes.data).type == \
            cupy.cuda.runtime.memoryTypeHost:
        return page
    pinned = _empty_pinned(page.shape, page.dtype)
    pinned[...] = page
    return pinned


def _keep(packed, directory: str | None, index: int):
    """A built page moved off the device: a file in ``directory``, else a pinned host array."""
    if directory is None:
        host = _empty_pinned(packed.shape, packed.dtype)
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


#: Bytes of this process's pinned pages alive now (``_empty_pinned``'s, less those freed).
_pinned_bytes = [0]
_pinned_lock = threading.Lock()


def _empty_pinned(shape, dtype) -> np.ndarray:
    """A host array in page-locked memory of its own, not cupy's pinned pool: its memory goes
    back to the system with it (a page held by Dask outlives the run that pools are emptied
    after). Counted in ``_pinned_bytes`` while it lives."""
    import cupy

    nbytes = max(int(np.prod(shape)) * np.dtype(dtype).itemsize, 1)
    memory = cupy.cuda.PinnedMemoryPointer(cupy.cuda.PinnedMemory(nbytes, cupy.cuda.runtime.hostAllocPortable), 0)
    array = np.ndarray(shape, dtype=dtype, buffer=memory)
    with _pinned_lock:
        _pinned_bytes[0] += nbytes
    weakref.finalize(array, _unpin, nbytes)
    return array


def _unpin(nbytes: int) -> None:
    with _pinned_lock:
        _pinned_bytes[0] -= nbytes


def _host_room() -> int:
    """Bytes of host memory more pages may take: dask config ``dgboost.host-page-bytes`` (less
    the pinned pages alive) if set, else half the memory available now, and on a Dask worker
    with a memory limit no more than half of it less the pinned pages alive (Dask counts a
    piece's pinned pages: past 60% of the limit it would spill them, unpinned, to its disk)."""
    configured = _settings.host_page_bytes()
    if configured is not None:
        return configured - _pinned_bytes[0]
    import psutil

    room = int(psutil.virtual_memory().available // 2)
    limit = _settings.worker_memory_limit()
    return room if limit is None else min(room, limit // 2 - _pinned_bytes[0])


def _spill_directory() -> str:
    """A new directory for one matrix's pages, in the spill directory (_settings.spill_directory)."""
    parent = _settings.spill_directory()
    try:
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix="dgboost-pages-", dir=parent)
    except OSError as error:
        raise OSError(error.errno, f"could not make a directory for the compressed matrix's pages in the spill "
                      f"directory {parent!r}: {error.strerror or error}; set dask config "
                      "dgboost.spill-directory to a writable directory", parent) from error
