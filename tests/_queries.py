"""Query ids for the ranking tests: uneven queries, contiguous and ascending."""

from __future__ import annotations

import numpy as np


def uneven_queries(rng, n_rows: int, largest: int) -> np.ndarray:
    """Query ids 0, 1, ... of ``n_rows`` rows, each query of 1 to ``largest - 1`` rows (drawn
    from ``rng``), the last cut to fit."""
    sizes = rng.integers(1, largest, n_rows)
    sizes = sizes[: int(np.searchsorted(np.cumsum(sizes), n_rows)) + 1]
    sizes[-1] -= int(sizes.sum()) - n_rows
    return np.repeat(np.arange(sizes.shape[0]), sizes)
