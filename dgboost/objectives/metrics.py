"""Evaluation metrics, reduced exactly over all ranks.

Each metric reduces per-rank partial sums (in fixed point, so the value does
not depend on how rows are split) or, for AUC, per-rank groups of tied
predictions that the coordinator merges: the global AUC, not a mean of
per-rank AUCs. Predictions arrive in output space (``eval_transform``).

A metric works in two halves so that a round reads the device once for all
its metrics: ``partial`` runs the collectives and leaves arrays of 8-byte
dtypes on the device; ``finish`` turns their host copies into the value.
"""

from __future__ import annotations

import math

import numpy as np

from .._dtypes import INDEX_DTYPE, STAT_DTYPE
from ..backend import column_reduce, get_xp, to_numpy, to_numpy_many
from ..fixed_point import SUM_HEADROOM_BITS, power_of_two_scale, to_fixed
from ..params import TrainParams
from ..reduce import device_count, exact_sums_partial, finish_exact_sums

#: Probabilities are clipped to [eps, 1 - eps] inside logarithms (XGBoost's 1e-16).
_EPS = 1e-16


class Metric:
    """A metric: ``metric(label, predictions, weight, comm) -> float``."""

    name: str
    maximize = False

    def __call__(self, label, predictions, weight, comm) -> float:
        return self.finish(to_numpy_many(self.partial(label, predictions, weight, comm)))

    def partial(self, label, predictions, weight, comm) -> list:
        """Device arrays (8-byte dtypes), reduced over all ranks, that ``finish`` needs."""
        raise NotImplementedError

    def finish(self, parts) -> float:
        """The metric from host copies of ``partial``'s arrays."""
        raise NotImplementedError


class _WeightedMean(Metric):
    """sum(w * loss) / sum(w), with ``loss`` per row from ``_loss``."""

    def __init__(self, params: TrainParams):
        self.params = params

    def partial(self, label, predictions, weight, comm):
        xp = get_xp(predictions)
        loss = self._loss(label.astype(STAT_DTYPE), predictions.astype(STAT_DTYPE), xp)
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        return exact_sums_partial(xp.stack([loss * weight, weight], axis=1), comm)

    def finish(self, parts):
        sum_loss, sum_weight = finish_exact_sums(parts)
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

    def __init__(self, params: TrainParams):
        super().__init__(params)
        self._label_terms = (None, None)  # (label, lgamma(label + 1)): an eval set's labels do not change

    def partial(self, label, predictions, weight, comm):
        if self._label_terms[0] is not label:
            self._label_terms = (label, _log_factorial(label.astype(STAT_DTYPE), get_xp(label)))
        return super().partial(label, predictions, weight, comm)

    def _loss(self, label, prediction, xp):
        p = xp.maximum(prediction, _EPS)
        return self._label_terms[1] + p - label * xp.log(p)


class AUC(Metric):
    """Area under the ROC curve, ties counted as half; multiclass: one-vs-rest,
    averaged with weights proportional to each class's weight (as XGBoost).
    NaN when an eval set lacks a positive or a negative row."""

    name = "auc"
    maximize = True

    def __init__(self, params: TrainParams):
        self.params = params

    def partial(self, label, predictions, weight, comm):
        xp = get_xp(predictions)
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        max_weight = comm.allreduce(column_reduce(weight, "max").reshape(1) if weight.size else xp.zeros(1), "max")
        scale = power_of_two_scale(max_weight, device_count(label.shape[0], comm, xp), SUM_HEADROOM_BITS)
        weight_fixed = to_fixed(weight, scale)
        columns = [predictions[:, None]] if predictions.ndim == 1 else \
            [predictions[:, [k]] for k in range(predictions.shape[1])]
        parts = []
        for k, score in enumerate(columns):
            positive = label == (1 if predictions.ndim == 1 else k)
            parts += _sorted_weights(score[:, 0], xp.where(positive, weight_fixed, 0),
                                     xp.where(positive, 0, weight_fixed), comm)
        return parts

    def finish(self, parts):
        if not parts:  # a rank other than the coordinator
            return math.nan
        areas, class_weights = zip(*(_binary_auc(*parts[k:k + 3]) for k in range(0, len(parts), 3)))
        if len(areas) == 1:
            return areas[0]
        areas, class_weights = np.array(areas), np.array(class_weights)
        present = class_weights > 0
        if not present.any():
            return math.nan
        return float(np.sum(areas[present] * class_weights[present]) / class_weights[present].sum())


def _sorted_weights(score, positive_weight, negative_weight, comm) -> list:
    """Every rank's (score, positive weight, negative weight) rows, gathered on the
    coordinator (as float64, int64, int64), each rank's sorted by score; [] elsewhere."""
    xp = get_xp(score)
    order = xp.argsort(score)
    columns = (score[order].astype(STAT_DTYPE), positive_weight[order], negative_weight[order])
    gathered = [comm.allgather(column) for column in columns]
    if comm.rank != 0:
        return []
    return [xp.concatenate(part) for part in gathered]


def _binary_auc(score, positive_weight, negative_weight):
    """(AUC, total positive weight) of one positive class from all ranks' rows (host arrays,
    each rank's sorted by score: one rank's need no second sort)."""
    if not np.all(score[1:] >= score[:-1]):
        order = np.argsort(score, kind="stable")
        score, positive_weight, negative_weight = score[order], positive_weight[order], negative_weight[order]
    _, positive_weight, negative_weight = _group_sums(score, [positive_weight, negative_weight], np)
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
