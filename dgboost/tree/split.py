"""Split evaluation: every rank gets the same table of a level's splits.

Spread over the ranks (``FeatureSlices``, every policy but symmetric trees in a job of
several ranks): each rank receives the sums of its contiguous slice of the features'
histograms (a reduce-scatter), scores its slice's candidates (kernels.evaluate_splits)
and packs its best split of every node into a SplitTable row; the ranks' tables are
all-gathered and every rank keeps, node by node, the first largest gain in rank
order, which is the first largest in feature order (a NaN gain, which splits no node,
the first of them): the table one rank scoring every feature makes, bit for bit where
a node splits. On the coordinator
(``coordinated``: one rank, or symmetric trees, whose level split sums a
candidate's score over every node): rank 0 scores the level and broadcasts the
table, so a level costs one broadcast.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .._dtypes import BIN_OFFSET_DTYPE, GAIN_DTYPE, HIST_DTYPE, POSITION_DTYPE
from ..backend import asarray, get_xp
from ..kernels import SPLIT_TABLE_COLUMNS, Regularisation, evaluate_splits
from ..kernels.cpu import CategorySplits

_COLUMNS = len(SPLIT_TABLE_COLUMNS)


class SplitTable:
    """The chosen split of every node of a level, on the device.

    ``table`` is the packed (n_nodes, len(SPLIT_TABLE_COLUMNS)) int64 array the
    coordinator broadcasts; the columns are views or conversions of it, made
    when first asked for (each is an array operation). A node with ``valid``
    False does not split (a leaf, or a padding slot). ``left_sum`` and
    ``right_sum`` are the children's fixed-point (gradient, hessian) totals,
    shape (n_nodes, 2). A category-set split (bin -1) sends right the categories whose bits
    are set in ``categories``, the table's int64 words after its SPLIT_TABLE_COLUMNS (none
    without categorical features).
    """

    def __init__(self, table):
        self.table = table

    @property
    def n_nodes(self) -> int:
        return int(self.table.shape[0])

    @classmethod
    def empty(cls, n_nodes: int, xp, n_words: int = 0) -> "SplitTable":
        """A table where no node splits (the level at max_depth)."""
        return cls(xp.zeros((n_nodes, _COLUMNS + n_words), dtype=HIST_DTYPE))

    @property
    def categories(self):
        """Each node's category bits, as uint32 words (category ``c``: bit ``c % 32`` of word
        ``c // 32``), or None without categorical features: what the kernels read."""
        if self.table.shape[1] == _COLUMNS:
            return None
        xp = get_xp(self.table)
        return xp.ascontiguousarray(self.table[:, _COLUMNS:]).view(xp.uint32)

    @functools.cached_property
    def valid(self):
        return self.table[:, 0] != 0

    @property
    def feature(self):
        return self._rule[0]

    @property
    def bin(self):
        return self._rule[1]

    @property
    def default_left(self):
        return self._rule[2]

    @functools.cached_property
    def _rule(self):
        """(feature, bin, default_left): what partitioning and routing read, (n_nodes,) int32,
        int32 and bool; on a GPU made in one launch (a level's partition needs all three)."""
        xp = get_xp(self.table)
        if xp is not np:
            return _split_rule()(self.table[:, 1], self.table[:, 2], self.table[:, 3])
        return (self.table[:, 1].astype(POSITION_DTYPE), self.table[:, 2].astype(POSITION_DTYPE),
                self.table[:, 3] != 0)

    @functools.cached_property
    def gain(self):
        return self.table[:, 4].copy().view(GAIN_DTYPE)

    @property
    def left_sum(self):
        return self.table[:, 5:7]

    @property
    def right_sum(self):
        return self.table[:, 7:9]


@functools.lru_cache(maxsize=1)
def _split_rule():
    import cupy

    return cupy.ElementwiseKernel("int64 feature_in, int64 bin_in, int64 default_in",
                                  "int32 feature, int32 bin, bool default_left",
                                  "feature = (int)feature_in; bin = (int)bin_in; default_left = default_in != 0",
                                  "dgboost_split_rule")


def find_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales,
                rules: Regularisation, comm, allowed=None, monotone=None, bounds=None,
                categories: CategorySplits | None = None) -> SplitTable:
    """The coordinator's best split of every node, as every rank receives it (``allowed``,
    ``monotone``, ``bounds``, ``categories``: see kernels.evaluate_splits)."""
    return coordinated(lambda: evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules,
                                               allowed, monotone, bounds, categories), hist.shape[0], get_xp(hist),
                       comm, 0 if categories is None else categories.n_words)


def coordinated(evaluate, n_nodes: int, xp, comm, n_words: int = 0) -> SplitTable:
    """The table ``evaluate()`` packs on the coordinator, as every rank receives it (``n_words``:
    its words of category bits)."""
    packed = evaluate() if comm.rank == 0 else xp.empty((n_nodes, _COLUMNS + n_words), dtype=HIST_DTYPE)
    return SplitTable(comm.broadcast(packed, root=0))


@dataclasses.dataclass(frozen=True)
class FeatureSlices:
    """Split evaluation spread over a job's ranks: rank r scores the features
    ``[features[r], features[r + 1])``, whose bins are ``[bins[r], bins[r + 1])`` of a level's
    histograms, the slices' bins as even as whole features allow.

    ``reduce`` sums a level's histograms over the ranks, each rank receiving its slice
    (what the grower then keeps, subtracts from and scores: a rank holds 1 / n of the
    histograms); ``find_splits`` scores the slice and merges the ranks' best splits.
    """

    rank: int
    features: tuple  # every rank's first feature, then the features' count
    bins: tuple  # every rank's first bin, then the bins' count
    feature_of_bin: object  # (this slice's bins,) int32 on the device: its features counted from its first
    bin_offsets: object  # (this slice's features + 1,) int64 on the device: its bins counted from its first
    monotone: object  # (this slice's features,) int8 on the device, or None
    categories: CategorySplits | None  # its categorical features counted from its first, or None

    @classmethod
    def of(cls, bin_offsets: np.ndarray, comm, xp, monotone=None,
           categories: CategorySplits | None = None) -> "FeatureSlices | None":
        """The ranks' slices of the features of ``bin_offsets`` (the matrix's, on the host);
        None where there is nothing to spread: one rank, or fewer features with bins than
        ranks."""
        n = comm.world_size
        bin_offsets = np.asarray(bin_offsets, dtype=np.int64)
        n_features = len(bin_offsets) - 1
        if n < 2 or np.count_nonzero(np.diff(bin_offsets)) < n:
            return None
        # Rank r starts at the feature whose first bin is nearest r / n of them (the first of
        # equals), each rank keeping a feature at least.
        targets = np.arange(1, n) * bin_offsets[-1] / n
        starts = np.abs(bin_offsets[None, :-1] - targets[:, None]).argmin(axis=1)
        features = [0]
        for r, start in enumerate(starts, start=1):
            features.append(int(min(max(start, features[-1] + 1), n_features - (n - r))))
        features.append(n_features)
        rank = comm.rank
        first, end = features[rank], features[rank + 1]
        offsets = bin_offsets[first:end + 1] - bin_offsets[first]
        local = None
        if categories is not None:
            chosen = np.asarray(categories.features)
            chosen = chosen[(chosen >= first) & (chosen < end)] - first
            local = categories._replace(features=chosen.astype(POSITION_DTYPE))
        return cls(rank, tuple(features), tuple(int(bin_offsets[f]) for f in features),
                   asarray(xp, np.repeat(np.arange(end - first), np.diff(offsets)), POSITION_DTYPE),
                   asarray(xp, offsets, BIN_OFFSET_DTYPE),
                   None if monotone is None else monotone[first:end], local)

    @property
    def width(self) -> int:
        """The bins of the widest slice: each rank's block of a reduce-scatter."""
        return int(np.diff(self.bins).max())

    def reduce(self, hist, comm):
        """This rank's slice of ``hist`` (n_slots, n_bins_total, 2) summed over the ranks:
        (n_slots, this slice's bins, 2). Each rank's slice goes in a block of ``width`` bins."""
        xp = get_xp(hist)
        n_slots, width = hist.shape[0], self.width
        blocks = xp.empty((len(self.bins) - 1, n_slots, width, 2), dtype=HIST_DTYPE)
        for r, (begin, end) in enumerate(zip(self.bins[:-1], self.bins[1:])):
            blocks[r, :, :end - begin] = hist[:, begin:end]
            blocks[r, :, end - begin:] = 0  # read by no rank; summed all the same
        mine = comm.reduce_scatter(blocks)
        n_bins = self.bins[self.rank + 1] - self.bins[self.rank]
        return mine if n_bins == width else xp.ascontiguousarray(mine[:, :n_bins])

    def find_splits(self, hist, node_sums, active, scales, rules: Regularisation, comm, allowed=None,
                    bounds=None, n_words: int = 0) -> SplitTable:
        """The best split of every node over every rank's slice, the same table on every rank
        (``hist``: this slice's, from ``reduce``; ``allowed``: every feature's columns, or
        None; ``bounds``: as evaluate_splits takes them; ``n_words``: the words of category
        bits a row carries)."""
        xp = get_xp(hist)
        first, end = self.features[self.rank], self.features[self.rank + 1]
        n_nodes = hist.shape[0]
        if hist.shape[1]:
            table = evaluate_splits(hist, node_sums, active, self.feature_of_bin, self.bin_offsets, scales, rules,
                                    None if allowed is None else allowed[:, first:end], self.monotone, bounds,
                                    self.categories)
            table[:, 1] += first  # its features counted from the slice's first
        else:  # no bins in this slice: no candidate (evaluate_splits' row for it)
            table = xp.zeros((n_nodes, _COLUMNS + n_words), dtype=HIST_DTYPE)
            table[:, 4] = int(np.array(-np.inf, dtype=GAIN_DTYPE).view(HIST_DTYPE))
            table[:, 7:9] = node_sums
        tables = comm.allgather(table, rows=[n_nodes] * comm.world_size)
        best, gain = tables[0], tables[0][:, 4].copy().view(GAIN_DTYPE)
        for other in tables[1:]:  # the first largest gain in rank order, which is feature order;
            other_gain = other[:, 4].copy().view(GAIN_DTYPE)  # a NaN gain (no split) wins, as in one table
            better = (other_gain > gain) | (xp.isnan(other_gain) & ~xp.isnan(gain))
            best, gain = xp.where(better[:, None], other, best), xp.where(better, other_gain, gain)
        return SplitTable(xp.ascontiguousarray(best))
