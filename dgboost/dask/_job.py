"""The task each worker of a training job runs: its shard in, (on rank 0) the model out."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time

import numpy as np

from ..backend import get_xp
from ..callback import TrainingCallback, latest_metrics
from ..collective import CollectiveError, LocalCommunicator
from ..data import sparse
from ..data.inputs import Dataset, RowSpans, check_feature_names, make_dataset
from ..data.pages import device_budget, stays_on_host
from ..kernels.loops import using_threads
from ..objectives import make_objective
from ..training import EvalSet, Options, Resume, boost, device_module, to_device
from ..tree.constraints import FeatureRules
from ._restart import JournalSender, RoundsDone, retryable
from ._shards import Incoming, concat_bundles, move_pieces

logger = logging.getLogger("dgboost")


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """What every rank of one job shares."""

    name: str  # unique; the tasks' keys start with "dgboost-train"
    addresses: tuple[str, ...]  # rank -> worker address
    timeout: float  # seconds any one collective wait may take
    options: Options
    evals: tuple[tuple[str, bool], ...]  # (name, is the training data) of each eval set
    n_features: int | None  # as X's shape says (None: unknown); the client checked its partitions' too
    client_draws_progress: bool = False  # the client draws a bar from round events: print no lines
    keep_nccl: bool = True  # GPU ranks keep their NCCL communicator for the next job (collective.nccl)
    cuda_graphs: tuple = (True, True)  # the client's _settings.cuda_graphs: where rounds may replay a CUDA graph
    feature_weights: object = None  # (n_features,) numpy array: column sampling's weights, or None
    journal: bool = False  # rank 0 sends each finished round to the client (_restart.JournalSender)
    resume: Resume | None = None  # a restart's standing: options.init_model holds its finished rounds


def train_rank(job: JobSpec, rank: int, shard: list, runs: tuple, evals: list[list], sends: list = ()):
    """Train on this worker's rows as rank ``rank`` of ``job``.

    ``shard`` holds the bundles of this rank's rows, in global order (an ``Incoming`` piece
    for each that another rank sends it), ``runs`` their global row runs; ``evals[i]`` the
    bundles of eval set i held here (maybe none); ``sends`` the pieces this rank sends others
    (``_shards.move_pieces``).

    Rank 0 returns (the Booster; seconds of each of its phases; its notes of how the job ran,
    e.g. out of core; its collectives' traffic, ``_traffic``), the other ranks their traffic.
    """
    from distributed import get_worker

    with _profiler_paused(get_worker()):
        return _train_rank(job, rank, shard, runs, evals, sends)


#: Each worker's (by the Worker's id) ranks running with its profiler paused, and whether the
#: first of them stopped it: the last starts it again then (a failed job's rank may still be
#: stopping as the next job's starts).
_pausing: dict[int, list] = {}
_pausing_lock = threading.Lock()


@contextlib.contextmanager
def _profiler_paused(worker):
    """The worker's statistical profiler paused while a rank runs. It samples every running
    task's stack 100 times a second on the worker's event loop, holding the GIL that the
    rank's thread needs between its kernel launches: a GPU round of 10M rows on two GPUs
    lost 1 to 2 ms to it (benchmarks/kernel_profile.py --workers 2, DASK_DISTRIBUTED__WORKER__
    PROFILE__ENABLED=False). The dashboard's profile of the rank's task would only show it
    waiting in its calls."""
    sampling = worker.periodic_callbacks.get("profile")
    if sampling is None:  # the worker's config turned it off
        yield
        return
    with _pausing_lock:
        ranks = _pausing.setdefault(id(worker), [0, False])
        ranks[0] += 1
        if ranks[0] == 1 and sampling.is_running():
            ranks[1] = True
            worker.loop.add_callback(sampling.stop)  # the loop's own to stop and start
    try:
        yield
    finally:
        with _pausing_lock:
            ranks[0] -= 1
            if not ranks[0]:
                del _pausing[id(worker)]
                if ranks[1] and worker.status.name not in ("closing", "closing_gracefully", "closed", "failed"):
                    with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: nothing to start
                        worker.loop.add_callback(sampling.start)


def _train_rank(job: JobSpec, rank: int, shard: list, runs: tuple, evals: list[list], sends: list):
    from distributed import get_worker

    from ..collective.host import DaskCommunicator

    clock = _Phases()
    host = DaskCommunicator(job.name, rank, job.addresses, job.timeout)
    comm = host
    on_gpu, failed = _worker_device(job.options.params.device) == "cuda", False
    try:
        params = job.options.params
        objective = make_objective(params)
        xp = device_module(_worker_device(params.device))
        comm = _device_communicator(host, xp, job)
        clock.lap("communicator (kept)" if getattr(comm, "reused", False) else "communicator")
        moved = None  # the traffic of the rows moved: apart from the collectives'
        if sends or any(isinstance(piece, Incoming) for piece in shard):
            before = _traffic(host, comm)
            shard = move_pieces(host, comm, shard, sends)
            moved = {k: v - before[k] for k, v in _traffic(host, comm).items()}
            clock.lap("rows moved in")
        # Checked where each partition was made (_shards.make_bundle). An X that stays on the host
        # stays in its pieces: its matrix is read from them a chunk at a time (no joined copy).
        training = concat_bundles(shard, join_X=not _pieces_stay_apart(params, shard, xp))
        eval_sets = [_eval_set(index, name, is_training, parts, training, objective)
                     for index, ((name, is_training), parts) in enumerate(zip(job.evals, evals))]
        training = to_device(training, xp, params)
        for eval_set in eval_sets:
            eval_set.data = to_device(eval_set.data, xp, params)
        clock.lap("shard")
        options = job.options
        if job.client_draws_progress:
            options = dataclasses.replace(options, period=0)
        if job.resume is None:
            own = options.all_callbacks(_ClientLines() if rank == 0 and options.period else None)
        else:  # as they stood after the last finished round
            own = list(job.resume.started)
        notes = _Notes()
        # A job of one worker has no collective that an abort (a cancel, the client's stop) would
        # interrupt: its rank looks for one before each round.
        callbacks = ([_StopAtAbort(host)] if host.world_size == 1 else []) + own + [_RoundEvents(job.name), notes]
        if job.journal and rank == 0:
            callbacks.append(JournalSender(job.name, own))  # last: it sends what the others did
        elif peers_vouch(job):
            callbacks.append(RoundsDone(job.name, rank))  # vouches for rank 0's round before
        with using_threads(get_worker().state.nthreads):  # params' nthread, if given, overrides it in boost
            # The client checked the parameters against X's features where it knew them.
            features = FeatureRules.resolve(params, training.n_features, training.feature_names, job.feature_weights)
            booster = boost(params, objective, training, eval_sets, comm, num_boost_round=job.options.num_boost_round,
                            callbacks=callbacks, rows=RowSpans(runs), init_model=job.options.init_model,
                            features=features, resume=job.resume, graphs=job.cuda_graphs)
        clock.lap("boosting")
        traffic = _traffic(host, comm, moved)
        return (booster, clock.seconds, notes.texts, traffic) if rank == 0 else traffic
    except CollectiveError:
        failed = True
        raise  # another rank failed first, or a wait timed out (the peers were told)
    except BaseException as error:
        failed = True
        group_failure = _group_failure(comm, error)
        if group_failure is not None:
            raise group_failure from error
        comm.abort(f"{type(error).__name__}: {error}")
        raise
    finally:
        if comm is not host and hasattr(comm, "close"):
            comm.close()  # closes host too (and aborts NCCL if the job failed)
        else:
            host.close()
        if failed and on_gpu:
            _restart_if_device_broken(rank)


def _group_failure(comm, error: BaseException) -> CollectiveError | None:
    """The group's failure where it failed before this rank's ``error``, which then follows from
    it (values an aborted collective left, read on the host: an index out of bounds, say) and
    must not be reported as the job's cause, nor stop a restart as a bug's error would. A
    retryable error (NCCL's, a lost connection: maybe this rank's own watchdog failed the group
    for it) is kept: it already lets the job restart, and it names its rank."""
    if retryable(error):
        return None
    try:
        comm.check()
    except CollectiveError as failure:
        return failure
    return None


#: The Dask event topic of training progress: one event a round, from the coordinator.
EVENT_TOPIC = "dgboost-train"
#: How a job's attempts are named: ``dgboost-train-<id>``, then ``-r<n>`` for its restarts.
ATTEMPT_PREFIX = "dgboost-train-"


def rank_key(attempt: str, rank: int) -> str:
    """The Dask key of an attempt's task of rank ``rank``."""
    return f"{attempt}-{rank}"


class _StopAtAbort(TrainingCallback):
    """Raises the job's abort (``DaskCommunicator.check``) before a round: a rank that calls
    no collective a round would otherwise train on to its last round after a cancel, its
    worker held all the while."""

    every_rank = True
    never_stops = True

    def __init__(self, host):
        self.host = host

    def before_iteration(self, model, epoch, evals_log):
        self.host.check()
        return False


class _RoundEvents(TrainingCallback):
    """Sends each round's latest metrics as a Dask event (``client.get_events("dgboost-train")``,
    or ``client.subscribe_topic``): ``{"job", "round", "metrics": {set: {metric: value}}}``."""

    never_stops = True

    def __init__(self, job: str):
        self.job = job

    def after_iteration(self, model, epoch, evals_log):
        from distributed import get_worker

        get_worker().log_event(EVENT_TOPIC, {"job": self.job, "round": epoch, "metrics": latest_metrics(evals_log)})
        return False

    def note(self, text: str) -> None:
        """How the job runs (e.g. out of core): an event the client logs and shows on its bar."""
        from distributed import get_worker

        get_worker().log_event(EVENT_TOPIC, {"job": self.job, "note": text})


class _Notes(TrainingCallback):
    """Keeps the coordinator's notes of how the job runs, for the client's log."""

    never_stops = True

    def __init__(self):
        self.texts: list[str] = []

    def note(self, text: str) -> None:
        self.texts.append(text)


class _ClientLines:
    """A text file whose lines print on the client, as distributed.print's do (the
    coordinator's progress reaches the user's terminal, not only the worker's log)."""

    def __init__(self):
        self._partial = ""  # all its state: it is pickled with the callbacks for a restart

    def write(self, text: str) -> int:
        from distributed import get_worker

        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            get_worker().log_event("print", {"args": (line,), "file": 1})
        return len(text)

    def flush(self) -> None:
        """Nothing to do: whole lines go out as they are written."""


def _traffic(host, comm, moved: dict | None = None) -> dict:
    """The rank's collectives: {"calls", "bytes_sent"} over its communicators (NCCL's device
    calls and the host's; none for a one-worker job), less ``moved``, the traffic of the rows
    it sent before training (``move_pieces``), whose bytes are "moved_bytes"."""
    counted = [host.traffic] + ([comm.traffic] if comm is not host else [])
    moved = moved or {"calls": 0, "bytes_sent": 0}
    return {"calls": sum(t.calls for t in counted) - moved["calls"],
            "bytes_sent": sum(t.bytes_sent for t in counted) - moved["bytes_sent"], "moved_bytes": moved["bytes_sent"]}


class _Phases:
    """Wall seconds of a rank's phases, for the client's log."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 4)
        self._last = now


def _eval_set(index: int, name: str, is_training: bool, parts: list, training: Dataset, objective):
    if is_training:
        return EvalSet(name, training, is_training=True)
    where = f"evals[{index}] "
    if parts:
        data = concat_bundles(parts)
        if data.n_features != training.n_features:
            raise ValueError(f"{where}X has {data.n_features} features but the training X has "
                             f"{training.n_features}")
        check_feature_names(training.feature_names, data.feature_names, f"{where}X")
    else:  # none of this eval set's rows are on this worker
        import numpy as np

        columns = objective.label_columns
        data = make_dataset(np.zeros((0, training.n_features), np.float32),
                            np.zeros((0, columns) if columns > 1 else 0, np.float32), n_outputs=objective.n_outputs,
                            label_columns=columns, label_bounds=objective.label_bounds, where=where, allow_empty=True)
        group = None if training.group is None else np.zeros(1, np.int64)  # no queries here
        data = dataclasses.replace(data, feature_names=training.feature_names, group=group)
    return EvalSet(name, data)


def _pieces_stay_apart(params, shard: list, xp) -> bool:
    """Whether this rank's X, a dense one on the host in several pieces, stays in them
    (data.inputs.RowBlocks): always on a CPU worker, whose matrix is built from them as from
    the joined X (a join would copy every value, for nothing); on a GPU worker where X would
    stay on the host joined (training.to_device: its matrix may exceed the device's budget,
    or its values would not fit beside it there). Not categorical features: their codes and
    statistics are made from the joined X."""
    if params.enable_categorical or len(shard) < 2:
        return False
    first = shard[0][0]
    if sparse.is_sparse(first) or get_xp(first) is not np:
        return False
    if xp is np:
        return True
    n_rows = sum(int(bundle[0].shape[0]) for bundle in shard)
    value_bytes = sum(int(bundle[0].nbytes) for bundle in shard)
    return stays_on_host(n_rows, int(first.shape[1]), value_bytes, device_budget(params, xp), params.max_bin)


def peers_vouch(job: JobSpec) -> bool:
    """Whether rank 0's rounds are journaled only once every peer vouched for them
    (_restart.RoundsDone): where the ranks sum through NCCL, which reads a peer's buffers in
    place, so a dying peer can leave half-read sums. The host collective's messages arrive
    whole or not at all."""
    return job.journal and _worker_device(job.options.params.device) == "cuda"


def _worker_device(device: str) -> str:
    """A worker owns one GPU, its current device (dask-cuda sets CUDA_VISIBLE_DEVICES):
    'cuda:N' in a cluster means 'this worker's GPU', as in xgboost.dask."""
    return "cuda" if device.startswith("cuda") else device


#: Seconds a failed GPU rank waits for its device to finish what was queued before it judges it hung.
DEVICE_CHECK_SECONDS = 30.0


def _restart_if_device_broken(rank: int) -> None:
    """After a failed job on a GPU: make sure the worker's GPU still works, or end the worker's
    process (its nanny starts a fresh one).

    A CUDA error such as an illegal address is sticky: every later call of the process fails
    with it, so a worker left so would fail every job it is given. Kernels queued behind an
    aborted NCCL collective read what it never wrote (collective.nccl zeroes its outputs for
    that), and one that NCCL read from a dead peer's freed buffers may be anything."""
    import os
    import threading

    import cupy

    outcome: dict = {}
    device = cupy.cuda.Device()  # the rank's (a thread starts on device 0)

    def synchronize():
        try:
            with device:
                cupy.cuda.runtime.deviceSynchronize()
            outcome["ok"] = True
        except Exception as error:  # noqa: BLE001 - any CUDA error: the context is unusable
            outcome["error"] = error

    began = time.perf_counter()
    thread = threading.Thread(target=synchronize, name="dgboost-device-check", daemon=True)
    thread.start()
    thread.join(DEVICE_CHECK_SECONDS)
    if outcome.get("ok"):
        logger.info("rank %d: the GPU works after the failed job (checked in %.3f s)", rank,
                    time.perf_counter() - began)
        return
    why = (f"{type(outcome['error']).__name__}: {outcome['error']}" if "error" in outcome
           else f"its queued work did not finish in {DEVICE_CHECK_SECONDS:g} s")
    logger.error("dgboost: rank %d's GPU is unusable after the job failed (%s); this worker's process ends so "
                 "that its nanny starts a fresh one", rank, why)
    for handler in logging.getLogger().handlers + logger.handlers:
        handler.flush()
    # At once, while the job still holds this worker: no job after it may be given it. The
    # job sees the worker leave (a lost worker, which it may restart after).
    os._exit(70)  # EX_SOFTWARE


def _device_communicator(host, xp, job: JobSpec):
    """The communicator ``boost`` talks through: the world of one for a one-worker job;
    NCCL between GPUs; the host communicator between CPU workers."""
    import numpy as np

    if host.world_size == 1:
        return LocalCommunicator()
    if xp is np:
        return host
    from ..collective.nccl import NcclCommunicator

    return NcclCommunicator(host, timeout=job.timeout, keep=job.keep_nccl)


def abort_message(attempt: str, reason: str) -> dict:
    """The message that stops attempt ``attempt``'s ranks on the workers it is broadcast to
    (``Scheduler.broadcast``, from the client or the job table): every wait raises ``reason``."""
    from ..collective.host import ABORT_OP

    return {"op": ABORT_OP, "job": attempt, "reason": reason}
