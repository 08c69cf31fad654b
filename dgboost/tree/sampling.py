"""Row sampling before the histograms.

A sampled-out row keeps its place in the tree (it is still partitioned and its
margin still updated) but contributes a zero gradient pair, as in XGBoost. The
draw for a row depends on (seed, tree, global row index) only.
"""

from __future__ import annotations

from .._hashing import STREAM_ROW_SUBSAMPLE, stream_key, uniform
from ..backend import get_xp
from ..data import RowSpans


def subsample_rows(gpair, rate: float, seed: int, tree_index: int, rows: RowSpans):
    """``gpair`` with the rows left out of this tree's sample set to zero.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32
    rate : float in (0, 1]; 1 returns ``gpair`` itself
    tree_index : int, the tree's index in the model (round * n_outputs + output)
    rows : RowSpans, the global indices of this rank's rows
    """
    if rate >= 1.0:
        return gpair
    xp = get_xp(gpair)
    index = rows.global_index(xp)
    keep = uniform(index, stream_key(seed, STREAM_ROW_SUBSAMPLE, tree_index)) < rate
    return xp.where(keep[:, None], gpair, gpair.dtype.type(0))
