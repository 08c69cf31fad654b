"""Cut points: per-feature bin boundaries from a partition-invariant row sample.

Which rows are sampled depends only on a hash of each row's global index and
the seed, so a data set split any way across workers yields the same sample,
and after sorting by global index the same cuts. The coordinator computes the
cuts on its device from the gathered sample; they are small, and kept on the host.

Bins follow XGBoost's convention: feature ``f`` has ``n_bins[f]`` bins and
``n_bins[f] - 1`` interior cut values ``c``; a value ``x`` falls in bin
``#{c <= x}``, so ``x`` is in a bin ``<= b`` exactly when ``x < c[b]``, which is
the split condition stored in trees.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._dtypes import (BIN_OFFSET_DTYPE, COLUMN_INDEX_DTYPE, CUT_DTYPE, EXACT_SUM_DTYPE, FEATURE_DTYPE,
                      ROW_INDEX_DTYPE, ROW_POINTER_DTYPE, STAT_DTYPE, WEIGHT_DTYPE)
from .._hashing import STREAM_CUT_SAMPLE, stream_key, uniform
from ..backend import asarray, get_xp, to_numpy, to_numpy_many
from ..fixed_point import SUM_HEADROOM_BITS, power_of_two_scale, to_fixed
from . import sparse
from .inputs import RowBlocks

#: Expected rows in the cut sample. With 2**18 rows a quantile's rank error is
#: about 1/sqrt(2**18) = 0.2%, half the width of a bin at max_bin 256; data sets
#: smaller than this are used whole, so their cuts are exact.
SKETCH_SAMPLE_ROWS = 2**18

#: Split threshold meaning "every non-missing value goes left" (a split on the
#: last bin, which separates missing values from all others). The largest
#: float32 rather than inf, so the model stays plain JSON and XGBoost-exportable.
ALL_VALUES_LEFT = float(np.finfo(CUT_DTYPE).max)


@dataclasses.dataclass(frozen=True)
class Cuts:
    """Bin boundaries of every feature, on the host.

    Attributes
    ----------
    values : array of shape (n_cuts_total,), float32
        Interior cut values of all features, concatenated, ascending per feature.
    offsets : array of shape (n_features + 1,), int64
        Feature ``f``'s cuts are ``values[offsets[f]:offsets[f + 1]]``.
    """

    values: np.ndarray
    offsets: np.ndarray

    @property
    def n_features(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_bins(self) -> np.ndarray:
        """Bins per feature (one more than its cut values), int64, shape (n_features,)."""
        return np.diff(self.offsets) + 1

    @property
    def bin_offsets(self) -> np.ndarray:
        """Start of each feature's bins in a histogram row; the last entry is the total."""
        return np.concatenate([[0], np.cumsum(self.n_bins)]).astype(BIN_OFFSET_DTYPE)

    def threshold(self, feature: np.ndarray, split_bin: np.ndarray) -> np.ndarray:
        """The raw-value threshold ``x < t`` of splits after ``split_bin`` of ``feature``."""
        last = split_bin >= self.n_bins[feature] - 1
        index = np.where(last, 0, self.offsets[feature] + split_bin)
        values = self.values[index] if len(self.values) else np.zeros(len(index), CUT_DTYPE)
        return np.where(last, CUT_DTYPE(ALL_VALUES_LEFT), values).astype(CUT_DTYPE)


@dataclasses.dataclass(frozen=True)
class Sample:
    """Sampled rows of one rank, on its data's device, in ascending global index order."""

    global_index: object  # (m,), int64
    values: object  # (m, n_features): float32, NaN = missing; or a CSR matrix (data/sparse.py)
    weights: object  # (m,), float32

    @property
    def is_sparse(self) -> bool:
        return sparse.is_sparse(self.values)

    def to_bytes(self):
        """The sample as one uint8 array, which one collective carries bit for bit: a header
        of three int64 (1 if sparse, rows, stored entries), then each row's global index
        and weight and, dense, its values (a row of 12 + 4 n_features bytes), or, sparse,
        the CSR matrix's ``indptr``, ``indices`` and ``data``."""
        xp = get_xp(self.global_index)
        m = self.global_index.shape[0]
        as_bytes = lambda a, dtype: xp.ascontiguousarray(a, dtype=dtype).view(np.uint8).reshape(-1)  # noqa: E731
        rows = [self.global_index.astype(ROW_INDEX_DTYPE).view(np.uint8).reshape(m, 8),
                xp.ascontiguousarray(self.weights, dtype=WEIGHT_DTYPE).view(np.uint8).reshape(m, 4)]
        if self.is_sparse:
            X = self.values
            header = [1, m, int(X.nnz)]
            body = [xp.concatenate(rows, axis=1).reshape(-1), as_bytes(X.indptr, ROW_POINTER_DTYPE),
                    as_bytes(X.indices, COLUMN_INDEX_DTYPE), as_bytes(X.data, FEATURE_DTYPE)]
        else:
            n_features = self.values.shape[1]
            header = [0, m, m * n_features]
            values = xp.ascontiguousarray(self.values, dtype=FEATURE_DTYPE).view(np.uint8).reshape(m, 4 * n_features)
            body = [xp.concatenate(rows + [values], axis=1).reshape(-1)]
        return xp.concatenate([asarray(xp, np.array(header, dtype=np.int64)).view(np.uint8)] + body)

    @staticmethod
    def from_bytes(packed, n_features: int) -> "Sample":
        """The Sample ``to_bytes`` packed."""
        xp = get_xp(packed)
        is_sparse_, m, nnz = (int(v) for v in to_numpy(packed[:_HEADER_BYTES]).view(np.int64))
        body = packed[_HEADER_BYTES:]
        width = 12 + (0 if is_sparse_ else 4 * n_features)
        rows, body = body[:m * width].reshape(m, width), body[m * width:]
        global_index = xp.ascontiguousarray(rows[:, :8]).view(ROW_INDEX_DTYPE).reshape(m)
        weights = xp.ascontiguousarray(rows[:, 8:12]).view(WEIGHT_DTYPE).reshape(m)
        if not is_sparse_:
            values = xp.ascontiguousarray(rows[:, 12:]).view(FEATURE_DTYPE).reshape(m, n_features)
            return Sample(global_index, values, weights)
        sizes = np.cumsum([0, 8 * (m + 1), 4 * nnz, 4 * nnz])
        indptr, indices, data = (xp.ascontiguousarray(body[a:b]).view(dtype) for a, b, dtype in
                                 zip(sizes[:-1], sizes[1:], (ROW_POINTER_DTYPE, COLUMN_INDEX_DTYPE, FEATURE_DTYPE)))
        return Sample(global_index, sparse.from_arrays(data, indices, indptr, n_features), weights)

    @staticmethod
    def merge(samples: list["Sample"]) -> "Sample":
        """All ranks' samples as one, ordered by global index whatever the rank order (sparse
        where any is: a dense rank's values join as CSR)."""
        if len(samples) == 1:
            return samples[0]  # draw_sample's rows are already in order
        xp = get_xp(samples[0].global_index)
        index = xp.concatenate([s.global_index for s in samples])
        order = xp.argsort(index)  # global indices are unique: no tie to break
        weights = xp.concatenate([s.weights for s in samples])[order]
        if not any(s.is_sparse for s in samples):
            return Sample(index[order], xp.concatenate([s.values for s in samples])[order], weights)
        values = sparse.stack([s.values if s.is_sparse else sparse.from_dense(s.values) for s in samples])
        return Sample(index[order], sparse.take_rows(values, order), weights)


#: Bytes of Sample.to_bytes's header.
_HEADER_BYTES = 24


def draw_sample(X, weight, global_index, n_total: int, seed: int) -> Sample:
    """This rank's rows of the cut sample, on X's device.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32, or a CSR matrix (data/sparse.py), on
        global_index's device or on the host (an X kept there for its pages)
    weight : array of shape (n_rows,), float32, or None
    global_index : array of shape (n_rows,), int64, ascending, on the training device
        Each row's index in the whole data set (data.RowSpans.global_index).
    n_total : int
        Rows over all ranks.
    seed : int

    Returns the sample on global_index's device.
    """
    xp = get_xp(global_index)
    probability = min(1.0, SKETCH_SAMPLE_ROWS / max(n_total, 1))
    keep = None
    if probability < 1.0:
        keep = uniform(global_index, stream_key(seed, STREAM_CUT_SAMPLE)) < probability
    if weight is not None:  # a row that weighs nothing places no cut
        keep = weight > 0 if keep is None else keep & (weight > 0)
    if keep is None and isinstance(X, RowBlocks):  # every row, read from its blocks
        keep = xp.ones(X.shape[0], dtype=bool)
    if keep is not None:
        # Row numbers, not a boolean mask: cupy expands a row mask over every cell.
        chosen = xp.flatnonzero(keep)
        global_index = global_index[chosen]
        X = sparse.take_rows(X, asarray(get_xp(X.data), chosen)) if sparse.is_sparse(X) else X[asarray(get_xp(X), chosen)]
        weight = None if weight is None else weight[chosen]
    weights = xp.ones(X.shape[0], WEIGHT_DTYPE) if weight is None else weight
    values = sparse.to_device(X, xp) if sparse.is_sparse(X) else asarray(xp, X).astype(FEATURE_DTYPE, copy=False)
    return Sample(global_index, values, weights)


def compute_cuts(sample: Sample, max_bin: int) -> Cuts:
    """Weighted quantile cuts of every feature: at most ``max_bin - 1`` value bins.

    One symbol of ``max_bin`` is kept for missing values (see ellpack.py). A
    feature with at most that many distinct values gets one bin per value (exact);
    otherwise bin ``k`` starts at the first distinct value with at least ``k / n``
    of the feature's weight below it (``n`` value bins).

    Runs on the sample's device, all features at once (``_SORT_CELLS`` cells at
    a time; on the host, chunks of features on ``loops.threads()`` threads, as NumPy
    sorts without the GIL). Weights are summed in fixed point, so tied values may
    sort in any order and every device finds the same cuts. Returns the cuts on the
    host.
    """
    xp = get_xp(sample.weights)
    n_rows, n_features = sample.values.shape
    if not n_features:
        return Cuts(np.zeros(0, CUT_DTYPE), np.zeros(1, BIN_OFFSET_DTYPE))
    n_value_bins = max_bin - 1
    weights = _fixed_weights(sample.weights, n_value_bins)
    from ..kernels.loops import on_host_threads, threads

    if sample.is_sparse:  # each feature's entries together; a feature's first entry (one read)
        columns = sample.values.tocsc()
        cells_before = to_numpy(columns.indptr).astype(np.int64)
        cells = lambda begin, end: _sparse_cells(columns, cells_before, begin, end, weights)  # noqa: E731
    else:
        cells_before = np.arange(n_features + 1, dtype=np.int64) * n_rows
        cells = lambda begin, end: _dense_cells(sample.values[:, begin:end], weights)  # noqa: E731
    n_cells = int(cells_before[-1])
    n_threads = 1  # on a GPU: the caller's thread, where its device is current
    if xp is np:
        n_threads = min(threads(), n_features, max(1, n_cells // _CELLS_PER_THREAD))
    # The threads' chunks together hold _SORT_CELLS cells (one feature each at the least).
    chunks = _feature_chunks(cells_before, max(1, min(_SORT_CELLS // n_threads, -(-n_cells // n_threads))))
    values, counts = zip(*on_host_threads(
        lambda index: _cuts_of_sorted(*cells(*chunks[index]), chunks[index][1] - chunks[index][0], n_value_bins),
        len(chunks), n_threads))
    # One read of both (float32 values travel exactly as float64).
    values, counts = to_numpy_many([xp.concatenate(values).astype(STAT_DTYPE), xp.concatenate(counts)])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(BIN_OFFSET_DTYPE)
    return Cuts(values.astype(CUT_DTYPE), offsets)


def _feature_chunks(cells_before, cells_per_chunk: int) -> list[tuple[int, int]]:
    """The features cut into ranges ``(begin, end)``, in order, of about ``cells_per_chunk``
    cells each (one feature at the least); feature ``f``'s cells start at ``cells_before[f]``."""
    n_features = len(cells_before) - 1
    bounds = [0]
    while bounds[-1] < n_features:
        begin = bounds[-1]
        end = int(np.searchsorted(cells_before, cells_before[begin] + cells_per_chunk, side="right")) - 1
        bounds.append(min(n_features, max(begin + 1, end)))
    return list(zip(bounds[:-1], bounds[1:]))


#: Cells of the sample sorted at a time by compute_cuts (over all its threads): bounds
#: its temporaries (about 40 bytes a cell, 80 MiB).
_SORT_CELLS = 1 << 21

#: The fewest sample cells a thread of compute_cuts sorts on the host.
_CELLS_PER_THREAD = 1 << 16


def _fixed_weights(weights, n_value_bins: int):
    """Weights as int64 fixed point, scaled so that ``total * n_value_bins`` fits an int64."""
    xp = get_xp(weights)
    if weights.shape[0] == 0:
        return xp.zeros(0, dtype=EXACT_SUM_DTYPE)
    headroom = SUM_HEADROOM_BITS - int(n_value_bins).bit_length()
    scale = power_of_two_scale(xp.max(weights)[None].astype(STAT_DTYPE), int(weights.shape[0]), headroom)
    return to_fixed(weights, scale[0])


def _dense_cells(columns, weights):
    """The present cells of a few dense features, sorted by (feature, value): their features
    (``0 .. f - 1``), values and fixed-point weights (see _cuts_of_sorted).

    Parameters
    ----------
    columns : array of shape (m, f), float32, NaN = missing
    weights : array of shape (m,), int64 fixed point
    """
    xp = get_xp(columns)
    keys = columns.T + FEATURE_DTYPE(0)  # a copy, -0.0 made 0.0: one value, whichever sorts first
    keys = xp.where(xp.isnan(keys), xp.inf, keys)  # missing last (X holds no infinity)
    order = xp.argsort(keys, axis=1)
    keys = xp.take_along_axis(keys, order, axis=1)
    present = keys < xp.inf
    feature = xp.broadcast_to(xp.arange(keys.shape[0])[:, None], keys.shape)
    return feature[present], keys[present], weights[order][present]


def _sparse_cells(columns, cells_before, begin: int, end: int, weights):
    """The stored cells of features ``begin`` to ``end`` of a CSC matrix, as _dense_cells
    gives a dense chunk's: sorted by (feature, value) with one key of both."""
    xp = get_xp(weights)
    first, stop = int(cells_before[begin]), int(cells_before[end])
    values = columns.data[first:stop] + FEATURE_DTYPE(0)
    starts = asarray(xp, cells_before[begin:end + 1] - first)
    feature = xp.searchsorted(starts, xp.arange(stop - first), side="right") - 1
    order = xp.argsort((feature.astype(np.uint64) << np.uint64(32)) | _ordered_bits(values))
    return feature[order], values[order], weights[columns.indices[first:stop][order]]


def _ordered_bits(values):
    """float32 values (no NaN) as uint32 whose order is theirs: the sign bit flipped for
    values >= 0, every bit for the others."""
    xp = get_xp(values)
    bits = values.view(np.uint32)
    return (bits ^ xp.where(bits >> np.uint32(31), np.uint32(0xFFFFFFFF), np.uint32(0x80000000))).astype(np.uint64)


def _cuts_of_sorted(feature, keys, weight, n_features: int, n_value_bins: int):
    """Cut values (ascending per feature, features in order) and counts of ``n_features``
    features from their present cells sorted by (feature, value).

    Parameters
    ----------
    feature : array of shape (c,), int: each cell's feature, ascending
    keys : array of shape (c,), float32: the values, ascending within a feature
    weight : array of shape (c,), int64 fixed point: each cell's row's weight
    """
    xp = get_xp(keys)
    # The first cell of each distinct value of each feature.
    new_value = xp.ones(keys.shape[0], dtype=bool)
    new_value[1:] = (keys[1:] != keys[:-1]) | (feature[1:] != feature[:-1])
    starts = xp.flatnonzero(new_value)
    value_feature = feature[starts]
    first_of_feature = xp.concatenate([xp.ones(min(1, starts.size), dtype=bool),
                                       value_feature[1:] != value_feature[:-1]])
    # Weight before each cell, over the chunk: it may pass int64's range and wrap, but the
    # differences below are a feature's sums, which fit, so they come out exact.
    before = xp.concatenate([xp.zeros(1, dtype=weight.dtype), xp.cumsum(weight)])
    feature_start = xp.searchsorted(feature, xp.arange(n_features + 1, dtype=feature.dtype))
    below = before[starts] - before[feature_start[value_feature]]  # exact, whatever the order of ties
    total = before[feature_start[1:]] - before[feature_start[:-1]]
    # Quantile targets total * k / n (k = 1 .. n - 1) at or below `below`, in integers.
    reached = xp.minimum(below * n_value_bins // xp.maximum(total[value_feature], 1), n_value_bins - 1)
    reached_before = xp.concatenate([xp.zeros(min(1, starts.size), dtype=reached.dtype), reached[:-1]])
    exact = _counts(value_feature, n_features) <= n_value_bins
    is_cut = ~first_of_feature & (exact[value_feature] | (reached > reached_before))
    return keys[starts[is_cut]], _counts(value_feature[is_cut], n_features).astype(BIN_OFFSET_DTYPE)


def _counts(sorted_ids, n: int):
    """Occurrences of each of 0 .. n - 1 in ascending ``sorted_ids``, by binary search.

    Not ``bincount``: cupy's checks its input with a reduction compiled for the
    input's size, so each new data size cost a compile (1.5 s) on a cold kernel cache.
    """
    xp = get_xp(sorted_ids)
    return xp.diff(xp.searchsorted(sorted_ids, xp.arange(n + 1, dtype=sorted_ids.dtype)))
