"""Classification objectives: logistic, softmax and hinge."""

from __future__ import annotations

import functools

import numpy as np

from .._dtypes import GRADIENT_DTYPE, MARGIN_DTYPE, STAT_DTYPE
from ..backend import get_xp
from ..params import TrainParams
from ..reduce import exact_sums
from .base import (_F32, _MIN_HESSIAN, _MIN_PROBABILITY, Objective, _logit, raise_for_first, _sigmoid, _softmax,
                   _weights_of)


class Logistic(Objective):
    """reg:logistic, binary:logistic and binary:logitraw: log loss on sigmoid(margin)."""
    replayable = True  # see Objective.replayable

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
        raise_for_first(bad, label, name, f"labels must be {rule} for objective={self.name!r}", xp)

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
        weight = self._positive_weighted(label, weight)
        xp = get_xp(margins)
        if xp is not np and all(a is None or a.dtype == GRADIENT_DTYPE for a in (margins, label, weight)):
            return _fused_gradients(margins[:, 0], label, weight)
        return super().gradients(margins, label, weight)

    def _loop_weight(self, label, weight):
        return self._positive_weighted(label, weight)

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


def _fused_gradients(margin, label, weight):
    """Logistic's gradient pairs on a GPU, (n_rows, 1, 2) float32, in one launch: the array
    program's float32 steps (sigmoid, p * (1 - p) floored at _MIN_HESSIAN, p - label, times
    the weight), each rounded as cupy's own kernels round it, so the bits are theirs."""
    import cupy

    gpair = cupy.empty((margin.shape[0], 1, 2), dtype=GRADIENT_DTYPE)
    if weight is None:
        _logistic_kernel(False)(margin, label, _MIN_HESSIAN, gpair[:, 0, 0], gpair[:, 0, 1])
    else:
        _logistic_kernel(True)(margin, label, weight, _MIN_HESSIAN, gpair[:, 0, 0], gpair[:, 0, 1])
    return gpair


@functools.lru_cache(maxsize=2)
def _logistic_kernel(weighted: bool):
    import cupy

    inputs = "float32 margin, float32 label, " + ("float32 weight, " if weighted else "") + "float32 min_hessian"
    body = """
        const float probability = 1.0f / (1.0f + expf(-margin));
        const float spread = probability * (1.0f - probability);
        gradient = probability - label;
        hessian = isnan(spread) ? spread : (spread > min_hessian ? spread : min_hessian);
        """ + ("gradient = gradient * weight; hessian = hessian * weight;" if weighted else "")
    return cupy.ElementwiseKernel(inputs, "float32 gradient, float32 hessian", body,
                                  "dgboost_logistic_gradients" + ("_weighted" if weighted else ""),
                                  options=("--fmad=false",))


class Softmax(Objective):
    """multi:softmax (predicts the class) and multi:softprob (predicts probabilities)."""
    replayable = True  # see Objective.replayable

    def __init__(self, params: TrainParams):
        super().__init__(params)
        self.name = params.objective
        self.n_outputs = params.num_class

    def check_labels(self, label, name):
        xp = get_xp(label)
        bad = (label < 0) | (label >= self.n_outputs) | (label != xp.floor(label))
        raise_for_first(bad, label, name, f"labels must be integers in [0, num_class={self.n_outputs})", xp)

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

    def training_gradients(self, margins, label, weight, epoch: int = 0):
        """On the host, ``gradients``' bits from compiled loops on threads and NumPy's exp and
        row sums (cpu.softmax_gradients), where the array program made a dozen passes over the
        margins on one thread. Margins not in C order (a Fortran-ordered base_margin's) keep the
        array program: NumPy sums their rows in another order from 8 classes up."""
        if (get_xp(margins) is not np or not margins.flags.c_contiguous or margins.dtype != MARGIN_DTYPE
                or (weight is not None and weight.dtype != GRADIENT_DTYPE)):  # a dtype of the caller's: its own
            return self.gradients(margins, label, weight)
        from ..kernels import cpu

        return cpu.softmax_gradients(margins, label, weight, _MIN_HESSIAN)

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


class Hinge(Objective):
    """binary:hinge: the hinge loss of labels 0/1 read as -1/+1; predicts the class (0 or 1).
    The intercept is XGBoost's: 1 where the weighted labels lean positive, else 0 (a margin)."""
    replayable = True  # see Objective.replayable

    name = "binary:hinge"
    #: The hessian of a row past the margin (XGBoost's FLT_MIN, unweighted): never zero.
    _TINY = GRADIENT_DTYPE(np.finfo(np.float32).tiny)

    def check_labels(self, label, name):
        raise_for_first((label != 0) & (label != 1), label, name, "labels must be 0 or 1 for "
                         "objective='binary:hinge'", get_xp(label))

    def estimate_base_score(self, label, weight, comm):
        weight = _weights_of(label, weight)
        sum_wy, sum_w = exact_sums(get_xp(label).stack([weight * (_F32(2) * label - _F32(1)), weight], axis=1), comm)
        return 1.0 if sum_wy / sum_w > 0 else 0.0

    def gradients(self, margins, label, weight):
        xp = get_xp(margins)
        signed = _F32(2) * label - _F32(1)
        inside = margins[:, 0] * signed < _F32(1)
        weight = xp.ones_like(label) if weight is None else weight
        gradient = xp.where(inside, -signed * weight, _F32(0))
        hessian = xp.where(inside, weight, self._TINY)
        return xp.stack([gradient, hessian], axis=1)[:, None, :]

    def transform(self, margins):
        return (margins[:, 0] > 0).astype(MARGIN_DTYPE)
