"""Per-feature rules of split choice: monotone constraints (and, with them, each node's weight
bounds) and interaction constraints (and, with them, each node's path), resolved against the
data's features.

``FeatureRules.resolve`` reads the parameters as the user gave them (by position or by
feature name) once the features are known, before any work, and raises a ValueError that
names the parameter, the bad value and the fix.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._dtypes import GAIN_DTYPE, MONOTONE_DTYPE
from ..backend import get_xp, to_numpy
from ..data.inputs import check_numeric_dtype
from ..params import TrainParams


@dataclasses.dataclass(frozen=True)
class FeatureRules:
    """The resolved rules; None where a rule is not in use.

    monotone : array of shape (n_features,), int8 in {-1, 0, 1}, on the host: each
        feature's direction (1 increasing, -1 decreasing); None when no feature is
        constrained.
    interaction_sets : array of shape (n_sets, n_features), bool, on the host: the
        features of each set of interaction_constraints; None without them.
    feature_weights : array of shape (n_features,), float64, on the host: column sampling's
        weights (``feature_weights`` of ``train``); None: all equal.
    """

    monotone: np.ndarray | None = None
    interaction_sets: np.ndarray | None = None
    feature_weights: np.ndarray | None = None

    @classmethod
    def resolve(cls, params: TrainParams, n_features: int, feature_names=None,
                feature_weights=None) -> "FeatureRules":
        """The rules of ``params`` for ``n_features`` features named ``feature_names`` (or None),
        and ``feature_weights`` (array-like, or None) checked."""
        return cls(monotone=_monotone(params.monotone_constraints, n_features, feature_names),
                   interaction_sets=_interaction_sets(params.interaction_constraints, n_features, feature_names),
                   feature_weights=_feature_weights(feature_weights, n_features))


    def with_combinations(self, pairs) -> "FeatureRules":
        """The rules with a feature appended for each pair (a, b) of features combined (categorical
        target statistics): unconstrained, in the interaction sets holding both, weighted as the
        mean of the two."""
        if not pairs:
            return self
        a, b = (np.array(side, dtype=np.int64) for side in zip(*pairs))
        monotone = None if self.monotone is None else np.concatenate(
            [self.monotone, np.zeros(len(pairs), MONOTONE_DTYPE)])
        sets = None if self.interaction_sets is None else np.concatenate(
            [self.interaction_sets, self.interaction_sets[:, a] & self.interaction_sets[:, b]], axis=1)
        weights = None if self.feature_weights is None else np.concatenate(
            [self.feature_weights, (self.feature_weights[a] + self.feature_weights[b]) / 2])
        return FeatureRules(monotone, sets, weights)


@dataclasses.dataclass(frozen=True)
class Paths:
    """Each node's path under interaction constraints (XGBoost's rule): a node may split on
    the features split on along its path, and on every feature of each set holding all of
    them; the root, on any feature. Arrays of a level's slots, on the device.

    used : (n_slots, n_features) bool: the features the path split on
    compatible : (n_slots, n_sets) bool: the sets holding all of them
    """

    used: object
    compatible: object

    @classmethod
    def root(cls, sets) -> "Paths":
        xp = get_xp(sets)
        return cls(xp.zeros((1, sets.shape[1]), dtype=bool), xp.ones((1, sets.shape[0]), dtype=bool))

    def allowed(self, sets):
        """(n_slots, n_features) bool: the features each node may split on."""
        reached = (self.compatible[:, :, None] & sets[None, :, :]).any(axis=1)
        return self.used | reached | ~self.used.any(axis=1, keepdims=True)  # nothing used yet: the root

    def children(self, sets, table, slot_of_rank) -> "Paths":
        """The paths of the next level's sibling pairs, one pair per parent rank (the table's
        split feature added to the parent's path)."""
        xp = get_xp(sets)
        feature = table[slot_of_rank, 1]
        used = self.used[slot_of_rank] | (xp.arange(sets.shape[1])[None, :] == feature[:, None])
        compatible = self.compatible[slot_of_rank] & sets[:, feature].T
        return Paths(xp.repeat(used, 2, axis=0), xp.repeat(compatible, 2, axis=0))


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


def _feature_weights(value, n_features: int) -> np.ndarray | None:
    """``feature_weights`` as float64, checked: one finite weight >= 0 per feature, not all 0."""
    if value is None:
        return None
    weights = np.asarray(to_numpy(value))
    check_numeric_dtype(weights.dtype, "feature_weights")
    weights = weights.astype(GAIN_DTYPE)
    if weights.shape != (n_features,):
        raise ValueError(f"feature_weights has shape {weights.shape} but X has {n_features} features: give one "
                         "weight per feature")
    bad = np.flatnonzero(~np.isfinite(weights) | (weights < 0))
    if bad.size:
        raise ValueError(f"feature_weights[{bad[0]}]={float(weights[bad[0]])!r}: weights must be finite and >= 0")
    if not weights.any():
        raise ValueError("feature_weights are all 0: give some feature a positive weight")
    return weights


def _interaction_sets(value, n_features: int, feature_names) -> np.ndarray | None:
    """params.interaction_constraints as a (n_sets, n_features) bool matrix, or None."""
    if value is None:
        return None
    sets = np.zeros((len(value), n_features), dtype=bool)
    for index, group in enumerate(value):
        for feature in group:
            sets[index, _feature_index(f"interaction_constraints[{index}]", feature, n_features, feature_names)] = True
    return sets


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
