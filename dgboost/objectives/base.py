"""The objective's interface, and what its implementations share.

Gradients are computed in float32 from float32 margins, as in XGBoost, and
already include the sample weight. Every constant is a float32 scalar so that
numpy and cupy evaluate the same float32 operations.
"""

from __future__ import annotations

import numpy as np

from .._dtypes import GRADIENT_DTYPE, MARGIN_DTYPE
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
    #: Label columns a row: 2 for survival:aft's [lower, upper] bounds, k for k targets.
    label_columns = 1
    #: The label columns are bounds (survival:aft's), whose upper may be inf.
    label_bounds = False
    #: Its gradients on the device read nothing of the host and depend on the margins, labels
    #: and weights alone (not the round): a GPU round of it may be replayed (dgboost/replay.py).
    replayable = False

    def __init__(self, params: TrainParams):
        self.params = params
        self.comm = None

    def prepare(self, data, rows, comm) -> None:
        """Take what the gradients need beyond margins and labels, once before the first round:
        the communicator (for objectives whose gradients reduce over all rows), and the rows'
        structure (``data``: this rank's ``Dataset``, ``rows``: its global row spans)."""
        self.comm = comm

    def resume(self, init_model) -> None:
        """Take up the training state a model carries (``init_model``'s), where the objective has one."""

    def state(self):
        """The training state a model keeps after this round (unbiased ranking's position bias), or None."""
        return None

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

    def newton_intercept(self, label, weight, comm) -> np.ndarray:
        """One Newton step from margin 0 (XGBoost's estimate for objectives without a mean-like
        one): each output's -sum(g) / max(sum(h), 1e-6) over all rows, a margin."""
        xp = get_xp(label)
        gpair = self.gradients(xp.zeros((label.shape[0], self.n_outputs), MARGIN_DTYPE), label, weight)
        sums = exact_sums(gpair.reshape(label.shape[0], -1), comm).reshape(self.n_outputs, 2)
        return (-sums[:, 0] / np.maximum(sums[:, 1], 1e-6)).astype(MARGIN_DTYPE)

    def base_margin(self, label, weight, comm) -> np.ndarray:
        """Each output's starting margin: the given base_score's, else the estimate's."""
        base_score = self.params.base_score
        if base_score is None:
            base_score = self.estimate_base_score(label, weight, comm)
        return self.link(base_score)

    # -- training and prediction ----------------------------------------------
    def training_gradients(self, margins, label, weight, epoch: int = 0):
        """``gradients`` as training computes them, the same bits: on the host, a compiled
        loop on threads for the objectives that have one (``_loop_kind``), NumPy computing
        only their transcendental functions (``_loop_input``); elsewhere the array program
        (on the host, on one thread: on threads it was slower, its temporaries' pages
        faulted in at once, its threads meeting the compiled loops' spinning ones)."""
        if get_xp(margins) is not np or self._loop_kind is None:
            return self.gradients(margins, label, weight)
        from ..kernels import cpu

        return cpu.pair_gradients(self._loop_kind, self._loop_input(margins[:, 0]), label,
                                  self._loop_weight(label, weight), self._loop_parameter(), _MIN_HESSIAN)[:, None, :]

    #: loops.pair_gradients's kind of this objective, None for none.
    _loop_kind = None

    def _loop_weight(self, label, weight):
        """The rows' weights as the compiled loop takes them (``gradients`` makes its own)."""
        return weight

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
        """What metrics receive: the transform, but for binary:logitraw, whose metrics see
        probabilities (XGBoost 3.2 scores its raw margins, with which logloss and error mean little)."""
        return self.transform(margins)


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


def raise_for_first(bad, label, name, rule, xp):
    if bool(bad.any()):
        row = int(xp.nonzero(bad)[0][0])
        raise RowError(f"{name} has {float(label[row])!r} at row ", row, f": {rule}")


class LogLink(Objective):
    """An objective of log link (Poisson, gamma, Tweedie, survival): its output exp(margin), an
    output-space intercept's margin its log."""

    def link(self, base_score):
        # A given base_score is > 0 (params' check) and taken as it is; an estimated mean may be 0
        estimated = self.params.base_score is None
        return np.full(1, np.log(max(base_score, _MIN_PROBABILITY) if estimated else base_score), dtype=MARGIN_DTYPE)

    def transform(self, margins):
        return get_xp(margins).exp(margins[:, 0])


class MultiTarget(Objective):
    """Several targets, y of shape (n_rows, k): ``single``'s loss on each target's column, one
    output (and one tree a round) a target, XGBoost's multi_strategy="one_output_per_tree"; each
    target's intercept is estimated from its own column."""

    label_columns = property(lambda self: self.n_outputs)

    def __init__(self, params: TrainParams, single: Objective):
        super().__init__(params)
        self.single = single
        self.name = single.name
        self.n_outputs = params.num_target

    def prepare(self, data, rows, comm):
        super().prepare(data, rows, comm)
        self.single.prepare(data, rows, comm)

    @property
    def replayable(self) -> bool:
        return self.single.replayable

    def check_labels(self, label, name):
        for target in range(label.shape[1]):
            self.single.check_labels(label[:, target], f"{name}[:, {target}]")

    def base_margin(self, label, weight, comm):
        return np.concatenate([self.single.base_margin(label[:, t], weight, comm) for t in range(label.shape[1])])

    def training_gradients(self, margins, label, weight, epoch=0):
        return self._by_target(lambda t: self.single.training_gradients(margins[:, t:t + 1], label[:, t], weight,
                                                                        epoch), margins)

    def gradients(self, margins, label, weight):
        return self._by_target(lambda t: self.single.gradients(margins[:, t:t + 1], label[:, t], weight), margins)

    def _by_target(self, gradients_of, margins):
        xp = get_xp(margins)
        return xp.concatenate([gradients_of(t) for t in range(self.n_outputs)], axis=1)

    def transform(self, margins):
        return get_xp(margins).stack([self.single.transform(margins[:, t:t + 1]) for t in range(self.n_outputs)], 1)

    def eval_transform(self, margins):
        return get_xp(margins).stack([self.single.eval_transform(margins[:, t:t + 1])
                                      for t in range(self.n_outputs)], 1)
