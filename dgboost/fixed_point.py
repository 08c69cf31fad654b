"""Fixed-point quantisation: exact, order-independent sums of real values.

Floating-point addition is not associative, so a sum split across workers, or
added by GPU atomics in any order, can differ in its last bits. Integers do not
have that problem. Each value is scaled by a power of two ``scale`` and rounded
to an int64; sums of those integers are exact whatever the order.

The scale is the largest power of two with ``max|value| * n_total * scale <=
2**headroom_bits``, where ``max|value|`` and ``n_total`` are global (a max and a
count, both exact under any reduction), so every rank derives the same scale.
Any partial sum then stays within ``2**headroom_bits`` in magnitude. Histograms
use 52 bits: below 2**53 every partial sum is also exact in float64, which lets
the NumPy twin accumulate with ``bincount``; relative to ``max|value|`` a single
value keeps ``52 - log2(n_total)`` bits, finer than float32's 24 for any
data set below 2**28 rows.
"""

from __future__ import annotations

import functools

import numpy as np

from ._dtypes import EXACT_SUM_DTYPE, EXPONENT_DTYPE, INDEX_DTYPE, STAT_DTYPE
from .backend import column_reduce, get_xp, row_chunks

#: Headroom of histogram sums: exact in int64 and in float64 (see above).
HISTOGRAM_HEADROOM_BITS = 52
#: Headroom of other exact sums (metrics, base score): int64 arithmetic only.
SUM_HEADROOM_BITS = 62


def power_of_two_scale(max_abs, n_total: int, headroom_bits: int):
    """The quantisation scale for values bounded by ``max_abs``, summed over ``n_total`` rows.

    Parameters
    ----------
    max_abs : array of shape (k,), float64
        The global maximum absolute value of each of k quantities.
    n_total : int, or an int array of shape (1,) on ``max_abs``'s device
        Global number of values summed.
    headroom_bits : int

    Returns
    -------
    array of shape (k,), float64, on ``max_abs``'s device: powers of two.
    """
    xp = get_xp(max_abs)
    if xp is not np:  # the same steps in one launch (a tree's first; its host time counts on shallow trees)
        if get_xp(n_total) is xp:
            count = n_total.astype(STAT_DTYPE)
        else:
            count = STAT_DTYPE(n_total) if np.ndim(n_total) == 0 else xp.asarray(n_total, dtype=STAT_DTYPE)
        return _fused_scale()(max_abs, count, EXPONENT_DTYPE(headroom_bits))
    bound = max_abs.astype(STAT_DTYPE) * xp.maximum(xp.asarray(n_total, dtype=STAT_DTYPE), 1.0)
    # frexp: bound = m * 2**e with m in [0.5, 1), so bound < 2**e and
    # bound * 2**(headroom - e) < 2**headroom. The product's own rounding is
    # covered by that strict inequality's slack of at least one ulp.
    _, exponent = xp.frexp(bound)
    exponent = xp.clip(headroom_bits - exponent.astype(INDEX_DTYPE) - 1, -1000, 1000)
    return xp.ldexp(xp.ones_like(bound), exponent.astype(EXPONENT_DTYPE))


@functools.lru_cache(maxsize=1)
def _fused_scale():
    """power_of_two_scale's steps on a GPU: each exact (a product of two float64s, frexp, an
    integer clip, ldexp), so the scale is the NumPy program's bit for bit, an infinite or NaN
    bound's included."""
    import cupy

    return cupy.ElementwiseKernel(
        "T max_abs, float64 n_total, int32 headroom_bits", "float64 scale",
        """
        const double count = (double)n_total;
        const double bound = (double)max_abs * (count > 1.0 ? count : 1.0);
        int exponent = 0;  // NumPy's frexp of an infinite or NaN bound (CUDA leaves it unspecified)
        if (isfinite(bound)) frexp(bound, &exponent);
        long long shift = (long long)headroom_bits - exponent - 1;
        shift = shift < -1000 ? -1000 : (shift > 1000 ? 1000 : shift);
        scale = ldexp(1.0, (int)shift);
        """, "dgboost_power_of_two_scale", options=("--fmad=false",))


def to_fixed(values, scale):
    """``rint(values * scale)`` as int64, the product in float64; ``scale`` broadcasts
    against ``values``. On a GPU one fused kernel, with no float64 temporaries."""
    xp = get_xp(values)
    if xp is not np:
        return _fused_to_fixed()(values, xp.asarray(scale, dtype=STAT_DTYPE))
    return xp.rint(values.astype(STAT_DTYPE) * scale).astype(EXACT_SUM_DTYPE)


@functools.lru_cache(maxsize=1)
def _fused_to_fixed():
    import cupy

    return cupy.ElementwiseKernel("T value, float64 scale", "int64 fixed",
                                  "fixed = (long long)rint((double)value * scale)", "dgboost_to_fixed",
                                  options=("--fmad=false",))


def fixed_column_sums(values, scale, keep=None):
    """Column sums of ``to_fixed(values, scale)``: (n, k) -> (k,) int64, exact.

    Converts a chunk of rows at a time (backend.row_chunks), so no int64 copy of
    ``values`` is made. Where the boolean ``keep`` (broadcast against a chunk) is
    False, values count as 0.
    """
    xp = get_xp(values)
    sums = [column_reduce(to_fixed(chunk if keep is None else xp.where(keep, chunk, 0.0), scale), "sum")
            for chunk in row_chunks(values)]
    if not sums:
        return xp.zeros(values.shape[1:], dtype=EXACT_SUM_DTYPE)
    return sums[0] if len(sums) == 1 else xp.stack(sums).sum(axis=0)


def from_fixed(integers, scale):
    """The real values of fixed-point ``integers`` (float64)."""
    return integers.astype(STAT_DTYPE) / scale
