"""Split evaluation on the coordinator, broadcast to every rank as one table.

Rank 0 scores the candidates of a level (kernels.evaluate_splits) and sends a
SplitTable, packed into one int64 array, so a level costs one broadcast and
every rank applies exactly the coordinator's decisions.
"""

from __future__ import annotations

import functools

import numpy as np

from .._dtypes import GAIN_DTYPE, HIST_DTYPE, POSITION_DTYPE
from ..backend import get_xp
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
