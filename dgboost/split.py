"""Split evaluation on the coordinator, broadcast to every rank as one table.

Rank 0 scores the candidates of a level (kernels.evaluate_splits) and sends a
SplitTable, packed into one int64 array, so a level costs one broadcast and
every rank applies exactly the coordinator's decisions.
"""

from __future__ import annotations

import dataclasses

from ._dtypes import GAIN_DTYPE, HIST_DTYPE, POSITION_DTYPE
from .backend import get_xp
from .kernels import SPLIT_TABLE_COLUMNS, Regularisation, evaluate_splits

_COLUMNS = len(SPLIT_TABLE_COLUMNS)


@dataclasses.dataclass(frozen=True)
class SplitTable:
    """The chosen split of every node of a level (arrays of length n_nodes, on device).

    A node with ``valid`` False does not split (a leaf, or a padding slot).
    ``left_sum`` and ``right_sum`` are the children's fixed-point (gradient,
    hessian) totals, shape (n_nodes, 2).
    """

    valid: object
    feature: object
    bin: object
    default_left: object
    gain: object
    left_sum: object
    right_sum: object
    table: object  # the packed (n_nodes, len(SPLIT_TABLE_COLUMNS)) int64 array all of the above view

    @property
    def n_nodes(self) -> int:
        return int(self.valid.shape[0])

    @classmethod
    def empty(cls, n_nodes: int, xp) -> "SplitTable":
        """A table where no node splits (the level at max_depth)."""
        return cls.unpack(xp.zeros((n_nodes, _COLUMNS), dtype=HIST_DTYPE))

    @classmethod
    def unpack(cls, packed) -> "SplitTable":
        return cls(valid=packed[:, 0] != 0, feature=packed[:, 1].astype(POSITION_DTYPE),
                   bin=packed[:, 2].astype(POSITION_DTYPE), default_left=packed[:, 3] != 0,
                   gain=packed[:, 4].copy().view(GAIN_DTYPE), left_sum=packed[:, 5:7],
                   right_sum=packed[:, 7:9], table=packed)


def find_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales,
                rules: Regularisation, comm) -> SplitTable:
    """The coordinator's best split of every node, as every rank receives it."""
    xp = get_xp(hist)
    if comm.rank == 0:
        packed = evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules)
    else:
        packed = xp.empty((hist.shape[0], _COLUMNS), dtype=HIST_DTYPE)
    return SplitTable.unpack(comm.broadcast(packed, root=0))
