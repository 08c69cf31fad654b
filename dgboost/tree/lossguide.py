"""Lossguide growth (XGBoost's ``grow_policy="lossguide"``): the leaf whose split gains most is
split first, one leaf at a time, in XGBoost's order (ties to the lower node id), until the
tree has ``max_leaves`` leaves (0: no limit), no leaf's split gains, or every leaf that could
split is at ``max_depth`` (0: no limit).

Nodes are numbered as they are made, XGBoost's way: the root 0, then each split's children
``n`` and ``n + 1``, the next two ids. Each split is one step: the node's rows (a range of
``ridx``) partitioned in place, the smaller child's histogram built (the other by
subtraction from the node's, which is kept while the node is a leaf), one collective, and
the two children's best splits found by the coordinator. The host keeps the leaves in a
heap by gain: on a GPU it reads each step's children's gains and their rows' count.
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from . import histogram, partition
from .grower import Grower, GrownTree, Level, _Frontier
from .split import SplitTable
from .._dtypes import POSITION_DTYPE
from ..backend import get_xp, to_numpy


@dataclasses.dataclass
class _Leaf:
    """A leaf of the tree being grown: where its row lie in ``ridx`` (on this rank), its
    histogram (over all ranks) and the level (a step's pair of nodes) that holds its row."""

    begin: int
    end: int
    depth: int
    hist: object  # (n_bins_total, 2) int64
    level: Level
    slot: int  # its slot in the level


class LossguideGrower(Grower):
    """One split a step, the best leaf first."""

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
        next_id, depth = 1, 0
        while heap and (not self.max_leaves or len(leaves) < self.max_leaves):
            _, node = heapq.heappop(heap)
            leaf = leaves.pop(node)
            level, slot = leaf.level, leaf.slot
            left_id = next_id
            next_id += 2
            level.left_child[slot] = left_id
            level.splits.table[slot, 0] = 1  # split: made (the rows of nodes left leaves say 0)
            parent = frontiers[level.start]
            one = SplitTable(level.splits.table[slot:slot + 1])
            # The node's rows, in place: its range of ridx partitioned as a level of one slot.
            moved, n_left = partition.apply_level(self.matrix, ridx[leaf.begin:leaf.end], positions, node,
                                                  xp.zeros(1, dtype=POSITION_DTYPE),
                                                  xp.full(1, leaf.end - leaf.begin, dtype=POSITION_DTYPE),
                                                  one, level.left_child[slot:slot + 1])
            ridx[leaf.begin:leaf.end] = moved
            middle = leaf.begin + int(to_numpy(n_left)[0])
            child = self._child_frontier(parent, slot, one, left_id, leaf, middle, scales)
            built = child.build_begin, child.build_end
            hist_built = self.comm.allreduce(histogram.build(self.matrix, gpair, scales, ridx, *built))
            hist = histogram.children(leaf.hist[None], xp.zeros(1, dtype=POSITION_DTYPE), hist_built,
                                      child.build_left)
            splits = self._splits(child, hist, scales, tree_index, leaf.depth + 1,
                                  slots=np.array([left_id, left_id + 1]))
            level = self._level(child, splits)
            levels.append(level)
            frontiers[left_id] = child
            depth = max(depth, leaf.depth + 1)
            pair = {left_id: _Leaf(leaf.begin, middle, leaf.depth + 1, hist[0], level, 0),
                    left_id + 1: _Leaf(middle, leaf.end, leaf.depth + 1, hist[1], level, 1)}
            leaves.update(pair)
            for entry in self._candidates(pair, splits):
                heapq.heappush(heap, entry)
        for level in levels:  # the splits not made: their nodes are leaves
            level.splits.table[:, 0] = level.left_child >= 0
        return self._finish(levels, positions, scales, drawn, depth)

    def _level(self, frontier: _Frontier, splits: SplitTable) -> Level:
        """A step's nodes as a level of the record; no node split yet (left_child -1)."""
        xp = get_xp(splits.table)
        left_child = xp.full(frontier.size, -1, dtype=POSITION_DTYPE)
        return Level(frontier.start, frontier.node_sums, frontier.active, SplitTable(splits.table.copy()),
                     left_child, frontier.bounds)

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

    def _child_frontier(self, parent: _Frontier, slot: int, one: SplitTable, left_id: int, leaf: _Leaf,
                        middle: int, scales) -> _Frontier:
        """The split node's children as a frontier of one sibling pair: their sums, ranges, which
        one to build (the smaller hessian), and their bounds and paths."""
        xp = get_xp(one.table)
        table = one.table
        node_sums = xp.concatenate([table[:, 5:7], table[:, 7:9]])
        build_left = node_sums[0:1, 1] <= node_sums[1:2, 1]
        seg_begin = xp.asarray(np.array([leaf.begin, middle], dtype=POSITION_DTYPE))
        seg_end = xp.asarray(np.array([middle, leaf.end], dtype=POSITION_DTYPE))
        build_begin = xp.where(build_left, seg_begin[0:1], seg_begin[1:2])
        build_end = xp.where(build_left, seg_end[0:1], seg_end[1:2])
        one_parent = _Frontier(parent.start + slot, parent.node_sums[slot:slot + 1], parent.active[slot:slot + 1],
                               None, None, None, None, None, None, None,
                               None if parent.bounds is None else parent.bounds[slot:slot + 1],
                               None if parent.paths is None else
                               dataclasses.replace(parent.paths, used=parent.paths.used[slot:slot + 1],
                                                   compatible=parent.paths.compatible[slot:slot + 1]))
        rules = self._children_rules(one_parent, one, xp.zeros(1, dtype=POSITION_DTYPE),
                                     xp.ones(1, dtype=POSITION_DTYPE), scales)
        return _Frontier(left_id, node_sums, xp.ones(2, dtype=bool), seg_begin, seg_end, None,
                         xp.zeros(1, dtype=POSITION_DTYPE), build_left, build_begin, build_end, **rules)
