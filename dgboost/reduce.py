"""Reductions over all ranks whose results do not depend on the partitioning.

Sums of real values go through fixed point (fixed_point.py), so a metric or an
estimated base score is bit-for-bit the same on one worker or ten.

``exact_sums_partial`` does the collectives and leaves its results on the
device, so that a caller can read many reductions in one transfer
(backend.to_numpy_many) and finish them on the host with ``finish_exact_sums``.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import EXACT_SUM_DTYPE, STAT_DTYPE
from .backend import column_max_abs, column_reduce, get_xp, row_chunks, to_numpy, to_numpy_many
from .fixed_point import SUM_HEADROOM_BITS, fixed_column_sums, from_fixed, power_of_two_scale
from .kernels import cpu


def global_count(n_local: int, comm, xp=np) -> int:
    """The number of rows over all ranks."""
    return int(to_numpy(device_count(n_local, comm, xp))[0])


def device_count(n_local: int, comm, xp=np):
    """The number of rows over all ranks, as an int64 array of shape (1,) on ``xp``'s device."""
    return comm.allreduce(xp.full(1, n_local, dtype=EXACT_SUM_DTYPE), "sum")  # filled: no host copy


def exact_sums_partial(columns, comm) -> list:
    """The device half of exact_sums: [fixed-point sums, scales, plain sums, finite flag].

    Parameters
    ----------
    columns : array of shape (n_rows, k), float32 or float64, on any device
        Read a chunk of rows at a time (backend.row_chunks, in float64), so temporaries stay small.

    Returns
    -------
    list of arrays on ``columns``' device, every rank's rows reduced: int64 (k,),
    float64 (k,), float64 (k,), float64 (1,).
    """
    xp = get_xp(columns)
    max_abs = comm.allreduce(_column_bounds(columns, xp), "max")
    finite = xp.isfinite(max_abs).all(keepdims=True)
    # Non-finite columns are summed in floating point (the result is non-finite anyway, in
    # any order of the additions).
    safe = xp.where(finite, max_abs, 1.0)
    scale = power_of_two_scale(safe, device_count(columns.shape[0], comm, xp), SUM_HEADROOM_BITS)
    fixed, plain = _column_sums(columns, scale, finite, xp)
    return [comm.allreduce(fixed, "sum"), scale, comm.allreduce(plain, "sum"), finite.astype(STAT_DTYPE)]


def _column_bounds(columns, xp):
    """Each column's max |x| (float64, NaN where it holds one): a compiled pass on the host,
    chunked array programs on a GPU."""
    k = columns.shape[1]
    if xp is np:
        return cpu.host_column_bounds(columns).astype(STAT_DTYPE, copy=False)
    chunks = row_chunks(columns)
    if not chunks:
        return xp.zeros(k, dtype=STAT_DTYPE)
    return xp.stack([column_max_abs(chunk) for chunk in chunks]).max(axis=0).astype(STAT_DTYPE)


def _column_sums(columns, scale, finite, xp):
    """(fixed-point column sums, 0 unless ``finite``; plain float64 sums, read only where not
    ``finite``). On the host the one that is read is computed."""
    k = columns.shape[1]
    if xp is np:
        fixed, plain = np.zeros(k, dtype=EXACT_SUM_DTYPE), np.zeros(k, dtype=STAT_DTYPE)
        if finite[0]:
            fixed = cpu.host_fixed_sums(columns, scale).astype(EXACT_SUM_DTYPE, copy=False)
        else:
            plain = columns.sum(axis=0, dtype=STAT_DTYPE)
        return fixed, plain
    chunks = row_chunks(columns)
    plain = xp.stack([column_reduce(chunk.astype(STAT_DTYPE), "sum") for chunk in chunks]).sum(axis=0) \
        if chunks else xp.zeros(k, dtype=STAT_DTYPE)
    return fixed_column_sums(columns, scale, keep=finite), plain.astype(STAT_DTYPE)


def finish_exact_sums(parts) -> np.ndarray:
    """exact_sums' result from the host copies of exact_sums_partial's arrays."""
    fixed, scale, plain, finite = parts
    return from_fixed(fixed, scale) if finite[0] else np.asarray(plain, dtype=STAT_DTYPE)


def exact_sums(columns, comm) -> np.ndarray:
    """Column sums over all ranks' rows, exact to 2**-62 of their bound, order-free.

    Parameters
    ----------
    columns : array of shape (n_rows, k), float32 or float64, on any device
    comm : Communicator

    Returns
    -------
    array of shape (k,), float64, on the host. Non-finite inputs give non-finite sums.
    """
    return finish_exact_sums(to_numpy_many(exact_sums_partial(columns, comm)))
