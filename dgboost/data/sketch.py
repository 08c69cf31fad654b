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

from .._dtypes import (BIN_OFFSET_DTYPE, CUT_DTYPE, EXACT_SUM_DTYPE, FEATURE_DTYPE,
                      STAT_DTYPE, WEIGHT_DTYPE)
from .._hashing import STREAM_CUT_SAMPLE, stream_key, uniform
from ..backend import get_xp, to_numpy_many
from ..fixed_point import SUM_HEADROOM_BITS, power_of_two_scale, to_fixed

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
    values: object  # (m, n_features), float32, NaN = missing
    weights: object  # (m,), float32

    def to_bytes(self):
        """The rows as one (m, 12 + 4 * n_features) uint8 array: global index, weight,
        values (one collective carries them, bit for bit)."""
        xp = get_xp(self.values)
        m, n_features = self.values.shape
        columns = [(self.global_index, np.int64, 8), (self.weights, WEIGHT_DTYPE, 4),
                   (self.values, FEATURE_DTYPE, 4 * n_features)]
        return xp.concatenate([xp.ascontiguousarray(a, dtype=dtype).view(np.uint8).reshape(m, width)
                               for a, dtype, width in columns], axis=1)

    @staticmethod
    def from_bytes(rows, n_features: int) -> "Sample":
        """The Sample ``to_bytes`` packed."""
        xp = get_xp(rows)
        m = rows.shape[0]
        index, weights, values = rows[:, :8], rows[:, 8:12], rows[:, 12:]
        return Sample(global_index=xp.ascontiguousarray(index).view(np.int64).reshape(m),
                      values=xp.ascontiguousarray(values).view(FEATURE_DTYPE).reshape(m, n_features),
                      weights=xp.ascontiguousarray(weights).view(WEIGHT_DTYPE).reshape(m))

    @staticmethod
    def merge(samples: list["Sample"]) -> "Sample":
        """All ranks' samples as one, ordered by global index whatever the rank order."""
        if len(samples) == 1:
            return samples[0]  # draw_sample's rows are already in order
        xp = get_xp(samples[0].values)
        index = xp.concatenate([s.global_index for s in samples])
        order = xp.argsort(index)  # global indices are unique: no tie to break
        return Sample(index[order], xp.concatenate([s.values for s in samples])[order],
                      xp.concatenate([s.weights for s in samples])[order])


def draw_sample(X, weight, global_index, n_total: int, seed: int) -> Sample:
    """This rank's rows of the cut sample, on X's device.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32, on any device
    weight : array of shape (n_rows,), float32, or None
    global_index : array of shape (n_rows,), int64, ascending, on X's device
        Each row's index in the whole data set (data.RowSpans.global_index).
    n_total : int
        Rows over all ranks.
    seed : int
    """
    xp = get_xp(X)
    probability = min(1.0, SKETCH_SAMPLE_ROWS / max(n_total, 1))
    keep = None
    if probability < 1.0:
        keep = uniform(global_index, stream_key(seed, STREAM_CUT_SAMPLE)) < probability
    if weight is not None:  # a row that weighs nothing places no cut
        keep = weight > 0 if keep is None else keep & (weight > 0)
    if keep is not None:
        # Row numbers, not a boolean mask: cupy expands a row mask over every cell.
        chosen = xp.flatnonzero(keep)
        global_index, X = global_index[chosen], X[chosen]
        weight = None if weight is None else weight[chosen]
    weights = xp.ones(X.shape[0], WEIGHT_DTYPE) if weight is None else weight
    return Sample(global_index, X.astype(FEATURE_DTYPE, copy=False), weights)


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
    xp = get_xp(sample.values)
    n_rows, n_features = sample.values.shape
    if not n_features:
        return Cuts(np.zeros(0, CUT_DTYPE), np.zeros(1, BIN_OFFSET_DTYPE))
    n_value_bins = max_bin - 1
    weights = _fixed_weights(sample.weights, n_value_bins)
    from ..kernels.loops import on_host_threads, threads

    n_threads = 1  # on a GPU: the caller's thread, where its device is current
    if xp is np:
        n_threads = min(threads(), n_features, max(1, n_rows * n_features // _CELLS_PER_THREAD))
    # The threads' chunks together hold _SORT_CELLS cells (one feature each at the least).
    step = max(1, min(_SORT_CELLS // max(n_rows * n_threads, 1), -(-n_features // n_threads)))
    begins = range(0, n_features, step)
    values, counts = zip(*on_host_threads(
        lambda index: _chunk_cuts(sample.values[:, begins[index]:begins[index] + step], weights, n_value_bins),
        len(begins), n_threads))
    # One read of both (float32 values travel exactly as float64).
    values, counts = to_numpy_many([xp.concatenate(values).astype(STAT_DTYPE), xp.concatenate(counts)])
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(BIN_OFFSET_DTYPE)
    return Cuts(values.astype(CUT_DTYPE), offsets)


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


def _chunk_cuts(columns, weights, n_value_bins: int):
    """Cut values (ascending per feature, features in order) and counts of a few features.

    Parameters
    ----------
    columns : array of shape (m, f), float32, NaN = missing
    weights : array of shape (m,), int64 fixed point
    """
    xp = get_xp(columns)
    m, f = columns.shape
    keys = columns.T
    keys = xp.where(xp.isnan(keys), xp.inf, keys)  # missing last (X holds no infinity)
    order = xp.argsort(keys, axis=1)
    keys = xp.take_along_axis(keys, order, axis=1)
    present = keys < xp.inf
    weight = xp.where(present, weights[order], 0)
    # The first position of each distinct value, row-major: features in order.
    new_value = xp.concatenate([xp.ones((f, 1), dtype=bool), keys[:, 1:] != keys[:, :-1]], axis=1)
    starts = xp.flatnonzero(present & new_value)
    feature = starts // m
    first_of_feature = xp.concatenate([xp.ones(min(1, starts.size), dtype=bool), feature[1:] != feature[:-1]])
    # Weight below each distinct value: exact, whatever the order of tied values.
    below = (xp.cumsum(weight, axis=1) - weight).reshape(-1)[starts]
    total = weight.sum(axis=1)
    # Quantile targets total * k / n (k = 1 .. n - 1) at or below `below`, in integers.
    reached = xp.minimum(below * n_value_bins // xp.maximum(total[feature], 1), n_value_bins - 1)
    reached_before = xp.concatenate([xp.zeros(min(1, starts.size), dtype=reached.dtype), reached[:-1]])
    exact = _counts(feature, f) <= n_value_bins
    is_cut = ~first_of_feature & (exact[feature] | (reached > reached_before))
    return keys.reshape(-1)[starts[is_cut]], _counts(feature[is_cut], f).astype(BIN_OFFSET_DTYPE)


def _counts(sorted_ids, n: int):
    """Occurrences of each of 0 .. n - 1 in ascending ``sorted_ids``, by binary search.

    Not ``bincount``: cupy's checks its input with a reduction compiled for the
    input's size, so each new data size cost a compile (1.5 s) on a cold kernel cache.
    """
    xp = get_xp(sorted_ids)
    return xp.diff(xp.searchsorted(sorted_ids, xp.arange(n + 1, dtype=sorted_ids.dtype)))
