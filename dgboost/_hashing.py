"""Counter-based random numbers keyed by global row index.

A row's draw depends on (seed, stream, round, global row index) only, never on
which worker holds the row or in which order rows arrive: that is what makes the
cut sample and row sampling independent of the partitioning. The mixer is
splitmix64 (Steele, Lea & Flood 2014), whose output passes BigCrush.
"""

from __future__ import annotations

from ._dtypes import HASH_DTYPE, ROW_INDEX_DTYPE, STAT_DTYPE

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB

#: Independent streams of draws, so two uses of one seed never correlate.
STREAM_CUT_SAMPLE = 1
STREAM_ROW_SUBSAMPLE = 2
STREAM_COLUMNS_BY_TREE = 3
STREAM_COLUMNS_BY_LEVEL = 4
STREAM_COLUMNS_BY_NODE = 5
STREAM_TARGET_STATISTICS = 6
STREAM_RANK_PAIRS = 7


def _splitmix64_int(x: int) -> int:
    z = (x + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _MIX1) & _MASK64
    z = ((z ^ (z >> 27)) * _MIX2) & _MASK64
    return z ^ (z >> 31)


def stream_key(seed: int, stream: int, round_index: int = 0) -> int:
    """A 64-bit key for one stream of one round, mixed on the host."""
    return tree_key(stream_base(seed, stream), round_index)


def stream_base(seed: int, stream: int) -> int:
    """What keys a stream's rounds: ``stream_key`` is ``tree_key(stream_base(seed, stream), round)``
    (a kernel given the round on the device mixes the last step itself)."""
    return _splitmix64_int(_splitmix64_int(seed) ^ stream)


def tree_key(base: int, round_index: int) -> int:
    """The key of round (or tree) ``round_index`` of the stream ``base`` keys."""
    return _splitmix64_int(base ^ round_index)


def sub_key(key: int, index: int) -> int:
    """The key of the ``index``-th part of what ``key`` keys (a tree's level, a level's node)."""
    return _splitmix64_int(key ^ (index & _MASK64))


def uniform(global_index, key: int):
    """Uniform draws in [0, 1), one per global row index.

    Parameters
    ----------
    global_index : array of shape (n,), int64, on any device
    key : int
        From :func:`stream_key`.

    Returns
    -------
    array of shape (n,), float64, on ``global_index``'s device
    """
    z = global_index.astype(ROW_INDEX_DTYPE).view(HASH_DTYPE) + HASH_DTYPE(key)
    z = z + HASH_DTYPE(_GOLDEN)
    z = (z ^ (z >> HASH_DTYPE(30))) * HASH_DTYPE(_MIX1)
    z = (z ^ (z >> HASH_DTYPE(27))) * HASH_DTYPE(_MIX2)
    z = z ^ (z >> HASH_DTYPE(31))
    # The top 53 bits scaled by 2**-53: exactly representable, so the same on every device.
    return (z >> HASH_DTYPE(11)).astype(STAT_DTYPE) * (2.0**-53)
