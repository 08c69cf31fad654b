"""Symmetric (oblivious) growth, CatBoost's trees (``grow_policy="symmetric"``): every node
of a level splits by one split, the one whose summed score over the level's nodes is the
largest, so a tree of depth d has 2**d leaves and a row's leaf is d bits, one a level."""

from __future__ import annotations

from .depthwise import DepthwiseGrower
from .split import SplitTable, coordinated
from ..backend import asarray, get_xp
from ..kernels import evaluate_level_split


class SymmetricGrower(DepthwiseGrower):
    """Depthwise growth whose levels share one split (kernels.evaluate_level_split), chosen by
    the coordinator. A child too light, or empty, gains nothing and still is a leaf, with
    weight 0 where it holds no rows. Column sampling draws one set of features a level:
    the tree's, the level's, and (colsample_bynode) the level's first node's."""

    def _level_splits(self, frontier, hist, scales, tree_index: int, depth: int) -> SplitTable:
        xp = get_xp(hist)

        def evaluate():
            sampled = self.columns.level(tree_index, depth, 1)
            allowed = None if sampled is None else asarray(xp, sampled[0], bool)
            return evaluate_level_split(hist, frontier.node_sums, frontier.active, self.feature_of_bin,
                                        self.matrix.host_bin_offsets, scales, self.rules, allowed)

        return coordinated(evaluate, hist.shape[0], xp, self.comm)
