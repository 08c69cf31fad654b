"""What lets a Dask job survive a lost worker: the coordinator's journal of finished rounds.

A job's model does not depend on its number of workers, and training on from a model of
its first rounds makes the model an uninterrupted run makes (the continuation tests). So
a job that loses a worker can resume on the workers left: the client re-shares the rows
and trains on from the rounds already finished, with the callbacks as they stood.

The coordinator (rank 0) sends each finished round to the client as a Dask event on
``JOURNAL_TOPIC``: the round's trees, the model's best round and ranking state, the
round's metrics, and the callbacks pickled after the round (early stopping's count, a
checkpoint's last save). The client keeps them (``Journal``) and, when a worker is lost,
makes of them the next attempt's ``init_model`` and ``training.Resume``. The events go
through the scheduler, which keeps the topic's last ``distributed.admin.low-level-log-length``
(1000) of them: a few MB for trees of depth 6 to 8.

Not every failure is worth a restart: a lost worker or connection, or an NCCL error, is
(``retryable``); bad input or a bug would fail the same way again, so it is raised at once.
"""

from __future__ import annotations

import logging
import pickle
import threading
import time
import zlib

from ..booster import Booster
from ..callback import TrainingCallback
from ..training import Resume

logger = logging.getLogger("dgboost")

#: The Dask event topic of the coordinator's journal (apart from the progress events: larger).
JOURNAL_TOPIC = "dgboost-journal"


# ---- on the coordinator ----------------------------------------------------------------------

class JournalSender(TrainingCallback):
    """Runs last on rank 0: sends the model's frame once, then each finished round, to the client.

    ``callbacks`` are the job's own (the user's, early stopping, progress lines): pickled after
    each round, as the next attempt starts them. A callback that cannot be pickled makes the
    job one that cannot resume (said once in the worker's log; the client then fails as
    without restarts)."""

    never_stops = True

    def __init__(self, job: str, callbacks: list):
        self.job = job
        self.callbacks = callbacks
        self._sent = 0  # trees of the model already sent (or the init_model's)
        self._pickles = True

    def before_training(self, model):
        self._sent = len(model.trees)
        self._send({"frame": zlib.compress(pickle.dumps(model[:0]))})
        return model

    def after_iteration(self, model, epoch, evals_log):
        trees = list(zip(model.trees[self._sent:], model.tree_outputs[self._sent:]))
        self._sent = len(model.trees)
        latest = {name: {metric: values[-1] for metric, values in metrics.items()}
                  for name, metrics in evals_log.items()}
        callbacks = self._pickled_callbacks()
        state = (trees, model.best_iteration, model.best_score, model.position_bias, latest)
        self._send({"round": epoch, "state": zlib.compress(pickle.dumps(state), 1), "callbacks": callbacks})
        return False

    def _pickled_callbacks(self) -> bytes | None:
        if not self._pickles:
            return None
        import cloudpickle

        try:
            return cloudpickle.dumps(self.callbacks)
        except Exception as error:  # noqa: BLE001 - any callback's own pickling failure
            self._pickles = False
            logger.warning("dgboost.dask job %s: the callbacks cannot be pickled (%s: %s), so the job cannot "
                           "resume after a lost worker", self.job, type(error).__name__, error)
            return None

    def _send(self, message: dict) -> None:
        from distributed import get_worker

        get_worker().log_event(JOURNAL_TOPIC, {"job": self.job, **message})


# ---- on the client ---------------------------------------------------------------------------

class Journal:
    """The client's copy of a job's finished rounds, over all its attempts.

    ``receive`` runs on the client's event loop (a topic handler); ``resume`` and
    ``begin`` on the caller's thread, between attempts."""

    def __init__(self, init_model: Booster | None):
        self._lock = threading.Lock()
        self._init_model = init_model
        self._first = 0 if init_model is None else init_model.num_boosted_rounds()  # the job's first round
        self._attempt: str | None = None  # the job name whose messages are taken
        self._frame: Booster | None = None
        self._rounds: list[bytes] = []  # each finished round's state, in order from the first
        self._callbacks: bytes | None = None  # pickled after the last round
        self._resumed_at: float | None = None  # when the current attempt was asked to resume
        self.restart_seconds: float | None = None  # the last restart: lost to its first new round

    def begin(self, job: str, resumed_at: float | None = None) -> None:
        """Take the messages of attempt ``job`` from now on (an older attempt's are late)."""
        with self._lock:
            self._attempt, self._resumed_at = job, resumed_at

    def receive(self, message: dict) -> None:
        with self._lock:
            if message.get("job") != self._attempt:
                return
            if "frame" in message:
                if self._frame is None:
                    self._frame = pickle.loads(zlib.decompress(message["frame"]))
                return
            if message["round"] != self._first + len(self._rounds):
                return  # each attempt starts after the rounds kept, and the events keep their order
            self._rounds.append(message["state"])
            self._callbacks = message["callbacks"]
            if self._resumed_at is not None:
                self.restart_seconds = time.monotonic() - self._resumed_at
                self._resumed_at = None
                logger.warning("dgboost.dask job %s: round %d finished %.2f s after the loss (the restart and "
                               "one round)", self._attempt, message["round"], self.restart_seconds)

    def finished_rounds(self) -> int:
        with self._lock:
            return len(self._rounds)

    def resume(self) -> tuple[Booster, Resume] | None:
        """The model of every finished round and the Resume of the next attempt; None when
        no round finished (the next attempt starts as the first did) or the callbacks
        could not be pickled (no attempt can go on where this one stood)."""
        with self._lock:
            if not self._rounds or self._frame is None:
                return None
            if self._callbacks is None:
                raise _CannotResume("the job's callbacks cannot be pickled (see the coordinator's log)")
            model = self._frame[:0]
            if self._init_model is not None:
                for tree, output in zip(self._init_model.trees, self._init_model.tree_outputs):
                    model.append(tree, output)
            evals_log: dict = {}
            for state in self._rounds:
                trees, best_iteration, best_score, position_bias, latest = pickle.loads(zlib.decompress(state))
                for tree, output in trees:
                    model.append(tree, output)
                for name, metrics in latest.items():
                    for metric, value in metrics.items():
                        evals_log.setdefault(name, {}).setdefault(metric, []).append(value)
            model.best_iteration, model.best_score, model.position_bias = best_iteration, best_score, position_bias
            model.record_evals(evals_log)
            import cloudpickle

            return model, Resume(evals_log, tuple(cloudpickle.loads(self._callbacks)))


class _CannotResume(RuntimeError):
    """A job that lost a worker but cannot go on where it stood."""


def retryable(error: BaseException) -> bool:
    """Whether a rank's error may pass on a new attempt: a lost connection or NCCL's error, not
    bad input or a bug (which would fail the same way again)."""
    from distributed.comm.core import CommClosedError

    if isinstance(error, (ConnectionError, CommClosedError)):
        return True
    return any(kind.__name__ == "NcclError" for kind in type(error).__mro__)  # cupy.cuda.nccl's, not imported here
