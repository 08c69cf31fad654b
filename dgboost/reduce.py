"""Reductions over all ranks whose results do not depend on the partitioning.

Sums of real values go through fixed point (fixed_point.py), so a metric or an
estimated base score is bit-for-bit the same on one worker or ten.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import EXACT_SUM_DTYPE, STAT_DTYPE
from .backend import get_xp, to_numpy
from .fixed_point import SUM_HEADROOM_BITS, from_fixed, power_of_two_scale, to_fixed


def global_count(n_local: int, comm, xp=np) -> int:
    """The number of rows over all ranks."""
    return int(to_numpy(comm.allreduce(xp.asarray([n_local], dtype=EXACT_SUM_DTYPE), "sum"))[0])


def exact_sums(columns, comm) -> np.ndarray:
    """Column sums over all ranks' rows, exact to 2**-62 of their bound, order-free.

    Parameters
    ----------
    columns : array of shape (n_rows, k), float64, on any device
    comm : Communicator

    Returns
    -------
    array of shape (k,), float64, on the host. Non-finite inputs give non-finite sums.
    """
    xp = get_xp(columns)
    n_local, k = columns.shape
    max_abs = xp.abs(columns).max(axis=0) if n_local else xp.zeros(k, dtype=STAT_DTYPE)
    max_abs = comm.allreduce(max_abs, "max")
    n_total = global_count(n_local, comm, xp)
    if not bool(xp.isfinite(max_abs).all()):
        return to_numpy(comm.allreduce(columns.sum(axis=0), "sum"))
    scale = power_of_two_scale(max_abs, n_total, SUM_HEADROOM_BITS)
    sums = comm.allreduce(to_fixed(columns, scale).sum(axis=0), "sum")
    return to_numpy(from_fixed(sums, scale))
