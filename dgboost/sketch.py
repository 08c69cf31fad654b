"""Cut points: per-feature bin boundaries from a partition-invariant row sample.

Which rows are sampled depends only on a hash of each row's global index and
the seed, so a data set split any way across workers yields the same sample,
and after sorting by global index the same cuts. The cuts are computed on the
host, on the coordinator, from the gathered sample; they are small.

Bins follow XGBoost's convention: feature ``f`` has ``n_bins[f]`` bins and
``n_bins[f] - 1`` interior cut values ``c``; a value ``x`` falls in bin
``#{c <= x}``, so ``x`` is in a bin ``<= b`` exactly when ``x < c[b]``, which is
the split condition stored in trees.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._dtypes import BIN_OFFSET_DTYPE, CUT_DTYPE, FEATURE_DTYPE, ROW_INDEX_DTYPE, STAT_DTYPE, WEIGHT_DTYPE
from ._hashing import STREAM_CUT_SAMPLE, stream_key, uniform
from .backend import get_xp, to_numpy

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
    """Sampled rows of one rank, on the host, in ascending global index order."""

    global_index: np.ndarray  # (m,), int64
    values: np.ndarray  # (m, n_features), float32, NaN = missing
    weights: np.ndarray  # (m,), float32

    @staticmethod
    def merge(samples: list["Sample"]) -> "Sample":
        """All ranks' samples as one, ordered by global index whatever the rank order."""
        index = np.concatenate([s.global_index for s in samples])
        order = np.argsort(index, kind="stable")
        return Sample(index[order], np.concatenate([s.values for s in samples])[order],
                      np.concatenate([s.weights for s in samples])[order])


def draw_sample(X, weight, row_offset: int, n_total: int, seed: int) -> Sample:
    """This rank's rows of the cut sample.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32, on any device
    weight : array of shape (n_rows,), float32, or None
    row_offset : int
        Global index of this rank's first row.
    n_total : int
        Rows over all ranks.
    seed : int
    """
    xp = get_xp(X)
    global_index = xp.arange(row_offset, row_offset + X.shape[0], dtype=ROW_INDEX_DTYPE)
    probability = min(1.0, SKETCH_SAMPLE_ROWS / max(n_total, 1))
    if probability < 1.0:
        # Row numbers, not a boolean mask: cupy expands a row mask over every cell.
        chosen = xp.flatnonzero(uniform(global_index, stream_key(seed, STREAM_CUT_SAMPLE)) < probability)
        global_index, X = global_index[chosen], X[chosen]
        weight = None if weight is None else weight[chosen]
    weights = np.ones(X.shape[0], WEIGHT_DTYPE) if weight is None else to_numpy(weight)
    return Sample(to_numpy(global_index), to_numpy(X).astype(FEATURE_DTYPE, copy=False), weights)


def compute_cuts(sample: Sample, max_bin: int) -> Cuts:
    """Weighted quantile cuts of every feature: at most ``max_bin - 1`` value bins.

    One symbol of ``max_bin`` is kept for missing values (see ellpack.py). A
    feature with at most that many distinct values gets one bin per value (exact);
    otherwise boundaries sit at the weighted quantiles ``k / n_bins``.
    """
    max_value_bins = max_bin - 1
    per_feature = [_feature_cuts(sample.values[:, f], sample.weights, max_value_bins)
                   for f in range(sample.values.shape[1])]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in per_feature])]).astype(BIN_OFFSET_DTYPE)
    values = np.concatenate(per_feature).astype(CUT_DTYPE) if per_feature else np.zeros(0, CUT_DTYPE)
    return Cuts(values, offsets)


def _feature_cuts(column: np.ndarray, weights: np.ndarray, max_value_bins: int) -> np.ndarray:
    present = ~np.isnan(column)
    column, weights = column[present], weights[present]
    if column.size == 0:
        return np.zeros(0, CUT_DTYPE)
    # Stable: tied values keep global-index order, so their weights are summed in
    # one fixed order on every run.
    order = np.argsort(column, kind="stable")
    column, weights = column[order], weights[order].astype(STAT_DTYPE)
    starts = np.flatnonzero(np.concatenate([[True], column[1:] != column[:-1]]))
    distinct = column[starts]
    if len(distinct) <= max_value_bins:
        return distinct[1:]
    group_weight = np.add.reduceat(weights, starts)
    weight_before = np.concatenate([[0.0], np.cumsum(group_weight)[:-1]])
    total = weight_before[-1] + group_weight[-1]
    targets = total * np.arange(1, max_value_bins) / max_value_bins
    # Bin k starts at the first distinct value with at least k/n of the weight below it.
    first = np.unique(np.searchsorted(weight_before, targets, side="left"))
    first = first[(first > 0) & (first < len(distinct))]
    return distinct[first]
