"""The compressed bin matrix: bin ids, bit-packed, row-major, in dense or sparse rows.

A dense row has one cell a feature, holding the feature's local bin id or the
matrix-wide missing symbol (one past the largest bin count). A sparse row (the
multi-GPU paper's sparse ELLPACK) has ``row_stride`` cells, the most present
values of any row: its entries' global bin ids (feature offset + bin), ascending
as their features are, then the null symbol (the total of bins) to the row's
end. All cells of a matrix use the same width, ``bits = ceil(log2(symbols))``,
and a cell never straddles a 32-bit word::

    row r:  word 0                          word 1
            [ c3 | c2 | c1 | c0 ]           [ c7 | c6 | c5 | c4 ]     (bits = 8)
            high bits        low bits

At the default max_bin of 256 a dense cell is one byte, so a dense matrix costs
one byte per value (a quarter of float32). A thread reading a row reads whole
words. ``build_ellpack`` picks the smaller of the two for the rows it is given
(dense on a tie), so data with most values missing, given as a dense array with
NaN or as a sparse matrix, is packed the same way; the model does not depend on
the choice (the histograms are the same integers).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._dtypes import BIN_OFFSET_DTYPE, PACKED_WORD_DTYPE
from ..backend import asarray, get_xp
from ..kernels import most_present, quantise_and_pack, quantise_sparse, unpack
from . import sparse
from .inputs import RowBlocks
from .sketch import Cuts

WORD_BITS = 32


@dataclasses.dataclass(frozen=True)
class EllpackLayout:
    """How cells sit in words.

    ``missing_symbol``: a dense row's missing cell, a sparse row's null cell.
    ``row_stride``: cells a row (``n_features`` where dense).
    """

    n_features: int
    bits: int
    missing_symbol: int
    row_stride: int
    is_sparse: bool = False

    @classmethod
    def for_cuts(cls, cuts: Cuts) -> "EllpackLayout":
        """Dense rows."""
        missing_symbol = int(cuts.n_bins.max())
        return cls(cuts.n_features, _bits(missing_symbol), missing_symbol, cuts.n_features)

    @classmethod
    def sparse_for_cuts(cls, cuts: Cuts, row_stride: int) -> "EllpackLayout":
        """Sparse rows of ``row_stride`` cells (one at the least)."""
        null_symbol = int(cuts.bin_offsets[-1])
        return cls(cuts.n_features, _bits(null_symbol), null_symbol, max(1, int(row_stride)), is_sparse=True)

    @classmethod
    def smaller(cls, cuts: Cuts, row_stride: int) -> "EllpackLayout":
        """Dense or sparse rows for rows of at most ``row_stride`` present values: the fewer
        bytes a row, dense on a tie (a dense cell is found without a search)."""
        limit = cls.sparse_limit(cuts)
        if limit < 1 or row_stride > limit:  # a sparse row has one cell at the least
            return cls.for_cuts(cuts)
        return cls.sparse_for_cuts(cuts, row_stride)

    @classmethod
    def sparse_limit(cls, cuts: Cuts) -> int:
        """The most present values a row may have for sparse rows to take fewer bytes than
        dense ones (0: they never do), below the feature count."""
        dense_words = cls.for_cuts(cuts).n_words
        return min(cuts.n_features - 1, (dense_words - 1) * cls.sparse_for_cuts(cuts, 1).cells_per_word)

    @property
    def cells_per_word(self) -> int:
        return WORD_BITS // self.bits

    @property
    def n_words(self) -> int:
        return -(-self.row_stride // self.cells_per_word)

    @property
    def bytes_per_row(self) -> int:
        return self.n_words * (WORD_BITS // 8)


def _bits(largest_symbol: int) -> int:
    return max(1, math.ceil(math.log2(largest_symbol + 1)))


@dataclasses.dataclass(frozen=True)
class EllpackMatrix:
    """One rank's rows, compressed.

    Attributes
    ----------
    packed : array of shape (n_rows, layout.n_words), uint32, on the training device
    layout : EllpackLayout
    bin_offsets : array of shape (n_features + 1,), int64, on ``packed``'s device
        Start of each feature's bins in a histogram row (from the cuts).
    host_bin_offsets : numpy array, the same on the host (sizes for kernel launches)
    """

    packed: object
    layout: EllpackLayout
    bin_offsets: object
    host_bin_offsets: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.packed.shape[0])

    @property
    def n_bins_total(self) -> int:
        return int(self.host_bin_offsets[-1])

    @property
    def nbytes(self) -> int:
        return int(self.packed.nbytes)

    @property
    def feature_bins(self):
        """What partition and route kernels take to find a feature's cell: None for dense rows,
        the device's bin offsets for sparse ones."""
        return self.bin_offsets if self.layout.is_sparse else None

    def describe(self) -> str:
        """A line of the log: the layout chosen and its cost."""
        layout = self.layout
        kind = f"sparse ({layout.row_stride} cells a row)" if layout.is_sparse else "dense"
        return (f"compressed matrix: {self.n_rows} rows x {layout.n_features} features, {kind}, "
                f"{layout.bits} bits a cell, {layout.bytes_per_row} bytes a row")

    def unpack(self, rows=None):
        """Cells of ``rows`` (all by default): (n, row_stride) int32, as stored (dense: local
        bins, missing = layout.missing_symbol; sparse: global bins, then null)."""
        packed = self.packed if rows is None else self.packed[rows]
        return unpack(packed, self.layout.bits, self.layout.cells_per_word, self.layout.row_stride)


def matrix_layout(X, cuts: Cuts) -> EllpackLayout:
    """Dense or sparse rows for ``X``, whichever is smaller (build_ellpack's choice): pages of
    one matrix take the layout of all its rows."""
    row_stride = sparse.row_stride(X) if sparse.is_sparse(X) else _most_present(X, EllpackLayout.sparse_limit(cuts))
    return EllpackLayout.smaller(cuts, row_stride)


def row_stride(X) -> int:
    """The most present values of a row of ``X`` (a CSR matrix's most entries) as a layout
    takes them (EllpackLayout.smaller): without the cuts, a dense X whose first rows hold a
    full row gives the feature count (dense rows, whatever the cuts) without a pass over every
    row. The largest of its pieces' is the whole X's, whose layout it makes with the cuts."""
    return sparse.row_stride(X) if sparse.is_sparse(X) else _most_present(X, int(X.shape[1]) - 1)


def build_ellpack(X, cuts: Cuts, xp=None, layout: EllpackLayout | None = None) -> EllpackMatrix:
    """Quantise and bit-pack ``X`` (float32, NaN = missing; or a CSR matrix, absent entries
    missing) with ``cuts``, in ``layout`` (default: matrix_layout's, dense or sparse rows,
    whichever is smaller), on ``xp``'s device (default X's). X on the host is packed on a
    GPU a chunk of rows at a time (_CHUNK_ENTRIES values), so the GPU never holds all of it."""
    if X.shape[1] != cuts.n_features:
        raise ValueError(f"X has {X.shape[1]} features but the cuts were made for {cuts.n_features}")
    xp = xp or get_xp(X)
    is_csr = sparse.is_sparse(X)
    layout = layout or matrix_layout(X, cuts)
    host_bin_offsets = np.asarray(cuts.bin_offsets, dtype=BIN_OFFSET_DTYPE)
    cut_values = asarray(xp, cuts.values)

    def pack(rows):  # rows on xp's device
        if layout.is_sparse or sparse.is_sparse(rows):
            rows = rows if sparse.is_sparse(rows) else sparse.from_dense(rows)
            return quantise_sparse(rows.data, rows.indices, rows.indptr, cut_values, cuts.offsets.tolist(),
                                   host_bin_offsets.tolist(), layout.bits, layout.cells_per_word, layout.n_words,
                                   layout.missing_symbol, layout.is_sparse)
        return quantise_and_pack(rows, cut_values, cuts.offsets.tolist(), layout.bits, layout.cells_per_word,
                                 layout.n_words, layout.missing_symbol)

    if sparse.array_module(X) is xp and not isinstance(X, RowBlocks):
        packed = pack(X)
    else:  # from the host to a GPU, or from blocks of rows: a chunk at a time
        packed = xp.empty((X.shape[0], layout.n_words), dtype=PACKED_WORD_DTYPE)
        step = max(1, _CHUNK_ENTRIES // max(layout.row_stride if is_csr else X.shape[1], 1))
        for begin in range(0, X.shape[0], step):
            rows = X[begin:begin + step]
            packed[begin:begin + step] = pack(sparse.to_device(rows, xp) if is_csr else asarray(xp, rows))
    return EllpackMatrix(packed, layout, asarray(xp, host_bin_offsets), host_bin_offsets)


#: The most entries (values of a dense X) copied from the host to a GPU at a time by build_ellpack.
_CHUNK_ENTRIES = 1 << 25

#: Rows of a dense X looked at first by _most_present.
_HEAD_ROWS = 64


def _most_present(X, limit: int) -> int:
    """The most present values of a row of the dense ``X``, or, where sparse rows could not be
    smaller (more than ``limit`` of them in one of its first rows: most dense data), the
    feature count without a pass over every row."""
    head = X[:_HEAD_ROWS]
    if limit < 1 or (head.shape[0] and int((~get_xp(X).isnan(head)).sum(axis=1).max()) > limit):
        return int(X.shape[1])
    if isinstance(X, RowBlocks):
        return max(most_present(block) for block in X.blocks)
    return most_present(X)
