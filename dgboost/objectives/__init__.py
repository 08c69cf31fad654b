"""Objectives: gradients and hessians of each loss, the link, and the intercept.

``base.py`` holds the interface (``Objective``); ``regression.py``,
``classification.py``, ``ranking.py`` and ``survival.py`` the losses, by XGBoost's names;
``metrics.py`` the evaluation metrics beside them.
"""

from __future__ import annotations

from ..params import TrainParams
from .base import MultiTarget, Objective
from .classification import Hinge, Logistic, Softmax
from .ranking import LambdaRank
from .survival import AcceleratedFailureTime, Cox
from .regression import (AbsoluteError, Gamma, Poisson, PseudoHuberError, QuantileError, SquaredError, SquaredLogError,
                         Tweedie)

_OBJECTIVES = {
    "reg:squarederror": SquaredError,
    "reg:pseudohubererror": PseudoHuberError,
    "reg:squaredlogerror": SquaredLogError,
    "reg:absoluteerror": AbsoluteError,
    "reg:quantileerror": QuantileError,
    "reg:logistic": Logistic,
    "binary:logistic": Logistic,
    "binary:logitraw": Logistic,
    "binary:hinge": Hinge,
    "multi:softmax": Softmax,
    "multi:softprob": Softmax,
    "count:poisson": Poisson,
    "reg:gamma": Gamma,
    "reg:tweedie": Tweedie,
    "rank:ndcg": LambdaRank,
    "rank:pairwise": LambdaRank,
    "rank:map": LambdaRank,
    "survival:aft": AcceleratedFailureTime,
    "survival:cox": Cox,
}


def make_objective(params: TrainParams) -> Objective:
    """The objective named by ``params.objective`` (of ``params.num_target`` targets)."""
    objective = _OBJECTIVES[params.objective](params)
    return MultiTarget(params, objective) if params.num_target and params.num_target > 1 else objective


__all__ = ["Objective", "make_objective"]
