"""Per-feature rules of split choice: monotone constraints (and, with them, each node's weight
bounds), resolved against the data's features.

``FeatureRules.resolve`` reads the parameters as the user gave them (by position or by
feature name) once the features are known, before any work, and raises a ValueError that
names the parameter, the bad value and the fix.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._dtypes import MONOTONE_DTYPE
from ..params import TrainParams


@dataclasses.dataclass(frozen=True)
class FeatureRules:
    """The resolved rules; None where a rule is not in use.

    monotone : array of shape (n_features,), int8 in {-1, 0, 1}, on the host: each
        feature's direction (1 increasing, -1 decreasing); None when no feature is
        constrained.
    """

    monotone: np.ndarray | None = None

    @classmethod
    def resolve(cls, params: TrainParams, n_features: int, feature_names=None) -> "FeatureRules":
        """The rules of ``params`` for ``n_features`` features named ``feature_names`` (or None)."""
        return cls(monotone=_monotone(params.monotone_constraints, n_features, feature_names))


def _monotone(value, n_features: int, feature_names) -> np.ndarray | None:
    """params.monotone_constraints (a tuple by position, or a tuple of (name, direction) pairs)
    as one direction per feature; None where every feature is free."""
    if value is None:
        return None
    directions = np.zeros(n_features, dtype=MONOTONE_DTYPE)
    if value and isinstance(value[0], tuple):  # by feature name
        for name, direction in value:
            directions[_feature_index("monotone_constraints", name, n_features, feature_names)] = direction
    else:
        if len(value) != n_features:
            raise ValueError(f"monotone_constraints has {len(value)} values but X has {n_features} features: "
                             "give one per feature (0 for none), or a dict by feature name")
        directions[:] = value
    return directions if directions.any() else None


def _feature_index(parameter: str, name, n_features: int, feature_names) -> int:
    """The index of a feature a parameter names: a name of ``feature_names``, or an index."""
    if isinstance(name, str):
        if feature_names is None or name not in feature_names:
            known = "X has no feature names: give a list by position" if feature_names is None else \
                f"X's features are {list(feature_names)[:8]}{'...' if len(feature_names) > 8 else ''}"
            raise ValueError(f"{parameter} names feature {name!r}, which is not one of X's features ({known})")
        return list(feature_names).index(name)
    if not 0 <= name < n_features:
        raise ValueError(f"{parameter} names feature index {name}, but X has {n_features} features "
                         f"(indices 0 to {n_features - 1})")
    return int(name)
