"""The compressed bin matrix: per-feature bin ids, bit-packed, row-major.

Each cell holds a feature's local bin id, or the matrix-wide missing symbol
(one past the largest bin count). All cells of a matrix use the same width,
``bits = ceil(log2(symbols))``, and a cell never straddles a 32-bit word::

    row r:  word 0                          word 1
            [ f3 | f2 | f1 | f0 ]           [ f7 | f6 | f5 | f4 ]     (bits = 8)
            high bits        low bits

At the default max_bin of 256 a cell is one byte, so a dense matrix costs one
byte per value (a quarter of float32). A thread reading a row reads whole words.

Room is left for what later work adds: sparse rows (a row stride below
n_features with feature ids beside the bins) and pages of rows for out-of-core
training both fit behind ``EllpackMatrix`` without changing the kernels' contract
of "packed words in, bin ids out".
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._dtypes import BIN_OFFSET_DTYPE
from ..backend import asarray, get_xp
from ..kernels import quantise_and_pack, unpack
from .sketch import Cuts

WORD_BITS = 32


@dataclasses.dataclass(frozen=True)
class EllpackLayout:
    """How cells sit in words; identical on every rank of a job."""

    n_features: int
    bits: int
    missing_symbol: int

    @classmethod
    def for_cuts(cls, cuts: Cuts) -> "EllpackLayout":
        missing_symbol = int(cuts.n_bins.max())
        bits = max(1, math.ceil(math.log2(missing_symbol + 1)))
        return cls(cuts.n_features, bits, missing_symbol)

    @property
    def cells_per_word(self) -> int:
        return WORD_BITS // self.bits

    @property
    def n_words(self) -> int:
        return -(-self.n_features // self.cells_per_word)

    @property
    def bytes_per_row(self) -> int:
        return self.n_words * (WORD_BITS // 8)


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

    def unpack(self, rows=None):
        """Bin ids of ``rows`` (all by default): (n, n_features) int32; missing = layout.missing_symbol."""
        packed = self.packed if rows is None else self.packed[rows]
        return unpack(packed, self.layout.bits, self.layout.cells_per_word, self.layout.n_features)


def build_ellpack(X, cuts: Cuts) -> EllpackMatrix:
    """Quantise and bit-pack ``X`` (float32, NaN = missing) with ``cuts``, on X's device."""
    if X.shape[1] != cuts.n_features:
        raise ValueError(f"X has {X.shape[1]} features but the cuts were made for {cuts.n_features}")
    xp = get_xp(X)
    layout = EllpackLayout.for_cuts(cuts)
    packed = quantise_and_pack(X, asarray(xp, cuts.values), cuts.offsets.tolist(), layout.bits,
                               layout.cells_per_word, layout.n_words, layout.missing_symbol)
    host_bin_offsets = np.asarray(cuts.bin_offsets, dtype=BIN_OFFSET_DTYPE)
    return EllpackMatrix(packed, layout, asarray(xp, host_bin_offsets), host_bin_offsets)
