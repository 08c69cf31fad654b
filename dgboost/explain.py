"""Exact TreeSHAP feature contributions, on the host.

TreeSHAP is the path-dependent algorithm of Lundberg, Erion & Lee (2018,
"Consistent individualized feature attribution for tree ensembles",
Algorithm 2), compiled (kernels/loops.py ``shap``): each row walks every node of
a tree depth first (a row's cold branch with a zero "one fraction"), carrying
the path of unique features with their zero and one fractions and permutation
weights, the rows spread over threads. Node weights are the trees' covers
(hessian sums), as in XGBoost, so the contributions equal XGBoost's
``pred_contribs`` on the exported model; with the bias they sum to the margin.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import CUT_DTYPE, GAIN_DTYPE, POSITION_DTYPE


#: The fewest rows a thread of TreeSHAP takes: a row's walk visits every node of a tree,
#: with a path of up to depth + 1 entries at each, some hundred times a prediction's work.
_ROWS_PER_THREAD = 128


def contributions(trees, tree_outputs, start: np.ndarray, X) -> np.ndarray:
    """Per-feature contributions and the bias (last column) of every output.

    ``X``: the rows, dense (NaN missing) or a scipy CSR matrix (absent entries missing).
    ``start`` holds each row's starting margins, (n_rows, n_outputs). Returns
    float32 (n_rows, n_outputs, n_features + 1); summed over the last axis it is
    each output's margin.
    """
    from .kernels import loops
    from .kernels.cpu import feature_rows

    n_rows, n_features = X.shape
    phi = np.zeros((start.shape[1], n_rows, n_features + 1), dtype=GAIN_DTYPE)  # by output: rows contiguous
    phi[:, :, -1] = start.T
    n_threads = max(1, min(loops.threads(), n_rows // _ROWS_PER_THREAD))
    for tree, output in zip(trees, tree_outputs):
        leaf = tree.is_leaf
        cover = tree.cover.astype(GAIN_DTYPE)
        # The tree's expected value, weighting leaves by cover, goes to the bias.
        if cover[0] > 0:
            phi[output, :, -1] += float(np.sum(tree.value[leaf] * cover[leaf]) / cover[0])
        if not leaf[0] and n_rows:
            node = lambda a: np.ascontiguousarray(a, dtype=POSITION_DTYPE)  # noqa: E731
            loops.shap(n_threads, *feature_rows(X), node(tree.left), node(tree.right), node(tree.feature),
                       np.ascontiguousarray(tree.threshold, dtype=CUT_DTYPE),
                       np.ascontiguousarray(tree.default_left, dtype=bool), *tree.category_table(),
                       np.ascontiguousarray(tree.value),
                       cover, tree.depth, phi[output])
    return np.ascontiguousarray(phi.transpose(1, 0, 2), dtype=np.float32)
