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
from ..kernels import group_order, rank_scores
from ..kernels.rank_loops import SCORE_MAP, SCORE_NDCG, SCORE_PRECISION
from ..params import RANKING_METRICS, TrainParams, parse_metric
from .ranking import QueryLayout
from ..reduce import device_count, exact_sums_partial, finish_exact_sums

#: Probabilities are clipped to [eps, 1 - eps] inside logarithms (XGBoost's 1e-16).
_EPS = 1e-16


class Metric:
    """A metric: ``metric(label, predictions, weight, comm) -> float``."""

    name: str
    maximize = False
    #: ``partial`` reads nothing of the host and copies nothing to the device: a GPU round
    #: that computes it may be replayed (dgboost/replay.py).
    replayable = False

    def __call__(self, label, predictions, weight, comm, group=None) -> float:
        return self.finish(to_numpy_many(self.partial(label, predictions, weight, comm, group)))

    def partial(self, label, predictions, weight, comm, group=None) -> list:
        """Device arrays (8-byte dtypes), reduced over all ranks, that ``finish`` needs.
        ``group``: the rows' query groups (``Dataset.group``), for the ranking metrics."""
        raise NotImplementedError

    def finish(self, parts) -> float:
        """The metric from host copies of ``partial``'s arrays."""
        raise NotImplementedError


def _per_eval_set(cache: dict, label, make):
    """``make()`` for the eval set whose labels are ``label``, made once (an eval set's labels do
    not change): ``cache`` maps id(label) to (label, value), the label kept so its id is not reused."""
    cached = cache.get(id(label))
    if cached is None or cached[0] is not label:
        cached = cache[id(label)] = (label, make())
    return cached[1]


class _WeightedMean(Metric):
    """sum(w * loss) / sum(w), with ``loss`` per row from ``_loss``."""

    replayable = True

    def __init__(self, params: TrainParams):
        self.params = params

    def partial(self, label, predictions, weight, comm, group=None):
        xp = get_xp(predictions)
        loss = self._loss(label.astype(STAT_DTYPE), predictions.astype(STAT_DTYPE), xp)
        if loss.ndim == 2:  # several targets: a row's loss is its targets' mean (XGBoost's)
            loss = loss.mean(axis=1)
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
        # Each side bounded by _EPS itself: 1 - 1e-16 rounds to 1 - 1.1e-16 in float64
        return -(label * xp.log(xp.maximum(prediction, _EPS)) + (1.0 - label) * xp.log(xp.maximum(1.0 - prediction,
                                                                                             _EPS)))


class BinaryError(_WeightedMean):
    """error, or error@t: a row counts as positive where its prediction is above t (0.5)."""

    name = "error"

    def __init__(self, params: TrainParams, threshold: float | None = None):
        super().__init__(params)
        self.threshold = 0.5 if threshold is None else threshold
        if threshold is not None:
            self.name = f"error@{threshold:g}"

    def _loss(self, label, prediction, xp):
        # XGBoost's: a row's error is the label's share on the other side (reg:logistic's labels in [0, 1])
        return xp.where(prediction > self.threshold, 1.0 - label, label)


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
        # id(label) -> (label, lgamma(label + 1)): an eval set's labels do not change; made once
        # each (a round of several eval sets reads the host for none of them).
        self._label_terms = {}
        self._terms = None  # the terms of the labels being evaluated

    def partial(self, label, predictions, weight, comm, group=None):
        self._terms = _per_eval_set(self._label_terms, label,
                                    lambda: _log_factorial(label.astype(STAT_DTYPE), get_xp(label)))
        return super().partial(label, predictions, weight, comm)

    def _loss(self, label, prediction, xp):
        p = xp.maximum(prediction, _EPS)
        return self._terms + p - label * xp.log(p)


class AUC(Metric):
    """Area under the ROC curve, ties counted as half; multiclass: one-vs-rest,
    averaged with weights proportional to each class's weight (as XGBoost).
    NaN when an eval set lacks a positive or a negative row."""

    name = "auc"
    maximize = True
    replayable = True

    def __init__(self, params: TrainParams):
        self.params = params
        # Each eval set's rows on every rank, gathered on the host once: a later round's
        # gathers of its scores then send no host message (a replayed round sends none).
        self._rows = {}

    def partial(self, label, predictions, weight, comm, group=None):
        xp = get_xp(predictions)
        rows = _per_eval_set(self._rows, label, lambda: [
            int(shown[0]) for shown in comm.allgather(np.array([label.shape[0]], dtype=np.int64))])
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        max_weight = comm.allreduce(column_reduce(weight, "max").reshape(1) if weight.size else xp.zeros(1), "max")
        scale = power_of_two_scale(max_weight, device_count(label.shape[0], comm, xp), SUM_HEADROOM_BITS)
        weight_fixed = to_fixed(weight, scale)
        columns = [predictions[:, None]] if predictions.ndim == 1 else \
            [predictions[:, k:k + 1] for k in range(predictions.shape[1])]  # slices: no index array copied
        parts = []
        for k, score in enumerate(columns):
            if predictions.ndim == 1:  # a row is positive by its label's share (reg:logistic's in [0, 1]), as XGBoost
                positive_fixed = to_fixed(weight * label.astype(STAT_DTYPE), scale)
            else:
                positive_fixed = xp.where(label == k, weight_fixed, 0)
            parts += _sorted_weights(score[:, 0], positive_fixed, weight_fixed - positive_fixed, comm, rows)
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


def _sorted_weights(score, positive_weight, negative_weight, comm, rows) -> list:
    """Every rank's (score, positive weight, negative weight) rows, gathered on the
    coordinator (as float64, int64, int64), each rank's sorted by score; [] elsewhere.
    ``rows``: every rank's count of them."""
    xp = get_xp(score)
    order = xp.argsort(score)
    columns = (score[order].astype(STAT_DTYPE), positive_weight[order], negative_weight[order])
    gathered = [comm.allgather(column, rows) for column in columns]
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


def _beside(label, prediction):
    """The label as a column beside a prediction of several outputs (quantile_alpha's), where
    each output is compared with it."""
    return label[:, None] if prediction.ndim == 2 and label.ndim == 1 else label


class MAPE(_WeightedMean):
    name = "mape"

    def _loss(self, label, prediction, xp):
        label = _beside(label, prediction)
        return xp.abs((label - prediction) / label)


class RMSLE(_WeightedMean):
    name = "rmsle"

    def _loss(self, label, prediction, xp):
        return (xp.log1p(_beside(label, prediction)) - xp.log1p(prediction)) ** 2

    def _finish(self, mean):
        return math.sqrt(mean)


class GammaNegLogLik(_WeightedMean):
    name = "gamma-nloglik"

    def _loss(self, label, prediction, xp):
        p = xp.maximum(prediction, 1e-6)
        return label / p + xp.log(p)


class GammaDeviance(_WeightedMean):
    name = "gamma-deviance"

    def _loss(self, label, prediction, xp):
        p, y = prediction + 1e-6, label + 1e-6
        return xp.log(p / y) + y / p - 1.0

    def _finish(self, mean):
        return 2.0 * float(mean)


class TweedieNegLogLik(_WeightedMean):
    """tweedie-nloglik@rho (``argument``; the objective's power where none is given)."""

    name = "tweedie-nloglik"

    def __init__(self, params, argument=None):
        super().__init__(params)
        self.rho = params.tweedie_variance_power if argument is None else argument
        self.name = f"tweedie-nloglik@{self.rho:g}"

    def _loss(self, label, prediction, xp):
        rho = self.rho
        log_p = xp.log(prediction)
        return -label * xp.exp((1.0 - rho) * log_p) / (1.0 - rho) + xp.exp((2.0 - rho) * log_p) / (2.0 - rho)


class Quantile(Metric):
    """The pinball loss of each quantile_alpha, weighted, averaged over the quantiles."""

    name = "quantile"

    def __init__(self, params: TrainParams):
        self.alphas = np.asarray(params.quantile_alpha or (0.5,), dtype=STAT_DTYPE)

    def partial(self, label, predictions, weight, comm, group=None):
        xp = get_xp(predictions)
        predictions = predictions.reshape(label.shape[0], -1).astype(STAT_DTYPE)
        residual = label.astype(STAT_DTYPE)[:, None] - predictions
        alphas = xp.asarray(self.alphas)[None, :]
        loss = xp.where(residual >= 0, alphas * residual, (alphas - 1.0) * residual).mean(axis=1)
        weight = xp.ones(label.shape[0], STAT_DTYPE) if weight is None else weight.astype(STAT_DTYPE)
        return exact_sums_partial(xp.stack([loss * weight, weight], axis=1), comm)

    def finish(self, parts):
        sum_loss, sum_weight = finish_exact_sums(parts)
        return float(sum_loss / sum_weight)


class AUCPR(AUC):
    """Area under the precision-recall curve, XGBoost's: precision interpolated between
    distinct scores (Davis and Goadrich); multiclass: the mean over classes."""

    name = "aucpr"

    def finish(self, parts):
        if not parts:
            return math.nan
        areas = [_binary_aucpr(*parts[k:k + 3]) for k in range(0, len(parts), 3)]
        return areas[0] if len(areas) == 1 else float(np.mean(areas))


def _binary_aucpr(score, positive_weight, negative_weight):
    if not np.all(score[1:] >= score[:-1]):
        order = np.argsort(score, kind="stable")
        score, positive_weight, negative_weight = score[order], positive_weight[order], negative_weight[order]
    _, positive_weight, negative_weight = _group_sums(score, [positive_weight, negative_weight], np)
    tp = np.cumsum(positive_weight[::-1]).astype(np.float64)  # descending scores
    fp = np.cumsum(negative_weight[::-1]).astype(np.float64)
    total_positive, total_negative = (tp[-1], fp[-1]) if tp.size else (0.0, 0.0)
    if total_positive <= 0 or total_negative <= 0:
        return math.nan
    tp_prev = np.concatenate([[0.0], tp[:-1]])
    fp_prev = np.concatenate([[0.0], fp[:-1]])
    recall, recall_prev = tp / total_positive, tp_prev / total_positive
    same = tp == tp_prev
    slope = np.where(same, 0.0, (fp - fp_prev) / np.where(same, 1.0, tp - tp_prev))
    a = np.where(same, 1.0, 1.0 + slope)
    b = np.where(same, 0.0, (fp_prev - slope * tp_prev) / total_positive)
    with np.errstate(divide="ignore", invalid="ignore"):
        curved = (recall - recall_prev - b / a * (np.log(a * recall + b) - np.log(a * recall_prev + b))) / a
    area = np.where(b != 0, curved, (recall - recall_prev) / a)
    return float(min(np.sum(area), 1.0))


class AFTNegLogLik(_WeightedMean):
    """aft-nloglik: survival:aft's loss (its margin in, XGBoost's), weighted mean."""

    name = "aft-nloglik"

    def _loss(self, label, prediction, xp):
        from .survival import AcceleratedFailureTime

        return AcceleratedFailureTime(self.params).loss(prediction, label)


class IntervalAccuracy(_WeightedMean):
    """interval-regression-accuracy: the weight of rows whose predicted time exp(margin) lies
    within their [lower, upper] bounds."""

    name = "interval-regression-accuracy"
    maximize = True

    def _loss(self, label, prediction, xp):
        time = xp.exp(prediction)
        return ((label[:, 0] <= time) & (time <= label[:, 1])).astype(STAT_DTYPE)


class CoxNegLogLik(Metric):
    """cox-nloglik: the partial likelihood over every rank's rows (gathered; XGBoost's, unweighted)."""

    name = "cox-nloglik"

    def __init__(self, params: TrainParams):
        self.params = params

    def partial(self, label, predictions, weight, comm, group=None):
        from .survival import cox_negative_log_likelihood

        xp = get_xp(predictions)
        times = np.concatenate([to_numpy(p) for p in comm.allgather(label)]).astype(np.float64)
        hazard = np.concatenate([to_numpy(p) for p in comm.allgather(predictions)]).astype(np.float64)
        return [xp.asarray(np.array([cox_negative_log_likelihood(times, hazard)]))]

    def finish(self, parts):
        return float(parts[0][0])


class RankingMetric(Metric):
    """ndcg, map and pre, each "@k" (the first k documents of a query by the model's order)
    and "-" (a query with no relevant document scores 0, not 1): a query's score, weighted by
    its weight, averaged over all queries of every rank (each query whole on one rank). As in
    XGBoost, a query with nothing relevant adds its NDCG of 1 unweighted (its weight still divides)."""

    maximize = True

    def __init__(self, params: TrainParams, base: str, k: int | None, minus: bool):
        self.name = base + (f"@{k}" if k is not None else "") + ("-" if minus else "")
        self.kind = {"ndcg": SCORE_NDCG, "map": SCORE_MAP, "pre": SCORE_PRECISION}[base]
        self.k, self.minus, self.exp_gain = k, minus, params.ndcg_exp_gain
        self._layouts = {}  # id(label) -> (label, QueryLayout): an eval set's queries and labels do not change

    def partial(self, label, predictions, weight, comm, group=None):
        xp = get_xp(predictions)
        layout = _per_eval_set(self._layouts, label, lambda: QueryLayout(group, label))
        order = group_order(predictions.astype(np.float32), layout.group_of_row)
        top_k = self.k if self.k is not None else max(layout.longest, 1)
        scores = rank_scores(layout.ptr, self.kind, order, layout.ideal, label, top_k, self.exp_gain, self.minus,
                             layout.discount)
        first = layout.ptr[:-1]
        group_weight = xp.ones(first.shape[0], STAT_DTYPE) if weight is None else weight[first].astype(STAT_DTYPE)
        weighted = scores * group_weight
        if self.kind == SCORE_NDCG:  # XGBoost's: a query with nothing relevant adds its 1 (or 0) unweighted
            weighted = xp.where(label[layout.ideal[first]] > 0, weighted, scores)
        return exact_sums_partial(xp.stack([weighted, group_weight], axis=1), comm)

    def finish(self, parts):
        total, weight = finish_exact_sums(parts)
        return float(total / weight) if weight > 0 else math.nan


_METRICS = {m.name: m for m in (RMSE, MAE, MeanPseudoHuberError, LogLoss, BinaryError, AUC, AUCPR,
                                 MultiLogLoss, MultiError, PoissonNegLogLik, MAPE, RMSLE, GammaNegLogLik,
                                 GammaDeviance, TweedieNegLogLik, Quantile, AFTNegLogLik, IntervalAccuracy,
                                 CoxNegLogLik)}


def make_metric(name: str, params: TrainParams) -> Metric:
    """The metric called ``name`` (validated by params.py; "@" and "-" forms parsed there)."""
    base, argument, minus = parse_metric(name)
    if base in RANKING_METRICS:
        return RankingMetric(params, base, argument, minus)
    if base == "tweedie-nloglik":
        return TweedieNegLogLik(params, argument)
    if base == "error":
        return BinaryError(params, argument)
    return _METRICS[base](params)


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the metric ``name`` is better (early stopping maximises it)."""
    try:
        base, _, _ = parse_metric(name)
    except ValueError:
        return False
    return base in RANKING_METRICS or (base in _METRICS and _METRICS[base].maximize)
