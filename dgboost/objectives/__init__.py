"""Objectives: gradients and hessians of each loss, the link, and the intercept.

Gradients are computed in float32 from float32 margins, as in XGBoost, and
already include the sample weight. Every constant is a float32 scalar so that
numpy and cupy evaluate the same float32 operations.
"""

from __future__ import annotations

import numpy as np

from .._dtypes import GRADIENT_DTYPE, MARGIN_DTYPE, STAT_DTYPE
from ..backend import get_xp
from ..data.inputs import RowError
from ..params import TrainParams
from ..reduce import exact_sums

_F32 = GRADIENT_DTYPE
#: Smallest hessian of the probabilistic losses (XGBoost's kRtEps), so a
#: saturated row never gives a zero hessian.
_MIN_HESSIAN = _F32(1e-16)
#: Estimated probabilities and means are kept this far from 0 and 1 so their
#: link (logit, log) stays finite.
_MIN_PROBABILITY = 1e-6


class Objective:
    """One learning task. Subclasses define the loss; the base holds the plumbing."""

    name: str
    n_outputs = 1

    def __init__(self, params: TrainParams):
        self.params = params

    # -- labels and intercept -------------------------------------------------
    def check_labels(self, label, name: str) -> None:
        """Raise ValueError if ``label`` (finite, float32) does not fit this objective."""

    def link(self, base_score: float) -> np.ndarray:
        """The margin of an output-space ``base_score``, one per output: (n_outputs,) float32."""
        return np.full(self.n_outputs, base_score, dtype=MARGIN_DTYPE)

    def estimate_base_score(self, label, weight, comm) -> float:
        """The intercept in output space: the weighted label mean (XGBoost's estimate)."""
        weight = _weights_of(label, weight)
        sum_wy, sum_w = exact_sums(_columns(weight * label, weight), comm)
        return float(sum_wy / sum_w)

    def base_margin(self, label, weight, comm) -> np.ndarray:
        """Each output's starting margin: the given base_score's, else the estimate's."""
        base_score = self.params.base_score
        if base_score is None:
            base_score = self.estimate_base_score(label, weight, comm)
        return self.link(base_score)

    # -- training and prediction ----------------------------------------------
    def training_gradients(self, margins, label, weight):
        """``gradients`` as training computes them, the same bits: on the host, a compiled
        loop on threads for the objectives that have one (``_loop_kind``), NumPy computing
        only their transcendental functions (``_loop_input``); elsewhere the array program
        (on the host, on one thread: on threads it was slower, its temporaries' pages
        faulted in at once, its threads meeting the compiled loops' spinning ones)."""
        if get_xp(margins) is not np or self._loop_kind is None:
            return self.gradients(margins, label, weight)
        from ..kernels import cpu

        return cpu.pair_gradients(self._loop_kind, self._loop_input(margins[:, 0]), label, weight,
                                  self._loop_parameter(), _MIN_HESSIAN)[:, None, :]

    #: loops.pair_gradients's kind of this objective, None for none.
    _loop_kind = None

    def _loop_input(self, margin):
        return margin

    def _loop_parameter(self) -> float:
        return 0.0

    def gradients(self, margins, label, weight):
        """Gradient pairs: (n_rows, n_outputs, 2) float32, weighted.

        margins : (n_rows, n_outputs) float32; label, weight : (n_rows,) float32 or None.
        """
        xp = get_xp(margins)
        gradient, hessian = self._gradients(margins[:, 0], label)
        gpair = xp.stack([gradient, hessian], axis=1)[:, None, :]
        return gpair if weight is None else gpair * weight[:, None, None]

    def _gradients(self, margin, label):
        raise NotImplementedError

    def transform(self, margins):
        """What ``predict`` returns for these margins (n_rows, n_outputs)."""
        return margins[:, 0]

    def eval_transform(self, margins):
        """What metrics receive: the transform, except where XGBoost differs (logitraw)."""
        return self.transform(margins)


class SquaredError(Objective):
    name = "reg:squarederror"
    _loop_kind = 0

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        return margin - label, xp.ones_like(margin)


class PseudoHuberError(Objective):
    """``delta**2 * (sqrt(1 + (z / delta)**2) - 1)`` with z = margin - label.

    The intercept is the weighted label mean. XGBoost takes one Newton step from
    0 instead, which overshoots when labels are large against delta (labels near
    140 give it 202); give base_score to reproduce XGBoost exactly.
    """

    name = "reg:pseudohubererror"
    _loop_kind = 1

    def _loop_parameter(self):
        return self.params.huber_slope

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        slope = _F32(self.params.huber_slope)
        residual = margin - label
        scaled = residual / slope
        curvature = _F32(1) + scaled * scaled
        root = xp.sqrt(curvature)
        return residual / root, _F32(1) / (curvature * root)


class Logistic(Objective):
    """reg:logistic, binary:logistic and binary:logitraw: log loss on sigmoid(margin)."""

    def __init__(self, params: TrainParams):
        super().__init__(params)
        self.name = params.objective

    def check_labels(self, label, name):
        xp = get_xp(label)
        if self.name == "reg:logistic":
            bad = (label < 0) | (label > 1)
            rule = "in [0, 1]"
        else:
            bad = (label != 0) & (label != 1)
            rule = "0 or 1"
        _raise_for_first(bad, label, name, f"labels must be {rule} for objective={self.name!r}", xp)

    def link(self, base_score):
        if self.name == "binary:logitraw":  # its output space is the margin (XGBoost's rule)
            return super().link(base_score)
        return np.full(1, _logit(base_score), dtype=MARGIN_DTYPE)

    def estimate_base_score(self, label, weight, comm):
        mean = super().estimate_base_score(label, self._positive_weighted(label, weight), comm)
        # binary:logitraw starts from the margin whose probability is the label mean.
        return _logit(mean) if self.name == "binary:logitraw" else mean

    _loop_kind = 2

    def gradients(self, margins, label, weight):
        return super().gradients(margins, label, self._positive_weighted(label, weight))

    def training_gradients(self, margins, label, weight):
        return super().training_gradients(margins, label, self._positive_weighted(label, weight))

    def _loop_input(self, margin):
        return np.exp(-margin)  # numpy's float32 exp, as _sigmoid

    def _positive_weighted(self, label, weight):
        """Weights with positive rows scaled by scale_pos_weight."""
        if self.params.scale_pos_weight == 1.0:
            return weight
        xp = get_xp(label)
        factor = xp.where(label == 1, _F32(self.params.scale_pos_weight), _F32(1))
        return factor if weight is None else weight * factor

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        probability = _sigmoid(margin)
        hessian = xp.maximum(probability * (_F32(1) - probability), _MIN_HESSIAN)
        return probability - label, hessian

    def transform(self, margins):
        return margins[:, 0] if self.name == "binary:logitraw" else _sigmoid(margins[:, 0])

    def eval_transform(self, margins):
        return _sigmoid(margins[:, 0])


class Softmax(Objective):
    """multi:softmax (predicts the class) and multi:softprob (predicts probabilities)."""

    def __init__(self, params: TrainParams):
        super().__init__(params)
        self.name = params.objective
        self.n_outputs = params.num_class

    def check_labels(self, label, name):
        xp = get_xp(label)
        bad = (label < 0) | (label >= self.n_outputs) | (label != xp.floor(label))
        _raise_for_first(bad, label, name, f"labels must be integers in [0, num_class={self.n_outputs})", xp)

    def estimate_base_score(self, label, weight, comm):
        raise AssertionError("multiclass intercepts are per class: see base_margin")

    def base_margin(self, label, weight, comm):
        if self.params.base_score is not None:
            return self.link(self.params.base_score)
        # Log class priors, centred: softmax of these margins is the weighted class frequency.
        xp = get_xp(label)
        weight = _weights_of(label, weight)
        onehot = label[:, None] == xp.arange(self.n_outputs, dtype=label.dtype)[None, :]
        sums = exact_sums(onehot * weight[:, None].astype(STAT_DTYPE), comm)
        log_prior = np.log(np.maximum(sums / sums.sum(), _MIN_PROBABILITY))
        return (log_prior - log_prior.mean()).astype(MARGIN_DTYPE)

    def gradients(self, margins, label, weight):
        xp = get_xp(margins)
        probability = _softmax(margins)
        onehot = label[:, None] == xp.arange(self.n_outputs, dtype=label.dtype)[None, :]
        gradient = probability - onehot.astype(GRADIENT_DTYPE)
        hessian = xp.maximum(_F32(2) * probability * (_F32(1) - probability), _MIN_HESSIAN)
        gpair = xp.stack([gradient, hessian], axis=2)
        return gpair if weight is None else gpair * weight[:, None, None]

    def transform(self, margins):
        if self.name == "multi:softmax":
            return get_xp(margins).argmax(margins, axis=1).astype(MARGIN_DTYPE)
        return _softmax(margins)

    def eval_transform(self, margins):
        return _softmax(margins)


class Poisson(Objective):
    """count:poisson: log link; the hessian is damped by max_delta_step (0.7 by default)."""

    name = "count:poisson"

    def check_labels(self, label, name):
        xp = get_xp(label)
        _raise_for_first(label < 0, label, name, "labels must be >= 0 for objective='count:poisson'", xp)

    def link(self, base_score):
        return np.full(1, np.log(max(base_score, _MIN_PROBABILITY)), dtype=MARGIN_DTYPE)

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        damping = _F32(self.params.effective_max_delta_step)
        return xp.exp(margin) - label, xp.exp(margin + damping)

    def transform(self, margins):
        return get_xp(margins).exp(margins[:, 0])


_OBJECTIVES = {
    "reg:squarederror": SquaredError,
    "reg:pseudohubererror": PseudoHuberError,
    "reg:logistic": Logistic,
    "binary:logistic": Logistic,
    "binary:logitraw": Logistic,
    "multi:softmax": Softmax,
    "multi:softprob": Softmax,
    "count:poisson": Poisson,
}


def make_objective(params: TrainParams) -> Objective:
    """The objective named by ``params.objective``."""
    return _OBJECTIVES[params.objective](params)


def _logit(probability: float) -> float:
    p = min(max(probability, _MIN_PROBABILITY), 1 - _MIN_PROBABILITY)
    return float(np.log(p / (1 - p)))


def _sigmoid(margin):
    xp = get_xp(margin)
    return _F32(1) / (_F32(1) + xp.exp(-margin))


def _softmax(margins):
    xp = get_xp(margins)
    shifted = xp.exp(margins - margins.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def _weights_of(label, weight):
    return get_xp(label).ones_like(label) if weight is None else weight


def _columns(*vectors):
    """Vectors side by side, in their own precision (exact_sums reads them in float64)."""
    return get_xp(vectors[0]).stack(vectors, axis=1)


def _raise_for_first(bad, label, name, rule, xp):
    if bool(bad.any()):
        row = int(xp.nonzero(bad)[0][0])
        raise RowError(f"{name} has {float(label[row])!r} at row ", row, f": {rule}")
