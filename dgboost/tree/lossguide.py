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
leaves in a heap by gain, reading each step's children's splits and rows sent left once
the step is done; the leaves' histograms and split rows stay on the device, in pools
(``_Pools``) that a step gathers from and writes its children to by slot.

One leaf a step (XGBoost's order) is done speculatively on a GPU, ``SPECULATION`` leaves a step:
the best leaves are split together as a batch, and then, the children's gains known, the
batch is cut where XGBoost's order leaves it: at the first leaf that a child of an earlier
leaf of the batch outranks. The leaves after the cut go back to the heap, their range of
``ridx`` as it is (its order may have changed, which no sum depends on: histograms are
integer sums; rows get their leaf ids only once the tree is grown) and their children's ids
back to the pool. The trees are XGBoost's order's,
in some 43 steps of 255 leaves rather than 254 (higgs-like, 16 leaves a step).
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from . import histogram, partition
from .grower import Grower, GrownTree, Level, _Frontier
from .split import SplitTable
from .._dtypes import HIST_DTYPE, POSITION_DTYPE
from ..backend import asarray, get_xp, join, to_numpy
from ..kernels import next_frontier, place_rows

#: Leaves split together a step when max_greedy_nodes is 1, the batch then cut to XGBoost's
#: order (higgs-like 10M rows, 255 leaves: 78 steps a tree at 4, 52 at 8, 43 at 16), by
#: device: on a GPU a step's cost is mostly fixed (some 30 launches, one wait for the device;
#: one H100, 100 rounds: 80.7, 59.6, 57.0 and 56.9 ms a round at widths 4, 8, 12 and 16); on
#: the CPU the leaves cut cost their rows' work (10 rounds of 255 leaves, 200k rows, 2 cores:
#: 2.7 to 3.2 s at 16 against 2.2 to 2.4 s at 1). The trees are the same at any width.
SPECULATION = {"cuda": 16, "cpu": 1}

#: Slots the leaves' pools start with (a 255-leaf tree grows them three times, once a run).
POOL_SLOTS = 64


@dataclasses.dataclass
class _Leaf:
    """A leaf of the tree being grown: where its rows lie in ``ridx`` (on this rank), its slot
    in the pools (its histogram over all ranks on the coordinator, elsewhere values that mean
    nothing; its best split row) and its place in the step that made it (``start``: that
    step's first id; ``place``: its slot there)."""

    begin: int
    end: int
    depth: int
    slot: int
    start: int
    place: int


class _Pools:
    """Each leaf's histogram and best split row, in the slots of two device arrays: a step
    gathers its leaves' by one index and its children's land by another, whatever the
    steps that made them (no per-leaf arrays to join). Slots are handed out and back on the
    host; the arrays grow where a tree has no ``max_leaves`` (the order of the work on the
    device keeps a slot's reads before its next writes)."""

    def __init__(self, xp, n_bins_total: int, n_columns: int, capacity: int):
        self.hist = xp.empty((capacity, n_bins_total, 2), dtype=HIST_DTYPE)
        self.table = xp.empty((capacity, n_columns), dtype=HIST_DTYPE)
        self.free = list(range(capacity - 1, -1, -1))

    def fits(self, xp, n_bins_total: int, n_columns: int) -> bool:
        return (get_xp(self.hist) is xp and self.hist.shape[1] == n_bins_total
                and self.table.shape[1] == n_columns)

    def reset(self) -> None:
        self.free = list(range(self.hist.shape[0] - 1, -1, -1))

    def take(self, n: int) -> list:
        if len(self.free) < n:
            xp, old = get_xp(self.hist), self.hist.shape[0]
            new = max(2 * old, old + n)
            self.hist = xp.concatenate([self.hist, xp.empty((new - old, *self.hist.shape[1:]), dtype=HIST_DTYPE)])
            self.table = xp.concatenate([self.table, xp.empty((new - old, self.table.shape[1]), dtype=HIST_DTYPE)])
            self.free[:0] = range(new - 1, old - 1, -1)
        return [self.free.pop() for _ in range(n)]

    def give(self, slots) -> None:
        self.free.extend(slots)


class LossguideGrower(Grower):
    """The best leaves first, ``max_greedy_nodes`` of them a step (1: XGBoost's order)."""

    def __init__(self, matrix, params, n_total: int, comm, features=None, categories=None):
        super().__init__(matrix, params, n_total, comm, features, categories)
        self.batch = params.max_greedy_nodes
        self.pools = None

    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        gpair, scales, positions, ridx, root = self._start(gpair, drawn)
        xp = get_xp(gpair)
        n_places = int(to_numpy(root.seg_end)[0])  # the rows drawn come first in ridx
        hist = root.histograms(self.matrix, gpair, scales, ridx, self.comm)
        splits = self._splits(root, hist, scales, tree_index, 0, slots=np.zeros(1, np.int64))
        width = SPECULATION["cpu" if xp is np else "cuda"] if self.batch == 1 else self.batch
        pools = self._pools(xp, hist.shape[1], splits.table.shape[1])
        (slot,) = pools.take(1)
        pools.hist[slot], pools.table[slot] = hist[0], splits.table[0]
        levels = [self._level(root, splits)]
        leaves = {0: _Leaf(0, n_places, 0, slot, 0, 0)}
        table = to_numpy(splits.table)
        self.comm.check()  # what a failure cut short is not read as splits
        heap = self._candidates({0: leaves[0]}, table)
        frontiers = {0: root}  # each step's frontier: its nodes' sums, bounds and paths
        left_child = [-1]  # by node id, on the host until the tree is grown
        depth = 0
        while heap and (not self.max_leaves or len(leaves) < self.max_leaves):
            room = self.max_leaves - len(leaves) if self.max_leaves else width
            keys = [heapq.heappop(heap) for _ in range(min(width, room, len(heap)))]
            batch = [node for _, node in keys]
            split = [leaves.pop(node) for node in batch]
            n = len(split)
            left_ids = [len(left_child) + 2 * k for k in range(n)]
            for node, left_id in zip(batch, left_ids):
                left_child[node] = left_id
            left_child.extend([-1] * 2 * n)
            child_slots = pools.take(2 * n)
            step = _Step.of(xp, split, left_ids, child_slots)
            table = xp.take(pools.table, step.slots_by_range, axis=0)  # the leaves' split rows, by range order
            n_left = self._partition(step, table, ridx)
            child = self._children(step, table, frontiers, split, n_left, scales)
            hist_built = self.comm.reduce(histogram.build(self.matrix, gpair, scales, ridx[step.first:step.stop],
                                                          child.build_begin, child.build_end))  # the coordinator's
            hist = histogram.children(pools.hist, step.slots, hist_built, child.build_left)
            child_depths = np.repeat([leaf.depth + 1 for leaf in split], 2)
            splits = self._splits(child, hist, scales, tree_index, child_depths,
                                  slots=np.arange(left_ids[0], left_ids[0] + 2 * n))  # the children's ids
            pools.hist[step.child_slots], pools.table[step.child_slots] = hist, splits.table
            table, n_left = to_numpy(splits.table), to_numpy(n_left)  # the second waits for nothing
            self.comm.check()
            level = self._level(child, splits)
            made = {}
            for k, leaf in enumerate(split):
                middle = leaf.begin + int(n_left[step.place[k]])
                made[left_ids[k]] = _Leaf(leaf.begin, middle, leaf.depth + 1, child_slots[2 * k], left_ids[0], 2 * k)
                made[left_ids[k] + 1] = _Leaf(middle, leaf.end, leaf.depth + 1, child_slots[2 * k + 1], left_ids[0],
                                              2 * k + 1)
            candidates = self._candidates(made, table)
            n_kept = _in_order(keys, left_ids, candidates) if self.batch == 1 else n  # XGBoost's order's cut
            if n_kept < n:
                for key, node, leaf in zip(keys[n_kept:], batch[n_kept:], split[n_kept:]):
                    heapq.heappush(heap, key)
                    leaves[node] = leaf
                    left_child[node] = -1
                del left_child[len(left_child) - 2 * (n - n_kept):]
                pools.give(child_slots[2 * n_kept:])
                level = _first_slots(level, 2 * n_kept)
                made = {node: leaf for node, leaf in made.items() if leaf.place < 2 * n_kept}
                candidates = [entry for entry in candidates if entry[1] in made]
                child_depths = child_depths[:2 * n_kept]
            pools.give([leaf.slot for leaf in split[:n_kept]])
            levels.append(level)
            frontiers[left_ids[0]] = child
            depth = max(depth, int(child_depths.max()))
            leaves.update(made)
            for entry in candidates:
                heapq.heappush(heap, entry)
        if drawn is None:  # else _finish routes every row
            ranges = np.array([[leaf.begin, leaf.end, node] for node, leaf in leaves.items()], dtype=POSITION_DTYPE)
            place_rows(ridx, *ranges.T, positions)
        return self._finish([self._joined(levels, asarray(xp, left_child, POSITION_DTYPE))], positions, scales,
                            drawn, depth)

    def _pools(self, xp, n_bins_total: int, n_columns: int) -> _Pools:
        """This grower's pools, made for its first tree and kept for the next: they start at
        ``POOL_SLOTS`` and double as the leaves need (max_leaves and max_greedy_nodes may be
        far above any tree's leaves)."""
        if self.pools is None or not self.pools.fits(xp, n_bins_total, n_columns):
            self.pools = _Pools(xp, n_bins_total, n_columns, POOL_SLOTS)
        self.pools.reset()
        return self.pools

    def _partition(self, step: "_Step", table, ridx):
        """Split the rows of the step's leaves (``table``: their split rows in the order of their
        ranges), in place, in one pass over the span of ``ridx`` their ranges cover: the leaves
        as one level, in the order of their ranges (the rows between them, other leaves', stay).
        Returns each leaf's rows sent left, by range order, on the device."""
        moved, n_left = partition.apply_level(self.matrix, ridx[step.first:step.stop], step.seg_begin, step.seg_end,
                                              SplitTable(table), step.left_by_range)
        ridx[step.first:step.stop] = moved
        return n_left

    def _joined(self, levels: list, left_child) -> Level:
        """The tree's steps as one level of every node id (``left_child`` by id), its splits
        those made."""
        xp = get_xp(left_child)
        table = xp.concatenate([level.splits.table for level in levels])  # a copy: its column 0 is set
        table[:, 0] = left_child >= 0
        bounds = None if levels[0].bounds is None else join([level.bounds for level in levels])
        return Level(0, join([level.node_sums for level in levels]),
                     join([level.active for level in levels]), SplitTable(table), left_child, bounds)

    def _level(self, frontier: _Frontier, splits: SplitTable) -> Level:
        """A step's nodes as a level of the record (their children are set when the tree is
        joined, ``_joined``)."""
        return Level(frontier.start, frontier.node_sums, frontier.active, splits, None, frontier.bounds)

    def _candidates(self, leaves: dict, table: np.ndarray) -> list:
        """Heap entries (-gain, id) of the leaves whose best split is worth making and may be
        made (depth), from the coordinator's table of their step, read to the host."""
        gains = table[:, 4].view(np.float64)
        out = []
        for node, leaf in leaves.items():
            valid = table[leaf.place, 0] != 0
            if valid and (not self.max_depth or leaf.depth < self.max_depth):
                out.append((-float(gains[leaf.place]), node))
        return out

    def _children(self, step: "_Step", table, frontiers: dict, split: list, n_left, scales) -> _Frontier:
        """The step's leaves' children as a frontier of sibling pairs, pair k the children of
        ``split[k]`` (``table``: the leaves' split rows, ``n_left``: their rows sent left, both
        in the order of their ranges): their sums, which of each pair to build (the smaller
        hessian) and its range of ``ridx`` from the step's first place (kernels.next_frontier,
        on the device), and, under constraints, their bounds and paths from the leaves' own
        rows of their steps."""
        xp = get_xp(n_left)
        n = len(split)
        node_sums, active, _, _, build_left, build_begin, build_end = next_frontier(
            table, step.place_on_device, step.n_split, step.seg_begin, step.seg_end, n_left, step.stop - step.first)
        rules = {}
        if self.monotone is not None or self.sets is not None:
            parents = _rows_of([(frontiers[leaf.start], leaf.place) for leaf in split])
            splitting = table[step.place_on_device]  # batch order
            splitting[:, 0] = 1  # each of them splits
            rules = self._children_rules(parents, SplitTable(splitting), xp.arange(n, dtype=POSITION_DTYPE),
                                         step.n_split, scales)
        return _Frontier(step.left_ids[0], node_sums, active, None, None, None, None, build_left, build_begin,
                         build_end, **rules)


@dataclasses.dataclass(frozen=True)
class _Step:
    """A step's leaves as the device reads them, copied there at once: their pool slots and
    ranges in the batch's order (pair k the children of leaf k) and in the order of their
    ranges (the partition's), and where their children land."""

    first: int  # the span of ridx the leaves' ranges cover
    stop: int
    place: list  # leaf k's place in range order (host)
    left_ids: list
    n_split: object  # (1,) int32 on the device: n, the leaves (pairs of children) of the step
    child_slots: object  # (2n,) int32: where the children's histograms and split rows go
    slots: object  # (n,) int32: the leaves' pool slots, batch order
    place_on_device: object  # (n,) int32: ``place``
    slots_by_range: object  # (n,) int32: the pool slots in range order
    seg_begin: object  # (n,) int32: the ranges in range order, from ``first``
    seg_end: object
    left_by_range: object  # (n,) int32: their left children's ids in range order

    @classmethod
    def of(cls, xp, split: list, left_ids: list, child_slots: list) -> "_Step":
        n = len(split)
        # By (begin, end): a rank's empty range comes before the range starting where it does,
        # so that a place's slot is the last one starting at or before it (kernels.partition_rows).
        order = sorted(range(n), key=lambda k: (split[k].begin, split[k].end))
        first, stop = split[order[0]].begin, split[order[-1]].end
        place = [0] * n
        for i, k in enumerate(order):
            place[k] = i
        host = np.array([[leaf.slot for leaf in split], place, [split[k].slot for k in order],
                         [split[k].begin - first for k in order], [split[k].end - first for k in order],
                         [left_ids[k] for k in order]], dtype=POSITION_DTYPE)
        device = asarray(xp, np.concatenate([[n], child_slots, host.reshape(-1)]), POSITION_DTYPE)  # one copy
        rows = [device[1 + 2 * n + i * n:1 + 2 * n + (i + 1) * n] for i in range(6)]
        return cls(first, stop, place, left_ids, device[:1], device[1:1 + 2 * n], *rows)


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
