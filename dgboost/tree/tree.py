"""A finished regression tree on the host, and its JSON form.

Nodes are numbered breadth first (the root is 0, children after parents, a
right child right after its left sibling), as in XGBoost's JSON model.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._dtypes import CUT_DTYPE, GAIN_DTYPE, INDEX_DTYPE, LEAF_DTYPE, NODE_INDEX_DTYPE
from ..kernels import RECORD_COLUMNS
from ..data.sketch import Cuts


@dataclasses.dataclass(frozen=True, eq=False)
class Tree:
    """Arrays of shape (n_nodes,), on the host.

    left, right : int32, children ids (-1 at leaves)
    feature, split_bin : int32, the split (-1 at leaves)
    threshold : float32, rows with ``x < threshold`` go left (0 at leaves)
    default_left : bool, where missing values go
    value : float32, eta * the node's weight: the prediction at a leaf
    gain : float64, the split's loss reduction (0 at leaves)
    cover : float64, the node's hessian sum
    categories : dict of node id to int32 array: a category-set split's categories sent
        right (codes, ascending); such a node has split_bin -1 and threshold 0, and sends a
        category not in its set left (data/categories.py)
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    split_bin: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    cover: np.ndarray
    categories: dict = dataclasses.field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.left)

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    @property
    def node_depths(self) -> np.ndarray:
        """Each node's edges from the root."""
        depth = np.zeros(self.n_nodes, dtype=INDEX_DTYPE)
        for node in np.flatnonzero(~self.is_leaf):  # parents precede children
            depth[self.left[node]] = depth[self.right[node]] = depth[node] + 1
        return depth

    @property
    def depth(self) -> int:
        """Edges on the longest root-to-leaf path."""
        return int(self.node_depths.max())

    def category_lists(self) -> dict:
        """The category sets as XGBoost's JSON holds them: ``categories_nodes`` (ascending), each
        one's ``categories`` at ``categories_segments``, ``categories_sizes`` of them (lists of
        Python ints; all empty without sets)."""
        nodes = sorted(self.categories)
        sizes = [len(self.categories[n]) for n in nodes]
        return {"categories_nodes": nodes, "categories_segments": np.cumsum([0] + sizes[:-1]).astype(int).tolist(),
                "categories_sizes": sizes, "categories": [int(c) for n in nodes for c in self.categories[n]]}

    @property
    def category_words(self) -> int:
        """uint32 words that hold its largest category set's highest code (0 without sets)."""
        return max((int(c[-1]) // 32 + 1 for c in self.categories.values() if len(c)), default=0)

    def category_table(self, n_words: int | None = None):
        """The category sets as the prediction kernels take them: (each node's row of the words,
        -1 where it has no set: int32 (n_nodes,); the sets' bits, uint32 (n_sets, n_words),
        bit ``c % 32`` of word ``c // 32`` for code ``c``); (None, None) without sets."""
        if not self.categories:
            return None, None
        return category_tables([self], self.category_words if n_words is None else n_words)

    @classmethod
    def from_record(cls, record: np.ndarray, cuts: Cuts) -> "Tree":
        """Build from a grower record (kernels.RECORD_COLUMNS), dropping padding slots."""
        column = dict(zip(RECORD_COLUMNS, record.T))  # then any words of category bits
        kept = np.flatnonzero(column["active"] != 0)
        compact = np.full(len(record), -1, dtype=INDEX_DTYPE)
        compact[kept] = np.arange(len(kept))
        split = column["valid"][kept] != 0
        left_id = column["left_child"][kept].astype(INDEX_DTYPE)
        left = np.where(split, compact[np.where(split, left_id, 0)], -1)
        feature = np.where(split, column["feature"][kept], -1).astype(NODE_INDEX_DTYPE)
        split_bin = np.where(split, column["bin"][kept], -1).astype(NODE_INDEX_DTYPE)
        by_set = split & (split_bin < 0)
        numeric = split & ~by_set
        threshold = np.zeros(len(kept), dtype=CUT_DTYPE)
        threshold[numeric] = cuts.threshold(feature[numeric].astype(INDEX_DTYPE),
                                            split_bin[numeric].astype(INDEX_DTYPE))
        categories = {}
        if by_set.any():  # the set nodes' words as bits, one row a node, then each row's codes
            nodes = np.flatnonzero(by_set)
            words = np.ascontiguousarray(record[kept[nodes], len(RECORD_COLUMNS):]).view(np.uint8)
            rows, codes = np.nonzero(np.unpackbits(words, axis=1, bitorder="little"))
            categories = dict(zip(nodes.tolist(), np.split(codes.astype(INDEX_DTYPE),
                                                           np.searchsorted(rows, np.arange(1, len(nodes))))))
        return cls(
            left=left.astype(NODE_INDEX_DTYPE),
            right=np.where(split, left + 1, -1).astype(NODE_INDEX_DTYPE),
            feature=feature,
            split_bin=split_bin,
            threshold=threshold,
            default_left=split & (column["default_left"][kept] != 0),
            value=column["value"][kept].astype(LEAF_DTYPE),
            gain=np.where(split, column["gain"][kept], 0.0).astype(GAIN_DTYPE),
            cover=column["cover"][kept].astype(GAIN_DTYPE),
            categories=categories,
        )

    def to_dict(self) -> dict:
        """JSON-ready: lists of Python ints, bools and floats (float32 values exactly); the
        category sets, where there are any, as XGBoost writes them (``categories_nodes``, and
        each one's ``categories`` at ``categories_segments`` of ``categories_sizes``)."""
        return {**(self.category_lists() if self.categories else {}), 
            "left_children": self.left.tolist(),
            "right_children": self.right.tolist(),
            "split_indices": self.feature.tolist(),
            "split_bins": self.split_bin.tolist(),
            "split_conditions": self.threshold.tolist(),
            "default_left": self.default_left.tolist(),
            "values": self.value.tolist(),
            "gains": self.gain.tolist(),
            "covers": self.cover.tolist(),
        }

    @classmethod
    def from_dict(cls, data, num_feature: int, where: str) -> "Tree":
        """Parse and validate a tree written by ``to_dict``; ValueError names what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} is not an object")
        arrays = {}
        for key, kind in _FIELDS.items():
            if key not in data:
                raise ValueError(f"{where} lacks {key!r}")
            arrays[key] = _array(data[key], kind, f"{where}.{key}")
        sizes = {len(a) for a in arrays.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise ValueError(f"{where}: its arrays have different lengths or are empty")
        n = sizes.pop()
        left, right = arrays["left_children"], arrays["right_children"]
        internal = left >= 0
        if not np.array_equal(internal, right >= 0) or np.any(left[~internal] != -1) \
                or np.any(right[~internal] != -1):
            raise ValueError(f"{where}: a node has one child, or a leaf has a child id other than -1")
        nodes = np.arange(n)
        if np.any(left[internal] <= nodes[internal]) or np.any(right[internal] <= nodes[internal]):
            raise ValueError(f"{where}: a child id does not follow its parent's (the tree has a cycle)")
        if np.any(right[internal] != left[internal] + 1):
            raise ValueError(f"{where}: a right child id is not its left sibling's + 1 (dgboost numbers "
                             "nodes breadth first, siblings side by side)")
        children = np.sort(np.concatenate([left[internal], right[internal]]))
        if not np.array_equal(children, np.arange(1, n)):
            raise ValueError(f"{where}: every node but the root must be the child of exactly one node")
        feature = arrays["split_indices"]
        if np.any((feature[internal] < 0) | (feature[internal] >= num_feature)):
            raise ValueError(f"{where}: a split feature is outside [0, num_feature={num_feature})")
        return cls(
            left=left.astype(NODE_INDEX_DTYPE),
            right=right.astype(NODE_INDEX_DTYPE),
            feature=feature.astype(NODE_INDEX_DTYPE),
            split_bin=arrays["split_bins"].astype(NODE_INDEX_DTYPE),
            threshold=arrays["split_conditions"].astype(CUT_DTYPE),
            default_left=arrays["default_left"],
            value=arrays["values"].astype(LEAF_DTYPE),
            gain=arrays["gains"],
            cover=arrays["covers"],
            categories=_category_sets(data, internal, arrays["split_bins"], where),
        )


def _category_sets(data: dict, internal: np.ndarray, split_bin: np.ndarray, where: str) -> dict:
    """The category sets of ``to_dict``'s form: every split of bin -1 has one, no other node."""
    keys = ("categories_nodes", "categories_segments", "categories_sizes", "categories")
    lists = {key: _array(data.get(key, []), "int", f"{where}.{key}") for key in keys}
    nodes, segments, sizes, codes = (lists[key] for key in keys)
    by_set = np.flatnonzero(internal & (split_bin < 0))
    if not np.array_equal(nodes, by_set) or len(segments) != len(nodes) or len(sizes) != len(nodes):
        raise ValueError(f"{where}: categories_nodes must list the category-set splits (split_bins -1), "
                         "with a segment and a size each")
    if np.any(sizes < 1) or not np.array_equal(segments, np.cumsum(sizes) - sizes) or sizes.sum() != len(codes):
        raise ValueError(f"{where}: categories_segments and categories_sizes do not cut categories into the sets")
    sets = {}
    for node, begin, size in zip(nodes.tolist(), segments.tolist(), sizes.tolist()):
        members = codes[begin:begin + size]
        if np.any(members < 0) or np.any(np.diff(members) <= 0):
            raise ValueError(f"{where}: node {node}'s categories must be ascending codes >= 0")
        sets[node] = members.astype(INDEX_DTYPE)
    return sets


def category_tables(trees, n_words: int):
    """The category sets of ``trees`` as one table: (each node's row of the words, -1 where it has
    no set: int32, the trees' nodes concatenated; the sets' bits, uint32 (n_sets, n_words), the
    trees' sets in order, each tree's by node id). One scatter for all of them."""
    rows = np.full(sum(t.n_nodes for t in trees), -1, dtype=NODE_INDEX_DTYPE)
    nodes, codes, sizes = [], [], []
    first = 0
    for tree in trees:
        for node in sorted(tree.categories):
            nodes.append(first + node)
            codes.append(tree.categories[node])
            sizes.append(len(tree.categories[node]))
        first += tree.n_nodes
    rows[np.asarray(nodes, dtype=np.int64)] = np.arange(len(nodes))
    words = np.zeros((len(nodes), n_words), dtype=np.uint32)
    if nodes:
        codes = np.concatenate(codes).astype(np.int64)
        owner = np.repeat(np.arange(len(nodes)), sizes)
        np.bitwise_or.at(words, (owner, codes // 32), np.left_shift(np.uint32(1), (codes % 32).astype(np.uint32)))
    return rows, words


_FIELDS = {
    "left_children": "int",
    "right_children": "int",
    "split_indices": "int",
    "split_bins": "int",
    "split_conditions": "float",
    "default_left": "bool",
    "values": "float",
    "gains": "float",
    "covers": "float",
}


def _array(values, kind: str, where: str) -> np.ndarray:
    if not isinstance(values, list):
        raise ValueError(f"{where} is not a list")
    if kind == "bool":
        if not all(isinstance(v, bool) for v in values):
            raise ValueError(f"{where} holds a value that is not true/false")
        return np.array(values, dtype=bool)
    if kind == "int":
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"{where} holds a value that is not an integer")
        if any(not -1 <= v < 2**31 for v in values):
            raise ValueError(f"{where} holds an integer out of range")
        return np.array(values, dtype=INDEX_DTYPE)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in values):
        raise ValueError(f"{where} holds a value that is not a finite number")
    return np.array(values, dtype=GAIN_DTYPE)
