"""dgboost: gradient-boosted decision trees on many GPUs through Dask.

The single-process entry points live here; ``dgboost.dask`` (a later layer)
runs the same training loop on every worker of a Dask cluster.
"""

from ._version import __version__
from .booster import Booster
from .training import train

__all__ = ["Booster", "__version__", "train"]
