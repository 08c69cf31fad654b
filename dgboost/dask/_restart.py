"""What lets a Dask job survive a lost worker: the coordinator's journal of finished rounds.

A job's model does not depend on its number of workers, and training on from a model of
its first rounds makes the model an uninterrupted run makes (the continuation tests). So
a job that loses a worker can resume on the workers left: the client re-shares the rows
and trains on from the rounds already finished, with the callbacks as they stood.

The coordinator (rank 0) sends the job's agreed cuts once, then each finished round, to the
client as Dask events on ``JOURNAL_TOPIC``: the round's trees, the model's best round and
ranking state, the round's metrics, and the callbacks pickled after the round (early
stopping's count, a checkpoint's last save). The same rows give the same cuts, so a restart
bins its shards with the journal's and skips the sample and its sketch. The client keeps them (``Journal``) and, when a worker is lost,
makes of them the next attempt's ``init_model`` and ``training.Resume``.

On GPUs (``_job.peers_vouch``) a round the coordinator finished is kept only once every other
rank has finished the round after it (each says so on the same topic, ``RoundsDone``). A peer that dies in a round's
collectives can leave the coordinator with that round finished from half-received sums:
NCCL reads a peer's buffers in place, and a dead process's are freed under it (a model
apart from the uninterrupted run's at the round of the loss, seen on two GPUs). A peer that
finished the next round took part in its first collective, which the coordinator joins only
after every kernel of the round before: so that round's sums were read while the peer lived.
A restart there redoes the round or two around the loss. (Between CPU workers a collective's
messages arrive whole or not at all: every round the coordinator finished is kept.) The events go
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
from ..callback import TrainingCallback, latest_metrics
from ..training import Resume

logger = logging.getLogger("dgboost")

#: The Dask event topic of the coordinator's journal (apart from the progress events: larger).
JOURNAL_TOPIC = "dgboost-journal"
#: The most bytes of pickled callbacks (compressed) a round may send; beyond, the job cannot resume.
MAX_CALLBACK_BYTES = 1 << 20
#: The most bytes of pickled cuts (compressed) the journal takes; beyond, a restart agrees on them again.
MAX_CUTS_BYTES = 8 << 20


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
        self._last_callbacks: bytes | None = None  # as last sent: a round whose callbacks did not change sends none
        self._latest: dict = {}  # the round's metrics
        self._callbacks: bytes | None = None  # pickled after the round's after_iteration

    def cuts_agreed(self, cuts) -> None:
        """The job's cuts, before its frame, by its first attempt (a restart bins its shards
        with them, and sends none); not past MAX_CUTS_BYTES compressed (a restart then agrees
        on them again)."""
        blob = zlib.compress(pickle.dumps(cuts), 1)
        if len(blob) <= MAX_CUTS_BYTES:
            self._send({"cuts": blob})

    def before_training(self, model):
        self._sent = len(model.trees)
        self._send({"frame": zlib.compress(pickle.dumps(model._rounds(0, 0)))})
        return model

    def after_iteration(self, model, epoch, evals_log):
        """Last of the callbacks: their state after the round (before the next round's
        before_iteration, which the next attempt runs), kept for round_finished."""
        self._latest = latest_metrics(evals_log)
        self._callbacks = self._pickled_callbacks()
        return False

    def round_finished(self, model, epoch: int, last: bool) -> None:
        """The round, its callbacks' state and whether training stops after it, in one message: a
        restart resumes after it (training no more if it was the last), or, were the message lost
        with the coordinator, replays the round and its callbacks, which decide alike."""
        trees = list(zip(model.trees[self._sent:], model.tree_outputs[self._sent:]))
        self._sent = len(model.trees)
        state = (trees, model.best_iteration, model.best_score, model.position_bias, self._latest)
        message = {"round": epoch, "state": zlib.compress(pickle.dumps(state), 1), "last": last}
        callbacks = self._callbacks
        if callbacks is None or callbacks != self._last_callbacks:  # None: they cannot be sent
            message["callbacks"] = callbacks
            self._last_callbacks = callbacks
        self._send(message)

    def _pickled_callbacks(self) -> bytes | None:
        if not self._pickles:
            return None
        import cloudpickle

        try:
            blob = zlib.compress(cloudpickle.dumps(self.callbacks), 1)
        except Exception as error:  # noqa: BLE001 - any callback's own pickling failure
            self._refuse(f"the callbacks cannot be pickled ({type(error).__name__}: {error})")
            return None
        if len(blob) > MAX_CALLBACK_BYTES:
            self._refuse(f"the callbacks pickle to {len(blob)} bytes, more than the {MAX_CALLBACK_BYTES} a round "
                         "may send (a callback holding data, say)")
            return None
        return blob

    def _refuse(self, why: str) -> None:
        self._pickles = False
        logger.warning("dgboost.dask job %s: %s, so the job cannot resume after a lost worker", self.job, why)

    def _send(self, message: dict) -> None:
        _log_journal({"job": self.job, **message})


class RoundsDone(TrainingCallback):
    """On every rank but the coordinator (``every_rank``): tells the client each round this rank
    finished, which vouches for the coordinator's round before it (see the module's text)."""

    never_stops = True
    every_rank = True

    def __init__(self, job: str, rank: int):
        self.job, self.rank = job, rank

    def round_finished(self, model, epoch: int, last: bool) -> None:
        _log_journal({"job": self.job, "rank": self.rank, "done": epoch})


def _log_journal(message: dict) -> None:
    from distributed import get_worker

    get_worker().log_event(JOURNAL_TOPIC, message)


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
        self._cuts = None  # the job's agreed cuts (data.sketch.Cuts), once its first attempt sent them
        self._rounds: list[bytes] = []  # each finished round's state, in order from the first
        self._callbacks: list[bytes | None] = []  # pickled after each round
        self._resumed_at: float | None = None  # when the current attempt was asked to resume
        self._ranks = 1  # the current attempt's
        self._done: dict[int, int] = {}  # each peer's last finished round, in the current attempt
        self._held_before = 0  # rounds held when the current attempt began
        self.ended = False  # no round follows the last one held (a callback stopped training, or the rounds are done)

    def begin(self, job: str | None, resumed_at: float | None = None, ranks: int = 1) -> None:
        """Take the messages of attempt ``job`` (of ``ranks`` ranks) from now on (an older
        attempt's are late); None: take none (between attempts). The attempt that ends keeps
        the rounds every one of its ranks vouched for."""
        with self._lock:
            if self._attempt is not None:
                self._keep_vouched()
            self._attempt, self._resumed_at, self._ranks = job, resumed_at, ranks
            self._done, self._held_before = {}, len(self._rounds)

    def _keep_vouched(self) -> None:
        """Drop the rounds some peer did not finish the round after (the module's text says why)."""
        kept = len(self._rounds)
        for rank in range(1, self._ranks):
            done = self._done.get(rank)
            kept = min(kept, self._held_before if done is None else max(self._held_before, done - self._first))
        if kept < len(self._rounds):
            del self._rounds[kept:], self._callbacks[kept:]
            self.ended = False

    def receive(self, message: dict) -> None:
        with self._lock:
            if message.get("job") != self._attempt:
                return
            if "done" in message:
                self._done[message["rank"]] = max(message["done"], self._done.get(message["rank"], -1))
                return
            if "frame" in message:
                if self._frame is None:
                    self._frame = pickle.loads(zlib.decompress(message["frame"]))
                return
            if "cuts" in message:
                if self._cuts is None:
                    self._cuts = pickle.loads(zlib.decompress(message["cuts"]))
                return
            if message["round"] != self._first + len(self._rounds):
                return  # each attempt starts after the rounds kept, and the events keep their order
            # Without "callbacks": as after the round before (None, which cannot resume, if none).
            callbacks = message["callbacks"] if "callbacks" in message else (self._callbacks or [None])[-1]
            self._rounds.append(message["state"])
            self._callbacks.append(callbacks)
            self.ended = message["last"]
            if self._resumed_at is not None:  # the restart's cost: from the loss to its first round
                logger.warning("dgboost.dask job %s: round %d finished %.2f s after the loss (the restart and "
                               "one round)", self._attempt, message["round"], time.monotonic() - self._resumed_at)
                self._resumed_at = None

    def finished_rounds(self) -> int:
        with self._lock:
            return len(self._rounds)

    def next_round(self) -> int:
        """The number of the round after those held (the job's first, after an init_model's)."""
        return self._first + self.finished_rounds()

    def resume(self) -> tuple[Booster, Resume] | None:
        """The model of every finished round and the Resume of the next attempt; None when
        no round finished (the next attempt starts as the first did) or the callbacks
        could not be pickled (no attempt can go on where this one stood)."""
        with self._lock:  # copied here, unpickled outside: receive runs on the client's event loop
            rounds, frame, cuts = list(self._rounds), self._frame, self._cuts
            callbacks = self._callbacks[-1] if self._callbacks else None
        if not rounds or frame is None:
            return None
        if callbacks is None:
            raise CannotResume("the job's callbacks could not be sent (the coordinator's log says why)")
        model = frame._rounds(0, 0)
        if self._init_model is not None:
            for tree, output in zip(self._init_model.trees, self._init_model.tree_outputs):
                model.append(tree, output)
        evals_log: dict = {}
        for state in rounds:
            trees, best_iteration, best_score, position_bias, latest = pickle.loads(zlib.decompress(state))
            for tree, output in trees:
                model.append(tree, output)
            for name, metrics in latest.items():
                for metric, value in metrics.items():
                    evals_log.setdefault(name, {}).setdefault(metric, []).append(value)
        model.best_iteration, model.best_score, model.position_bias = best_iteration, best_score, position_bias
        model.record_evals(evals_log)
        import cloudpickle

        return model, Resume(tuple(cloudpickle.loads(zlib.decompress(callbacks))), cuts)


class CannotResume(RuntimeError):
    """A job that lost a worker but cannot go on where it stood."""


def retryable(error: BaseException) -> bool:
    """Whether a rank's error may pass on a new attempt: a lost connection (a peer unreachable,
    whose worker has not left the scheduler yet, say) or NCCL's error; not bad input or a bug
    (which would fail the same way again), nor a peer that timed out (hung, it may hang again)."""
    from distributed.comm.core import CommClosedError

    from ..collective import PeerUnreachable

    if isinstance(error, (ConnectionError, CommClosedError, PeerUnreachable)):
        return True
    return any(kind.__name__ == "NcclError" for kind in type(error).__mro__)  # cupy.cuda.nccl's, not imported here
