"""The cluster's table of dgboost jobs: a scheduler plugin every client of the cluster can ask.

It knows every job submitted (``dgboost.dask.submit``): who submitted it, its status, its rounds
and latest metrics (read from the coordinator's round events as the scheduler logs them, so
training sends nothing more), its learning curves, and where its model was written. It is also
the queue: jobs that need the same workers run one at a time, in priority then submission order
(``acquire`` answers when a job's turn comes). It cancels a job (``cancel``: a queued one leaves
the queue; a running one is aborted on its workers, which stop within the round), and cancels
the jobs of a client gone for longer than ``dgboost.jobs.orphan-grace``, so a crashed notebook
does not hold the GPUs. Finished jobs are kept, up to ``dgboost.jobs.keep`` of them.

Clients reach it through the scheduler's RPC handlers named ``dgboost_jobs_*``; people through
``dgboost jobs`` (cli.py) and the page at ``/dgboost/jobs`` on the dashboard's HTTP server
(_page.py). It needs dgboost importable where the scheduler runs (the jobs' tasks need it there
too). Each job's client listens on CONTROL_TOPIC for a cancel of its job.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time

import dask
from distributed.diagnostics.plugin import SchedulerPlugin

from ._job import ATTEMPT_PREFIX, EVENT_TOPIC, abort_message, rank_key

logger = logging.getLogger("dgboost")

PLUGIN_NAME = "dgboost-jobs"
#: The topic the table tells a job's client of a cancel on (the client listens while the job lives).
CONTROL_TOPIC = "dgboost-jobs"
WAITING = ("queued", "restarting")  # for their turn (a job preparing its data, too; a restart)
HOLDING = ("running", "cancelling", "restarting")  # their workers (a restart keeps its turn)
ACTIVE = ("queued", "restarting", "running")  # what a cancel stops; "ending": finished but for its word
DONE = ("finished", "failed", "cancelled")
#: Seconds the table waits for a cancelled job's tasks to end when its client does not say so.
_STOP_WAIT_SECONDS = 60.0


def job_id_of(attempt: str) -> str:
    """The job id in an attempt's name, ``dgboost-train-<id>`` or ``dgboost-train-<id>-r<n>``."""
    return attempt[len(ATTEMPT_PREFIX):].split("-")[0] if attempt.startswith(ATTEMPT_PREFIX) else ""


class JobRegistry(SchedulerPlugin):
    name = PLUGIN_NAME
    idempotent = True

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        self.jobs: dict[str, dict] = {}
        self._order = itertools.count()
        self._turns = asyncio.Condition()
        self._orphans: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set = set()
        self.keep = int(dask.config.get("dgboost.jobs.keep", 100))
        self.orphan_grace = float(dask.utils.parse_timedelta(dask.config.get("dgboost.jobs.orphan-grace", "60s"),
                                                            default="seconds"))
        scheduler.handlers.update({f"dgboost_jobs_{name}": getattr(self, name) for name in
                                   ("submit", "acquire", "release", "finish", "cancel", "list", "show", "status",
                                    "note")})
        from ._page import add_routes

        add_routes(scheduler, self)

    # ---- the handlers (on the scheduler's event loop) -------------------------------------------

    def submit(self, record: dict) -> None:
        """A new job, queued: ``record`` holds its id, name, owner, user, priority, rounds."""
        record = {**record, "status": "queued", "order": next(self._order), "submitted": time.time(),
                  "started": None, "ended": None, "round": None, "metrics": {}, "curves": {}, "workers": [],
                  "rows": None, "attempt": None, "error": None, "model": None, "restarts": 0}
        self.jobs[record["id"]] = record
        self._forget_old()

    async def acquire(self, id: str, attempt: str, workers: list) -> str:
        """Wait for job ``id``'s turn on ``workers``; returns "running", else the status that ended
        the wait ("cancelled", or that of a job its client ended meanwhile)."""
        async with self._turns:
            while True:
                job = self.jobs.get(id)
                if job is None:
                    return "cancelled"
                if job["status"] not in WAITING:
                    return "cancelled" if job["status"] in ("cancelling", "cancelled") else job["status"]
                job["wanted"] = list(workers)
                if self._may_run(job):
                    if job["attempt"] is not None:
                        job["restarts"] += 1
                    job.update(status="running", attempt=attempt, workers=list(workers),
                               started=job["started"] or time.time())
                    job.pop("wanted")
                    return "running"
                await self._turns.wait()

    async def release(self, id: str, final: bool = True) -> str | None:
        """Job ``id``'s attempt ended, its ranks stopped. ``final``: the job ends (finish follows), its
        workers go to the next in the queue; else it restarts, keeping its workers (those left)
        until its next attempt has its turn, before any queued job. Returns its status then."""
        async with self._turns:
            job = self.jobs.get(id)
            if job is not None and job["status"] == "running":
                job["status"] = "ending" if final else "restarting"
            elif job is not None and job["status"] == "cancelling":
                job.update(status="cancelled", ended=time.time())
            self._turns.notify_all()
            return None if job is None else job["status"]

    async def finish(self, id: str, status: str, error: str | None = None) -> None:
        """Job ``id`` ended as ``status`` (a model made wins over a cancel that came too late)."""
        async with self._turns:
            job = self.jobs.get(id)
            if job is not None:
                if status != "finished" and job["status"] in ("cancelling", "cancelled"):
                    status = "cancelled"
                job.update(status=status, ended=time.time(), error=error)
                job.pop("wanted", None)
            self._turns.notify_all()
        self._forget_old()

    async def cancel(self, id: str, by: str = "") -> str:
        """Cancel job ``id`` (an id's unique start will do); returns its status before, or "unknown".

        A queued job leaves the queue at once. A running one is "cancelling": its ranks are
        aborted and it keeps its workers until they have stopped (its client releases them; for a
        client gone, the scheduler sees its tasks end), so the next job never shares them."""
        job = self._find(id)
        if job is None:
            return "unknown"
        before = job["status"]
        if before not in ACTIVE:
            return before
        reason = f"dgboost job {job['id']} was cancelled" + (f" by {by}" if by else "")
        async with self._turns:
            if before == "running":
                job.update(status="cancelling", error=reason)
            else:
                job.update(status="cancelled", error=reason, ended=time.time())
            self._turns.notify_all()
        # Its client stops waiting for its turn or its data, and says so to whoever waits on it.
        self.scheduler.log_event(CONTROL_TOPIC, {"job": ATTEMPT_PREFIX + job["id"], "cancelled": reason})
        if before == "running":
            self._background(self._stop_ranks(job, reason))
        return before

    def list(self) -> list[dict]:
        """Every job, newest first, without its curves."""
        return [self._summary(job) for job in sorted(self.jobs.values(), key=lambda j: -j["order"])]

    def status(self, id: str) -> str | None:
        """Job ``id``'s status alone (a client asks it when its ranks failed)."""
        job = self.jobs.get(id)
        return None if job is None else job["status"]

    def show(self, id: str) -> dict | None:
        job = self._find(id)
        return None if job is None else {**self._summary(job), "curves": job["curves"], "error": job["error"]}

    def note(self, id: str, model: str | None = None, rows: int | None = None) -> None:
        job = self.jobs.get(id)
        if job is not None:
            if model is not None:
                job["model"] = model
            if rows is not None:
                job["rows"] = rows

    # ---- the scheduler's hooks --------------------------------------------------------------------

    def log_event(self, topic, msg) -> None:
        if topic != EVENT_TOPIC or not isinstance(msg, dict) or "round" not in msg:
            return
        job = self.jobs.get(job_id_of(str(msg.get("job", ""))))
        if job is None:
            return
        job["round"] = msg["round"]
        job["metrics"] = msg.get("metrics", {})
        job["updated"] = time.time()
        job.setdefault("first_round", msg["round"])
        done = msg["round"] - job["first_round"]  # a restart may replay a round: it replaces the old
        for name, metrics in job["metrics"].items():
            for metric, value in metrics.items():
                curve = job["curves"].setdefault(name, {}).setdefault(metric, [])
                del curve[done:]
                curve.append(value)

    def remove_client(self, scheduler, client: str) -> None:
        """A client gone: its active jobs are cancelled after the grace period."""
        if any(job["owner"] == client and job["status"] in (*ACTIVE, "ending") for job in self.jobs.values()):
            loop = asyncio.get_running_loop()
            self._orphans[client] = loop.call_later(self.orphan_grace,
                                                    lambda: self._background(self._cancel_orphans(client)))

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        """A worker gone: the running jobs that held it are aborted on their other workers at once.
        Their ranks may be blocked in a GPU collective that would wait for the dead one until the
        client's next look; the client then restarts the job, or fails it, as it decides."""
        for job in self.jobs.values():
            if job["status"] == "running" and job["attempt"] and worker in job["workers"]:
                rank = job["workers"].index(worker)
                others = [w for w in job["workers"] if w != worker and w in scheduler.workers]
                if others:
                    self._background(self.scheduler.broadcast(
                        msg=abort_message(job["attempt"], f"worker {worker} (rank {rank}) left the cluster"),
                        workers=others, on_error="ignore"))

    def add_client(self, scheduler, client: str) -> None:
        handle = self._orphans.pop(client, None)
        if handle is not None:  # the same client back (a reconnect keeps its id)
            handle.cancel()

    # ---- inside ----------------------------------------------------------------------------------

    async def _cancel_orphans(self, client: str) -> None:
        self._orphans.pop(client, None)
        for job in list(self.jobs.values()):
            if job["owner"] == client and job["status"] == "ending":  # its client's last word never came
                job.update(status="failed", ended=time.time(), error=f"its client {client} left before it said")
                continue
            if job["owner"] == client and job["status"] in ACTIVE:
                logger.warning("dgboost job %s: its client %s left %.0f s ago; cancelling it", job["id"], client,
                               self.orphan_grace)
                try:
                    await self.cancel(job["id"], by=f"the scheduler: its client left {self.orphan_grace:g} s before")
                except Exception:  # noqa: BLE001 - the next job is cancelled all the same
                    logger.exception("dgboost job %s: the cancel failed", job["id"])

    async def _stop_ranks(self, job: dict, reason: str) -> None:
        """Abort a cancelled job's ranks, then, should no client release its workers (a client
        gone), release them once its tasks have ended (or after _STOP_WAIT_SECONDS)."""
        workers = [w for w in job["workers"] if w in self.scheduler.workers]
        if workers:  # they raise at their next collective
            await self.scheduler.broadcast(msg=abort_message(job["attempt"], reason), workers=workers,
                                           on_error="ignore")
        deadline = time.monotonic() + _STOP_WAIT_SECONDS
        ranks = [rank_key(job["attempt"], rank) for rank in range(len(job["workers"]))]
        while job["status"] == "cancelling" and time.monotonic() < deadline:
            tasks = [self.scheduler.tasks.get(key) for key in ranks]
            if not any(task is not None and task.state == "processing" for task in tasks):
                break
            await asyncio.sleep(0.2)
        async with self._turns:
            if job["status"] == "cancelling":
                job.update(status="cancelled", ended=time.time())
            self._turns.notify_all()

    def _background(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)  # referenced until done
        task.add_done_callback(self._tasks.discard)

    def _may_run(self, job: dict) -> bool:
        """No running job holds one of its workers, and no queued job that may want one ranks before
        it (one still preparing its data, whose workers are not known yet, may want any)."""
        mine = set(job["wanted"])
        restarting = job["status"] == "restarting"  # it had its turn: queued jobs do not pass it
        for other in self.jobs.values():
            if other is job:
                continue
            if other["status"] in HOLDING and mine & set(other["workers"]):
                return False
            if not restarting and other["status"] in WAITING and _rank(other) < _rank(job) and \
                    ("wanted" not in other or mine & set(other["wanted"])):
                return False
        return True

    def _find(self, id: str) -> dict | None:
        if id in self.jobs:
            return self.jobs[id]
        found = [job for key, job in self.jobs.items() if id and key.startswith(id)]
        return found[0] if len(found) == 1 else None

    def _forget_old(self) -> None:
        done = sorted((job for job in self.jobs.values() if job["status"] in DONE), key=lambda j: j["order"])
        for job in done[:max(0, len(done) - self.keep)]:
            del self.jobs[job["id"]]

    @staticmethod
    def _summary(job: dict) -> dict:
        rounds_done = 0 if job["round"] is None else job["round"] + 1 - job.get("first_round", job["round"])
        eta = None
        if job["status"] in ("running", "restarting") and job["started"] and rounds_done:
            left = job["rounds"] - rounds_done
            eta = (job.get("updated", time.time()) - job["started"]) / rounds_done * max(0, left)
        keys = ("id", "name", "owner", "user", "status", "priority", "submitted", "started", "ended", "round",
                "rounds", "metrics", "workers", "rows", "model", "restarts", "error")
        return {**{key: job.get(key) for key in keys}, "rounds_done": rounds_done, "eta": eta}


def _rank(job: dict) -> tuple:
    return (-job["priority"], job["order"])
