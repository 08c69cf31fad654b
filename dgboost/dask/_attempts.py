"""A job's attempts on the cluster (steps 4 to 6 of a Dask job, docs/architecture.md): each one's
ranks started in the job's turn, watched until the model comes back, stopped on failure, and
resumed after a lost worker from the journal (``_restart``)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time

from ..booster import Booster
from ..callback import ProgressLine
from ..collective import CollectiveError, PeerUnreachable
from ._job import EVENT_TOPIC, JobSpec, abort_message, peers_vouch, rank_key, train_rank
from ._placing import _CANCELLED, _TIMEOUTS, _alive, _Futures, _Rows, _share_evals, _share_rows, _workers, settle
from ._restart import JOURNAL_TOPIC, CannotResume, Journal, retryable
from ._service import JobCancelled, TrainingJob, _listening
from ._streamed import KeptPieceGone, Packing, keep
from ._shards import Incoming

logger = logging.getLogger("dgboost")


#: Seconds between the client's looks at a running job (task states, workers alive).
_POLL_SECONDS = 0.5


#: Seconds the client gives the ranks of a failed job to stop before it cancels their tasks.
_STOP_GRACE_SECONDS = 10.0


#: Seconds the client waits, when ranks failed at a peer, for the scheduler to see a worker gone.
_LOSS_GRACE_SECONDS = 5.0


class _Attempts:
    """A job's attempts: the first, then, after each loss worth a restart (``_Interrupted``),
    one on the workers there are then, from the last round the journal holds
    (``_restart.Journal``), until one finishes or ``max_restarts`` are spent."""

    def __init__(self, client, spec: JobSpec, rows: _Rows, evals: list, max_restarts: int, started: float,
                 owner: "TrainingJob"):
        self.client, self.spec, self.rows, self.evals = client, spec, rows, evals
        self.max_restarts = max_restarts
        self.started = started
        self.owner = owner
        self.journal = Journal(spec.options.init_model)
        self.last_workers = 1  # the last attempt's
        self.kept = None  # a streamed job's pieces packed by the last attempt (_streamed.Kept), for the next
        self.progress = _ProgressFromEvents(spec) if spec.client_draws_progress else None

    def run(self) -> Booster:
        job, restarts, resumed_at = self.spec, 0, None
        self.owner._bar = self.progress
        with _listening(self.client, JOURNAL_TOPIC, self.spec.name, self.journal if self.spec.journal else None):
            try:
                while True:
                    try:
                        booster = self._attempt(job, resumed_at, restarts < self.max_restarts)
                        break
                    except _Interrupted as interrupted:
                        job = self._restart(interrupted, restarts)
                        restarts, resumed_at = restarts + 1, interrupted.noticed
                if self.progress is not None:
                    self.progress.close(booster.num_boosted_rounds() - 1)
                    self.progress = None
                return booster
            finally:
                self._drop_kept()
                self.owner._bar = None  # a late event draws on no closed bar
                if self.progress is not None:  # the job failed: stop drawing at once
                    self.progress.close()

    def _attempt(self, job: JobSpec, resumed_at: float | None, may_restart: bool) -> Booster:
        if self.owner._cancel_reason() is not None:
            raise JobCancelled(self.owner._cancel_reason())
        if resumed_at is not None and not _workers(self.client):  # every worker lost: wait for their nannies'
            with contextlib.suppress(Exception):  # as many as there were a while, then any
                self.client.wait_for_workers(self.last_workers, timeout=min(10.0, job.timeout))
            with contextlib.suppress(Exception):  # none came: _share_rows says so
                self.client.wait_for_workers(1, timeout=job.timeout)
        with _Futures(self.client) as futures:
            self.owner._hold(futures)
            packing = Packing(job.options.init_model, self.kept)  # a streamed job's, for its rows and eval sets
            try:
                return self._attempt_with(job, resumed_at, futures, packing)
            except _Interrupted:  # a streamed job's next attempt takes again the pieces packed on the workers left
                if packing.packed and may_restart and self.owner._cancel_reason() is None:
                    self._drop_kept()
                    self.kept = keep(self.client, packing, _alive(self.client, packing.packed), job.timeout)
                raise

    def _drop_kept(self) -> None:
        if self.kept is not None:
            self.kept.drop(self.client)
            self.kept = None

    def _attempt_with(self, job: JobSpec, resumed_at: float | None, futures: _Futures, packing: Packing) -> Booster:
        job_workers, shards, sends, runs, moved = _share_rows(self.client, futures, self.rows, job.timeout, packing)
        evals_of = _share_evals(self.client, futures, self.evals, job_workers, job.timeout, packing)
        job = dataclasses.replace(job, addresses=tuple(job_workers))
        # The pieces are cut (or packed) in the job's turn, where its workers' threads are its
        # own: a queued job's pieces would wait behind another job's ranks, and a wait bounded
        # by dgboost.timeout would fail it. Submitted before, they start where a thread is free.
        with self.owner._turn(job):
            # A cancel meanwhile ends it; a slice cut on a worker outside the job is watched too.
            self._await_pieces(job, job_workers, shards, evals_of, futures.pinned)
            self._drop_kept()  # the last attempt's pieces, taken again or not, are spent
            if resumed_at is not None:
                seconds = time.monotonic() - resumed_at
                logger.warning("dgboost.dask job %s: resuming on %d workers (%d rows moved), %.2f s after the "
                               "loss", job.name, len(job_workers), moved, seconds)
                self.client.log_event(EVENT_TOPIC, {"job": job.name, "resumed": {
                    "workers": len(job_workers), "rows_moved": moved, "seconds": round(seconds, 3)}})
            self.last_workers = len(job_workers)
            self.journal.begin(job.name, resumed_at, ranks=len(job_workers) if peers_vouch(job) else 1)
            self.owner._on_attempt(job_workers, sum(summary.n_rows for summary in self.rows.summaries))
            return _run_job(self.client, job, shards, sends, runs, evals_of, futures, self.owner)

    def _await_pieces(self, job: JobSpec, job_workers, shards, evals_of, pinned: dict) -> None:
        """Every piece (training and eval) in memory before any rank starts: a rank occupies its
        worker's thread, so a slice still to be cut there would wait for the whole job.
        ``pinned``: each worker slices are cut on, those slices (``_Futures.pinned``)."""
        pieces = [f for w in job_workers for f in shards[w] if not isinstance(f, Incoming)]
        pieces += [f for w in job_workers for parts in evals_of[w] for f in parts]
        try:
            _await_done(self.client, pieces, job_workers, job.timeout, self.owner._cancel_reason, pinned)
        except KeptPieceGone as error:  # its worker was replaced at the same address: share again
            raise _Interrupted(str(error), time.monotonic(), cause=error) from error
        if any(f.status != "finished" for f in pieces):
            gone = _gone(self.client, job_workers, pinned)
            if gone:  # a slice's worker lost while it was cut: share again
                raise _Interrupted(f"worker {gone[0]} left the cluster while the rows were shared",
                                   time.monotonic(), gone[0])
            failed = next(f for f in pieces if f.status != "finished")
            raise RuntimeError(f"a piece of the job's rows was not cut within {job.timeout:g} s (its future is "
                               f"{failed.status}{': ' + repr(failed.exception()) if failed.status == 'error' else ''})")
        logger.info("dgboost.dask: shards ready in %.3f s", time.perf_counter() - self.started)

    def _restart(self, interrupted: _Interrupted, restarts: int) -> JobSpec:
        """The next attempt's JobSpec, or the job's error when it may not go on."""
        if self.owner._cancel_reason() is not None:
            raise JobCancelled(self.owner._cancel_reason()) from interrupted
        self.journal.begin(None)  # the rounds held now are those the next attempt starts after
        at = self.journal.next_round()
        if restarts >= self.max_restarts:
            spent = (f" ({restarts} restart{'s' if restarts != 1 else ''} made, max_restarts={self.max_restarts})"
                     if self.max_restarts else "")
            raise RuntimeError(f"dgboost training failed: {interrupted.reason}{spent}; the job was stopped on "
                               "every worker. Train again once the cluster is whole.") from interrupted.cause
        try:
            found = self.journal.resume()
        except CannotResume as error:
            raise RuntimeError(f"dgboost training failed: {interrupted.reason}; the job cannot resume: "
                               f"{error}") from interrupted.cause
        options = self.spec.options
        resume = None
        if found is not None:
            model, resume = found
            # ended: a callback stopped training, so the next attempt runs after_training alone
            left = 0 if self.journal.ended else options.num_boost_round - self.journal.finished_rounds()
            options = dataclasses.replace(options, init_model=model, num_boost_round=left)
        name = f"{self.spec.name}-r{restarts + 1}"
        logger.warning("dgboost.dask job %s: %s during round %d; restart %d of %d, from round %d", self.spec.name,
                       interrupted.reason, at, restarts + 1, self.max_restarts, at)
        self.client.log_event(EVENT_TOPIC, {"job": name, "restart": {
            "reason": interrupted.reason, "worker": interrupted.worker, "round": at, "restart": restarts + 1}})
        if self.progress is not None:
            self.progress.line.note = f"restarted from round {at} after {interrupted.reason}"
        return dataclasses.replace(self.spec, name=name, options=options, resume=resume)


def _gone(client, job_workers, pinned: dict) -> list:
    """The job's workers gone, and the workers gone that slices are cut on while one of theirs is
    not cut (pinned to its worker, it would wait for ever; one cut is held elsewhere too once
    fetched, or was moved off a retired worker)."""
    alive = _alive(client, sorted(set(job_workers) | set(pinned)))
    gone = {w for w in job_workers if w not in alive}
    gone |= {w for w, slices in pinned.items() if w not in alive and any(f.status != "finished" for f in slices)}
    return sorted(gone)


def _await_done(client, pieces, job_workers, timeout: float, cancelled, pinned: dict | None = None) -> None:
    """Wait for a job's pieces (slices cut, or a streamed job's partitions read again and
    packed) as long as one ends every ``timeout`` seconds; return at once where a job worker is
    gone, or a worker a slice is cut on before it is (``_gone``: the pieces restricted to it
    would wait for ever; the caller interrupts the attempt). A piece that failed (a budget too
    small, input changed since the survey) raises its error; ``cancelled()``, the job's cancel
    reason or None, raises JobCancelled."""
    last, pending = time.monotonic(), list(pieces)
    while True:
        settle(pending, _POLL_SECONDS)  # all of them, or half a second: two looks a second however many
        reason = cancelled()
        if reason is not None:
            raise JobCancelled(reason)
        left = [f for f in pending if not f.done()]
        failed = next((f for f in pending if f.status == "error"), None)
        if not left and failed is None:
            return
        if _gone(client, job_workers, pinned or {}):
            return
        if failed is not None:
            raise failed.exception()
        if len(left) < len(pending):
            last, pending = time.monotonic(), left
        elif time.monotonic() - last > timeout:  # none ended for a whole wait: the caller says which
            return


class _Interrupted(Exception):
    """An attempt stopped by a loss a new attempt may not meet: a worker gone, a retryable error."""

    restartable = True  # the job keeps its place in the queue (TrainingJob._turn)

    def __init__(self, reason: str, noticed: float, worker: str | None = None, cause: BaseException | None = None):
        super().__init__(reason)
        self.reason, self.worker, self.cause = reason, worker, cause
        self.noticed = noticed  # time.monotonic() when the client saw it


def _run_job(client, job: JobSpec, shards, sends, runs, evals_of, futures: _Futures, owner: "TrainingJob") -> Booster:
    from ..collective.host import CollectivePlugin

    client.register_plugin(CollectivePlugin())
    owner._start_ranks()  # or JobCancelled, where a cancel came since the pieces were waited for
    tasks = [futures.track_one(client.submit(
        train_rank, job, rank, shards[w], runs[w], evals_of[w], sends[w], key=rank_key(job.name, rank),
        workers=[w], allow_other_workers=False, pure=False, retries=0))
        for rank, w in enumerate(job.addresses)]
    return _watch(client, job, tasks, owner)


class _ProgressFromEvents:
    """A progress bar on the client's terminal, drawn from the coordinator's round events."""

    def __init__(self, job: JobSpec):
        self.line = ProgressLine(job.options.num_boost_round)
        self.line.start(0 if job.options.init_model is None else job.options.init_model.num_boosted_rounds())
        self.last_round = -1

    def receive(self, message: dict) -> None:
        if "note" in message:
            self.line.note = message["note"]
        elif "round" in message:
            self.line.update(message["round"], message["metrics"])
            self.last_round = message["round"]

    def close(self, final_round: int | None = None) -> None:
        """Stop drawing, once the final round's event (if given) is drawn or a second has passed."""
        deadline = time.monotonic() + 1.0
        while final_round is not None and self.last_round < final_round and time.monotonic() < deadline:
            time.sleep(0.02)
        self.line.close()


def _watch(client, job: JobSpec, tasks, owner: TrainingJob) -> Booster:
    """Rank 0's Booster once every task is done; on failure every rank stopped, then
    ``_Interrupted`` for a loss a new attempt may not meet, else the job's error."""
    peers_failed_at = None  # when ranks first failed with only the collective errors a lost peer gives
    while True:
        settle(tasks, _POLL_SECONDS, first=True)  # then look again: at a rank's end, or a while after
        reason = owner._cancel_reason()
        if reason is not None:
            _stop(client, job, tasks, reason, _alive(client, job.addresses))
            raise JobCancelled(reason)
        if tasks[0].status == "finished":  # the model is whole: the other ranks only close
            booster, phases, notes, traffic = _model_of(client, job, tasks)
            settle(tasks, min(_STOP_GRACE_SECONDS, job.timeout))
            logger.info("dgboost.dask: rank 0 took %s", ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))
            if traffic["calls"] and len(job.addresses) > 1 and logger.isEnabledFor(logging.INFO):
                _log_traffic(job, traffic, _held_results(tasks[1:]))
            for note in notes:
                logger.warning("dgboost.dask job %s: rank 0 runs %s (the workers' logs tell each rank's pages)",
                               job.name, note)
            return booster
        failed = [(rank, t) for rank, t in enumerate(tasks) if t.status in ("error", "cancelled")]
        alive = _alive(client, job.addresses)
        # A worker counts as lost when the scheduler (asked, not the client's cached view) no longer
        # lists it while its task is unfinished: a removed worker's task is lost with it. A failed
        # rank with a worker gone is the worker's loss: report that. (One look: a GPU survivor
        # blocked in NCCL waits for this to be aborted; two looks cost it half a second more.)
        lost = [(rank, w) for rank, (w, t) in enumerate(zip(job.addresses, tasks))
                if w not in alive and t.status != "finished"]
        noticed = time.monotonic()
        if lost:
            rank, worker = lost[0]
            _stop(client, job, tasks, f"worker {worker} (rank {rank}) left the cluster", alive)
            raise _Interrupted(f"worker {worker} (rank {rank}) left the cluster during dgboost job {job.name} "
                               "(it died or was shut down)", noticed, worker)
        if failed:
            errors = [(rank, t.exception()) for rank, t in enumerate(tasks) if t.status == "error"]
            first = _first_error(errors)
            if first is not None and isinstance(first[1], CollectiveError) and job.journal:
                # The ranks failed at a peer: a worker that died may not have left the scheduler yet.
                peers_failed_at = peers_failed_at or noticed
                if noticed - peers_failed_at < _LOSS_GRACE_SECONDS:
                    if all(t.done() for t in tasks):  # else the next look's settle waits
                        time.sleep(_POLL_SECONDS)
                    continue
            _stop(client, job, tasks, "another rank failed", alive)
            if first is not None and isinstance(first[1], CollectiveError) and owner._cancelled_in_table():
                raise JobCancelled(str(first[1]))  # aborted by a cancel whose word to this client was late
            if first is not None and retryable(first[1]):
                rank, error = first
                raise _Interrupted(f"{type(error).__name__} on worker {job.addresses[rank]} (rank {rank}): {error}",
                                   noticed, job.addresses[rank], error)
            _raise_first(job, first)


def _model_of(client, job: JobSpec, tasks) -> tuple:
    """Rank 0's result (its task finished), fetched while it is held. A worker lost once its
    rank has finished takes the result with it: that is a lost worker, which the next attempt
    resumes from (the journal holds every round), not a wait of dgboost.timeout. It shows as
    the worker gone, or as the future no longer finished (a nanny may bring the worker back at
    the same address at once, and the scheduler run rank 0 again there, alone, failing or
    waiting for peers that have finished). Each look waits twice as long as the last, from
    _POLL_SECONDS to the job's timeout, so that a large model's transfer (which a look cut
    short starts again) completes; one that has not after a look of the whole timeout raises."""
    wait = min(_POLL_SECONDS, job.timeout)
    while True:
        if tasks[0].status == "finished":
            try:
                return tasks[0].result(timeout=wait)
            except (Exception, *_CANCELLED) as error:  # a look cut short, or rank 0 run again and failed there
                if not isinstance(error, _TIMEOUTS) and tasks[0].status == "finished":
                    raise
        alive = _alive(client, job.addresses)
        if job.addresses[0] not in alive or tasks[0].status != "finished":  # lost, run again, erred or cancelled
            reason = f"worker {job.addresses[0]} (rank 0) lost its finished model"
            _stop(client, job, tasks, reason, alive)
            raise _Interrupted(f"{reason} during dgboost job {job.name}, before the client fetched it (the worker "
                               "died, was shut down or restarted)", time.monotonic(), job.addresses[0]) from None
        if wait >= job.timeout:
            raise TimeoutError(f"rank 0's model of dgboost job {job.name} was not fetched within {job.timeout:g} s "
                               "(raise dgboost.timeout if it is only large)")
        wait = min(2 * wait, job.timeout)


def _held_results(tasks) -> list:
    """The results of those ``tasks`` that finished and still hold them, each fetched with a
    short wait: one whose worker left since would be recomputed (its key is still wanted), and
    is never waited for. For a log line, so best effort."""
    held = []
    for task in tasks:
        if task.status == "finished":
            with contextlib.suppress(Exception, *_CANCELLED):  # timed out, lost, cancelled meanwhile
                held.append(task.result(timeout=_POLL_SECONDS))
    return held


def _log_traffic(job: JobSpec, traffic: dict, others: list[dict]) -> None:
    """The collectives' calls (rank 0's) and the bytes every rank sent: the wire's share of a
    round (rank 0, the root of the histograms' reduce, sends few of them); then the rows the
    ranks sent each other before training, if any (``_shards.move_pieces``)."""
    rounds = max(1, job.options.num_boost_round)
    sent = traffic["bytes_sent"] + sum(other["bytes_sent"] for other in others)
    moved = traffic.get("moved_bytes", 0) + sum(other.get("moved_bytes", 0) for other in others)
    ranks = "" if len(others) == len(job.addresses) - 1 else f" ({1 + len(others)} of {len(job.addresses)} ranks)"
    logger.info("dgboost.dask: the collectives: %d calls; the ranks sent %.2f MiB%s, %.1f KiB a round (rank 0 "
                "%.1f KiB)%s", traffic["calls"], sent / 2**20, ranks, sent / 1024 / rounds,
                traffic["bytes_sent"] / 1024 / rounds,
                f"; before them, {moved / 2**20:.2f} MiB of rows rank to rank" if moved else "")


def _stop(client, job: JobSpec, tasks, reason: str, alive) -> None:
    """Abort every rank still running and give them a moment to stop (the caller's
    _Futures cancels whatever is left)."""
    workers = [w for w in job.addresses if w in alive]
    if workers:
        try:
            client.sync(client.scheduler.broadcast, msg=abort_message(job.name, reason), workers=workers,
                        on_error="ignore")
        except Exception:  # noqa: BLE001 - a worker gone meanwhile; its peers time out anyway
            logger.debug("dgboost.dask: could not reach every worker to abort %s", job.name, exc_info=True)
    running = [t for t, w in zip(tasks, job.addresses) if w in alive and t.status == "pending"]
    deadline = time.monotonic() + min(_STOP_GRACE_SECONDS, job.timeout)
    while running and time.monotonic() < deadline:
        settle(running, _POLL_SECONDS)
        running = [t for t in running if t.status == "pending"]


def _first_error(errors) -> tuple | None:
    """(rank, error) of the error that started a failure: a rank's own error before the
    collective errors of the ranks it stopped; None when no rank raised (cancelled)."""
    if not errors:
        return None
    return next(((r, e) for r, e in errors if not isinstance(e, CollectiveError)),
                next(((r, e) for r, e in errors if isinstance(e, PeerUnreachable)), errors[0]))


def _raise_first(job: JobSpec, first: tuple | None) -> None:
    """Raise a failed job's error, as ``_first_error`` found it."""
    if first is None:
        raise RuntimeError(f"dgboost job {job.name} was cancelled")
    rank, error = first
    where = f"worker {job.addresses[rank]} (rank {rank})"
    if isinstance(error, (ValueError, TypeError)):
        if hasattr(error, "add_note"):
            error.add_note(f"raised by dgboost.dask on {where}")
        raise error
    raise RuntimeError(f"dgboost training failed on {where}: {type(error).__name__}: {error}") from error
