"""Sampling: rows before the histograms, columns before split evaluation.

A row left out of a tree's sample contributes nothing to its histograms (the grower
reads only the rows drawn) but still gets its leaf, and its margin is updated. The
draw for a row depends on (seed, tree, global row index) only.

Columns are sampled as XGBoost's ``colsample_bytree``, ``colsample_bylevel`` and
``colsample_bynode`` sample them, each from the set before it: a tree's set from
all features, a level's from the tree's, a node's from its level's, keeping
``max(1, floor(rate * size))`` features each time (the product in float32, as
XGBoost's). The draw is Efraimidis and Spirakis's weighted sampling without
replacement: the features of largest ``log(u) / weight``, with ``u`` keyed by
(seed, tree, level, node slot, feature), the same on every rank and device.
Without ``feature_weights`` the largest ``u`` (the same order, and no ``log``,
whose last bit may differ between machines). Node slots are the
level's slots in order, the same on the host and the GPU (whose padding slots
follow the real ones).
"""

from __future__ import annotations

import numpy as np

import math
from fractions import Fraction

from .._dtypes import GAIN_DTYPE, INDEX_DTYPE, POSITION_DTYPE, STAT_DTYPE
from .._hashing import (STREAM_COLUMNS_BY_LEVEL, STREAM_COLUMNS_BY_NODE, STREAM_COLUMNS_BY_TREE,
                        STREAM_ROW_SUBSAMPLE, stream_key, sub_key, uniform)
from ..backend import get_xp, to_numpy
from ..data import RowSpans
from ..kernels import RADIX_BUCKETS, bucket_counts


class RowSampler:
    """The rows each tree is grown from, and their pairs (``subsample`` by
    ``sampling_method``).

    ``draw`` returns the tree's gradient pairs, zero for the rows left out and divided
    by their probability for the rows drawn (gradient-based sampling and GOSS), and the
    rows drawn, whose histograms alone are built (the matrix is not copied: the grower
    reads these rows' cells where they are). Every threshold is found over all ranks'
    rows by a radix select of exact integer counts and sums, and every draw is keyed by
    (seed, tree, global row index), so the sample does not depend on the partitioning.

    - ``uniform``: each row with probability ``subsample``.
    - ``gradient_based`` (XGBoost's, the minimal variance sampling of Ibragimov and
      Gusev): each row with probability ``min(1, m / mu)``, ``m = sqrt(g^2 + 0.1 h^2)``,
      ``mu`` such that the expected sample is ``subsample`` of the rows; its pair divided
      by that probability.
    - ``goss`` (LightGBM's gradient-based one-side sampling): the ``top_rate`` of rows of
      largest ``|g h|``, and from the others ``other_rate`` of all rows, their pairs
      multiplied by ``(1 - top_rate) / other_rate``; as LightGBM, not in the first
      ``1 / eta`` rounds.
    """

    def __init__(self, params, n_total: int, n_outputs: int, rows: RowSpans, comm):
        self.method = params.sampling_method
        self.rate = params.subsample
        self.top_rate, self.other_rate = params.top_rate, params.other_rate
        self.warm_up_rounds = int(1.0 / params.eta) if params.eta > 0 else 0
        self.seed = params.seed
        self.n_total = n_total
        self.n_outputs = n_outputs
        self.rows = rows
        self.comm = comm

    @property
    def active(self) -> bool:
        return self.method == "goss" or self.rate < 1.0

    def draw(self, gpair, tree_index: int):
        """``(gpair, sample)`` for the tree ``tree_index`` (round * n_outputs + output):
        ``gpair`` (n_rows, 2) float32 as the tree sees it, ``sample`` the rows drawn (int32,
        ascending), or None for every row."""
        if not self.active or (self.method == "goss" and tree_index // self.n_outputs < self.warm_up_rounds):
            return gpair, None
        xp = get_xp(gpair)
        draws = uniform(self.rows.global_index(xp), stream_key(self.seed, STREAM_ROW_SUBSAMPLE, tree_index))
        if self.method == "uniform":
            keep = draws < self.rate
            return xp.where(keep[:, None], gpair, gpair.dtype.type(0)), _rows_of(keep)
        gradient, hessian = gpair[:, 0].astype(STAT_DTYPE), gpair[:, 1].astype(STAT_DTYPE)
        if self.method == "gradient_based":
            magnitude = xp.sqrt(gradient * gradient + _MVS_LAMBDA * (hessian * hessian))
        else:
            magnitude = xp.abs(gradient * hessian)  # exact: a product of two float32
        keys = self._fixed(magnitude)
        if keys is None:  # every pair is zero: nothing to draw by
            return gpair, None
        if self.method == "gradient_based":
            probability = xp.minimum(1.0, keys / float(self._mvs_threshold(keys)))
            keep = draws < probability
            divisor = xp.where(keep, probability, 1.0)[:, None]  # rows left out (probability 0 among them): unused
            scaled = (gpair.astype(STAT_DTYPE) / divisor).astype(gpair.dtype)
            return xp.where(keep[:, None], scaled, gpair.dtype.type(0)), _rows_of(keep)
        top_k = max(1, int(self.top_rate * self.n_total))
        other_k = max(1, int(self.other_rate * self.n_total))
        top = keys >= self._top_threshold(keys, top_k)
        keep = top | (draws < other_k / max(1, self.n_total - top_k))
        weight = xp.where(top, 1.0, (self.n_total - top_k) / other_k)
        scaled = (gpair.astype(STAT_DTYPE) * weight[:, None]).astype(gpair.dtype)
        return xp.where(keep[:, None], scaled, gpair.dtype.type(0)), _rows_of(keep)

    def _fixed(self, magnitude):
        """The magnitudes as int64 keys below 2**31, at a power-of-two scale every rank derives
        from the largest (exact: the keys are integers); None if every magnitude is 0."""
        xp = get_xp(magnitude)
        local = xp.max(magnitude, keepdims=True) if magnitude.size else xp.zeros(1, dtype=STAT_DTYPE)
        largest = float(to_numpy(self.comm.allreduce(local, "max"))[0])
        if not largest > 0:
            return None
        scale = math.ldexp(1.0, 31 - math.frexp(largest)[1])  # largest * scale < 2**31
        return xp.rint(magnitude * scale).astype(INDEX_DTYPE)

    def _buckets(self, keys, shift: int, prefix: int):
        """One radix step over every rank's keys, on the host: by bucket, how many keys are at
        or above its start (RADIX_BUCKETS + 1 entries) and the sum of those below it. int64
        is exact: fewer than 2**31 keys, each below 2**31."""
        counts, sums = bucket_counts(keys, shift, prefix)
        both = to_numpy(self.comm.allreduce(get_xp(keys).concatenate([counts, sums])))
        counts, sums = both[:RADIX_BUCKETS], both[RADIX_BUCKETS:]
        above = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])
        below = np.concatenate([[0], np.cumsum(sums)])
        return above, below

    def _mvs_threshold(self, keys) -> int:
        """The largest integer ``mu`` whose expected sample, ``#(key >= mu) + sum(key < mu) / mu``,
        is at least ``subsample`` of the rows: two radix steps, then exact comparisons."""
        target = Fraction(self.rate) * self.n_total

        def enough(mu, above, below):  # exact: Python integers and a fraction
            return int(above) * mu + int(below) >= target * mu

        # Bucket b's keys are [b * 2**16, (b + 1) * 2**16). mu >= 1: the first bucket's start
        # (0) is no threshold; its values are searched in the second step.
        count_above, sum_below = self._buckets(keys, 16, 0)
        bucket = _largest(lambda b: enough(b << 16, count_above[b], sum_below[b]), 1, RADIX_BUCKETS)
        low_above, low_below = self._buckets(keys, 0, bucket)
        outside_above, outside_below = int(count_above[bucket + 1]), int(sum_below[bucket])
        low = _largest(lambda j: enough((bucket << 16) + j, outside_above + low_above[j], outside_below + low_below[j]),
                       1 if bucket == 0 else 0, RADIX_BUCKETS)
        return max(1, (bucket << 16) + low)  # below 1: even mu = 1 draws too few; every nonzero row then

    def _top_threshold(self, keys, top_k: int) -> int:
        """The largest key value ``t`` with at least ``top_k`` keys >= ``t`` (ties at ``t`` all in)."""
        count_above, _ = self._buckets(keys, 16, 0)
        bucket = _largest(lambda b: count_above[b] >= top_k, 0, RADIX_BUCKETS)  # >= 0: every key is >= 0
        low_above, _ = self._buckets(keys, 0, bucket)
        return (bucket << 16) + _largest(lambda j: count_above[bucket + 1] + low_above[j] >= top_k, 0, RADIX_BUCKETS)


#: The hessian's weight in gradient-based sampling's magnitude (XGBoost's kLambda).
_MVS_LAMBDA = 0.1


def _largest(predicate, first: int, stop: int) -> int:
    """The largest i in [first, stop) with predicate(i), for a predicate true up to some i and
    false after; first - 1 if none."""
    low, high = first - 1, stop  # predicate(low) holds (or low = first - 1), predicate(high) fails
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(middle):
            low = middle
        else:
            high = middle
    return low


def _rows_of(keep):
    """The rows drawn, ascending, as int32 row indices."""
    return get_xp(keep).flatnonzero(keep).astype(POSITION_DTYPE)


#: The least weight a feature is drawn with (XGBoost's kRtEps): a weight of 0 is drawn last.
_LEAST_FEATURE_WEIGHT = 1e-6


class ColumnSampler:
    """The features each node of a tree may split on, under column sampling.

    Parameters
    ----------
    n_features : int
    by_tree, by_level, by_node : float in (0, 1]: colsample_bytree, _bylevel, _bynode
    seed : int
    feature_weights : array of shape (n_features,), float, >= 0, or None (all equal)
    """

    def __init__(self, n_features: int, by_tree: float, by_level: float, by_node: float, seed: int,
                 feature_weights=None):
        self.n_features = n_features
        self.rates = (by_tree, by_level, by_node)
        self.seed = seed
        self._weights = (None if feature_weights is None
                         else np.maximum(np.asarray(feature_weights, GAIN_DTYPE), _LEAST_FEATURE_WEIGHT))
        self._tree_set = (None, None)  # (tree index, its features)

    @property
    def active(self) -> bool:
        """Whether any rate leaves features out."""
        return any(rate < 1.0 for rate in self.rates)

    def level(self, tree_index: int, depth: int, n_slots: int):
        """The features each of a level's ``n_slots`` slots may split on: a host array of shape
        (n_slots, n_features), bool; None where every feature may be used."""
        if not self.active:
            return None
        by_tree, by_level, by_node = self.rates
        tree = self._tree(tree_index)
        level = self._choose(tree[None, :], by_level, sub_key(stream_key(self.seed, STREAM_COLUMNS_BY_LEVEL,
                                                                         tree_index), depth))
        if by_node >= 1.0:
            return np.repeat(level, n_slots, axis=0)
        node_key = sub_key(stream_key(self.seed, STREAM_COLUMNS_BY_NODE, tree_index), depth)
        return self._choose(np.repeat(level, n_slots, axis=0), by_node, node_key)

    def _tree(self, tree_index: int) -> np.ndarray:
        if self._tree_set[0] != tree_index:
            everything = np.ones((1, self.n_features), bool)
            key = stream_key(self.seed, STREAM_COLUMNS_BY_TREE, tree_index)
            self._tree_set = (tree_index, self._choose(everything, self.rates[0], key)[0])
        return self._tree_set[1]

    def _choose(self, candidates: np.ndarray, rate: float, key: int) -> np.ndarray:
        """Of each row's ``candidates`` (bool, (n_rows, n_features)), the ``max(1, floor(rate * m))``
        of largest ``log(u) / weight``, ``u`` drawn for (row, feature) under ``key``; ties to
        the lower feature."""
        if rate >= 1.0:
            return candidates
        n_rows, n_features = candidates.shape
        scores = uniform(np.arange(n_rows * n_features, dtype=INDEX_DTYPE), key).reshape(n_rows, n_features)
        if self._weights is not None:
            with np.errstate(divide="ignore"):  # u = 0: log 0 = -inf, drawn last
                scores = np.log(scores) / self._weights
        scores = np.where(candidates, scores, -np.inf)
        keep = np.maximum(1, (np.float32(rate) * candidates.sum(axis=1).astype(np.float32)).astype(INDEX_DTYPE))
        order = np.argsort(-scores, axis=1, kind="stable")  # largest first; ties to the lower feature
        chosen = np.zeros_like(candidates)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(n_features)[None, :], axis=1)
        chosen[:] = (rank < keep[:, None]) & candidates
        return chosen
