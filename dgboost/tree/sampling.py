"""Sampling: rows before the histograms, columns before split evaluation.

A sampled-out row keeps its place in the tree (it is still partitioned and its
margin still updated) but contributes a zero gradient pair, as in XGBoost. The
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

from .._dtypes import GAIN_DTYPE, INDEX_DTYPE
from .._hashing import (STREAM_COLUMNS_BY_LEVEL, STREAM_COLUMNS_BY_NODE, STREAM_COLUMNS_BY_TREE,
                        STREAM_ROW_SUBSAMPLE, stream_key, sub_key, uniform)
from ..backend import get_xp
from ..data import RowSpans


def subsample_rows(gpair, rate: float, seed: int, tree_index: int, rows: RowSpans):
    """``gpair`` with the rows left out of this tree's sample set to zero.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32
    rate : float in (0, 1]; 1 returns ``gpair`` itself
    tree_index : int, the tree's index in the model (round * n_outputs + output)
    rows : RowSpans, the global indices of this rank's rows
    """
    if rate >= 1.0:
        return gpair
    xp = get_xp(gpair)
    index = rows.global_index(xp)
    keep = uniform(index, stream_key(seed, STREAM_ROW_SUBSAMPLE, tree_index)) < rate
    return xp.where(keep[:, None], gpair, gpair.dtype.type(0))


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
