"""Training callbacks, in XGBoost's shape.

A callback sees the model before training, before and after every round (with the
evaluation log so far; returning True stops training) and after training.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import time
from typing import TextIO

import numpy as np

from ._files import write_atomically
from .objectives.metrics import higher_is_better

#: {eval set name: {metric name: [value per round]}}
EvalsLog = dict[str, dict[str, list[float]]]


def count(name: str, value, minimum: int) -> int:
    """``value``, an integer (a numpy one too, not a bool) >= ``minimum``, as an int; else a
    ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


class TrainingCallback:
    """Base class: override the hooks you need.

    A subclass whose hooks never return True may say so with ``never_stops = True``:
    a Dask job then skips asking the coordinator whether to stop after each round.
    Callbacks run on the coordinator alone, but for dgboost's own that say
    ``every_rank = True`` (and never stop).
    """

    never_stops = False
    every_rank = False

    def before_training(self, model):
        return model

    def before_iteration(self, model, epoch: int, evals_log: EvalsLog) -> bool:
        return False

    def after_iteration(self, model, epoch: int, evals_log: EvalsLog) -> bool:
        return False

    def after_training(self, model):
        return model


def latest_metrics(evals_log: EvalsLog) -> dict[str, dict[str, float]]:
    """Each eval set's metrics of the last round: ``{set: {metric: value}}``."""
    return {name: {metric: values[-1] for metric, values in metrics.items()} for name, metrics in evals_log.items()}


class CallbackContainer:
    """Runs callbacks in order; any one may stop training."""

    def __init__(self, callbacks):
        self.callbacks = list(callbacks)

    def before_training(self, model, started=()):
        """Start every callback but those of ``started`` (a resumed run's, started before)."""
        for callback in self.callbacks:
            if not any(callback is done for done in started):
                model = callback.before_training(model)
        return model

    def before_iteration(self, model, epoch: int, evals_log: EvalsLog) -> bool:
        return any([callback.before_iteration(model, epoch, evals_log) for callback in self.callbacks])

    def after_iteration(self, model, epoch: int, evals_log: EvalsLog) -> bool:
        # Every callback runs, even after one asks to stop, so all see the last round.
        return any([callback.after_iteration(model, epoch, evals_log) for callback in self.callbacks])

    def after_training(self, model):
        for callback in self.callbacks:
            model = callback.after_training(model)
        return model

    def round_finished(self, model, epoch: int, last: bool) -> None:
        """Tell dgboost's own callbacks that round ``epoch`` is over, every callback's hooks run and
        whether it is the last (a callback asked to stop, or the rounds are done): what a Dask job's
        journal sends, so that a restart knows the round and the decision together."""
        for callback in self.callbacks:
            if callable(getattr(callback, "round_finished", None)):
                callback.round_finished(model, epoch, last)

    def cuts_agreed(self, cuts) -> None:
        """Tell dgboost's own callbacks the cuts the ranks agreed (data.sketch.Cuts, before any
        categorical features' own): what a Dask job's journal keeps, so that a restart bins its
        shards with them rather than drawing and sketching the sample again."""
        for callback in self.callbacks:
            if callable(getattr(callback, "cuts_agreed", None)):
                callback.cuts_agreed(cuts)

    def note(self, text: str) -> None:
        """Tell the callbacks that show progress how the job runs (e.g. that it is out of core):
        those with a ``note`` method (dgboost's own; XGBoost's callbacks have none)."""
        for callback in self.callbacks:
            if callable(getattr(callback, "note", None)):
                callback.note(text)


class EvaluationMonitor(TrainingCallback):
    """Prints ``[round]\\tset-metric:value ...`` every ``period`` rounds and at the end."""

    never_stops = True

    def __init__(self, period: int = 1, file: TextIO | None = None):
        if isinstance(period, bool) or not isinstance(period, numbers.Integral) or period < 1:
            raise ValueError(f"EvaluationMonitor(period={period!r}): period must be an integer >= 1 (the rounds "
                             "between printed lines)")
        if file is not None and not callable(getattr(file, "write", None)):
            raise TypeError(f"EvaluationMonitor(file={file!r}): file must be a stream with write() (sys.stderr, a "
                            "file opened for writing), not a path: open it first")
        self.period = int(period)
        self.file = file
        self._pending: str | None = None

    def before_training(self, model):
        self._pending = None  # a monitor given to a second run prints none of the first's lines
        return model

    def after_iteration(self, model, epoch, evals_log):
        if not evals_log:
            return False
        line = f"[{epoch}]" + "".join(f"\t{name}-{metric}:{values[-1]:.5f}"
                                      for name, metrics in evals_log.items()
                                      for metric, values in metrics.items())
        if epoch % self.period == 0:
            self._write(line)
            self._pending = None
        else:
            self._pending = line
        return False

    def after_training(self, model):
        if self._pending is not None:
            self._write(self._pending)
        return model

    def _write(self, line):
        print(line, file=self.file or sys.stdout, flush=True)


class ProgressBar(TrainingCallback):
    """One line redrawn in place on a terminal: rounds done of ``total``, the latest
    metrics, and the time left at the pace so far. ``verbose_eval`` uses it when
    stdout is a terminal, else EvaluationMonitor's lines."""

    never_stops = True

    def __init__(self, total: int, file: TextIO | None = None):
        self.line = ProgressLine(total, file)

    def before_training(self, model):
        self.line.start(model.num_boosted_rounds())
        return model

    def after_iteration(self, model, epoch, evals_log):
        self.line.update(epoch, latest_metrics(evals_log))
        return False

    def after_training(self, model):
        self.line.close()
        return model

    def note(self, text: str) -> None:
        self.line.note = text


class ProgressLine:
    """The drawing behind ProgressBar (the Dask client draws one from round events)."""

    WIDTH = 24

    def __init__(self, total: int, file: TextIO | None = None, label: str = "building the matrix"):
        self.total = max(int(total), 1)
        self.file = file or sys.stdout
        self._first = 0
        self._started = time.monotonic()
        self._drawn = False
        self.note = ""  # how the job runs, shown after the rounds (e.g. "out of core: ...")
        self.before_rounds(label)

    def before_rounds(self, label: str) -> None:
        """Draw the line of no round yet, saying what the job does meanwhile."""
        self._draw(f"[{' ' * self.WIDTH}] 0/{self.total} rounds, {label}")

    def start(self, first_round: int) -> None:
        """Rounds before ``first_round`` (a continued model's) do not count toward the pace."""
        self._first = first_round
        self._started = time.monotonic()

    def update(self, epoch: int, latest: dict) -> None:
        done = epoch - self._first + 1
        filled = min(self.WIDTH, round(self.WIDTH * done / self.total))
        seconds = time.monotonic() - self._started
        left = seconds / done * (self.total - done) if done else math.nan
        metrics = "  ".join(f"{name}-{metric}:{value:.5f}" for name, values in latest.items()
                            for metric, value in values.items())
        note = f" ({self.note})" if self.note else ""
        self._draw(f"[{'#' * filled}{' ' * (self.WIDTH - filled)}] {done}/{self.total} rounds{note}"
                   f"  {metrics}  ETA {_duration(left)}")

    def close(self) -> None:
        if self._drawn:
            self.file.write("\n")
            self.file.flush()
            self._drawn = False

    def _draw(self, text: str) -> None:
        self.file.write("\r" + text + "\x1b[K")  # back to the line's start; clear what is left
        self.file.flush()
        self._drawn = True


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def on_terminal(file: TextIO | None = None) -> bool:
    """Whether ``file`` (default stdout) is an interactive terminal."""
    stream = file or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


class EarlyStopping(TrainingCallback):
    """Stop when a metric has not improved for ``rounds`` rounds.

    By default it watches the last metric of the last eval set (XGBoost's rule).
    Sets ``model.best_iteration`` and ``model.best_score``; with ``save_best``
    the returned model is cut after the best round.
    """

    def __init__(self, rounds: int, metric_name: str | None = None, data_name: str | None = None,
                 maximize: bool | None = None, save_best: bool = False, min_delta: float = 0.0):
        self.rounds = count("rounds", rounds, minimum=1)  # a numpy integer too, as XGBoost takes it
        if isinstance(min_delta, bool) or not isinstance(min_delta, numbers.Real) or not min_delta >= 0 \
                or not math.isfinite(min_delta):
            raise ValueError(f"min_delta={min_delta!r} must be a finite number >= 0 (the least change that counts "
                             "as better)")
        for name, value in (("maximize", maximize), ("save_best", save_best)):
            if value is not None and not isinstance(value, (bool, np.bool_)):
                by_metric = " (or None: as the metric says)" if name == "maximize" else ""
                raise TypeError(f"{name}={value!r} must be True or False{by_metric}")
        for name, value in (("metric_name", metric_name), ("data_name", data_name)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name}={value!r} must be a string (or None: the last)")
        self.metric_name = metric_name
        self.data_name = data_name
        self.maximize = maximize
        self.save_best = save_best
        self.min_delta = min_delta
        self._best_score: float | None = None
        self._best_iteration = 0

    def before_training(self, model):
        self._best_score, self._best_iteration = None, 0
        return model

    def after_iteration(self, model, epoch, evals_log):
        if not evals_log:
            raise ValueError("EarlyStopping needs at least one eval set with a metric: pass evals=")
        data_name = self.data_name or list(evals_log)[-1]
        if data_name not in evals_log:
            raise ValueError(f"EarlyStopping data_name={data_name!r} is not an eval set; "
                             f"the eval sets are {list(evals_log)}")
        metrics = evals_log[data_name]
        metric_name = self.metric_name or list(metrics)[-1]
        if metric_name not in metrics:
            raise ValueError(f"EarlyStopping metric_name={metric_name!r} is not reported; "
                             f"the metrics are {list(metrics)}")
        maximize = self.maximize if self.maximize is not None else higher_is_better(metric_name)
        score = metrics[metric_name][-1]
        if self._improves(score, maximize):
            self._best_score, self._best_iteration = score, epoch
        model.best_iteration = self._best_iteration
        model.best_score = self._best_score
        return epoch - self._best_iteration >= self.rounds

    def _improves(self, score: float, maximize: bool) -> bool:
        if self._best_score is None:  # the first round is the best so far
            return True
        if math.isnan(self._best_score):  # any number beats NaN; NaN never improves
            return not math.isnan(score)
        if maximize:
            return score > self._best_score + self.min_delta
        return score < self._best_score - self.min_delta

    def after_training(self, model):
        if self.save_best and model.best_iteration is not None:
            return model[: model.best_iteration + 1]
        return model


class LearningRateScheduler(TrainingCallback):
    """The learning rate (eta) of each round: ``learning_rates(round)`` or ``learning_rates[round]``.

    Every rank of a job applies it (the boosting loop asks it for each round's
    rate), so it must depend on the round alone.
    """

    never_stops = True

    def __init__(self, learning_rates):
        if not callable(learning_rates) and not isinstance(learning_rates, (list, tuple)):
            raise TypeError("learning_rates must be a function of the round or a list of rates, got "
                            f"{type(learning_rates).__name__}")
        self.learning_rates = learning_rates

    def rate(self, epoch: int) -> float:
        rates = self.learning_rates
        if callable(rates):
            value = rates(epoch)
        elif epoch < len(rates):
            value = rates[epoch]
        else:
            raise ValueError(f"LearningRateScheduler has {len(rates)} rates but round {epoch} asks for one: "
                             "give one rate per round")
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy floats too
            raise TypeError(f"LearningRateScheduler gave {value!r} for round {epoch}: a rate is a number")
        if not 0 < value < math.inf:
            raise ValueError(f"LearningRateScheduler gave {value!r} for round {epoch}: rates must be > 0 and finite")
        return float(value)


class TrainingCheckpoint(TrainingCallback):
    """Save the model every ``interval`` rounds and when training ends.

    ``path`` is a local path or an fsspec URL (``s3://bucket/model.json``); a
    ``{round}`` in it keeps every checkpoint (``ckpt/model-{round}.json``),
    otherwise each replaces the last. Writes are atomic: a local file is written
    beside the target and renamed over it, an object store receives the whole
    model in one put, so a crash never leaves a half-written model. In a Dask
    job the coordinator's worker writes, so give a path that worker can reach.
    """

    never_stops = True

    def __init__(self, path, interval: int = 100):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"TrainingCheckpoint path={path!r} must be a file path or fsspec URL (a string or "
                            "os.PathLike)")
        self.path = os.fspath(path)
        if "://" not in self.path and os.path.isdir(self.path):
            raise ValueError(f"TrainingCheckpoint path {self.path!r} is a directory: give the file to write, e.g. "
                             f"{os.path.join(self.path, 'model-{round}.json')!r}")
        try:  # the path is formatted at each save: a brace other than {round} fails now, not after rounds
            self.path.format(round=0)
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(f"TrainingCheckpoint path {self.path!r}: the only field it may hold is {{round}} "
                             f"({type(error).__name__}: {error}); write a literal brace as {{{{ or }}}}") from None
        self.interval = count("interval", interval, minimum=1)
        self._last: int | None = None

    def before_training(self, model):
        self._last = None  # a callback given to another run (a refit estimator's) saves that run's end
        return model

    def after_iteration(self, model, epoch, evals_log):
        if (epoch + 1) % self.interval == 0:
            self._save(model, epoch)
        return False

    def after_training(self, model):
        rounds = model.num_boosted_rounds()
        if rounds and self._last != rounds - 1:
            self._save(model, rounds - 1)
        return model

    def _save(self, model, epoch: int) -> None:
        write_atomically(self.path.format(round=epoch), model.save_raw())
        self._last = epoch
