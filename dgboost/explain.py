"""Exact TreeSHAP feature contributions, on the host.

TreeSHAP is the path-dependent algorithm of Lundberg, Erion & Lee (2018,
"Consistent individualized feature attribution for tree ensembles",
Algorithm 2), run for all rows at once: the recursion visits every node for
every row (a row's cold branch is walked with a zero "one fraction"), so its
shape does not depend on the row, and only the one fractions and path weights
are per-row arrays. Node weights are the trees' covers (hessian sums), as in
XGBoost, so the contributions equal XGBoost's ``pred_contribs`` on the
exported model; with the bias they sum to the margin.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import GAIN_DTYPE


def goes_left(tree, X: np.ndarray, node: int) -> np.ndarray:
    """Which rows of X a split node sends left (missing values its default way)."""
    column = X[:, tree.feature[node]]
    return np.where(np.isnan(column), bool(tree.default_left[node]), column < tree.threshold[node])


def contributions(trees, tree_outputs, start: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Per-feature contributions and the bias (last column) of every output.

    ``start`` holds each row's starting margins, (n_rows, n_outputs). Returns
    float32 (n_rows, n_outputs, n_features + 1); summed over the last axis it is
    each output's margin.
    """
    n_rows, n_features = X.shape
    phi = np.zeros((n_rows, start.shape[1], n_features + 1), dtype=GAIN_DTYPE)
    phi[:, :, -1] = start
    for tree, output in zip(trees, tree_outputs):
        _TreeShap(tree, X, phi[:, output, :]).run()
    return phi.astype(np.float32)


class _TreeShap:
    """One tree's contributions added into ``phi`` (n_rows, n_features + 1)."""

    def __init__(self, tree, X, phi):
        self.tree, self.X, self.phi = tree, X, phi
        self.cover = tree.cover.astype(GAIN_DTYPE)
        self.n_rows = X.shape[0]

    def run(self) -> None:
        tree = self.tree
        leaf = tree.is_leaf
        # The tree's expected value, weighting leaves by cover, goes to the bias.
        if self.cover[0] > 0:
            self.phi[:, -1] += float(np.sum(tree.value[leaf] * self.cover[leaf]) / self.cover[0])
        if not leaf[0]:
            self._recurse(0, _Path.empty(), 1.0, np.ones(self.n_rows), -1)

    def _recurse(self, node: int, path: "_Path", zero: float, one: np.ndarray, feature: int) -> None:
        tree = self.tree
        path = path.extend(zero, one, feature)
        if tree.left[node] < 0:
            value = float(tree.value[node])
            for i in range(1, path.length):
                weight = path.unwound_sum(i)
                self.phi[:, path.feature[i]] += weight * (path.one[i] - path.zero[i]) * value
            return
        split = int(tree.feature[node])
        left = goes_left(tree, self.X, node)
        incoming_zero, incoming_one = 1.0, np.ones(self.n_rows)
        k = path.find(split)
        if k is not None:  # the feature split before on this path: undo its entry
            incoming_zero, incoming_one = path.zero[k], path.one[k]
            path = path.unwind(k)
        cover = self.cover[node]
        for child, hot in ((int(tree.left[node]), left), (int(tree.right[node]), ~left)):
            fraction = self.cover[child] / cover if cover > 0 else 0.0
            self._recurse(child, path, incoming_zero * fraction, incoming_one * hot, split)


class _Path:
    """The unique features on a root-to-node path: feature, zero fraction (a number),
    one fraction and permutation weight (arrays over rows)."""

    def __init__(self, feature, zero, one, weight):
        self.feature, self.zero, self.one, self.weight = feature, zero, one, weight

    @classmethod
    def empty(cls) -> "_Path":
        return cls([], [], [], [])

    @property
    def length(self) -> int:
        return len(self.feature)

    def find(self, feature: int):
        return next((i for i in range(1, self.length) if self.feature[i] == feature), None)

    def extend(self, zero: float, one: np.ndarray, feature: int) -> "_Path":
        depth = self.length
        weight = [w.copy() for w in self.weight] + [np.full(one.shape, 1.0 if depth == 0 else 0.0)]
        for i in range(depth - 1, -1, -1):
            weight[i + 1] += one * weight[i] * (i + 1) / (depth + 1)
            weight[i] = zero * weight[i] * (depth - i) / (depth + 1)
        return _Path(self.feature + [feature], self.zero + [zero], self.one + [one], weight)

    def unwind(self, k: int) -> "_Path":
        depth = self.length - 1
        one, zero = self.one[k], self.zero[k]
        hot = one != 0
        weight = [w.copy() for w in self.weight]
        carry = weight[depth].copy()
        for j in range(depth - 1, -1, -1):
            from_one = carry * (depth + 1) / ((j + 1) * np.where(hot, one, 1.0))
            from_zero = weight[j] * (depth + 1) / _nonzero(zero * (depth - j))
            previous = weight[j]
            weight[j] = np.where(hot, from_one, from_zero)
            carry = np.where(hot, previous - weight[j] * zero * (depth - j) / (depth + 1), carry)
        keep = [i for i in range(self.length) if i != k]
        return _Path([self.feature[i] for i in keep], [self.zero[i] for i in keep], [self.one[i] for i in keep],
                     weight[:depth])

    def unwound_sum(self, k: int) -> np.ndarray:
        depth = self.length - 1
        one, zero = self.one[k], self.zero[k]
        hot = one != 0
        total = np.zeros_like(one)
        carry = self.weight[depth]
        for j in range(depth - 1, -1, -1):
            from_one = carry * (depth + 1) / ((j + 1) * np.where(hot, one, 1.0))
            from_zero = self.weight[j] * (depth + 1) / _nonzero(zero * (depth - j))
            total = total + np.where(hot, from_one, from_zero)
            carry = np.where(hot, self.weight[j] - from_one * zero * (depth - j) / (depth + 1), carry)
        return total


def _nonzero(value: float) -> float:
    """A divisor that is never 0 (a zero-cover branch contributes nothing either way)."""
    return value if value != 0 else np.inf
