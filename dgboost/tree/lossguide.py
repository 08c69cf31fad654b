"""Lossguide growth (XGBoost's ``grow_policy="lossguide"``): the leaf whose split gains most is
split first, in XGBoost's order (ties to the lower node id), until the tree has
``max_leaves`` leaves (0: no limit), no leaf's split gains, or every leaf that could split is
at ``max_depth`` (0: no limit). A step splits the ``max_greedy_nodes`` best leaves (1:
one at a time, XGBoost's trees), on every device alike, so the model is the same.

Nodes are numbered as they are made, XGBoost's way: the root 0, then each split's children
``n`` and ``n + 1``, the next two ids. A step: each node's rows (a range of ``ridx``)
partitioned in place, the smaller child of each pair's histogram built in one launch (the
other by subtraction from the node's, kept in a pool until then), one collective, and the
children's best splits found by the coordinator. The host keeps the leaves in a heap by gain
(``_Order``), reading each step's children's splits and rows sent left once the step is done;
the nodes' histograms and split rows stay on the device, in pools (``_Pools``) that a step
gathers from and writes its children to by slot.

With ``max_greedy_nodes=1`` splits are made ahead: a step splits, on the device, the
``SPECULATION`` nodes most likely to be split next, and the host then makes the tree's splits
in XGBoost's order for as long as the next leaf's children are known (``_Order``): a node's
children do not depend on when they were made, so every split made on the device ahead is
kept until its node's turn comes, and the steps are some 20 a tree of 255 leaves rather than
the 254 splits. The nodes a step splits are found best first (``_Order.ahead``): the leaves
of the heap, and below a leaf already split on the device its children, ranked by the least
gain on their way down from the heap (a node's turn comes only after its parents'). Column
draws a node (``colsample_bynode``) are keyed by the node's path from the root (``_Node.path``),
known when it is made, not by its id, known only at its turn. The trees are the same at any
width.
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from . import histogram, partition
from .grower import Grower, GrownTree, Level, _Frontier
from .split import SplitTable
from .._dtypes import GAIN_DTYPE, HIST_DTYPE, POSITION_DTYPE
from .._hashing import sub_key
from ..backend import asarray, get_xp, join, to_numpy
from ..kernels import next_frontier, place_rows

#: Nodes split on the device a step when max_greedy_nodes is 1, the tree taking them as their
#: turns come. Higgs-like 2M rows, 255 leaves, 100 rounds: steps a tree and nodes split a tree
#: at widths 8, 12, 16, 24 and 32: 35 and 260, 25 and 268, 21 and 285, 19 and 360, 18.5 and
#: 460 (254 splits at width 1). A step costs some 30 launches and a wait on a GPU, a pass over
#: its span of ridx and Python on the CPU (200k rows, 2 cores, 30 rounds: 2.75 s at width 1,
#: 1.8 s at 16); a node split and never taken costs its rows' work.
SPECULATION = 16

#: Slots the pools start with (a 255-leaf tree grows them some three times, once a run).
POOL_SLOTS = 64


@dataclasses.dataclass(eq=False)
class _Node:
    """A node of the tree being grown: where its rows lie in ``ridx`` (on this rank), its slot
    in the pools (its histogram over all ranks on the coordinator, elsewhere values that mean
    nothing; its best split row) while they may be read, the step that made it and its row
    there, its best split's gain, and its path: what keys its column draws (the root 0, a
    child its parent's mixed with its side, ``_child_path``; 0 without colsample_bynode).
    ``children``: its children once split on the device; ``id``: its node id, once its
    parent's split is in the tree. A slot goes back to the pools once nothing reads it: at
    once for a node that cannot split, else once the node is split on the device."""

    begin: int
    end: int
    depth: int
    slot: int
    step: int
    place: int
    gain: float
    open: bool  # its best split is worth making and may be made (depth)
    path: int
    children: tuple | None = None
    id: int = -1


class _Order:
    """XGBoost's order of splits, on the host: the tree's leaves that may split in a heap by
    (-gain, id), each node by id, the left child of each (-1 at a leaf), the tree's depth."""

    def __init__(self, root: _Node, max_leaves: int):
        root.id = 0
        self.nodes = [root]
        self.left_child = [-1]
        self.heap = [(-root.gain, 0)] if root.open else []
        self.max_leaves = max_leaves
        self.depth = 0

    @property
    def next_id(self) -> int:
        """The id the next split's left child gets."""
        return len(self.nodes)

    @property
    def n_leaves(self) -> int:
        return len(self.nodes) // 2 + 1  # a split adds two nodes and one leaf

    def done(self) -> bool:
        return not self.heap or bool(self.max_leaves and self.n_leaves >= self.max_leaves)

    def room(self, cap: int) -> int:
        """At most ``cap``, and no more than the splits max_leaves leaves room for."""
        return min(cap, self.max_leaves - self.n_leaves) if self.max_leaves else cap

    def next(self) -> _Node:
        """The leaf XGBoost splits next."""
        return self.nodes[self.heap[0][1]]

    def pop(self, n: int) -> list:
        """The ``n`` best leaves, taken from the heap in its order."""
        return [self.nodes[heapq.heappop(self.heap)[1]] for _ in range(min(n, len(self.heap)))]

    def split(self, node: _Node) -> None:
        """``node`` (taken from the heap) split in the tree: its children, split on the device,
        get the next two ids and join the heap where they may split."""
        self.left_child[node.id] = self.next_id
        for child in node.children:
            child.id = self.next_id
            self.nodes.append(child)
            self.left_child.append(-1)
            if child.open:
                heapq.heappush(self.heap, (-child.gain, child.id))
        self.depth = max(self.depth, node.depth + 1)

    def ahead(self, width: int) -> list:
        """At most ``width`` nodes not split on the device, those whose turn is likeliest to come
        soonest: best first from the heap's leaves, a node split on the device standing for its
        children (a node's turn comes after its parent's), each ranked by the least gain from
        the heap down to it, the heap's own leaves first on a tie. The heap's best leaf comes
        first where it is not split on the device (as where it is called)."""
        if not self.heap:
            return []
        queue = [(*self.heap[0], 0, 0)]  # a heap leaf: (-gain, id, 0, its place in the heap)
        picked, made = [], 0
        while queue and len(picked) < width:
            entry = heapq.heappop(queue)
            if entry[2] == 0:
                place = entry[3]
                for after in (2 * place + 1, 2 * place + 2):  # the heap's leaves in its order, lazily
                    if after < len(self.heap):
                        heapq.heappush(queue, (*self.heap[after], 0, after))
                node = self.nodes[entry[1]]
            else:
                node = entry[3]
            if node.children is None:
                picked.append(node)
                continue
            for child in node.children:
                if child.open:
                    made += 1  # (a tie after the heap's leaves, in the order found; no id yet)
                    heapq.heappush(queue, (max(entry[0], -child.gain), len(self.nodes) + made, 1, child))
        return picked


@dataclasses.dataclass
class _Growing:
    """A tree being grown: what its steps read (``steps``: each step's frontier and level)."""

    gpair: object
    scales: object
    ridx: object
    pools: "_Pools"
    tree_index: int
    steps: list


class _Pools:
    """Each node's histogram and best split row, in the slots of two device arrays: a step
    gathers its nodes' by one index and its children's land by another, whatever the
    steps that made them (no per-node arrays to join). Slots are handed out and back on the
    host; the arrays grow as a tree's nodes need (the order of the work on the device keeps a
    slot's reads before its next writes)."""

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
        self.by_node = self.columns.rates[2] < 1.0  # column draws a node, keyed by its path
        self.pools = None

    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        gpair, scales, positions, ridx, root = self._start(gpair, drawn)
        xp = get_xp(gpair)
        n_places = int(to_numpy(root.seg_end)[0])  # the rows drawn come first in ridx
        hist = root.histograms(self.matrix, gpair, scales, ridx, self.comm)
        splits = self._splits(root, hist, scales, tree_index, 0, slots=np.zeros(1, np.int64))
        pools = self._pools(xp, hist.shape[1], splits.table.shape[1])
        (slot,) = pools.take(1)
        pools.hist[slot], pools.table[slot] = hist[0], splits.table[0]
        table = to_numpy(splits.table)
        self.comm.check()  # what a failure cut short is not read as splits
        tree = _Growing(gpair, scales, ridx, pools, tree_index, [(root, self._level(root, splits))])
        order = _Order(self._nodes(table, [(0, n_places, 0, 0)], [slot], 0)[0], self.max_leaves)
        while not order.done():
            if self.batch > 1:  # the best leaves split together, in the heap's order
                batch = order.pop(order.room(self.batch))
                self._step(tree, batch)
                for node in batch:
                    order.split(node)
            elif order.next().children is not None:  # its turn, its children known
                order.split(order.pop(1)[0])
            else:
                self._step(tree, order.ahead(order.room(SPECULATION)))
        if drawn is None:  # else _finish routes every row
            ranges = np.array([[node.begin, node.end, node.id] for node in order.nodes
                               if order.left_child[node.id] < 0], dtype=POSITION_DTYPE)
            place_rows(ridx, *ranges.T, positions)
        return self._finish([self._joined(tree.steps, order)], positions, scales, drawn, order.depth)

    def _pools(self, xp, n_bins_total: int, n_columns: int) -> _Pools:
        """This grower's pools, made for its first tree and kept for the next: they start at
        ``POOL_SLOTS`` and double as the nodes need (max_leaves and max_greedy_nodes may be
        far above any tree's leaves)."""
        if self.pools is None or not self.pools.fits(xp, n_bins_total, n_columns):
            self.pools = _Pools(xp, n_bins_total, n_columns, POOL_SLOTS)
        self.pools.reset()
        return self.pools

    def _step(self, tree: _Growing, batch: list) -> None:
        """Split ``batch``'s nodes on the device: their rows partitioned, their children's
        histograms and best splits made, and each node's ``children`` set."""
        xp, pools = get_xp(tree.gpair), tree.pools
        n = len(batch)
        child_slots = pools.take(2 * n)
        step = _Step.of(xp, batch, child_slots)
        table = xp.take(pools.table, step.slots_by_range, axis=0)  # the nodes' split rows, by range order
        n_left = self._partition(step, table, tree.ridx)
        child = self._children(step, table, tree.steps, batch, n_left, tree.scales)
        hist_built = self.comm.reduce(histogram.build(self.matrix, tree.gpair, tree.scales,
                                                      tree.ridx[step.first:step.stop], child.build_begin,
                                                      child.build_end))  # the coordinator's
        hist = histogram.children(pools.hist, step.slots, hist_built, child.build_left)
        depths = np.repeat([node.depth + 1 for node in batch], 2)
        paths = [_child_path(node.path, side) if self.by_node else 0 for node in batch for side in (0, 1)]
        splits = self._splits(child, hist, tree.scales, tree.tree_index, depths, slots=np.array(paths))
        pools.hist[step.child_slots], pools.table[step.child_slots] = hist, splits.table
        table, n_left = to_numpy(splits.table), to_numpy(n_left)  # the second waits for nothing
        self.comm.check()
        tree.steps.append((child, self._level(child, splits)))
        ranges = []
        for k, node in enumerate(batch):
            middle = node.begin + int(n_left[step.place[k]])
            ranges += [(node.begin, middle, node.depth + 1, paths[2 * k]),
                       (middle, node.end, node.depth + 1, paths[2 * k + 1])]
        children = self._nodes(table, ranges, child_slots, len(tree.steps) - 1)
        for k, node in enumerate(batch):
            node.children = (children[2 * k], children[2 * k + 1])
        # Their histograms and split rows are read no more (the device reads them first).
        pools.give([node.slot for node in batch] + [node.slot for node in children if not node.open])

    def _nodes(self, table: np.ndarray, ranges: list, slots: list, step: int) -> list:
        """A step's new nodes (``ranges``: each one's (begin, end, depth, path)) from the
        coordinator's table of their splits, read to the host."""
        gains = table[:, 4].view(GAIN_DTYPE)
        valid = table[:, 0] != 0
        return [_Node(begin, end, depth, slot, step, place, float(gains[place]),
                      bool(valid[place]) and (not self.max_depth or depth < self.max_depth), path)
                for place, ((begin, end, depth, path), slot) in enumerate(zip(ranges, slots))]

    def _partition(self, step: "_Step", table, ridx):
        """Split the rows of the step's nodes (``table``: their split rows in the order of their
        ranges), in place, in one pass over the span of ``ridx`` their ranges cover: the nodes
        as one level, in the order of their ranges (the rows between them, other nodes', stay).
        Returns each node's rows sent left, by range order, on the device."""
        moved, n_left = partition.apply_level(self.matrix, ridx[step.first:step.stop], step.seg_begin, step.seg_end,
                                              SplitTable(table), step.left_by_range)
        ridx[step.first:step.stop] = moved
        return n_left

    def _joined(self, steps: list, order: _Order) -> Level:
        """The tree as one level of every node id: each id's row of the step that made it (the
        steps' levels hold nodes never taken too)."""
        levels = [level for _, level in steps]
        starts = np.cumsum([0] + [level.size for level in levels])
        xp = get_xp(levels[0].active)
        rows = asarray(xp, [starts[node.step] + node.place for node in order.nodes], POSITION_DTYPE)
        left_child = asarray(xp, order.left_child, POSITION_DTYPE)

        def taken(arrays):
            return xp.take(join(arrays), rows, axis=0)

        table = taken([level.splits.table for level in levels])  # a copy: its column 0 is set
        table[:, 0] = left_child >= 0
        bounds = None if levels[0].bounds is None else taken([level.bounds for level in levels])
        return Level(0, taken([level.node_sums for level in levels]), taken([level.active for level in levels]),
                     SplitTable(table), left_child, bounds)

    def _level(self, frontier: _Frontier, splits: SplitTable) -> Level:
        """A step's nodes as a level of the record (their children are set when the tree is
        joined, ``_joined``)."""
        return Level(frontier.start, frontier.node_sums, frontier.active, splits, None, frontier.bounds)

    def _children(self, step: "_Step", table, steps: list, batch: list, n_left, scales) -> _Frontier:
        """The step's nodes' children as a frontier of sibling pairs, pair k the children of
        ``batch[k]`` (``table``: the nodes' split rows, ``n_left``: their rows sent left, both
        in the order of their ranges): their sums, which of each pair to build (the smaller
        hessian) and its range of ``ridx`` from the step's first place (kernels.next_frontier,
        on the device), and, under constraints, their bounds and paths from the nodes' own
        rows of their steps."""
        xp = get_xp(n_left)
        n = len(batch)
        node_sums, active, _, _, build_left, build_begin, build_end = next_frontier(
            table, step.place_on_device, step.n_split, step.seg_begin, step.seg_end, n_left, step.stop - step.first)
        rules = {}
        if self.monotone is not None or self.sets is not None:
            parents = _rows_of([(steps[node.step][0], node.place) for node in batch])
            splitting = table[step.place_on_device]  # batch order
            splitting[:, 0] = 1  # each of them splits
            rules = self._children_rules(parents, SplitTable(splitting), xp.arange(n, dtype=POSITION_DTYPE),
                                         step.n_split, scales)
        return _Frontier(0, node_sums, active, None, None, None, None, build_left, build_begin, build_end, **rules)


@dataclasses.dataclass(frozen=True)
class _Step:
    """A step's nodes as the device reads them, copied there at once: their pool slots and
    ranges in the batch's order (pair k the children of node k) and in the order of their
    ranges (the partition's), and where their children land."""

    first: int  # the span of ridx the nodes' ranges cover
    stop: int
    place: list  # node k's place in range order (host)
    n_split: object  # (1,) int32 on the device: n, the nodes (pairs of children) of the step
    child_slots: object  # (2n,) int32: where the children's histograms and split rows go
    slots: object  # (n,) int32: the nodes' pool slots, batch order
    place_on_device: object  # (n,) int32: ``place``
    slots_by_range: object  # (n,) int32: the pool slots in range order
    seg_begin: object  # (n,) int32: the ranges in range order, from ``first``
    seg_end: object
    left_by_range: object  # (n,) int32: zeros, the partition's "every node splits"

    @classmethod
    def of(cls, xp, batch: list, child_slots: list) -> "_Step":
        n = len(batch)
        # By (begin, end): a rank's empty range comes before the range starting where it does,
        # so that a place's slot is the last one starting at or before it (kernels.partition_rows).
        order = sorted(range(n), key=lambda k: (batch[k].begin, batch[k].end))
        first, stop = batch[order[0]].begin, batch[order[-1]].end
        place = [0] * n
        for i, k in enumerate(order):
            place[k] = i
        host = np.array([[node.slot for node in batch], place, [batch[k].slot for k in order],
                         [batch[k].begin - first for k in order], [batch[k].end - first for k in order],
                         [0] * n], dtype=POSITION_DTYPE)
        device = asarray(xp, np.concatenate([[n], child_slots, host.reshape(-1)]), POSITION_DTYPE)  # one copy
        rows = [device[1 + 2 * n + i * n:1 + 2 * n + (i + 1) * n] for i in range(6)]
        return cls(first, stop, place, device[:1], device[1:1 + 2 * n], *rows)


def _child_path(path: int, side: int) -> int:
    """The path of a node's child on ``side`` (0 left, 1 right): the node's mixed with the side,
    31 bits (column sampling keys a node's features by ``path * n_features + feature``)."""
    return sub_key(path, side + 1) & 0x7FFFFFFF


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
