"""The service face of a Dask job, the client's side: ``TrainingJob`` (what ``submit`` returns),
the cluster's job table asked through the scheduler (``jobs``, ``job_info``, ``cancel``; the table
itself is ``_registry``), and the routing of Dask events to each job of a client."""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import threading
import time

import distributed

from ..booster import Booster
from ._job import ATTEMPT_PREFIX, EVENT_TOPIC, JobSpec
from ._registry import CONTROL_TOPIC

logger = logging.getLogger("dgboost")
#: Seconds between a queued job's looks at its cancel while it waits for the workers' lock.
_LOCK_POLL_SECONDS = 0.5


class JobCancelled(RuntimeError):
    """A job cancelled (``TrainingJob.cancel``, ``dgboost jobs cancel``, or its client gone)."""


class TrainingJob:
    """A training job submitted to a Dask cluster (``submit``): watch it, wait for it, cancel it.

    ``status`` is "queued", "running", "restarting" (between attempts, after a lost worker),
    "finished", "failed" or "cancelled". The job runs in a
    thread of this process; the cluster's job table (a scheduler plugin) shows it to every
    client, orders the queue and passes on a cancel from anywhere.
    """

    def __init__(self, client, id: str, name: str, priority: int, rounds: int, registry: bool):
        self.client, self.id, self.name, self.priority, self.rounds = client, id, name, priority, rounds
        self._registry = registry
        self._future: concurrent.futures.Future = concurrent.futures.Future()
        self._lock = threading.Lock()
        self._status = "queued"
        self._cancelled: str | None = None  # the reason, once cancelled
        self._round: int | None = None
        self._metrics: dict = {}
        self._first: tuple[float, int] | None = None  # (time, round) of the first round seen
        self._workers: list = []
        self._rows: int | None = None
        self._held: list = []  # the job's _Futures: cancelled with it where no rank runs
        self._ranks = False  # an attempt's ranks submitted: a cancel then stops them, not its data
        self._bar = None  # the progress bar the job draws, if any
        if registry:
            import getpass

            client.sync(client.scheduler.dgboost_jobs_submit, record={
                "id": id, "name": name, "owner": client.id, "user": getpass.getuser(), "priority": priority,
                "rounds": rounds})

    def __repr__(self):
        return f"<TrainingJob {self.id} {self.name!r}: {self.status}>"

    @property
    def status(self) -> str:
        return self._status

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> Booster:
        """The trained Booster, once the job ends; raises the job's error (JobCancelled if cancelled)."""
        return self._future.result(timeout)

    def wait(self) -> Booster:
        """``result()``, the job cancelled should the wait be interrupted (Ctrl-C)."""
        try:
            return self.result()
        except KeyboardInterrupt:
            self.cancel()
            raise

    def progress(self) -> dict:
        """{"status", "round", "rounds", "rounds_done", "metrics", "rows", "workers", "eta"}: the last
        finished round (numbered on from an init_model's), its metrics, and the seconds left at the
        pace so far."""
        with self._lock:
            done = 0 if self._first is None else self._round - self._first[1] + 1
            eta = None
            if self._first is not None and self._status == "running" and done > 0:
                eta = (time.monotonic() - self._first[0]) / done * max(0, self.rounds - done)
            return {"status": self._status, "round": self._round, "rounds": self.rounds, "rounds_done": done,
                    "metrics": dict(self._metrics), "rows": self._rows, "workers": list(self._workers), "eta": eta}

    def cancel(self) -> None:
        """Stop the job: a queued one leaves the queue, a running one stops within the round on every
        worker and gives its workers to the next. ``result()`` then raises JobCancelled."""
        if self.done():
            return
        self._cancel_here(f"dgboost job {self.id} was cancelled by its client")
        if self._registry:  # it aborts the ranks and wakes a queued wait
            self.client.sync(self.client.scheduler.dgboost_jobs_cancel, id=self.id, by="its client")

    def record_model(self, path: str) -> None:
        """Tell the cluster's job table where this job's model was written (``dgboost jobs show``)."""
        if self._registry:
            self.client.sync(self.client.scheduler.dgboost_jobs_note, id=self.id, model=str(path))

    # ---- from the job's thread and the client's event loop ---------------------------------------

    def _cancel_here(self, reason: str) -> None:
        """Mark the job cancelled; its thread stops at its next look. A job not running yet waits on
        its data, perhaps, whose futures are cancelled (from a thread of their own: this may run on
        the client's event loop); a running one is stopped by its watch, which waits for its ranks
        (cancelling its data would cancel the ranks' tasks under it)."""
        with self._lock:
            if self._cancelled is not None or self.done():
                return
            self._cancelled = reason
            held = []
            if self._cancels_data():  # its data's futures, and any it makes from now on
                for futures in self._held:
                    futures.cancelled = True
                held = [f for futures in self._held for f in futures.held]
        if held:
            threading.Thread(target=self._cancel_futures, args=(held,), daemon=True).start()

    def _cancel_futures(self, futures: list) -> None:
        with contextlib.suppress(Exception):  # the client closed meanwhile: nothing left to cancel
            self.client.cancel(futures)

    def _cancel_reason(self) -> str | None:
        return self._cancelled

    def _cancelled_in_table(self) -> bool:
        """Whether the cluster's job table has this job cancelled (asked when its ranks failed)."""
        if self._cancelled is not None:
            return True
        if not self._registry:
            return False
        try:
            status = self.client.sync(self.client.scheduler.dgboost_jobs_status, id=self.id)
        except Exception:  # noqa: BLE001 - the scheduler gone: the ranks' error stands
            return False
        return status in ("cancelling", "cancelled")

    def _hold(self, futures) -> None:
        """Futures of the job (a _placing._Futures: its data, an attempt's pieces), cancelled with it
        where no rank runs."""
        with self._lock:
            self._held.append(futures)
            futures.cancelled = self._cancels_data()  # cancelled already

    def _cancels_data(self) -> bool:
        """Whether the job's data futures are cancelled with it: it is cancelled and no rank runs
        (under ``_lock``)."""
        return self._cancelled is not None and not self._ranks

    def receive(self, message: dict) -> None:
        """The job's progress events, on the client's event loop: rounds, a cancel from elsewhere."""
        if "cancelled" in message:  # by another client, or by the scheduler for an orphaned job
            self._cancel_here(message["cancelled"])
            return
        if "round" in message:
            with self._lock:
                if self._first is None:
                    self._first = (time.monotonic(), message["round"])
                self._round, self._metrics = message["round"], message["metrics"]
        if self._bar is not None:
            self._bar.receive(message)

    def _start_ranks(self) -> None:
        """Say that the attempt's ranks are submitted now (a cancel from here on stops them, its
        data left under them), or raise JobCancelled where the job was cancelled before."""
        with self._lock:
            if self._cancelled is not None:
                raise JobCancelled(self._cancelled)
            self._ranks = True

    def _on_attempt(self, workers, rows: int) -> None:
        with self._lock:
            self._workers, self._rows = list(workers), rows
        if self._registry:
            self.client.sync(self.client.scheduler.dgboost_jobs_note, id=self.id, rows=rows)

    @contextlib.contextmanager
    def _turn(self, job: JobSpec):
        """The job's workers to itself while inside: its turn in the cluster's queue, or (with the
        job table turned off) a lock over them. Leaving on an exception that a new attempt follows
        (``restartable``) keeps the job's place in the queue."""
        if self._cancelled:
            raise JobCancelled(self._cancelled)
        bar = self._bar if self._round is None else None  # a line of no round yet says the wait
        if bar is not None:
            bar.line.before_rounds("waiting for its turn on the workers")
        waited = time.monotonic()
        if self._registry:
            state = self.client.sync(self.client.scheduler.dgboost_jobs_acquire, id=self.id, attempt=job.name,
                                     workers=list(job.addresses))
            if state != "running":
                self._cancel_here(f"dgboost job {self.id} was cancelled while queued")
                raise JobCancelled(self._cancelled if state == "cancelled"
                                   else f"dgboost job {self.id} ended ({state}) while queued")

            def release(final: bool) -> str | None:
                return self.client.sync(self.client.scheduler.dgboost_jobs_release, id=self.id, final=final)
        else:
            lock = distributed.MultiLock(names=[f"dgboost-worker-{w}" for w in job.addresses], client=self.client)
            while not lock.acquire(timeout=_LOCK_POLL_SECONDS):
                if self._cancelled:
                    raise JobCancelled(self._cancelled)

            def release(final: bool) -> str | None:
                lock.release()
                return None
        waited = time.monotonic() - waited
        if waited > 1.0:
            logger.info("dgboost.dask job %s waited %.1f s for its turn on the workers (other jobs ran)", self.id, waited)
        if bar is not None:
            bar.line.before_rounds("building the matrix")
        with self._lock:
            self._status = "running"
        try:
            yield
        except BaseException as error:
            restarting = bool(getattr(error, "restartable", False))
            with self._lock:
                self._ranks = False
                if restarting:
                    self._status = "restarting"
            state = self._release(release, final=not restarting)
            if restarting and (state == "cancelled" or self._cancelled):
                raise JobCancelled(self._cancelled or f"dgboost job {self.id} was cancelled") from error
            raise
        self._release(release, final=True)

    def _release(self, release, final: bool) -> str | None:
        """The workers back to the table (or the lock); a failure to say so is logged, not raised:
        the job's own outcome (a model, an error) matters more, and its finish records the end."""
        try:
            return release(final)
        except Exception as error:  # noqa: BLE001 - the scheduler unreachable for a moment, say
            if self.client.status not in ("closing", "closed"):  # closed (Ctrl-C): the scheduler frees its jobs
                logger.warning("dgboost.dask job %s: could not give its workers back (%s: %s)", self.id,
                               type(error).__name__, error)
            return None

    def _start(self, run) -> None:
        threading.Thread(target=self._main, args=(run,), name=f"dgboost-job-{self.id}", daemon=True).start()

    def _main(self, run) -> None:
        try:
            attempts = ATTEMPT_PREFIX + self.id
            with _listening(self.client, EVENT_TOPIC, attempts, self), \
                    _listening(self.client, CONTROL_TOPIC, attempts, self if self._registry else None):
                booster = run()
        except BaseException as error:  # noqa: BLE001 - the job's error, raised by result()
            if self._cancelled is not None and not isinstance(error, JobCancelled):
                error = JobCancelled(self._cancelled)  # whatever the cancel interrupted
            self._end("cancelled" if isinstance(error, JobCancelled) else "failed", error)
        else:
            self._end("finished", None, booster)

    def _end(self, status: str, error: BaseException | None, booster: Booster | None = None) -> None:
        self._status = status
        if self._registry:
            with contextlib.suppress(Exception):  # the scheduler gone: the job's own end matters more
                self.client.sync(self.client.scheduler.dgboost_jobs_finish, id=self.id, status=status,
                                 error=None if error is None else f"{type(error).__name__}: {error}")
        if error is None:
            self._future.set_result(booster)
        else:
            self._future.set_exception(error)


def install(client) -> None:
    """Install the cluster's job table (a scheduler plugin) now; every job makes sure of it anyway.
    Raises when dgboost cannot be imported where the scheduler runs."""
    from ._registry import JobRegistry

    client.register_plugin(JobRegistry())  # idempotent: once a scheduler


def _has_job_table(client) -> bool:
    """Whether jobs go through the cluster's job table (dask config ``dgboost.jobs.table``, default
    True), installing it if need be. False: each job takes a lock over its workers, and only its
    client sees it."""
    import dask

    if not dask.config.get("dgboost.jobs.table", True):
        return False
    try:
        install(client)
    except Exception as error:  # noqa: BLE001 - the scheduler cannot unpickle it, say
        raise RuntimeError(f"dgboost.dask could not install its job table on the scheduler ({type(error).__name__}: "
                           f"{error}): install dgboost where the scheduler runs (its tasks need it too)") from error
    return True


def jobs(client=None) -> list[dict]:
    """The cluster's dgboost jobs, newest first (what ``dgboost jobs`` lists): each one's id, name,
    owner (client id), user, status, priority, submitted / started / ended (epoch seconds),
    round, rounds, rounds_done, metrics (the latest), workers, rows, model, restarts, error, eta."""
    client = _client(client)
    install(client)
    return client.sync(client.scheduler.dgboost_jobs_list)


def job_info(client, id: str) -> dict:
    """One job (``id`` or its unique start), with its learning curves: ``{..., "curves": {set:
    {metric: [value a round]}}}``; KeyError when no job has that id."""
    _check_id(id)
    client = _client(client)
    install(client)
    found = client.sync(client.scheduler.dgboost_jobs_show, id=id)
    if found is None:
        raise KeyError(f"no dgboost job {id!r} on this cluster (or the id's start is not unique): dgboost jobs "
                       "lists them")
    return found


def _check_id(id) -> None:
    if not isinstance(id, str) or not id:
        raise TypeError(f"id={id!r} must be a job's id or its unique start, a non-empty string (dgboost jobs "
                        "lists them; a TrainingJob's is job.id)")


def cancel(client, id: str) -> str:
    """Cancel job ``id`` (or its unique start) from any client; returns its status before."""
    _check_id(id)
    client = _client(client)
    install(client)
    before = client.sync(client.scheduler.dgboost_jobs_cancel, id=id, by=f"client {client.id}")
    if before == "unknown":
        raise KeyError(f"no dgboost job {id!r} on this cluster (or the id's start is not unique): dgboost jobs "
                       "lists them")
    return before


#: The topics' handlers of each client, by job: one subscription a topic serves every job of a client.
_HANDLERS: dict[tuple, dict] = {}
#: The handler the client had on a topic before dgboost's (the user's own): still called, then restored.
_BEFORE: dict[tuple, object] = {}
_HANDLERS_LOCK = threading.Lock()


@contextlib.contextmanager
def _listening(client, topic: str, job: str, receiver):
    """While inside, ``receiver.receive(message)`` gets the messages on ``topic`` of job ``job``
    and its restarts (their names start with it); nothing for a receiver of None. A handler the
    user had subscribed on the topic goes on getting every event."""
    if receiver is None:
        yield
        return
    key = (client.id, topic)
    with _HANDLERS_LOCK:
        handlers = _HANDLERS.setdefault(key, {})
        if not handlers:
            before = getattr(client, "_event_handlers", {}).get(topic)  # distributed keeps one a topic
            if before is not None and before is not _late and \
                    not (isinstance(before, functools.partial) and before.func is _route):
                _BEFORE[key] = before
            client.subscribe_topic(topic, functools.partial(_route, key))
        handlers[job] = receiver
    try:
        yield
    finally:
        with _HANDLERS_LOCK:
            handlers.pop(job, None)
            if not handlers:
                del _HANDLERS[key]
                before = _BEFORE.pop(key, None)
                if before is not None:
                    client.subscribe_topic(topic, before)
                else:
                    client.unsubscribe_topic(topic)
                    # An event already on its way finds a handler that drops it: with none,
                    # distributed unsubscribes again, which raises and logs an ERROR.
                    if hasattr(client, "_event_handlers"):
                        client._event_handlers[topic] = _late


def _late(event) -> None:
    """A topic's handler once no job of the client listens: an event sent before is dropped."""


def _route(key: tuple, event):
    """Give ``event`` to its job's receiver; returns the user's own handler's result (distributed
    awaits it where it is a coroutine)."""
    with _HANDLERS_LOCK:
        before = _BEFORE.get(key)
    result = None
    if before is not None:
        try:
            result = before(event)
        except Exception:  # noqa: BLE001 - the user's own: logged, and dgboost's job still hears it
            logger.exception("dgboost.dask: the client's own handler of %r raised", key[1])
    _, message = event
    name = message.get("job") if isinstance(message, dict) else None
    if isinstance(name, str):
        with _HANDLERS_LOCK:
            receiver = next((r for job, r in _HANDLERS.get(key, {}).items() if name.startswith(job)), None)
        if receiver is not None:
            receiver.receive(message)
    return result


def _client(client):
    if client is None:
        try:
            return distributed.default_client()
        except ValueError:
            raise ValueError("client=None needs a current Dask client: create one first "
                             "(distributed.Client(...)) or pass client=") from None
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client or None, got {type(client).__name__}")
    return client
