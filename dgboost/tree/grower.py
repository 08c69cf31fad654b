"""The grower: what the boosting loop calls to grow a tree, and the level machinery its
growth policies share (histograms of a level's nodes, split evaluation, partitioning,
the finished tree's record). A policy (``depthwise.py``, ...) subclasses ``Grower``;
``make_grower`` picks it by ``grow_policy``.

Nodes get ids level by level. A level of ``L`` slots occupies ids
``[start, start + L)``; the children of its r-th splitting node (in slot order)
take slots ``2r`` and ``2r + 1`` of the next level, so every level is a list of
sibling pairs and ids are in breadth-first order::

    level 0:  [0]
    level 1:  [1 2]            (node 0 split)
    level 2:  [3 4 | 5 6]      (nodes 1 and 2 split)

The rows are kept grouped by node in ``ridx``: the rows of slot ``s`` of a level
are ``ridx[seg_begin[s]:seg_end[s]]``, so a histogram reads only the rows of the
nodes it builds. Splitting a node splits its range in place (stably: left rows
first); a node's range stays put once it stops splitting. Once the tree is grown
each row is put at its leaf (``positions``, its node id) in one pass over the
leaves' ranges, rather than a scattered write a row a level, so the training
margins are updated by one gather from a table of leaf values: no tree traversal.

On the host, sizes are plain ints and the grower allocates exactly. On a GPU it
allocates each level for the upper bound (every node splits, padding slots
inactive) so that a tree is grown without the host reading anything, until the
bound's histograms would exceed HISTOGRAM_BUDGET_BYTES; then it reads the
number of splits once per level and allocates exactly.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses

import numpy as np

from .._dtypes import GAIN_DTYPE, GRADIENT_DTYPE, HIST_DTYPE, MONOTONE_DTYPE, POSITION_DTYPE
from ..backend import asarray, get_xp, join, start_read
from ..data.ellpack import EllpackMatrix
from ..data.pages import PagedMatrix, RowsAhead, SamplePage
from ..fixed_point import HISTOGRAM_HEADROOM_BITS, power_of_two_scale
from ..kernels import (CategorySplits, Regularisation, ahead_room, child_bounds, gradient_bounds, gradient_sums,
                       mask_indices, next_frontier, rows_drawn_first, sample_sizes, tree_record)
from ..params import TrainParams
from . import histogram, partition
from .constraints import FeatureRules, Paths
from .sampling import ColumnSampler
from .split import SplitTable, find_splits

#: Largest histogram of one level (bytes) allocated for the upper bound rather
#: than the exact node count; see the module docstring.
HISTOGRAM_BUDGET_BYTES = 1 << 28


def _children_bytes(n_parents: int, n_bins_total: int) -> int:
    """The bytes of the histograms of ``n_parents``' children."""
    return 2 * n_parents * n_bins_total * 2 * np.dtype(HIST_DTYPE).itemsize


@dataclasses.dataclass(frozen=True)
class Level:
    """One level of a tree being grown; arrays of length ``size`` on the device."""

    start: int  # id of slot 0
    node_sums: object  # (size, 2) int64 fixed point: each node's (gradient, hessian) total
    active: object  # (size,) bool: the slot holds a node (False: padding)
    splits: SplitTable
    left_child: object  # (size,) int32: id of the left child, -1 where the node does not split
    bounds: object = None  # (size, 2) float64: each node's weight bounds (monotone constraints), or None

    @property
    def size(self) -> int:
        return int(self.active.shape[0])


@dataclasses.dataclass(frozen=True)
class GrownTree:
    """A finished tree on the device (arrays indexed by node id unless noted).

    Attributes
    ----------
    splits : SplitTable of every node id (the levels' tables, joined)
    left_child : array of shape (n_ids,), int32: -1 at leaves
    depth : int: levels below the root
    positions : array of shape (n_rows,), int32: each training row's leaf id
    leaf_value : array of shape (n_ids,), float32: eta * weight of every node id
    record : array of shape (n_ids, len(kernels.RECORD_COLUMNS)), float64: what Tree.from_record reads
    """

    splits: SplitTable
    left_child: object
    depth: int
    positions: object
    leaf_value: object
    record: object

    def route(self, matrix: EllpackMatrix, each_page=None):
        """Leaf ids of another matrix's rows (binned with the same cuts); ``each_page``: see
        partition.route."""
        return partition.route(matrix, self.splits.feature, self.splits.bin, self.splits.default_left,
                               self.left_child, depth=self.depth, categories=self.splits.categories,
                               each_page=each_page)


@dataclasses.dataclass(frozen=True)
class _Frontier:
    """The level about to be split: its nodes, their rows, and which histograms to build.

    Its slots come in sibling pairs, one pair per parent that split (the root
    level excepted). Of each pair one child is built from its rows
    (``build_left`` says which); its sibling comes by subtraction from its
    parent's histogram, ``parent_hist[parent_slot[pair]]`` (the parents' level, not
    a copy of its split nodes).
    """

    start: int  # id of slot 0
    node_sums: object  # (size, 2) int64
    active: object  # (size,) bool: False for padding slots
    # The ranges below are a tuple of each page's for a paged matrix (each page its own ridx).
    seg_begin: object  # (size,) int32: each slot's rows are ridx[seg_begin:seg_end]
    seg_end: object  # (size,) int32
    parent_hist: object  # (n_parent_slots, n_bins_total, 2) int64: the parents' level; None at the root
    parent_slot: object  # (size // 2,) int32: each pair's parent slot in parent_hist
    build_left: object  # (size // 2,) bool: the built child of each pair is the left one
    build_begin: object  # (size // 2,) int32: the built child's range of ridx
    build_end: object
    bounds: object = None  # (size, 2) float64: each node's (lower, upper) weight bound, or None
    paths: Paths | None = None  # each node's path under interaction constraints, or None

    @classmethod
    def root(cls, node_sums, root_end, bounded: bool = False, sets=None) -> "_Frontier":
        """The root level, its rows ``ridx[0:root_end]`` (a (1,) int32 array; a tuple of each
        page's for a paged matrix); ``bounded``: with weight bounds (monotone constraints),
        none yet; ``sets``: the interaction sets, or None."""
        xp = get_xp(node_sums)
        bounds = None
        if bounded:  # filled on the device, not copied from the host (a captured round copies nothing)
            bounds = xp.full((1, 2), -np.inf, dtype=GAIN_DTYPE)
            bounds[:, 1] = np.inf
        zero = lambda: xp.zeros(1, dtype=POSITION_DTYPE)  # noqa: E731
        seg_begin = tuple(zero() for _ in root_end) if isinstance(root_end, tuple) else zero()
        return cls(0, node_sums, xp.ones(1, dtype=bool), seg_begin, root_end,
                   None, None, None, None, None, bounds, None if sets is None else Paths.root(sets))

    @property
    def size(self) -> int:
        return int(self.active.shape[0])

    def histograms(self, matrix, gpair, scales, ridx, comm):
        """Every node's histogram, summed over all ranks on the coordinator, which alone
        evaluates splits (``split.coordinated``; the other ranks' hold values that mean
        nothing, in their shape): (size, n_bins_total, 2) int64."""
        if self.parent_hist is None:
            return comm.reduce(histogram.build(matrix, gpair, scales, ridx, self.seg_begin, self.seg_end))
        built = comm.reduce(histogram.build(matrix, gpair, scales, ridx, self.build_begin, self.build_end))
        return histogram.children(self.parent_hist, self.parent_slot, built, self.build_left)

    def streamed_children(self, matrix: PagedMatrix, level: Level, hist, slot_of_rank, n_split, ridx, gpair, scales,
                          comm, bounds=None, paths: Paths | None = None):
        """For a paged matrix: this level's partition, the next level's ranges and its
        histograms, in one pass over the pages (``partition.apply_level``, ``children`` and
        ``histograms`` would read each page twice). Returns (the new ridx, the next level,
        its histograms summed over all ranks on the coordinator)."""
        moved, pages, built = [None] * matrix.n_pages, [None] * matrix.n_pages, None
        for k, page in matrix.pages():
            start, begin, end = matrix.starts[k], self.seg_begin[k], self.seg_end[k]
            rows, n_left = partition.apply_level(page, ridx[k], begin, end, level.splits, level.left_child)
            ranges = next_frontier(level.splits.table, slot_of_rank, n_split, begin, end, n_left, int(rows.shape[0]))
            part = histogram.build(page, gpair[start:start + page.n_rows], scales, rows, ranges[5], ranges[6])
            if built is None:
                built = part
            else:
                built += part  # integers: exact, in any order
            moved[k], pages[k] = rows, ranges
        # Its histograms are built (returned): it keeps no parents' level, which goes the sooner.
        children = self._next_of_pages(pages, None, None, bounds, paths)
        return tuple(moved), children, histogram.children(hist, slot_of_rank, comm.reduce(built),
                                                          children.build_left)

    def children(self, level: Level, hist, slot_of_rank, n_split, n_left, n_rows,
                 bounds=None, paths: Paths | None = None) -> "_Frontier":
        """The next level: a sibling pair for each of ``slot_of_rank``'s parents (padding past
        ``n_split``); ``n_left`` is each slot's number of this rank's rows sent left and
        ``n_rows`` the places of ridx (a tuple of each page's, with ``n_left``, when paged);
        ``bounds`` and ``paths`` the children's weight bounds and paths, or None."""
        if isinstance(n_rows, tuple):  # a paged matrix
            pages = [next_frontier(level.splits.table, slot_of_rank, n_split, *page)
                     for page in zip(self.seg_begin, self.seg_end, n_left, n_rows)]
            return self._next_of_pages(pages, hist, slot_of_rank, bounds, paths)
        node_sums, active, seg_begin, seg_end, build_left, build_begin, build_end = next_frontier(
            level.splits.table, slot_of_rank, n_split, self.seg_begin, self.seg_end, n_left, n_rows)
        return _Frontier(self.start + self.size, node_sums, active, seg_begin, seg_end, hist, slot_of_rank,
                         build_left, build_begin, build_end, bounds, paths)

    def _next_of_pages(self, pages: list, parent_hist, parent_slot, bounds, paths) -> "_Frontier":
        """The next level from each page's ``next_frontier``: each page's ranges; the node sums,
        activity and built sides, which are every page's alike, from the first."""
        node_sums, active, build_left = pages[0][0], pages[0][1], pages[0][4]
        seg_begin, seg_end, build_begin, build_end = (tuple(page[k] for page in pages) for k in (2, 3, 5, 6))
        return _Frontier(self.start + self.size, node_sums, active, seg_begin, seg_end, parent_hist, parent_slot,
                         build_left, build_begin, build_end, bounds, paths)


class Grower(abc.ABC):
    """Grows trees on one rank's rows; every rank of a job grows the same tree.

    ``grow`` is the policy's; the steps every policy takes are here: the gradients'
    fixed-point scale and the root (``_start``), the coordinator's splits of a level
    (``_splits``), the room for the next level (``_next_level_parents``) and the
    finished tree's record (``_finish``). ``eta`` may change between trees (a
    learning-rate schedule).
    """

    def __init__(self, matrix: EllpackMatrix, params: TrainParams, n_total: int, comm,
                 features: FeatureRules | None = None, categories=None):
        self.matrix = matrix
        self.comm = comm
        self.n_total = n_total
        self.max_depth = params.max_depth
        self.max_leaves = params.max_leaves
        self.eta = params.eta
        self.rules = Regularisation(params.reg_lambda, params.alpha, params.min_child_weight,
                                    params.effective_max_delta_step, params.gamma)
        xp = get_xp(matrix.bin_offsets)
        n_bins = np.diff(matrix.host_bin_offsets)
        self.feature_of_bin = asarray(xp, np.repeat(np.arange(len(n_bins)), n_bins), POSITION_DTYPE)
        features = features or FeatureRules()
        self.monotone = None if features.monotone is None else asarray(xp, features.monotone, MONOTONE_DTYPE)
        self.sets = None if features.interaction_sets is None else asarray(xp, features.interaction_sets, bool)
        self.categories = None  # the categorical features as split evaluation takes them
        if categories is not None:
            self.categories = CategorySplits(categories.indices.astype(POSITION_DTYPE), params.max_cat_to_onehot,
                                             params.max_cat_threshold, -(-max(categories.max_count, 1) // 64))
        self.columns = ColumnSampler(len(n_bins), params.colsample_bytree, params.colsample_bylevel,
                                     params.colsample_bynode, params.seed, features.feature_weights)

    @abc.abstractmethod
    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        """Grow one tree from float32 gradient pairs of shape (n_rows, 2); ``tree_index`` is
        the tree's place in the model (round * n_outputs + output), which keys its draws;
        ``drawn``: the rows the tree is grown from (the others' pairs are zero), a (n_rows,)
        bool mask or their indices (int32, ascending), or None for every row. Only the rows
        drawn are read; every row gets its leaf."""

    def _start(self, gpair, drawn=None):
        """The tree's starting state: ``(gpair, scales, positions, ridx, root)``, the pairs
        contiguous. Without ``drawn`` every row is at the root, and ``positions`` is the
        array each row's leaf is written to once the tree is grown (every row is in some
        leaf's range: it is not filled first). With indices, ``ridx`` is them. With a mask,
        ``ridx`` holds the rows drawn first, the root's range, then the others (no host read:
        the root's end stays on the device). With ``drawn``, ``positions`` is None: the rows
        left out stay out of the tree, and every row is routed to its leaf once it is grown."""
        xp = get_xp(gpair)
        gpair = xp.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE)  # one output's column of a multiclass pair
        scales = power_of_two_scale(self.comm.allreduce(gradient_bounds(gpair), "max"), self.n_total,
                                    HISTOGRAM_HEADROOM_BITS)
        n_rows = self.matrix.n_rows
        if isinstance(self.matrix, PagedMatrix):  # each page's own ridx and ranges, from its first row
            pages = list(zip(self.matrix.starts, self.matrix.page_sizes))
            positions = None
            if drawn is None:
                positions = xp.empty(n_rows, dtype=POSITION_DTYPE)
                ridx = tuple(xp.arange(size, dtype=POSITION_DTYPE) for _, size in pages)
            else:
                drawn = _as_mask(drawn, n_rows)
                ridx = tuple(xp.flatnonzero(drawn[start:start + size]).astype(POSITION_DTYPE) for start, size in pages)
            root_end = tuple(xp.full(1, rows.shape[0], dtype=POSITION_DTYPE) for rows in ridx)
        elif drawn is None:
            positions = xp.empty(n_rows, dtype=POSITION_DTYPE)
            ridx = xp.arange(n_rows, dtype=POSITION_DTYPE)
            root_end = xp.full(1, n_rows, dtype=POSITION_DTYPE)
        elif drawn.dtype != bool:
            positions = None
            ridx = xp.ascontiguousarray(drawn, dtype=POSITION_DTYPE)
            root_end = xp.full(1, ridx.shape[0], dtype=POSITION_DTYPE)
        else:
            positions = None
            ridx, root_end = rows_drawn_first(drawn)
        root = _Frontier.root(self.comm.allreduce(gradient_sums(gpair, scales)[None, :]), root_end,
                              bounded=self.monotone is not None, sets=self.sets)
        return gpair, scales, positions, ridx, root

    def _splits(self, frontier: "_Frontier", hist, scales, tree_index: int, depth, slots=None) -> SplitTable:
        """The coordinator's best split of each of the frontier's nodes, on every rank; ``depth``
        (an int, or one a node) and ``slots`` key the nodes' column draws (their slots in the
        level by default)."""
        allowed = None
        if self.comm.rank == 0:  # the features each node may split on: the coordinator's alone
            allowed = self._allowed(frontier, tree_index, depth, frontier.size if slots is None else slots)
        return find_splits(hist, frontier.node_sums, frontier.active, self.feature_of_bin,
                           self.matrix.bin_offsets, scales, self.rules, self.comm, allowed=allowed,
                           monotone=self.monotone, bounds=frontier.bounds, categories=self.categories)

    @property
    def category_words(self) -> int:
        """The int64 words of category bits a split table row carries (0 without categorical features)."""
        return 0 if self.categories is None else self.categories.n_words

    def _cap_leaves(self, splits: SplitTable, n_leaves):
        """``splits`` with no more splits than max_leaves leaves room for, taken in slot order
        (XGBoost's depthwise order), and the tree's leaves after them. ``n_leaves``: the
        leaves so far, a (1,) int64 array on the device (no host read)."""
        xp = get_xp(splits.table)
        budget = self.max_leaves - n_leaves
        keep = splits.valid & (xp.cumsum(splits.valid) <= budget)
        table = splits.table.copy()
        table[:, 0] = keep
        return SplitTable(table), n_leaves + keep.sum()

    def _allowed(self, frontier: "_Frontier", tree_index: int, depth, slots):
        """(size, n_features) bool on the device: the features column sampling and interaction
        constraints leave each of the frontier's nodes; None where every feature is left."""
        sampled = self.columns.level(tree_index, depth, slots)
        xp = get_xp(frontier.active)
        sampled = None if sampled is None else asarray(xp, sampled, bool)
        if frontier.paths is None:
            return sampled
        reached = frontier.paths.allowed(self.sets)
        return reached if sampled is None else reached & sampled

    def _children_rules(self, frontier: "_Frontier", splits: SplitTable, slot_of_rank, n_split, scales):
        """The next level's weight bounds (monotone constraints) and paths (interaction
        constraints): keyword arguments of ``_Frontier.children``."""
        bounds = paths = None
        if frontier.bounds is not None:
            bounds = child_bounds(splits.table, slot_of_rank, n_split, frontier.bounds, self.monotone, scales,
                                  self.rules)
        if frontier.paths is not None:
            paths = frontier.paths.children(self.sets, splits.table, slot_of_rank)
        return {"bounds": bounds, "paths": paths}

    @staticmethod
    def _places(ridx):
        """The places of ``ridx``: every row or the rows drawn; a tuple of each page's."""
        return tuple(int(rows.shape[0]) for rows in ridx) if isinstance(ridx, tuple) else int(ridx.shape[0])

    def _next_level_parents(self, splits: SplitTable, n_bins_total: int) -> int:
        """Slots for the next level's parents: exact on the host, else the upper bound (which
        reads nothing of the splits)."""
        bound = splits.n_nodes
        if get_xp(splits.table) is np or _children_bytes(bound, n_bins_total) > HISTOGRAM_BUDGET_BYTES:
            return int(splits.valid.sum())
        return bound

    def reads_host(self) -> bool:
        """Whether a depthwise tree on the device reads the host: where its deepest level's
        upper bound is past HISTOGRAM_BUDGET_BYTES (``_next_level_parents``)."""
        deepest_parents = 2 ** (self.max_depth - 1) if self.max_depth > 0 else 0
        return _children_bytes(deepest_parents, int(self.matrix.host_bin_offsets[-1])) > HISTOGRAM_BUDGET_BYTES

    def _leaves_placed(self, left_child, ranges, ridx, positions):
        """``positions`` with each row at its leaf, from the tree's ``left_child`` by id (its
        levels' ids running on from 0) and ``ranges``, each level's ``(seg_begin, seg_end)``
        (tuples of each page's for a paged matrix): the rows of every node that did not split,
        whose range of ``ridx`` stayed put from its level on, at its id. One pass, with no host
        read."""
        xp = get_xp(positions)
        stops = left_child < 0
        ids = xp.arange(stops.shape[0], dtype=POSITION_DTYPE)

        def leaf_ranges(begins, ends):  # a splitting node's range emptied
            begin = join(begins)
            return begin, xp.where(stops, join(ends), begin)

        if isinstance(self.matrix, PagedMatrix):
            pages = [leaf_ranges([b[k] for b, _ in ranges], [e[k] for _, e in ranges]) for k in range(len(ridx))]
            begin, end = tuple(page[0] for page in pages), tuple(page[1] for page in pages)
        else:
            begin, end = leaf_ranges([b for b, _ in ranges], [e for _, e in ranges])
        return partition.place_leaves(self.matrix, ridx, positions, begin, end, ids)

    def _finish(self, levels, positions, scales, drawn=None, depth: int | None = None, ranges=None,
                ridx=None) -> GrownTree:
        """The grown tree (``depth``: its depth, by default its number of levels less one);
        with ``drawn`` rows, every row's leaf found by routing it (``positions`` None); else,
        given the levels' ``ranges`` of ``ridx``, every row put at its leaf (_leaves_placed)."""
        splits = SplitTable(join([level.splits.table for level in levels]))
        left_child = join([level.left_child for level in levels])
        if drawn is None and ranges is not None:
            positions = self._leaves_placed(left_child, ranges, ridx, positions)
        bounds = None if levels[0].bounds is None else join([level.bounds for level in levels])
        record, leaf_value = tree_record(join([level.node_sums for level in levels]),
                                         join([level.active for level in levels]), splits.table,
                                         left_child, scales, self.rules, self.eta, bounds)
        grown = GrownTree(splits, left_child, len(levels) - 1 if depth is None else depth, positions, leaf_value,
                          record)
        if drawn is not None:  # the rows left out stayed out of the tree: route every row
            grown = dataclasses.replace(grown, positions=grown.route(self.matrix))
        return grown


class PagedGrower:
    """A policy's grower over a paged matrix (data/pages.py), as the boosting loop calls it.

    A tree of a sample (row sampling) that fits the budget is grown in core: the
    sample's rows are gathered into one page on the device (``PagedMatrix.compact``),
    the tree grown from them as from an in-core matrix's drawn rows, and every row's
    leaf then found page by page. That pass also gathers the rows the next tree will
    likely draw (``sampler.likely``) from each page while it is on the device
    (``RowsAhead``): the next sample then crosses the bus only for the rows the guess
    missed, a few in ten thousand. A tree of every row, or of a sample too large to
    gather, streams the pages through the policy's own steps, level by level
    (depthwise and symmetric trees: one pass over the pages a level, its partition and
    the next level's histograms together, but for the root's histograms and the last
    level's partition). Either way the tree is the in-core one. Lossguide trees grow
    only from a gathered sample (make_grower refuses them without one).
    """

    #: Policies that stream pages level by level; the others grow only from a sample.
    STREAMS = ("depthwise", "symmetric")

    def __init__(self, grower: Grower, pages: PagedMatrix, streams: bool, sampler=None):
        self.grower = grower  # its matrix: the pages, but while it grows from a gathered page (_growing_on)
        self.pages = pages
        self.streams = streams
        self.sampler = sampler  # tree/sampling.py RowSampler, whose guess of the next sample is gathered ahead
        if sampler is not None:
            sampler.remembers = True
        self._ahead: RowsAhead | None = None  # this tree's likely rows, gathered by the last tree's pass
        self._page: SamplePage | None = None  # where they are gathered, made at the first guess (again if outgrown)
        self.graph = None  # a replay.RoundGraph the trees grown from the page run through, where they can
        # Whether this rank decides as its peers do (every rank's grower is paged and gathers its
        # guesses: agree_on_pages), so that their trees from the page are queued before the read
        # and may be replayed; one rank alone does.
        self.together = grower.comm.world_size == 1
        self._graphed: SamplePage | bool | None = None  # the page the graph's trees read (False: it was made again)

    @property
    def eta(self) -> float:
        return self.grower.eta

    @eta.setter
    def eta(self, value: float) -> None:
        self.grower.eta = value

    def grow(self, gpair, tree_index: int, drawn=None) -> GrownTree:
        grower = self.grower
        ahead, self._ahead = self._ahead, None
        if drawn is None:
            if not self.streams:
                raise RuntimeError(f"{type(grower).__name__} cannot stream pages: it grows from a sample")
            return grower.grow(gpair, tree_index)  # every row, from the pages
        xp = get_xp(gpair)
        drawn = _as_mask(drawn, self.pages.n_rows)
        # What the host needs, read once: the sample's size, the rows the guess missed, the next
        # guess's bounds, and how far this rank passes each limit (kernels.sample_sizes). Ranks growing
        # together take every rank's largest (one all-reduce, so each decides as the others do)
        # and read after the tree from the page is queued, while the last pass still runs: where
        # the guess missed more rows than the room, on any rank, every rank grows the tree again.
        # A rank growing alone reads before the tree (a tree grown again would call collectives
        # its peers do not).
        likely = None if self.sampler is None else self.sampler.likely(tree_index + 1)
        ahead = ahead if ahead is not None and ahead.complete else None
        sizes, missed = sample_sizes(drawn, None if ahead is None else ahead.likely, likely,
                                     self.pages.page_ends(xp), self._limits(0 if ahead is None else ahead.room))
        peers = self.together and grower.comm.world_size > 1
        read = start_read([sizes] + ([grower.comm.allreduce(sizes[-4:], "max")] if peers else []))
        late = ahead is not None and self.together  # the tree queued before the read
        if not late:
            values, passed = self._read(read)
        grown = None
        if ahead is not None and (late or passed[0] <= 0):
            grown = self._grow_page(ahead.sample(drawn, (missed, sizes[1:2]), gpair), tree_index)
        del ahead, missed
        if late:
            values, passed = self._read(read)
        n_drawn, bounds = values[0], values[2:]
        streamed = False  # here or, growing together, on a peer: then nothing is gathered ahead
        if grown is None or passed[0] > 0:
            grown = None  # the tree grown from the page, if any, goes first
            grown = self._grow_whole(gpair, tree_index, drawn, n_drawn)
            if grown.positions is not None:  # streamed: every row has its leaf
                return grown
            streamed = self.streams and passed[1] > 0
        upcoming = None
        if likely is not None and not streamed and passed[2] <= 0:
            if passed[3] > 0 and self._graphed is not None:
                self._graphed = False  # a page made again, here or on a peer: the graph read the last one
            next_room = ahead_room(bounds[-1])
            needed = bounds[-1] + next_room
            if self._page is None or self._page.capacity < needed:
                # A quarter more than the guess takes (a guess's size varies little), within the budget
                capacity = min(needed * 5 // 4, self.pages.budget // self.pages.layout.bytes_per_row)
                self._page = SamplePage.make(xp, capacity, self.pages.layout.n_words)
            upcoming = RowsAhead(self.pages, likely, bounds, next_room, self._page)
        positions = grown.route(self.pages, None if upcoming is None else upcoming.take)
        self._ahead = upcoming
        return dataclasses.replace(grown, positions=positions)

    def _limits(self, room: int) -> tuple:
        """kernels.sample_sizes's limits: the ``room`` for the rows the guess missed (beyond it
        the tree is grown again), the bytes of a row and the budget (a sample beyond it streams
        the pages; a next guess beyond it is not gathered), the sample page's rows (a next guess
        beyond them makes it again)."""
        capacity = 0 if self._page is None else self._page.capacity
        return room, self.pages.layout.bytes_per_row, self.pages.budget, capacity

    @staticmethod
    def _read(read) -> tuple[list, list]:
        """``grow``'s read, collected: the sample's sizes (the rows drawn, missed, then the next
        guess's bounds), and how far each limit is passed: every rank's largest where the
        ranks grow together (an all-reduce read beside), else this rank's."""
        host = read.result()
        values = host[0].tolist()
        return values[:-4], (host[1].tolist() if len(host) > 1 else values[-4:])

    def _grow_whole(self, gpair, tree_index: int, drawn, n_drawn: int) -> GrownTree:
        """The tree grown from the ``n_drawn`` rows ``drawn`` gathered now, or from the pages
        streamed where they exceed the budget (then with every row's leaf: ``positions``)."""
        if self.streams and not self.pages.fits(n_drawn):
            return self.grower.grow(gpair, tree_index, drawn)  # its matrix: the pages
        rows = mask_indices(drawn, n_drawn)
        with self._growing_on(self.pages.compact(rows)):
            return dataclasses.replace(self.grower.grow(gpair[rows], tree_index), positions=None)

    def _grow_page(self, matrix, tree_index: int) -> GrownTree:
        """The tree grown from the sample page (``matrix``, its pairs and rows drawn), through
        the graph where there is one and the page is the one it first ran with: the tree's
        arrays are then the graph's, which the next tree's replay writes over in stream order
        (its record, read after the round, is copied)."""
        page, grower = self._page, self.grower
        if self.graph is not None and self._graphed is None:
            self._graphed = page
        with self._growing_on(matrix):
            if page is not self._graphed:  # a graph reads the addresses it was made with
                return grower.grow(page.pairs, tree_index, page.drawn)
            grown = self.graph.run(lambda: grower.grow(page.pairs, tree_index, page.drawn), part="tree")
            return dataclasses.replace(grown, record=grown.record.copy())

    @contextlib.contextmanager
    def _growing_on(self, matrix):
        """The policy's grower grows from ``matrix`` within; the pages are its matrix again after
        (the gathered page goes before every row is routed)."""
        self.grower.matrix = matrix
        try:
            yield
        finally:
            self.grower.matrix = self.pages


def agree_on_pages(grower, sampler, comm) -> None:
    """Whether the paged growers of a job of several ranks grow together (``PagedGrower.together``):
    where every rank's grower is paged and gathers its guesses ahead. One host gather, on
    every rank of a job whose sampler guesses (a rank in core takes part too); a rank in core
    beside paged ones leaves each paged rank to decide alone."""
    if comm.world_size == 1 or sampler.likely_never:
        return
    mine = isinstance(grower, PagedGrower) and grower.sampler is not None
    shown = comm.allgather(np.array([mine], dtype=np.uint8))  # a host array: through the host
    if mine:
        grower.together = all(bool(theirs[0]) for theirs in shown)


def _as_mask(drawn, n_rows: int):
    """``drawn`` (a grower's rows drawn: a (n_rows,) bool mask or the rows' indices) as a mask."""
    if drawn.dtype == bool:
        return drawn
    mask = get_xp(drawn).zeros(n_rows, dtype=bool)
    mask[drawn] = True
    return mask
