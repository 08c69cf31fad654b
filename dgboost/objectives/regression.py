"""Regression objectives: squared, pseudo-Huber, squared log, absolute and quantile errors,
and the log-link family (Poisson, gamma, Tweedie), as XGBoost 3.4 defines them."""

from __future__ import annotations

import numpy as np

from .._dtypes import MARGIN_DTYPE
from ..backend import get_xp, to_numpy
from ..reduce import exact_sums
from .base import _F32, LogLink, Objective, raise_for_first, _weights_of


class SquaredError(Objective):
    replayable = True  # see Objective.replayable
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
    replayable = True  # see Objective.replayable

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


class Poisson(LogLink):
    """count:poisson: log link; the hessian is damped by max_delta_step (0.7 by default)."""
    replayable = True  # see Objective.replayable

    name = "count:poisson"

    def check_labels(self, label, name):
        xp = get_xp(label)
        raise_for_first(label < 0, label, name, "labels must be >= 0 for objective='count:poisson'", xp)

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        damping = _F32(self.params.effective_max_delta_step)
        return xp.exp(margin) - label, xp.exp(margin + damping)


class SquaredLogError(Objective):
    """reg:squaredlogerror: ``(log1p(margin) - log1p(label))**2 / 2``, the margin kept above -1."""
    replayable = True  # see Objective.replayable

    name = "reg:squaredlogerror"

    def check_labels(self, label, name):
        raise_for_first(label <= -1, label, name, "labels must be > -1 for objective='reg:squaredlogerror' "
                         "(it takes log(1 + label))", get_xp(label))

    def estimate_base_score(self, label, weight, comm):
        return float(self.newton_intercept(label, weight, comm)[0])

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        margin = xp.maximum(margin, _F32(-1 + 1e-6))
        log_margin, log_label = xp.log1p(margin), xp.log1p(label)
        above = margin + _F32(1)
        gradient = (log_margin - log_label) / above
        hessian = xp.maximum((-log_margin + log_label + _F32(1)) / (above * above), _F32(1e-6))
        return gradient, hessian


class Gamma(LogLink):
    """reg:gamma: gamma deviance on exp(margin); labels > 0."""
    replayable = True  # see Objective.replayable

    name = "reg:gamma"

    def check_labels(self, label, name):
        raise_for_first(label <= 0, label, name, "labels must be > 0 for objective='reg:gamma'", get_xp(label))

    def _gradients(self, margin, label):
        ratio = label / get_xp(margin).exp(margin)
        return _F32(1) - ratio, ratio


class Tweedie(LogLink):
    """reg:tweedie: Tweedie's log-likelihood of variance power ``tweedie_variance_power``."""
    replayable = True  # see Objective.replayable

    name = "reg:tweedie"

    def check_labels(self, label, name):
        raise_for_first(label < 0, label, name, "labels must be >= 0 for objective='reg:tweedie'", get_xp(label))

    def _gradients(self, margin, label):
        xp = get_xp(margin)
        rho = _F32(self.params.tweedie_variance_power)
        first, second = xp.exp((_F32(1) - rho) * margin), xp.exp((_F32(2) - rho) * margin)
        return -label * first + second, -label * (_F32(1) - rho) * first + (_F32(2) - rho) * second


class _Majorised(Objective):
    """Absolute and quantile errors as XGBoost 3.4 trains them: a smooth surrogate of the
    loss each round, scaled by ``(sum(w * sqrt|margin - label|) / sum(w))**2`` over all rows
    of the output (summed exactly over every rank), so no leaf needs refreshing."""

    def _scales(self, margins, label, weight, comm):
        """Each output's scale: (n_outputs,) float32."""
        xp = get_xp(margins)
        weight = _weights_of(label, weight)
        roots = xp.sqrt(xp.abs(margins - label[:, None]))
        sums = exact_sums(xp.concatenate([roots * weight[:, None], weight[:, None]], axis=1), comm)
        if not abs(float(sums[-1])) >= 1e-6:
            return np.zeros(margins.shape[1], np.float32)
        return ((sums[:-1] / sums[-1]) ** 2).astype(np.float32)

    def gradients(self, margins, label, weight):
        return self._majorised(margins, label, weight, self.comm)

    def _majorised(self, margins, label, weight, comm):
        xp = get_xp(margins)
        scales = self._scales(margins, label, weight, comm)
        columns = [self._pair(margins[:, j], label, _F32(scales[j]), j) for j in range(margins.shape[1])]
        gpair = xp.stack([xp.stack(pair, axis=1) for pair in columns], axis=1)
        return gpair if weight is None else gpair * weight[:, None, None]


class AbsoluteError(_Majorised):
    """reg:absoluteerror: ``|margin - label|``, each round a pseudo-Huber surrogate
    ``r * c, c`` with ``c = delta / hypot(delta, r)``; the intercept one such step from the
    weighted label mean."""

    name = "reg:absoluteerror"

    def estimate_base_score(self, label, weight, comm):
        mean = super().estimate_base_score(label, weight, comm)
        xp = get_xp(label)
        at_mean = xp.full((label.shape[0], 1), mean, dtype=MARGIN_DTYPE)
        gpair = self._majorised(at_mean, label, weight, comm)[:, 0, :]
        sum_g, sum_h = exact_sums(gpair, comm)
        return float(np.float32(mean)) - float(sum_g / max(sum_h, 1e-6))

    def _pair(self, margin, label, scale, output):
        xp = get_xp(margin)
        residual = margin - label
        norm = xp.hypot(scale, residual)
        curvature = xp.where(norm > 0, scale / xp.where(norm > 0, norm, _F32(1)), _F32(1))
        return residual * curvature, curvature


class QuantileError(_Majorised):
    """reg:quantileerror: the pinball loss of each ``quantile_alpha``, one output each,
    smoothed each round (XGBoost 3.4's ``0.5 * S * (tanh(x) + 1 - 2 alpha)``, x = r / (0.04 S));
    predictions sorted within a row so quantiles never cross; intercepts the labels' quantiles."""

    name = "reg:quantileerror"
    _SHARPNESS = _F32(0.04)

    def __init__(self, params):
        super().__init__(params)
        self.alphas = params.quantile_alpha
        self.n_outputs = len(self.alphas)

    def base_margin(self, label, weight, comm):
        if self.params.base_score is not None:
            return self.link(self.params.base_score)
        labels = np.concatenate([to_numpy(part) for part in comm.allgather(label)])
        weights = None if weight is None else np.concatenate([to_numpy(p) for p in comm.allgather(weight)])
        return np.array([label_quantile(labels, weights, alpha) for alpha in self.alphas], dtype=MARGIN_DTYPE)

    def _pair(self, margin, label, scale, output):
        xp = get_xp(margin)
        if not scale > 0:
            zero = xp.zeros_like(margin)
            return zero, zero
        alpha = _F32(self.alphas[output])
        x = (margin - label) / (self._SHARPNESS * scale)
        tanh = xp.tanh(x)
        ratio = xp.maximum(xp.where(x == 0, _F32(1), tanh / xp.where(x == 0, _F32(1), x)), _F32(3e-4))
        gradient = _F32(0.5) * scale * (tanh + _F32(1) - _F32(2) * alpha)
        return gradient, _F32(0.5) / self._SHARPNESS * ratio

    def gradients(self, margins, label, weight):
        gpair = super().gradients(margins, label, weight)
        if weight is not None:  # XGBoost: a row of no weight has no pair (0 * anything else)
            gpair = gpair * (weight > 0)[:, None, None]
        return gpair

    def transform(self, margins):
        return get_xp(margins).sort(margins, axis=1) if self.n_outputs > 1 else margins[:, 0]


def label_quantile(labels: np.ndarray, weights: np.ndarray | None, alpha: float) -> float:
    """XGBoost's quantile of labels: without weights interpolated (R's type 6, alpha (n + 1)
    through the sorted labels); with weights the first label whose cumulative weight
    reaches alpha of the total (labels ordered by value, then weight: the same order however
    the rows were split)."""
    order = np.argsort(labels, kind="stable") if weights is None else np.lexsort((weights, labels))
    values = labels[order].astype(np.float64)
    n = values.shape[0]
    if weights is None:
        if alpha <= 1.0 / (n + 1):
            return float(values[0])
        if alpha >= n / (n + 1):
            return float(values[-1])
        x = alpha * (n + 1)
        k = int(np.floor(x)) - 1
        d = (x - 1) - k
        return float(values[k] + d * (values[k + 1] - values[k]))
    cdf = np.cumsum(weights[order].astype(np.float32), dtype=np.float32)
    index = int(np.searchsorted(cdf, np.float32(cdf[-1] * np.float32(alpha)), side="left"))
    return float(values[min(index, n - 1)])
