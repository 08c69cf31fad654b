"""Evaluation metrics, reduced exactly over all ranks.

Each metric reduces per-rank partial sums (in fixed point, so the value does
not depend on how rows are split) or, for AUC, per-rank groups of tied
predictions that the coordinator merges: the global AUC, not a mean of
per-rank AUCs. Predictions arrive in output space (``eval_transform``).
"""

from __future__ import annotations

import math

import numpy as np

from ._dtypes import INDEX_DTYPE, STAT_DTYPE
from .backend import get_xp, to_numpy
from .fixed_point import SUM_HEADROOM_BITS, power_of_two_scale, to_fixed
from .params import TrainParams
from .reduce import exact_sums, global_count

#: Probabilities are clipped to [eps, 1 - eps] inside logarithms (XGBoost's 1e-16).
_EPS = 1e-16


class Metric:
    """A metric: ``metric(label, predictions, weight, comm) -> float``."""

    name: str
    maximize = False

    def __call__(self, label, predictions, weight, comm) -> float:
        raise NotImplementedError


class _WeightedMean(Metric):
    """sum(w * loss) / sum(w), with ``loss`` per row from ``_loss``."""

    def __init__(self, params: TrainParams):
        self.params = params

    def __call__(self, label, predictions, weight, comm):
        xp = get_xp(predictions)
        loss = self._loss(label.astype(STAT_DTYPE), predictions.astype(STAT_DTYPE), xp)
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        sum_loss, sum_weight = exact_sums(xp.stack([loss * weight, weight], axis=1), comm)
        return self._finish(sum_loss / sum_weight)

    def _finish(self, mean):
        return float(mean)


class RMSE(_WeightedMean):
    name = "rmse"

    def _loss(self, label, prediction, xp):
        return (prediction - label) ** 2

    def _finish(self, mean):
        return math.sqrt(mean)


class MAE(_WeightedMean):
    name = "mae"

    def _loss(self, label, prediction, xp):
        return xp.abs(prediction - label)


class MeanPseudoHuberError(_WeightedMean):
    name = "mphe"

    def _loss(self, label, prediction, xp):
        slope = self.params.huber_slope
        scaled = (prediction - label) / slope
        return slope * slope * (xp.sqrt(1.0 + scaled * scaled) - 1.0)


class LogLoss(_WeightedMean):
    name = "logloss"

    def _loss(self, label, prediction, xp):
        p = xp.clip(prediction, _EPS, 1.0 - _EPS)
        return -(label * xp.log(p) + (1.0 - label) * xp.log(1.0 - p))


class BinaryError(_WeightedMean):
    name = "error"

    def _loss(self, label, prediction, xp):
        return ((prediction > 0.5) != (label > 0.5)).astype(STAT_DTYPE)


class MultiLogLoss(_WeightedMean):
    name = "mlogloss"

    def _loss(self, label, prediction, xp):
        chosen = xp.take_along_axis(prediction, label.astype(INDEX_DTYPE)[:, None], axis=1)[:, 0]
        return -xp.log(xp.clip(chosen, _EPS, 1.0))


class MultiError(_WeightedMean):
    name = "merror"

    def _loss(self, label, prediction, xp):
        return (xp.argmax(prediction, axis=1) != label.astype(INDEX_DTYPE)).astype(STAT_DTYPE)


class PoissonNegLogLik(_WeightedMean):
    name = "poisson-nloglik"

    def _loss(self, label, prediction, xp):
        p = xp.maximum(prediction, _EPS)
        return _log_factorial(label, xp) + p - label * xp.log(p)


class AUC(Metric):
    """Area under the ROC curve, ties counted as half; multiclass: one-vs-rest,
    averaged with weights proportional to each class's weight (as XGBoost).
    NaN when an eval set lacks a positive or a negative row."""

    name = "auc"
    maximize = True

    def __init__(self, params: TrainParams):
        self.params = params

    def __call__(self, label, predictions, weight, comm):
        xp = get_xp(predictions)
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        max_weight = comm.allreduce(weight.max(keepdims=True) if weight.size else xp.zeros(1), "max")
        scale = power_of_two_scale(max_weight, global_count(label.shape[0], comm, xp), SUM_HEADROOM_BITS)
        if predictions.ndim == 1:
            return _binary_auc(label == 1, predictions, weight, scale, comm)[0]
        areas, class_weights = zip(*(_binary_auc(label == k, predictions[:, k], weight, scale, comm)
                                     for k in range(predictions.shape[1])))
        areas, class_weights = np.array(areas), np.array(class_weights)
        present = class_weights > 0
        if not present.any():
            return math.nan
        return float(np.sum(areas[present] * class_weights[present]) / class_weights[present].sum())


def _binary_auc(positive, score, weight, scale, comm):
    """(AUC, total positive weight) of one positive class, exact over ranks."""
    xp = get_xp(score)
    order = xp.argsort(score)
    score = score[order]
    weight_fixed = to_fixed(weight[order], scale)
    positive = positive[order]
    groups = _group_sums(score, [xp.where(positive, weight_fixed, 0),
                                 xp.where(positive, 0, weight_fixed)], xp)
    # The coordinator merges every rank's groups; with one rank this is the identity.
    gathered = [comm.allgather(group) for group in groups]
    if comm.rank != 0:
        return math.nan, 0.0
    score, positive_weight, negative_weight = (np.concatenate([to_numpy(g) for g in part])
                                               for part in gathered)
    order = np.argsort(score, kind="stable")
    _, positive_weight, negative_weight = _group_sums(score[order], [positive_weight[order],
                                                                     negative_weight[order]], np)
    total_positive, total_negative = positive_weight.sum(), negative_weight.sum()
    if total_positive == 0 or total_negative == 0:
        return math.nan, float(total_positive)
    # Ascending scores: each positive group beats the negatives below it and ties half.
    negative_below = np.cumsum(negative_weight) - negative_weight
    pos = positive_weight / float(total_positive)
    neg_below = negative_below / float(total_negative)
    neg_tied = negative_weight / float(total_negative)
    return float(np.sum(pos * (neg_below + 0.5 * neg_tied))), float(total_positive)


def _group_sums(sorted_score, columns, xp):
    """The distinct scores and each column's sums over their runs (int64, exact)."""
    if sorted_score.shape[0] == 0:
        return [sorted_score, *(column[:0] for column in columns)]
    last = xp.concatenate([sorted_score[1:] != sorted_score[:-1], xp.ones(1, dtype=bool)])
    ends = xp.nonzero(last)[0]
    out = [sorted_score[ends]]
    for column in columns:
        running = xp.cumsum(column)[ends]
        out.append(xp.concatenate([running[:1], running[1:] - running[:-1]]))
    return out


def _log_factorial(label, xp):
    """lgamma(label + 1), via the distinct labels (count data has few)."""
    distinct, inverse = xp.unique(label, return_inverse=True)
    values = np.array([math.lgamma(v + 1.0) for v in to_numpy(distinct).tolist()])
    return xp.asarray(values)[inverse.reshape(-1)]


_METRICS = {m.name: m for m in (RMSE, MAE, MeanPseudoHuberError, LogLoss, BinaryError, AUC,
                                 MultiLogLoss, MultiError, PoissonNegLogLik)}


def make_metric(name: str, params: TrainParams) -> Metric:
    """The metric called ``name`` (validated by params.py)."""
    return _METRICS[name](params)

#: Metrics for which a larger value is better (early stopping maximises them).
HIGHER_IS_BETTER = frozenset(name for name, metric in _METRICS.items() if metric.maximize)
