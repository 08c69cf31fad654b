"""Survival objectives: accelerated failure time (survival:aft) and Cox proportional hazards
(survival:cox), as XGBoost 3.4 defines them.

survival:aft's labels are intervals: ``y`` of shape (n_rows, 2), each row's lower and upper
bound of its event time (XGBoost's label_lower_bound, label_upper_bound): equal for an
observed event, upper ``inf`` for right censoring, lower 0 for left censoring. survival:cox's
label is a time, negative for a censored row (XGBoost's rule).
"""

from __future__ import annotations

import numpy as np

from .._dtypes import GRADIENT_DTYPE, MARGIN_DTYPE
from ..backend import asarray, get_xp, to_numpy
from ..data.inputs import RowError
from ..kernels.loops import compiled
from .base import LogLink

#: XGBoost's AFT clipping (src/common/survival_util.h).
_MIN_GRADIENT, _MAX_GRADIENT = -15.0, 15.0
_MIN_HESSIAN, _MAX_HESSIAN = 1e-16, 15.0
_EPS = 1e-12


def _erf(x):
    if get_xp(x) is np:
        from scipy.special import erf
    else:
        from cupyx.scipy.special import erf
    return erf(x)


def cox_negative_log_likelihood(times, hazard) -> float:
    """XGBoost's cox-nloglik over all rows (host float64 arrays): the partial likelihood's
    negative log over the events, Breslow's risk sets, unweighted, per event. Rows of one time
    share their risk set, so their order does not matter but for rounding: it is made canonical
    (by time, then hazard, then label), so the value is the same however the rows were split."""
    order = np.lexsort((times, hazard, np.abs(times)))
    return _cox_metric(times[order], hazard[order])


@compiled
def _cox_metric(times, hazard):
    n = times.shape[0]
    total = 0.0
    for i in range(n):
        total += hazard[i]
    out, events, accumulated = 0.0, 0.0, 0.0
    for i in range(n):
        if times[i] > 0:
            out -= np.log(hazard[i]) - np.log(total)
            events += 1.0
        accumulated += hazard[i]
        if i == n - 1 or abs(times[i]) < abs(times[i + 1]):
            total -= accumulated
            accumulated = 0.0
    return out / events if events > 0 else np.nan


class _Distribution:
    """The error distribution of AFT: pdf, cdf and the pdf's first two derivatives at z."""

    def __init__(self, name: str):
        self.name = name

    def terms(self, z):
        xp = get_xp(z)
        if self.name == "normal":
            pdf = xp.exp(-z * z / 2.0) / np.sqrt(2.0 * np.pi)
            return pdf, 0.5 * (1.0 + _erf(z / np.sqrt(2.0))), -z * pdf, (z * z - 1.0) * pdf
        with np.errstate(over="ignore", invalid="ignore"):
            u = xp.exp(z)
            u2 = u * u
            big = xp.isinf(u) | xp.isinf(u2)
            if self.name == "logistic":
                pdf = xp.where(big, 0.0, u / ((1.0 + u) * (1.0 + u)))
                cdf = xp.where(xp.isinf(u), 1.0, u / (1.0 + u))
                grad = xp.where(xp.isinf(u), 0.0, pdf * (1.0 - u) / (1.0 + u))
                hess = xp.where(big, 0.0, pdf * (u2 - 4.0 * u + 1.0) / ((1.0 + u) * (1.0 + u)))
            else:  # extreme
                pdf = xp.where(xp.isinf(u), 0.0, u * xp.exp(-u))
                cdf = 1.0 - xp.exp(-u)
                grad = xp.where(xp.isinf(u), 0.0, (1.0 - u) * pdf)
                hess = xp.where(big, 0.0, (u2 - 3.0 * u + 1.0) * pdf)
        return pdf, cdf, grad, hess

    def limits(self, kind, sign, scale):
        """XGBoost's gradient and hessian where the formula is 0/0 or overflows: by censoring
        ``kind`` (0 uncensored, 1 right, 2 left, 3 interval) and the sign of z."""
        xp = get_xp(kind)
        inv, inv2 = 1.0 / scale, 1.0 / (scale * scale)
        right, left = kind == 1, kind == 2

        def by_kind(if_right, if_left, otherwise):
            return xp.where(right, if_right, xp.where(left, if_left, otherwise))

        if self.name == "normal":
            gradient = by_kind(xp.where(sign, -15.0, 0.0), xp.where(sign, 0.0, 15.0), xp.where(sign, -15.0, 15.0))
            hessian = by_kind(xp.where(sign, inv2, 1e-16), xp.where(sign, 1e-16, inv2), inv2)
        elif self.name == "logistic":
            gradient = by_kind(xp.where(sign, -inv, 0.0), xp.where(sign, 0.0, inv), xp.where(sign, -inv, inv))
            hessian = xp.full(kind.shape, 1e-16)
        else:
            gradient = by_kind(xp.where(sign, -15.0, 0.0), xp.where(sign, 0.0, inv), xp.where(sign, -15.0, inv))
            hessian = xp.where(left, 1e-16, xp.where(sign, 15.0, 1e-16))
        return gradient, hessian


class AcceleratedFailureTime(LogLink):
    """survival:aft: log(time) = margin + scale * error, the error of ``aft_loss_distribution``."""

    name = "survival:aft"
    label_columns = 2
    label_bounds = True

    def __init__(self, params):
        super().__init__(params)
        self.distribution = _Distribution(params.aft_loss_distribution)
        self.scale = float(params.aft_loss_distribution_scale)

    def check_labels(self, label, name):
        xp = get_xp(label)
        lower, upper = label[:, 0], label[:, 1]
        for bad, rule in ((~xp.isfinite(lower) | (lower < 0), "its lower bound must be a finite time >= 0 (0: left "
                                                                "censored)"),
                          (xp.isnan(upper) | (upper < lower), "its upper bound must be >= its lower bound (inf: "
                                                              "right censored)")):
            if bool(bad.any()):
                row = int(xp.nonzero(bad)[0][0])
                raise RowError(f"{name} holds [{float(lower[row])!r}, {float(upper[row])!r}] at row ", row,
                               f": for objective='survival:aft' each row is [lower, upper] of its event time; {rule}")

    def base_margin(self, label, weight, comm):
        base_score = 0.5 if self.params.base_score is None else self.params.base_score  # XGBoost's constant
        return np.full(1, np.log(base_score), dtype=MARGIN_DTYPE)

    def _ends(self, margin, label):
        """Each row's censoring and its bounds' terms, float64: (observed, right, left, z of the lower
        bound, z of the upper, the distribution's terms at each, those of a censored side's absent
        bound (right: upper; left: lower) made its limits: pdf 0, cdf 1 or 0, pdf' 0)."""
        xp = get_xp(margin)
        lower, upper = label[:, 0].astype(np.float64), label[:, 1].astype(np.float64)
        observed = lower == upper
        right, left = xp.isinf(upper), (lower <= 0) & ~observed  # an event at time 0 is observed, its z -inf
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z_low = (xp.log(xp.where(left, 1.0, lower)) - margin) / self.scale
            z_up = (xp.log(xp.where(right, 1.0, upper)) - margin) / self.scale
            pdf_l, cdf_l, grad_l, hess_l = self.distribution.terms(z_low)
            pdf_u, cdf_u, grad_u, _ = self.distribution.terms(z_up)
        low = (xp.where(left, 0.0, pdf_l), xp.where(left, 0.0, cdf_l), xp.where(left, 0.0, grad_l), hess_l)
        up = (xp.where(right, 0.0, pdf_u), xp.where(right, 1.0, cdf_u), xp.where(right, 0.0, grad_u))
        return observed, right, left, z_low, z_up, low, up, lower

    def gradients(self, margins, label, weight):
        xp = get_xp(margins)
        scale = self.scale
        observed, right, left, z_low, z_up, (pdf_l, cdf_l, grad_l, hess_l), (pdf_u, cdf_u, grad_u), _ = \
            self._ends(margins[:, 0].astype(np.float64), label)
        kind = xp.where(observed, 0, xp.where(right, 1, xp.where(left, 2, 3)))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            mass = cdf_u - cdf_l
            numerator = xp.where(observed, grad_l, pdf_u - pdf_l)
            denominator = xp.where(observed, scale * pdf_l, scale * mass)
            gradient = numerator / denominator
            h_numerator = xp.where(observed, -(pdf_l * hess_l - grad_l * grad_l),
                                   -(mass * (grad_u - grad_l) - (pdf_u - pdf_l) ** 2))
            h_denominator = xp.where(observed, scale * scale * pdf_l * pdf_l, (scale * mass) ** 2)
            hessian = h_numerator / h_denominator
        sign = xp.where(observed, z_low > 0, (xp.where(right, 0.0, z_up) > 0) | (xp.where(left, 0.0, z_low) > 0))
        limit_g, limit_h = self.distribution.limits(kind, sign, scale)
        gradient = xp.where((denominator < _EPS) & ~xp.isfinite(gradient), limit_g, gradient)
        hessian = xp.where((h_denominator < _EPS) & ~xp.isfinite(hessian), limit_h, hessian)
        gradient = xp.clip(gradient, _MIN_GRADIENT, _MAX_GRADIENT).astype(GRADIENT_DTYPE)
        hessian = xp.clip(hessian, _MIN_HESSIAN, _MAX_HESSIAN).astype(GRADIENT_DTYPE)
        gpair = xp.stack([gradient, hessian], axis=1)[:, None, :]
        return gpair if weight is None else gpair * weight[:, None, None]

    def loss(self, margins, label):
        """Each row's negative log-likelihood (the aft-nloglik metric's), float64."""
        xp = get_xp(margins)
        observed, _, left, _, _, (pdf_l, cdf_l, _, _), (_, cdf_u, _), lower = \
            self._ends(margins.astype(np.float64).reshape(-1), label)
        with np.errstate(divide="ignore", invalid="ignore"):
            density = pdf_l / (self.scale * xp.where(left, 1.0, lower))
        # fmax: a NaN (0 / 0, an event at time 0) counts as _EPS, as in XGBoost
        return -xp.log(xp.fmax(xp.where(observed, density, cdf_u - cdf_l), _EPS))

    def eval_transform(self, margins):
        return margins[:, 0]  # XGBoost's: the survival metrics read the margin


class Cox(LogLink):
    """survival:cox: Cox's partial likelihood (Breslow's ties), XGBoost's sequential pass over
    all rows in time order. The risk sets span every rank: the rows' times are gathered once
    and each round every row's exp(margin) (one allgather), and every rank runs the same pass
    on the host, so the sums are the same bits on any number of workers and on the GPU."""

    name = "survival:cox"

    def check_labels(self, label, name):
        xp = get_xp(label)
        if bool((label == 0).any()):
            row = int(xp.nonzero(label == 0)[0][0])
            raise RowError(f"{name} is 0 at row ", row, ": survival:cox's label is the time, negative where censored "
                           "(XGBoost's rule): a time must not be 0")

    def estimate_base_score(self, label, weight, comm):
        return float(np.exp(self.newton_intercept(label, weight, comm)[0]))

    def prepare(self, data, rows, comm):
        super().prepare(data, rows, comm)
        self._global_index = rows.global_index(np)
        self._order = None

    def _global_order(self, label, comm):
        """(every rank's times, gathered in rank order; their order by |time|, ties by global row
        index, as XGBoost's stable sort of the whole data; this rank's rows' slice of them),
        gathered once."""
        if self._order is None:
            parts = [to_numpy(part) for part in comm.allgather(label)]
            index = np.concatenate([to_numpy(part) for part in comm.allgather(self._global_index)])
            times = np.concatenate(parts).astype(np.float64)
            start = int(sum(part.shape[0] for part in parts[:comm.rank]))
            self._order = (times, np.lexsort((index, np.abs(times))), slice(start, start + parts[comm.rank].shape[0]))
        return self._order

    def gradients(self, margins, label, weight):
        xp = get_xp(margins)
        comm = self.comm
        if self._order is None and comm.world_size == 1:  # the intercept's step, before prepare
            self._global_index = np.arange(label.shape[0], dtype=np.int64)
        times, order, mine = self._global_order(label, comm)
        # The margins gathered as they are (float32) and exp taken on the host: the same bits on any device.
        margin = np.concatenate([to_numpy(part) for part in comm.allgather(margins[:, 0])]).astype(np.float64)
        gpair = _cox_pass(times[order], np.exp(margin[order]))
        out = np.empty_like(gpair)
        out[order] = gpair
        gpair = asarray(xp, out[mine].astype(GRADIENT_DTYPE))[:, None, :]
        return gpair if weight is None else gpair * weight[:, None, None]


@compiled
def _cox_pass(times, exp_margin):
    """XGBoost's CoxRegression pass over rows sorted by |time| (float64): (gradient, hessian)."""
    n = times.shape[0]
    out = np.empty((n, 2))
    total = 0.0
    for i in range(n):  # in time order, as XGBoost sums it
        total += exp_margin[i]
    risk, r, s, accumulated, last_e, last_t = total, 0.0, 0.0, 0.0, 0.0, 0.0
    for i in range(n):
        t, e = abs(times[i]), exp_margin[i]
        accumulated += last_e
        if last_t < t:
            risk -= accumulated
            accumulated = 0.0
        if times[i] > 0:
            r += 1.0 / risk
            s += 1.0 / (risk * risk)
        out[i, 0] = e * r - (1.0 if times[i] > 0 else 0.0)
        out[i, 1] = e * r - e * e * s
        last_t, last_e = t, e
    return out
