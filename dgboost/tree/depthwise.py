"""Depthwise growth (XGBoost's ``grow_policy="depthwise"``): every node of a level is split
at once, one histogram collective per level, down to ``max_depth``."""

from __future__ import annotations

from . import partition
from .grower import Grower, GrownTree, Level
from .split import SplitTable
from .._dtypes import INDEX_DTYPE
from ..backend import get_xp
from ..data.pages import PagedMatrix
from ..kernels import number_children


class DepthwiseGrower(Grower):
    """Level by level: a level's histograms, its splits, its rows moved to their children.
    ``_level_splits`` chooses a level's splits: each node its own best (SymmetricGrower
    overrides it)."""

    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        gpair, scales, positions, ridx, frontier = self._start(gpair, drawn)
        xp = get_xp(gpair)
        n_places = self._places(ridx)
        self._n_leaves = xp.ones(1, dtype=INDEX_DTYPE)  # the root
        levels, ranges = [], []  # ranges: each level's rows by slot, (seg_begin, seg_end)
        streamed = None  # a paged matrix's next histograms, built in the pass that partitioned a level
        for depth in range(self.max_depth + 1):
            last = depth == self.max_depth
            if last:
                splits, n_parents = SplitTable.empty(frontier.size, xp, self.category_words), 0
            else:
                hist = frontier.histograms(self.matrix, gpair, scales, ridx, self.comm) if streamed is None else streamed
                streamed = None
                splits = self._level_splits(frontier, hist, scales, tree_index, depth)
                n_parents = self._next_level_parents(splits, hist.shape[1])
            left_child, slot_of_rank, n_split = number_children(splits.table, frontier.start, n_parents)
            level = Level(frontier.start, frontier.node_sums, frontier.active, splits, left_child, frontier.bounds)
            levels.append(level)
            ranges.append((frontier.seg_begin, frontier.seg_end))
            if last:
                break
            if isinstance(self.matrix, PagedMatrix) and n_parents and depth + 1 < self.max_depth:
                ridx, frontier, streamed = frontier.streamed_children(
                    self.matrix, level, hist, slot_of_rank, n_split, ridx, gpair, scales, self.comm,
                    **self._children_rules(frontier, splits, slot_of_rank, n_split, scales))
                continue
            ridx, n_left = partition.apply_level(self.matrix, ridx, frontier.seg_begin, frontier.seg_end, splits,
                                                 level.left_child)
            if n_parents == 0:
                break
            frontier = frontier.children(level, hist, slot_of_rank, n_split, n_left, n_places,
                                         **self._children_rules(frontier, splits, slot_of_rank, n_split, scales))
        return self._finish(levels, positions, scales, drawn, ranges=ranges, ridx=ridx)

    def _level_splits(self, frontier, hist, scales, tree_index: int, depth: int) -> SplitTable:
        """Each node's best split, then no more than max_leaves leaves room for."""
        splits = self._splits(frontier, hist, scales, tree_index, depth)
        if self.max_leaves:
            splits, self._n_leaves = self._cap_leaves(splits, self._n_leaves)
        return splits
