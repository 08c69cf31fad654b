"""Lossguide growth (XGBoost's ``grow_policy="lossguide"``): the leaf whose split gains most is
split first, in XGBoost's order (ties to the lower node id), until the tree has
``max_leaves`` leaves (0: no limit), no leaf's split gains, or every leaf that could split is
at ``max_depth`` (0: no limit). A step splits the ``max_greedy_nodes`` best leaves (1:
one at a time, XGBoost's trees), on every device alike, so the model is the same.

Nodes are numbered as they are made, XGBoost's way: the root 0, then each split's children
``n`` and ``n + 1``, the next two ids. A step: each leaf's rows (a range of ``ridx``)
partitioned in place, the smaller child of each pair's histogram built in one launch (the
other by subtraction from the leaf's, which is kept while the node is a leaf), one
collective, and the children's best splits found by the coordinator. The host keeps the
leaves in a heap by gain: on a GPU it reads each step's rows sent left and children's
gains.

One leaf a step (XGBoost's order) is done speculatively on a GPU, ``SPECULATION`` leaves a step:
the best leaves are split together as a batch, and then, the children's gains known, the
batch is cut where XGBoost's order leaves it: at the first leaf that a child of an earlier
leaf of the batch outranks. The leaves after the cut go back to the heap, their rows back to
their node (their order in ``ridx`` may change, which no sum depends on: histograms are
integer sums) and their children's ids back to the pool. The trees are XGBoost's order's,
in some 73 steps of 255 leaves rather than 254 (higgs-like).
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from . import histogram, partition
from .grower import Grower, GrownTree, Level, _Frontier
from .split import SplitTable
from .._dtypes import POSITION_DTYPE
from ..backend import asarray, get_xp, to_numpy

#: Leaves split together a step when max_greedy_nodes is 1, the batch then cut to XGBoost's
#: order (higgs-like, 255 leaves: 96 steps a tree at 4, 73 at 16 and at 32), by device: on a
#: GPU a step's cost is mostly fixed (launches, two host reads); on the CPU the leaves cut
#: cost their rows' work (10 rounds of 255 leaves, 200k rows, 2 cores: 2.7 to 3.2 s at 16
#: against 2.2 to 2.4 s at 1). The trees are the same at any width.
SPECULATION = {"cuda": 16, "cpu": 1}


@dataclasses.dataclass
class _Leaf:
    """A leaf of the tree being grown: where its rows lie in ``ridx`` (on this rank), its
    histogram (over all ranks) and the level (a step's nodes) that holds its record row."""

    begin: int
    end: int
    depth: int
    hist: object  # (n_bins_total, 2) int64
    level: Level
    slot: int  # its slot in the level


class LossguideGrower(Grower):
    """The best leaves first, ``max_greedy_nodes`` of them a step (1: XGBoost's order)."""

    def __init__(self, matrix, params, n_total: int, comm, features=None, categories=None):
        super().__init__(matrix, params, n_total, comm, features, categories)
        self.batch = params.max_greedy_nodes

    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        gpair, scales, positions, ridx, root = self._start(gpair, drawn)
        xp = get_xp(gpair)
        n_places = int(to_numpy(root.seg_end)[0])  # the rows drawn come first in ridx
        hist = root.histograms(self.matrix, gpair, scales, ridx, self.comm)
        splits = self._splits(root, hist, scales, tree_index, 0, slots=np.zeros(1, np.int64))
        levels = [self._level(root, splits)]
        leaves = {0: _Leaf(0, n_places, 0, hist[0], levels[0], 0)}
        heap = self._candidates({0: leaves[0]}, splits)
        frontiers = {0: root}  # each level's frontier: its nodes' sums, bounds and paths
        left_child = [-1]  # by node id, on the host until the tree is grown
        depth = 0
        width = SPECULATION["cpu" if xp is np else "cuda"] if self.batch == 1 else self.batch
        while heap and (not self.max_leaves or len(leaves) < self.max_leaves):
            room = self.max_leaves - len(leaves) if self.max_leaves else width
            keys = [heapq.heappop(heap) for _ in range(min(width, room, len(heap)))]
            batch = [node for _, node in keys]
            split = [leaves.pop(node) for node in batch]
            left_ids = [len(left_child) + 2 * k for k in range(len(split))]
            for node, left_id in zip(batch, left_ids):
                left_child[node] = left_id
            left_child.extend([-1] * 2 * len(split))
            table = xp.concatenate([leaf.level.splits.table[leaf.slot:leaf.slot + 1] for leaf in split])
            middles = self._partition(split, left_ids, table, ridx, positions)
            child = self._children(split, frontiers, table, left_ids, middles, scales)
            hist_built = self.comm.allreduce(histogram.build(self.matrix, gpair, scales, ridx, child.build_begin,
                                                             child.build_end))
            hist = histogram.children(xp.stack([leaf.hist for leaf in split]), child.parent_slot, hist_built,
                                      child.build_left)
            child_depths = np.repeat([leaf.depth + 1 for leaf in split], 2)
            splits = self._splits(child, hist, scales, tree_index, child_depths,
                                  slots=np.repeat(left_ids, 2) + np.tile([0, 1], len(split)))
            level = self._level(child, splits)
            made = {}
            for k, (leaf, middle) in enumerate(zip(split, middles)):
                made[left_ids[k]] = _Leaf(leaf.begin, middle, leaf.depth + 1, hist[2 * k], level, 2 * k)
                made[left_ids[k] + 1] = _Leaf(middle, leaf.end, leaf.depth + 1, hist[2 * k + 1], level, 2 * k + 1)
            candidates = self._candidates(made, splits)
            if self.batch == 1:  # the batch cut where XGBoost's order leaves it
                n_kept = _in_order(keys, left_ids, candidates)
                if n_kept < len(batch):
                    for key, node, leaf in zip(keys[n_kept:], batch[n_kept:], split[n_kept:]):
                        heapq.heappush(heap, key)
                        leaves[node] = leaf
                        left_child[node] = -1
                    _back_to_their_nodes(batch[n_kept:], split[n_kept:], ridx, positions)
                    del left_child[len(left_child) - 2 * (len(batch) - n_kept):]
                    level = _first_slots(level, 2 * n_kept)
                    kept = hist[:2 * n_kept].copy()  # the cut children's histograms freed with the step's
                    made = {node: dataclasses.replace(leaf, hist=kept[leaf.slot], level=level)
                            for node, leaf in made.items() if leaf.slot < 2 * n_kept}
                    candidates = [entry for entry in candidates if entry[1] in made]
                    child_depths = child_depths[:2 * n_kept]
            levels.append(level)
            frontiers[left_ids[0]] = child
            depth = max(depth, int(child_depths.max()))
            leaves.update(made)
            for entry in candidates:
                heapq.heappush(heap, entry)
        return self._finish([self._joined(levels, asarray(xp, left_child, POSITION_DTYPE))], positions, scales,
                            drawn, depth)

    def _partition(self, split: list, left_ids: list, table, ridx, positions) -> list:
        """Split the rows of the batch's leaves (``table`` their split rows), in place, in one
        pass over the span of ``ridx`` their ranges cover: the leaves as one level, in the
        order of their ranges (the rows between them, other leaves', stay). Returns where each
        leaf's right rows begin."""
        xp = get_xp(table)
        # By (begin, end): a rank's empty range comes before the range starting where it does,
        # so that a place's slot is the last one starting at or before it (kernels.partition_rows).
        order = sorted(range(len(split)), key=lambda k: (split[k].begin, split[k].end))
        first, stop = split[order[0]].begin, split[order[-1]].end
        ranges = asarray(xp, [[split[k].begin - first for k in order], [split[k].end - first for k in order],
                              [left_ids[k] for k in order]], POSITION_DTYPE)  # seg_begin, seg_end, left child
        if order != sorted(order):  # slices joined: a cupy index by a list measured no faster
            table = xp.concatenate([table[k:k + 1] for k in order])
        moved, n_left = partition.apply_level(self.matrix, ridx[first:stop], positions, None, ranges[0], ranges[1],
                                              SplitTable(table), ranges[2])
        ridx[first:stop] = moved
        n_left = to_numpy(n_left)
        middles = [0] * len(split)
        for slot, k in enumerate(order):
            middles[k] = split[k].begin + int(n_left[slot])
        return middles

    def _joined(self, levels: list, left_child) -> Level:
        """The tree's steps as one level of every node id (``left_child`` by id), its splits
        those made."""
        xp = get_xp(left_child)
        table = xp.concatenate([level.splits.table for level in levels])
        table[:, 0] = left_child >= 0
        bounds = None if levels[0].bounds is None else xp.concatenate([level.bounds for level in levels])
        return Level(0, xp.concatenate([level.node_sums for level in levels]),
                     xp.concatenate([level.active for level in levels]), SplitTable(table), left_child, bounds)

    def _level(self, frontier: _Frontier, splits: SplitTable) -> Level:
        """A step's nodes as a level of the record (their children are set when the tree is
        joined, ``_joined``)."""
        return Level(frontier.start, frontier.node_sums, frontier.active, splits, None, frontier.bounds)

    def _candidates(self, leaves: dict, splits: SplitTable) -> list:
        """Heap entries (-gain, id) of the leaves whose best split is worth making and may be
        made (depth), read from the coordinator's table (one host read)."""
        table = to_numpy(splits.table)
        gains = table[:, 4].view(np.float64)
        out = []
        for node, leaf in leaves.items():
            valid = table[leaf.slot, 0] != 0
            if valid and (not self.max_depth or leaf.depth < self.max_depth):
                out.append((-float(gains[leaf.slot]), node))
        return out

    def _children(self, split: list, frontiers: dict, table, left_ids: list, middles: list, scales) -> _Frontier:
        """The split leaves' children as a frontier of sibling pairs, pair k the children of
        ``split[k]`` (``table`` their split rows): their sums, ranges, which of each pair to
        build (the smaller hessian), and, under constraints, their bounds and paths from the
        leaves' own rows of their levels."""
        xp = get_xp(table)
        n = len(split)
        node_sums = xp.stack([table[:, 5:7], table[:, 7:9]], axis=1).reshape(2 * n, 2)
        build_left = node_sums[0::2, 1] <= node_sums[1::2, 1]
        ranges = np.array([[leaf.begin, middle, middle, leaf.end] for leaf, middle in zip(split, middles)])
        ranges = asarray(xp, np.concatenate([ranges[:, [0, 2]].reshape(-1), ranges[:, [1, 3]].reshape(-1),
                                             np.arange(n)]), POSITION_DTYPE)
        seg_begin, seg_end, rank = ranges[:2 * n], ranges[2 * n:4 * n], ranges[4 * n:]
        build_begin = xp.where(build_left, seg_begin[0::2], seg_begin[1::2])
        build_end = xp.where(build_left, seg_end[0::2], seg_end[1::2])
        rules = {}
        if self.monotone is not None or self.sets is not None:
            parents = _rows_of([(frontiers[leaf.level.start], leaf.slot) for leaf in split])
            splitting = table.copy()
            splitting[:, 0] = 1  # each of them splits
            rules = self._children_rules(parents, SplitTable(splitting), rank, xp.full(1, n, dtype=POSITION_DTYPE),
                                         scales)
        return _Frontier(left_ids[0], node_sums, xp.ones(2 * n, dtype=bool), seg_begin, seg_end, None, rank,
                         build_left, build_begin, build_end, **rules)


def _in_order(keys: list, left_ids: list, candidates: list) -> int:
    """How many leaves of a batch (popped in heap order, ``keys`` their (-gain, id)) XGBoost's
    order splits one after another: leaf j is next while no child of leaves 0..j-1 outranks it
    (``candidates``: the children's heap entries; leaf j's children are ids left_ids[j] and
    left_ids[j] + 1)."""
    best_child = {}
    for entry in candidates:
        parent = (entry[1] - left_ids[0]) // 2
        best_child[parent] = min(best_child.get(parent, entry), entry)
    outranking = None  # the best child of the leaves kept so far
    for j, key in enumerate(keys):
        if outranking is not None and outranking < key:
            return j
        if j in best_child and (outranking is None or best_child[j] < outranking):
            outranking = best_child[j]
    return len(keys)


def _back_to_their_nodes(nodes: list, split: list, ridx, positions) -> None:
    """The rows of the ``split`` leaves at their nodes again (``positions``), in a few array
    operations whatever their number."""
    xp = get_xp(ridx)
    rows = xp.concatenate([ridx[leaf.begin:leaf.end] for leaf in split])
    ends = np.cumsum([leaf.end - leaf.begin for leaf in split])
    leaf_of_row = xp.searchsorted(asarray(xp, ends, POSITION_DTYPE), xp.arange(rows.shape[0], dtype=POSITION_DTYPE),
                                  side="right")
    positions[rows] = asarray(xp, nodes, POSITION_DTYPE)[leaf_of_row]


def _first_slots(level: Level, n: int) -> Level:
    """A step's level cut to its first ``n`` slots (the children of the leaves kept)."""
    return Level(level.start, level.node_sums[:n], level.active[:n], SplitTable(level.splits.table[:n]), None,
                 None if level.bounds is None else level.bounds[:n])


def _rows_of(picks: list) -> _Frontier:
    """A frontier of the given (frontier, slot) nodes, their sums, bounds and paths (what
    _children_rules reads of a parent level)."""
    xp = get_xp(picks[0][0].node_sums)

    def gathered(name):
        parts = [getattr(frontier, name) for frontier, _ in picks]
        return None if parts[0] is None else xp.concatenate([part[slot:slot + 1]
                                                             for part, (_, slot) in zip(parts, picks)])

    paths = None
    if picks[0][0].paths is not None:
        paths = dataclasses.replace(picks[0][0].paths, used=xp.concatenate([f.paths.used[s:s + 1] for f, s in picks]),
                                    compatible=xp.concatenate([f.paths.compatible[s:s + 1] for f, s in picks]))
    return _Frontier(0, gathered("node_sums"), gathered("active"), None, None, None, None, None, None, None,
                     gathered("bounds"), paths)
