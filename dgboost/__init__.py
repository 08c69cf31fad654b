"""dgboost: gradient-boosted decision trees on many GPUs through Dask.

The single-process entry points live here, with the scikit-learn estimators
(``DGBRegressor``, ``DGBClassifier``, ``DGBRanker``; they need scikit-learn); ``dgboost.dask``
runs the same training loop on every worker of a Dask cluster.
"""

from ._version import __version__
from .booster import Booster
from .training import train

__all__ = ["Booster", "DGBClassifier", "DGBRanker", "DGBRegressor", "__version__", "train"]


def __getattr__(name: str):
    """The scikit-learn estimators load on first use: scikit-learn is an optional dependency."""
    if name in ("DGBClassifier", "DGBRanker", "DGBRegressor"):
        from . import sklearn

        return getattr(sklearn, name)
    raise AttributeError(f"module 'dgboost' has no attribute {name!r}")
