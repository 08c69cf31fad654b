"""Prediction of raw feature values from a flat device copy of the trees.

All trees are concatenated into one set of node arrays (child ids made global)
and kernels.predict_margins walks them (on a GPU one thread per row). Leaf
values are added to the margins one tree at a time, in model order: the same
float32 additions, in the same order, that training applied to its margins.

Where every tree is oblivious (symmetric growth: every node of a level splits by
one split) the forest also holds each tree as its levels' splits and its leaf
values, and kernels.predict_oblivious finds a row's leaf from the bits of its
sides rather than walking: the same leaves, the same additions.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .._dtypes import CUT_DTYPE, FEATURE_DTYPE, INDEX_DTYPE, LEAF_DTYPE, MARGIN_DTYPE, NODE_INDEX_DTYPE
from ..backend import asarray, get_xp
from .. import kernels
from ..data.sparse import is_sparse, take_rows, to_dense
from .tree import category_tables


@dataclasses.dataclass(frozen=True)
class Forest:
    """Trees concatenated, on one device (arrays of shape (n_nodes_total,) unless noted)."""

    left: object
    right: object
    feature: object  # 0 at leaves so that gathers stay in bounds
    threshold: object
    default_left: object
    value: object
    roots: object  # (n_trees,) int32
    category_row: object  # (n_nodes_total,) int32: a category-set split's row of category_words, -1 at others; or None
    category_words: object  # (n_sets, n_words) uint32: the categories each set sends right; or None
    outputs: np.ndarray  # (n_trees,) int, on the host: the margin column of each tree
    outputs_device: object  # the same, int32 on the device
    depth: int
    oblivious: "Oblivious | None" = None  # the trees as levels, where every one is oblivious

    @classmethod
    def from_trees(cls, trees, outputs, xp) -> "Forest":
        """The trees joined on ``xp``'s device. Child ids and the depth come from array
        operations over all nodes at once; per tree, only its arrays are listed to be joined."""
        sizes = np.array([t.n_nodes for t in trees], dtype=INDEX_DTYPE)
        roots = (np.cumsum(sizes) - sizes).astype(NODE_INDEX_DTYPE)
        first_node = np.repeat(roots, sizes)  # each node's tree's root: makes child ids global

        def joined(name, dtype):
            return np.concatenate([getattr(t, name) for t in trees]).astype(dtype) if trees \
                else np.zeros(0, dtype)

        def children(name):
            ids = joined(name, NODE_INDEX_DTYPE)
            return np.where(ids >= 0, ids + first_node, -1).astype(NODE_INDEX_DTYPE)

        left, right = children("left"), children("right")
        device = lambda a: asarray(xp, a)  # noqa: E731
        category_row = category_words = None
        n_words = max((t.category_words for t in trees), default=0)
        if n_words:
            category_row, category_words = (device(a) for a in category_tables(trees, n_words))
        return cls(
            left=device(left),
            right=device(right),
            feature=device(np.maximum(joined("feature", NODE_INDEX_DTYPE), 0)),
            threshold=device(joined("threshold", CUT_DTYPE)),
            default_left=device(joined("default_left", bool)),
            value=device(joined("value", LEAF_DTYPE)),
            roots=device(roots),
            category_row=category_row,
            category_words=category_words,
            outputs=np.asarray(outputs, dtype=INDEX_DTYPE),
            outputs_device=device(np.asarray(outputs, dtype=NODE_INDEX_DTYPE)),
            depth=_deepest(left, right, roots),
            oblivious=Oblivious.from_trees(trees, xp),
        )

    @property
    def n_trees(self) -> int:
        return len(self.outputs)

    @functools.cached_property
    def walk(self):
        """The nodes as the host's prediction walks them (kernels.cpu.walk_table), made once a
        forest, not once a call; a host forest's (a device's kernel makes its own records)."""
        return kernels.cpu.walk_table(self.left, self.feature, self.default_left, self.threshold)


@dataclasses.dataclass(frozen=True)
class Oblivious:
    """Oblivious trees as levels, on one device: arrays of shape (n_trees, depth) give each
    level's split, and ``leaf_value`` (n_trees, 2**depth) the leaves in BFS order. A tree
    shallower than ``depth`` gets levels that send every row left (threshold +inf, missing
    left), its leaf values spread to the leaves they lead to."""

    feature: object
    threshold: object
    default_left: object
    leaf_value: object
    depth: int

    #: The deepest trees laid out this way (2**depth leaf values a tree).
    MAX_DEPTH = 16

    @classmethod
    def from_trees(cls, trees, xp) -> "Oblivious | None":
        """The layout, or None where a tree is not oblivious (or deeper than MAX_DEPTH)."""
        depths = [_oblivious_depth(tree) for tree in trees]
        if not trees or any(d is None or d > cls.MAX_DEPTH for d in depths):
            return None
        depth = max(depths)
        feature = np.zeros((len(trees), depth), dtype=NODE_INDEX_DTYPE)
        threshold = np.full((len(trees), depth), np.inf, dtype=CUT_DTYPE)
        default_left = np.ones((len(trees), depth), dtype=bool)
        leaf_value = np.empty((len(trees), 1 << depth), dtype=LEAF_DTYPE)
        for index, (tree, tree_depth) in enumerate(zip(trees, depths)):
            first = (1 << np.arange(tree_depth)) - 1  # each level's first node, BFS
            feature[index, :tree_depth] = tree.feature[first]
            threshold[index, :tree_depth] = tree.threshold[first]
            default_left[index, :tree_depth] = tree.default_left[first]
            leaves = tree.value[(1 << tree_depth) - 1:]
            leaf_value[index] = np.repeat(leaves, 1 << (depth - tree_depth))
        device = lambda a: asarray(xp, a)  # noqa: E731
        return cls(device(feature), device(threshold), device(default_left), device(leaf_value), depth)


def _oblivious_depth(tree) -> int | None:
    """The depth of an oblivious tree (complete, each level's nodes sharing feature, threshold
    and missing direction); None for any other tree."""
    n_nodes = tree.n_nodes
    if tree.categories:  # category-set splits share no threshold to compare
        return None
    depth = n_nodes.bit_length() - 1
    if n_nodes != (1 << (depth + 1)) - 1:
        return None
    internal = np.arange(n_nodes) < (1 << depth) - 1
    if not np.array_equal(tree.left >= 0, internal):
        return None
    for level in range(depth):
        nodes = slice((1 << level) - 1, (1 << (level + 1)) - 1)
        for name in ("feature", "threshold", "default_left"):
            values = getattr(tree, name)[nodes]
            if not np.all(values == values[0]):
                return None
    return depth


def _deepest(left, right, roots) -> int:
    """Edges on the longest root-to-leaf path of any tree, one level of every tree at a time.

    ``left``, ``right``: global child ids (-1 at leaves); ``roots``: each tree's root.
    """
    depth, level = 0, roots
    while True:
        below = np.concatenate([left[level], right[level]])
        level = below[below >= 0]
        if not level.size:
            return depth
        depth += 1


def predict_margins(forest: Forest, X, margins):
    """Add every tree's leaf value to ``margins``, in model order.

    Parameters
    ----------
    forest : Forest, on X's device
    X : array of shape (n_rows, n_features), float32; NaN is missing
    margins : array of shape (n_rows, n_outputs), float32: the starting margins (not modified)

    Returns
    -------
    array of shape (n_rows, n_outputs), float32
    """
    xp = get_xp(X)
    margins = xp.ascontiguousarray(margins.astype(MARGIN_DTYPE, copy=True))
    if forest.oblivious is not None:
        levels = forest.oblivious
        return kernels.predict_oblivious(X, levels.feature, levels.threshold, levels.default_left, levels.leaf_value,
                                         forest.outputs_device, levels.depth, margins)
    return kernels.predict_margins(X, forest.left, forest.right, forest.feature, forest.threshold,
                                   forest.default_left, forest.value, forest.roots, forest.outputs_device,
                                   forest.depth, margins, forest.category_row, forest.category_words,
                                   walk=forest.walk if get_xp(forest.left) is np else None)


def predict_leaf_ids(forest: Forest, X):
    """Each row's leaf in every tree, numbered within its tree (XGBoost's node ids).

    Returns
    -------
    array of shape (n_rows, n_trees), int32, on X's device
    """
    if is_sparse(X):  # densified a block of rows at a time
        xp = get_xp(X)
        step = max(1, _LEAF_BLOCK_CELLS // max(X.shape[1], 1))
        blocks = [predict_leaf_ids(forest, to_dense(take_rows(X, xp.arange(begin, min(begin + step, X.shape[0])))))
                  for begin in range(0, X.shape[0], step)]
        return xp.concatenate(blocks) if blocks else xp.zeros((0, forest.n_trees), dtype=NODE_INDEX_DTYPE)
    leaves = kernels.cpu.predict_leaves(X, forest.left, forest.right, forest.feature, forest.threshold,
                                        forest.default_left, forest.roots, forest.depth, forest.category_row,
                                        forest.category_words)
    return (leaves - forest.roots[None, :]).astype(NODE_INDEX_DTYPE)


#: Cells of a sparse X densified at a time by predict_leaf_ids.
_LEAF_BLOCK_CELLS = 1 << 22


def bin_forest(trees, outputs, xp) -> Forest:
    """Trees grown with some cuts, as they split rows packed by those cuts: each split at its
    ``split_bin`` + 0.5, so that a row's bins read as values (``bin_values``) go where training
    sent the row (left where its bin is at most ``split_bin``; a missing one by the default), and
    ``predict_margins`` finds the leaf it finds from the row's float values, with the same float32
    additions. A streamed job's restart continues a packed piece's margins so, reading no float
    value again (dask/_streamed.continue_piece)."""
    on_bins = []
    for tree in trees:
        split = tree.left >= 0
        if np.any(split & (tree.split_bin < 0)):
            raise ValueError("a tree with category-set splits cannot be walked on bins: predict it from values")
        threshold = np.where(split, tree.split_bin.astype(CUT_DTYPE) + CUT_DTYPE(0.5), tree.threshold)
        on_bins.append(dataclasses.replace(tree, threshold=threshold.astype(CUT_DTYPE)))
    return Forest.from_trees(on_bins, outputs, xp)


#: Rows' bins read as values at a time (float32: 128 MiB), a page's rows in blocks of them.
_BIN_VALUES = 1 << 25


def predict_bins(forest: Forest, matrix, margins):
    """``predict_margins`` of a packed matrix's rows by a ``bin_forest``, a block of rows at a
    time (each read as values by ``bin_values``).

    Parameters
    ----------
    forest : Forest, a bin_forest on the matrix's device
    matrix : EllpackMatrix, rows packed by the cuts the forest's trees were grown with
    margins : array of shape (n_rows, n_outputs), float32: the starting margins (not modified)

    Returns
    -------
    array of shape (n_rows, n_outputs), float32
    """
    step = max(1, _BIN_VALUES // max(matrix.layout.n_features, 1))
    blocks = [predict_margins(forest, bin_values(matrix, begin, begin + step), margins[begin:begin + step])
              for begin in range(0, matrix.n_rows, step)]
    return get_xp(margins).concatenate(blocks) if blocks else margins.astype(MARGIN_DTYPE, copy=True)


def bin_values(matrix, begin: int, stop: int):
    """Rows ``[begin, stop)`` of a packed matrix as values: array of shape (n, n_features),
    float32, on the matrix's device, each feature's bin number within the feature, NaN where
    missing (a sparse row's absent features too)."""
    xp = get_xp(matrix.packed)
    layout = matrix.layout
    cells = matrix.unpack(slice(begin, stop))
    present = cells != layout.missing_symbol
    if not layout.is_sparse:
        return xp.where(present, cells.astype(FEATURE_DTYPE), FEATURE_DTYPE(np.nan))
    feature = xp.searchsorted(matrix.bin_offsets, cells, side="right") - 1
    values = xp.full((cells.shape[0], layout.n_features), np.nan, dtype=FEATURE_DTYPE)
    rows = xp.broadcast_to(xp.arange(cells.shape[0])[:, None], cells.shape)
    values[rows[present], feature[present]] = (cells - matrix.bin_offsets[feature])[present].astype(FEATURE_DTYPE)
    return values
