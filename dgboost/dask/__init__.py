"""Training and prediction on a Dask cluster: one GPU (or CPU process) per worker.

``train`` runs the single-process boosting loop (training.boost) on every
worker at once, each on a near-equal share of the rows; histograms are summed
over the workers (NCCL between GPUs, Dask's comms between CPU workers), the
coordinator (rank 0) picks the splits and every worker applies them. The model
is the same, bit for bit, as ``dgboost.train`` on the whole data, whatever the
number of workers or the partitioning.

A job's steps, as ../docs/architecture.md tells them:

1. check params and the collections' metadata (nothing computed yet);
2. one future per row partition (X, y, weight, margin together), its length,
   and the worker that holds it;
3. near-equal shares (``_shards.plan_shards``): rows stay where they are up to
   a worker's share, the rest are cut and moved; the log says before and after;
4. a ``distributed.MultiLock`` on the job's workers, then one long task per
   worker, pinned to it, keyed ``dgboost-train-...``;
5. the client watches: a task's error, or a worker leaving the cluster, stops
   every rank (``_job.abort_job``) and raises here within a bounded time.

Settings (dask.config): ``dgboost.timeout`` (default "300s"), the longest any
one collective wait may take before the job is aborted; ``dgboost.keep-nccl``
(default True): a GPU worker keeps its NCCL communicator for the next job over
the same workers (``collective.nccl``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import os
import threading
import time
import uuid

import dask
import distributed
import numpy as np

from ..backend import get_xp, to_numpy
from ..booster import Booster
from ..callback import ProgressLine, on_terminal
from ..collective import CollectiveError, PeerUnreachable
from ..data.categories import resolve as resolve_categories
from ..data.inputs import check_feature_names
from ..data.sparse import is_sparse
from ..tree.constraints import FeatureRules
from ..training import Options, aligned_list, check_groups, eval_entries
from . import _shards
from ._job import EVENT_TOPIC, JobSpec, abort_job, train_rank
from ._restart import JOURNAL_TOPIC, Journal, _CannotResume, retryable

#: A job resumes this many times after lost workers (train's max_restarts).
DEFAULT_MAX_RESTARTS = 3

__all__ = ["DaskDGBClassifier", "DaskDGBRanker", "DaskDGBRegressor", "JobCancelled", "TrainingJob", "cancel",
           "install", "job_info", "jobs", "local_cluster", "predict", "submit", "train"]


def __getattr__(name: str):
    """The estimators load on first use: they need scikit-learn."""
    if name in ("DaskDGBClassifier", "DaskDGBRanker", "DaskDGBRegressor"):
        from . import _estimators

        return getattr(_estimators, name)
    raise AttributeError(f"module 'dgboost.dask' has no attribute {name!r}")

logger = logging.getLogger("dgboost")

#: Seconds between the client's looks at a running job (task states, workers alive).
_POLL_SECONDS = 0.5
#: Seconds the client gives the ranks of a failed job to stop before it cancels their tasks.
_STOP_GRACE_SECONDS = 10.0
#: Seconds the client waits, when ranks failed at a peer, for the scheduler to see a worker gone.
_LOSS_GRACE_SECONDS = 5.0
_DEFAULT_TIMEOUT = "300s"
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)  # the same class from Python 3.11
#: What distributed.wait raises for a future cancelled meanwhile (its input lost for good, say).
_CANCELLED = (concurrent.futures.CancelledError, asyncio.CancelledError)


def train(client, params, X, y, **arguments) -> Booster:
    """Train a gradient-boosted tree model on the workers of a Dask cluster: ``submit``'s job,
    waited for (``submit(...).result()``; an interrupt of the wait cancels the job).

    Takes ``submit``'s arguments (``name=`` and ``priority=`` too) and returns its Booster, equal
    (bytes of its saved model) to dgboost.train's on the same rows.
    """
    job = submit(client, params, X, y, **arguments)
    try:
        return job.result()
    except KeyboardInterrupt:
        job.cancel()
        raise


def submit(client, params, X, y, *, num_boost_round: int = 100, evals=(), sample_weight=None,
           base_margin=None, early_stopping_rounds: int | None = None, callbacks=None,
           verbose_eval: bool | int = False, init_model=None, feature_weights=None, qid=None,
           eval_qid=None, max_restarts: int = DEFAULT_MAX_RESTARTS, name: str | None = None,
           priority: int = 0) -> "TrainingJob":
    """Submit a training job to the workers of a Dask cluster; returns at once.

    The job is checked here (params, the collections' metadata: bad input raises now), then
    queued: jobs that need the same workers run one at a time, in priority then submission
    order, whichever client submitted them. Every client of the cluster sees it (``dgboost jobs``,
    the dashboard's ``/dgboost/jobs`` page).

    Parameters
    ----------
    client : distributed.Client or None
        None uses the current default client.
    params : dict
        Training parameters under XGBoost's names (docs/parameters.md). On a
        cluster ``device="cuda"`` means each worker's own GPU.
    X : dask.array.Array (chunked by rows only) or dask.dataframe.DataFrame
        Chunks may be numpy or cupy arrays, partitions pandas or cudf frames.
    y : dask array or Series with X's row partitioning
    num_boost_round, early_stopping_rounds, callbacks, verbose_eval
        As in ``dgboost.train``; callbacks run on the coordinator (rank 0).
    evals : sequence of (X, y, name) with dask collections
        Passing the training (X, y) again reuses its matrix.
    sample_weight, base_margin : dask collections with X's row partitioning, optional
    init_model : Booster or path, optional
        Continue training from this model, as in ``dgboost.train``.
    feature_weights : array (n_features,), optional
        Column sampling's weights, as in ``dgboost.train`` (a small array on the client).
    qid : dask collection with X's row partitioning, optional
        Ranking's query ids (rank:*), ascending over the whole collection. The workers' shares
        are cut only where a query starts, so no query is split (the log says how even
        that leaves them); a query may span partitions.
    eval_qid : list, one dask collection an eval set (None for the training set), optional
    max_restarts : int
        How many times the job may resume on the workers left when a worker is lost (it died or
        left) or a rank's connection or NCCL fails: it goes on from its last finished round, on
        the rows re-shared over the workers there are then, and makes the model an
        uninterrupted run makes. 0: such a loss fails the job at once. Bad input or a bug on a
        rank fails it at once whatever this says.
    name : str, optional
        What the job table shows (default: the objective and the rounds).
    priority : int
        A job of higher priority runs before queued jobs of lower priority (default 0).

    Returns
    -------
    TrainingJob: its status, progress and result (the Booster, equal, bytes of its saved
    model, to dgboost.train's on the same rows); ``cancel()`` stops it.
    """
    options = Options.check(params, num_boost_round, early_stopping_rounds, callbacks, verbose_eval,
                            has_evals=isinstance(evals, (list, tuple)) and len(evals) > 0,
                            init_model=init_model)
    client = _client(client)
    categorical = options.params.enable_categorical
    _shards.check_collection(X, "X", features=True, enable_categorical=categorical)
    if y is None:
        raise ValueError("y is required: pass the labels as a dask collection with X's partitions")
    _shards.check_collection(y, "y", features=False, like=X)
    options = dataclasses.replace(options, params=options.params.with_targets(_target_columns(y, options.params)))
    for what, value in (("sample_weight", sample_weight), ("base_margin", base_margin), ("qid", qid)):
        if value is not None:
            _shards.check_collection(value, what, features=False, like=X)
    check_groups(options.params, qid is not None)
    eval_specs = _check_evals(evals, X, y, categorical, aligned_list(eval_qid, evals, "eval_qid"), options.params,
                              qid)
    categories = _shards.column_categories(X, categorical)  # every partition codes its categories by these
    timeout = _timeout()
    keep_nccl = _keep_nccl()
    n_features = _shards.n_columns(X)
    if feature_weights is not None:
        feature_weights = np.asarray(to_numpy(feature_weights.compute() if hasattr(feature_weights, "compute")
                                              else feature_weights), dtype=np.float64)
    if n_features is not None:  # else each rank checks, with its shard's features
        FeatureRules.resolve(options.params, n_features, _shards.column_names(X), feature_weights)
        resolve_categories(options.params, n_features, categories, feature_names=_shards.column_names(X))
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts={max_restarts!r} must be an integer >= 0 (0: no restart)")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority={priority!r} must be an integer (higher runs first)")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name={name!r} must be a string")
    job_id = uuid.uuid4().hex[:16]
    spec = JobSpec(f"dgboost-train-{job_id}", (), timeout, options,
                   tuple((set_name, is_training) for _, _, set_name, is_training, _ in eval_specs), n_features,
                   client_draws_progress=bool(options.period) and on_terminal(), keep_nccl=keep_nccl,
                   feature_weights=feature_weights, journal=max_restarts > 0)
    name = name or f"{options.params.objective}, {num_boost_round} rounds"
    job = TrainingJob(client, job_id, name, priority, options.num_boost_round, _has_job_table(client))

    def run() -> Booster:
        started = time.perf_counter()
        with _Futures(client) as futures:
            job._hold(futures)
            rows = _rows(client, futures, options.params, X, y, sample_weight, base_margin, "", categories, qid)
            if sum(summary.n_rows for summary in rows.summaries) == 0:
                raise ValueError("X has no rows: training needs at least one")
            evals = [None if is_training else
                     _rows(client, futures, options.params, eval_X, eval_y, None, None, f"evals[{index}] ",
                           categories, eval_qid)
                     for index, (eval_X, eval_y, _, is_training, eval_qid) in enumerate(eval_specs)]
            return _Attempts(client, spec, rows, evals, max_restarts, started, job).run()

    job._start(run)
    return job


def _target_columns(y, params) -> int:
    """The targets of a dask y: a 2-D array's columns (but survival:aft's bounds), a DataFrame's."""
    if params.objective == "survival:aft":
        return 1
    if _shards.is_dask_array(y):
        return int(y.shape[1]) if y.ndim == 2 else 1
    return len(y.columns) if hasattr(y, "columns") else 1


@dataclasses.dataclass(frozen=True)
class _Rows:
    """A collection's row partitions, computed once a job (a lost one is recomputed from its
    graph by Dask): one future each, its bundle (X, y, weight, margin, qid), and what the
    client learnt of each."""

    bundles: list
    summaries: list
    by_query: bool


def _rows(client, futures, params, X, y, weight, base_margin, what: str, categories=None, qid=None) -> _Rows:
    bundles = futures.track(_bundles(client, params, X, y, weight, base_margin, what, categories, qid))
    return _Rows(bundles, _summaries(client, bundles), qid is not None)


def _share_rows(client, futures, rows: _Rows, timeout: float):
    """(the job's workers, each one's piece futures, each one's global row runs, rows moved),
    over the workers of the cluster now."""
    lengths = [summary.n_rows for summary in rows.summaries]
    workers = sorted(_workers(client))
    if not workers:
        raise RuntimeError("the Dask cluster has no workers: start some (dask worker, dask cuda worker) "
                           "or use dgboost.dask.local_cluster()")
    holders = _holders(client, rows.bundles, workers, timeout)
    plan = _plan(rows.summaries, holders, workers, rows.by_query)
    moved = _log_balance(lengths, holders, plan, workers)
    job_workers = [w for w in workers if plan[w]]  # workers beyond the rows sit the job out
    shards = {w: [_piece(client, futures, rows.bundles[p.part], p, lengths[p.part], holders[p.part])
                  for p in plan[w]] for w in job_workers}
    runs = {w: _shards.global_runs(plan[w], lengths) for w in job_workers}
    return job_workers, shards, runs, moved


def _plan(summaries, holders, workers, by_query: bool) -> dict:
    """Each worker's pieces: near-equal shares (``plan_shards``), or for ranking shares cut at
    query boundaries (``plan_query_shards``: the log says how uneven they are)."""
    lengths = [summary.n_rows for summary in summaries]
    if not by_query:
        return _shards.plan_shards(lengths, holders, workers)
    _shards.check_query_order(summaries)
    starts, last = [], None
    for summary in summaries:  # a partition's first row starts a query unless it goes on the last one
        inner = np.zeros(0, np.int64) if summary.query_starts is None else summary.query_starts
        new = summary.n_rows and (last is None or summary.qid_first != last)
        starts.append(np.concatenate([[0], inner]) if new else inner)
        last = summary.qid_last if summary.n_rows else last
    plan = _shards.plan_query_shards(lengths, starts, holders, workers)
    shares = [sum(p.n_rows for p in pieces) for pieces in plan.values()]
    logger.info("dgboost.dask: shares cut at query boundaries: the largest %.3f of an equal share",
                max(shares) / (sum(shares) / len(shares)))
    return plan


def _share_evals(client, futures, evals: list, job_workers, timeout: float) -> dict[str, list[list]]:
    """Each job worker's bundles of each eval set (none for the training set, None in ``evals``,
    which it has); a ranking eval set's shares are cut at query boundaries too, so each query
    is scored whole."""
    evals_of: dict[str, list[list]] = {w: [] for w in job_workers}
    for index, rows in enumerate(evals):
        if rows is None:
            for w in job_workers:
                evals_of[w].append([])
            continue
        holders = _holders(client, rows.bundles, job_workers, timeout, f"evals[{index}] X")
        lengths = [s.n_rows for s in rows.summaries]
        if not rows.by_query:
            plan = _shards.plan_evals(lengths, holders, job_workers)
            for w in job_workers:
                evals_of[w].append([rows.bundles[i] for i in plan[w]])
            continue
        plan = _plan(rows.summaries, holders, job_workers, True)
        for w in job_workers:
            evals_of[w].append([_piece(client, futures, rows.bundles[p.part], p, lengths[p.part], holders[p.part])
                                for p in plan[w]])
    return evals_of


def predict(client, booster: Booster, X, *, output_margin: bool = False):
    """Predict lazily where X's partitions are.

    Parameters
    ----------
    client : distributed.Client or None
        Kept for XGBoost's signature; the result is computed by whichever client computes it.
    booster : Booster
    X : dask.array.Array (chunked by rows only) or dask.dataframe.DataFrame
    output_margin : bool
        Raw margins rather than transformed predictions.

    Returns
    -------
    For an array: a dask array of shape (n_rows,), or (n_rows, n_outputs) for several
    outputs, float32, chunked as X's rows. For a DataFrame: a dask Series (one output)
    or DataFrame (columns 0..n_outputs-1) with X's index and partitions.
    """
    if client is not None:
        _client(client)
    if not isinstance(booster, Booster):
        raise TypeError(f"booster must be a dgboost.Booster, got {type(booster).__name__}")
    _shards.check_collection(X, "X", features=True, enable_categorical=booster.categories is not None)
    n_features = _shards.n_columns(X)
    if n_features is not None and n_features != booster.num_features:
        raise ValueError(f"X has {n_features} features but the model was trained on {booster.num_features}")
    check_feature_names(booster.feature_names, _shards.column_names(X), "X")
    model = dask.delayed(booster, pure=False)  # one key: shipped to each worker once
    k = booster.n_outputs
    if _shards.is_dask_array(X):
        meta = X._meta.astype(np.float32)  # numpy or cupy, as X's chunks
        if is_sparse(meta):  # predictions of sparse chunks are dense, on their device
            meta = get_xp(meta).zeros((0, 0), dtype=np.float32)
        if k == 1:
            return X.map_blocks(_predict_block, model, output_margin, drop_axis=1, meta=meta.reshape(0),
                                token="dgboost-predict")
        return X.map_blocks(_predict_block, model, output_margin, chunks=(X.chunks[0], (k,)), meta=meta,
                            token="dgboost-predict")
    return X.map_partitions(_predict_frame, model, output_margin, meta=_frame_meta(X, k))


def _predict_block(block, booster: Booster, output_margin: bool):
    return booster.predict(block, output_margin=output_margin)


def _predict_frame(frame, booster: Booster, output_margin: bool):
    values = booster.predict(frame, output_margin=output_margin)
    return _frame_like(frame, values)


def _frame_meta(X, k: int):
    return _frame_like(X._meta, np.zeros((0, k) if k > 1 else 0, np.float32))


def _frame_like(frame, values):
    """A Series (one output) or DataFrame of ``values`` with ``frame``'s index, of frame's library."""
    library = __import__(type(frame).__module__.split(".")[0])  # pandas or cudf
    if values.ndim == 1:
        return library.Series(values, index=frame.index, name="prediction")
    return library.DataFrame(values, index=frame.index)


def local_cluster(device: str = "cpu", n_workers: int | None = None, **kwargs):
    """A local Dask cluster set up for dgboost: dask-cuda's ``LocalCUDACluster`` with one
    worker per GPU for ``device="cuda"``, else a ``LocalCluster`` of worker processes.

    CPU workers are started without distributed's ``MALLOC_TRIM_THRESHOLD_=65536``: it
    stops glibc from adapting its mmap threshold, so every large NumPy temporary is mapped
    and faulted in afresh, which made dgboost's CPU path 3x slower (docs/performance.md).
    Other keyword arguments go to the cluster class.
    """
    kwargs.setdefault("dashboard_address", None)
    kwargs.setdefault("silence_logs", logging.ERROR)
    if device.startswith("cuda"):
        from ..backend import cuda_device_count

        found = cuda_device_count()
        if not found:
            raise ValueError(f"device={device!r} needs a CUDA GPU, and none was found: use device='cpu'")
        n_workers = found if n_workers is None else n_workers
        if not 1 <= n_workers <= found:
            raise ValueError(f"n_workers={n_workers} needs as many GPUs, found {found}")
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            raise ValueError("device='cuda' needs dask-cuda: install dgboost[cuda12] or dgboost[cuda13]") from None
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_workers)), **kwargs)
    n_workers = 2 if n_workers is None else n_workers
    kwargs.setdefault("threads_per_worker", max(1, (os.cpu_count() or 1) // n_workers))
    environ = {key: value for key, value in dask.config.get("distributed.nanny.pre-spawn-environ", {}).items()
               if key != "MALLOC_TRIM_THRESHOLD_"}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return distributed.LocalCluster(n_workers=n_workers, processes=True, **kwargs)


# ---- the client's side of a job ---------------------------------------------------------------

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


def _workers(client) -> set[str]:
    """Addresses of every worker of the cluster now."""
    return set(worker_info(client))


def worker_info(client) -> dict:
    """Every worker of the cluster now, address to what the scheduler knows of it, asked of
    the scheduler. (Not ``client.scheduler_info()``: the client's periodic refresh, which
    lists no workers, may replace what that call fetched before it returns it.)"""
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1)  # newer distributed lists 5 unless asked
    except TypeError:  # older: no such argument, every worker listed
        info = client.sync(client.scheduler.identity)
    return dict(info["workers"])


def _timeout() -> float:
    from dask.utils import parse_timedelta

    value = dask.config.get("dgboost.timeout", _DEFAULT_TIMEOUT)
    try:
        seconds = parse_timedelta(value, default="seconds")
    except (ValueError, TypeError, KeyError):
        seconds = None
    if seconds is None or not seconds > 0:
        raise ValueError(f"dask config dgboost.timeout={value!r} must be a positive duration, "
                         "e.g. '300s' or '5 minutes'")
    return float(seconds)


def _keep_nccl() -> bool:
    value = dask.config.get("dgboost.keep-nccl", True)
    if not isinstance(value, bool):
        raise ValueError(f"dask config dgboost.keep-nccl={value!r} must be True or False")
    return value


def _check_evals(evals, X, y, enable_categorical: bool = False, qids=(), params=None, qid=None) -> list[tuple]:
    """[(X, y, name, is_training, qid)] of checked eval sets (the training set: X, y and, if
    given, the training qid themselves)."""
    specs = []
    for (where, eval_X, eval_y, name), eval_qid in zip(eval_entries(evals), list(qids) or [None] * len(evals)):
        is_training = eval_X is X and eval_y is y and (eval_qid is None or eval_qid is qid)
        if not is_training:
            if params is not None:
                check_groups(params, eval_qid is not None, f"{where} ")
            if eval_qid is not None:
                _shards.check_collection(eval_qid, f"{where} qid", features=False, like=eval_X)
            _shards.check_collection(eval_X, f"{where} X", features=True, enable_categorical=enable_categorical)
            _shards.check_collection(eval_y, f"{where} y", features=False, like=eval_X)
            n, n_train = _shards.n_columns(eval_X), _shards.n_columns(X)
            if n is not None and n_train is not None and n != n_train:
                raise ValueError(f"{where} X has {n} features but the training X has {n_train}")
            check_feature_names(_shards.column_names(X), _shards.column_names(eval_X), f"{where} X")
        specs.append((eval_X, eval_y, name, is_training, eval_qid))
    return specs


class _Futures:
    """The futures a job makes, released when it ends however it ends."""

    def __init__(self, client):
        self.client = client
        self.held = []

    def track(self, futures: list) -> list:
        self.held.extend(futures)
        return futures

    def track_one(self, future):
        self.held.append(future)
        return future

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.client.cancel(self.held)
        self.held.clear()


def _bundles(client, params, X, y, weight, base_margin, what: str, categories=None, qid=None) -> list:
    """One future per row partition: its X, y, weight, base_margin and qid, validated where the
    partition is (a Dataset, or the partition's bad input: see ``_summaries``).

    Keys are the job's own (not pure), so that a job's clean-up never cancels another's.
    """
    parts = [_shards.partitions(v) for v in (X, y, weight, base_margin, qid)]
    n = len(parts[0])
    parts = [p if p is not None else [None] * n for p in parts]
    bundles = [dask.delayed(_shards.make_bundle, pure=False)(x, yy, w, m, q, i, what, params, categories)
               for i, (x, yy, w, m, q) in enumerate(zip(*parts))]
    return client.compute(bundles)


def _summaries(client, bundles) -> list:
    """What the client learns of each partition (its rows; its queries). Bad input in any
    partition is raised here, once, naming its row in the whole data set, before any rank
    starts and without a traceback in a worker's log."""
    summaries = client.gather(client.map(_shards.summarise, bundles, pure=True))
    _shards.check_summaries(summaries)
    return summaries


def _holders(client, futures, workers, timeout: float, what: str = "X") -> list:
    """The worker (of ``workers``) holding each future's result, or None. A partition lost
    with a worker is recomputed by Dask meanwhile; one it cannot recompute is named."""
    with contextlib.suppress(*_TIMEOUTS, *_CANCELLED):
        distributed.wait(futures, timeout=timeout)
    missing = [i for i, f in enumerate(futures) if f.status != "finished"]
    erred = next((f for f in futures if f.status == "error"), None)
    if erred is not None:  # recomputed, and failed: its inputs are gone, say
        raise RuntimeError(f"partitions {missing} of {what} were lost with a worker, and recomputing them "
                           f"failed: {erred.exception()!r}")
    if missing:
        states = sorted({futures[i].status for i in missing})
        raise RuntimeError(f"partitions {missing} of {what} were lost with a worker and could not be "
                           f"recomputed (their futures are {', '.join(states)}): Dask recomputes a partition from "
                           "its graph, but not data given with client.scatter or computed from it. Load or "
                           "persist the data again and train again (init_model= a checkpoint keeps the rounds done)")
    who = client.who_has(futures)
    allowed = set(workers)
    return [next((w for w in who.get(f.key, ()) if w in allowed), None) for f in futures]


def _piece(client, futures, bundle, piece, length: int, holder):
    """The future of one piece: the bundle itself when whole, else a slice cut where it lies
    (held by ``futures``, an attempt's: the bundles outlive it)."""
    if piece.start == 0 and piece.stop == length:
        return bundle
    placed = {"workers": [holder], "allow_other_workers": False} if holder else {}
    return futures.track_one(client.submit(_shards.slice_bundle, bundle, piece.start, piece.stop, pure=False,
                                           **placed))


def _log_balance(lengths, holders, plan, workers) -> int:
    before = dict.fromkeys(workers, 0)
    for length, holder in zip(lengths, holders):
        if holder in before:
            before[holder] += length
    after = {w: sum(p.n_rows for p in plan[w]) for w in workers}
    moved = sum(p.n_rows for w in workers for p in plan[w] if holders[p.part] != w)
    logger.info("dgboost.dask: rows per worker before: %s", _shards.describe(before))
    logger.info("dgboost.dask: rows per worker after:  %s (%d rows moved)", _shards.describe(after), moved)
    return moved


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
        self.progress = _ProgressFromEvents(spec) if spec.client_draws_progress else None

    def run(self) -> Booster:
        job, restarts, resumed_at = self.spec, 0, None
        self.owner._bar = self.progress
        with _listening(self.client, JOURNAL_TOPIC, self.spec.name, self.journal if self.spec.journal else None):
            try:
                while True:
                    try:
                        booster = self._attempt(job, resumed_at)
                        break
                    except _Interrupted as interrupted:
                        job = self._restart(interrupted, restarts)
                        restarts, resumed_at = restarts + 1, interrupted.noticed
                if self.progress is not None:
                    self.progress.close(booster.num_boosted_rounds() - 1)
                    self.progress = None
                return booster
            finally:
                if self.progress is not None:  # the job failed: stop drawing at once
                    self.progress.close()

    def _attempt(self, job: JobSpec, resumed_at: float | None) -> Booster:
        with _Futures(self.client) as futures:
            job_workers, shards, runs, moved = _share_rows(self.client, futures, self.rows, job.timeout)
            evals_of = _share_evals(self.client, futures, self.evals, job_workers, job.timeout)
            # Every piece (training and eval) in memory before any rank starts: a rank occupies
            # its worker's thread, so a slice still to be cut there would wait for the whole job.
            pieces = [f for w in job_workers for f in shards[w]] + [f for w in job_workers for parts in evals_of[w]
                                                                    for f in parts]
            _settle_all(pieces, job.timeout)
            if any(f.status != "finished" for f in pieces):
                gone = sorted(set(job_workers) - _workers(self.client))
                if gone:  # a slice's worker lost while it was cut: share again
                    raise _Interrupted(f"worker {gone[0]} left the cluster while the rows were shared",
                                       time.monotonic(), gone[0])
                failed = next(f for f in pieces if f.status != "finished")
                raise RuntimeError(f"a piece of the job's rows was not cut within {job.timeout:g} s (its future is "
                                   f"{failed.status}{': ' + repr(failed.exception()) if failed.status == 'error' else ''})")
            logger.info("dgboost.dask: shards ready in %.3f s", time.perf_counter() - self.started)
            if resumed_at is not None:
                seconds = time.monotonic() - resumed_at
                logger.warning("dgboost.dask job %s: resuming on %d workers (%d rows moved), %.2f s after the loss",
                               job.name, len(job_workers), moved, seconds)
                self.client.log_event(EVENT_TOPIC, {"job": job.name, "resumed": {
                    "workers": len(job_workers), "rows_moved": moved, "seconds": round(seconds, 3)}})
            job = dataclasses.replace(job, addresses=tuple(job_workers))
            self.journal.begin(job.name, resumed_at)
            self.owner._on_attempt(job_workers, sum(summary.n_rows for summary in self.rows.summaries))
            return _run_job(self.client, job, shards, runs, evals_of, futures, self.owner)

    def _restart(self, interrupted: _Interrupted, restarts: int) -> JobSpec:
        """The next attempt's JobSpec, or the job's error when it may not go on."""
        self.journal.begin(None)  # the rounds held now are those the next attempt starts after
        at = self._next_round()
        if restarts >= self.max_restarts:
            spent = (f" ({restarts} restart{'s' if restarts != 1 else ''} made, max_restarts={self.max_restarts})"
                     if self.max_restarts else "")
            raise RuntimeError(f"dgboost training failed: {interrupted.reason}{spent}; the job was stopped on "
                               "every worker. Train again once the cluster is whole.") from interrupted.cause
        try:
            found = self.journal.resume()
        except _CannotResume as error:
            raise RuntimeError(f"dgboost training failed: {interrupted.reason}; the job cannot resume: "
                               f"{error}") from interrupted.cause
        options = self.spec.options
        resume = None
        if found is not None:
            model, resume = found
            done = model.num_boosted_rounds() - (0 if options.init_model is None
                                                 else options.init_model.num_boosted_rounds())
            left = 0 if self.journal.ended else options.num_boost_round - done  # ended: after_training alone
            options = dataclasses.replace(options, init_model=model, num_boost_round=left)
        name = f"{self.spec.name}-r{restarts + 1}"
        logger.warning("dgboost.dask job %s: %s during round %d; restart %d of %d, from round %d", self.spec.name,
                       interrupted.reason, at, restarts + 1, self.max_restarts, at)
        self.client.log_event(EVENT_TOPIC, {"job": name, "restart": {
            "reason": interrupted.reason, "worker": interrupted.worker, "round": at, "restart": restarts + 1}})
        if self.progress is not None:
            self.progress.line.note = f"restarted from round {at} after {interrupted.reason}"
        return dataclasses.replace(self.spec, name=name, options=options, resume=resume)

    def _next_round(self) -> int:
        first = 0 if self.spec.options.init_model is None else self.spec.options.init_model.num_boosted_rounds()
        return first + self.journal.finished_rounds()


class _Interrupted(Exception):
    """An attempt stopped by a loss a new attempt may not meet: a worker gone, a retryable error."""

    def __init__(self, reason: str, noticed: float, worker: str | None = None, cause: BaseException | None = None):
        super().__init__(reason)
        self.reason, self.worker, self.cause = reason, worker, cause
        self.noticed = noticed  # time.monotonic() when the client saw it


def _run_job(client, job: JobSpec, shards, runs, evals_of, futures: _Futures, owner: "TrainingJob") -> Booster:
    from ..collective.host import CollectivePlugin

    client.register_plugin(CollectivePlugin())
    with owner._turn(job):
        tasks = [futures.track_one(client.submit(
            train_rank, job, rank, shards[w], runs[w], evals_of[w], key=f"{job.name}-{rank}",
            workers=[w], allow_other_workers=False, pure=False, retries=0))
            for rank, w in enumerate(job.addresses)]
        return _watch(client, job, tasks, owner)


class JobCancelled(RuntimeError):
    """A job cancelled (``TrainingJob.cancel``, ``dgboost jobs cancel``, or its client gone)."""


class TrainingJob:
    """A training job submitted to a Dask cluster (``submit``): watch it, wait for it, cancel it.

    ``status`` is "queued", "running", "finished", "failed" or "cancelled". The job runs in a
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
        self._held: list = []  # the job's futures: cancelled with it, wherever its thread waits
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
        reason = f"dgboost job {self.id} was cancelled by its client"
        if self._registry:  # it aborts the ranks and wakes a queued wait
            self.client.sync(self.client.scheduler.dgboost_jobs_cancel, id=self.id, by="its client")
        self._cancel_here(reason)

    def record_model(self, path: str) -> None:
        """Tell the cluster's job table where this job's model was written (``dgboost jobs show``)."""
        if self._registry:
            self.client.sync(self.client.scheduler.dgboost_jobs_note, id=self.id, model=str(path))

    # ---- from the job's thread and the client's event loop ---------------------------------------

    def _cancel_here(self, reason: str) -> None:
        """Mark the job cancelled; its thread stops at its next look, or at once where it waits on
        its futures (a queued job's data, say), which are cancelled (from a thread of their own: this
        may run on the client's event loop)."""
        with self._lock:
            if self._cancelled is not None or self.done():
                return
            self._cancelled = reason
            held = list(self._held)
        if held:
            threading.Thread(target=self.client.cancel, args=(held,), daemon=True).start()

    def _cancel_reason(self) -> str | None:
        return self._cancelled

    def _hold(self, futures: _Futures) -> None:
        with self._lock:
            self._held = futures.held

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

    def _on_attempt(self, workers, rows: int) -> None:
        with self._lock:
            self._workers, self._rows = list(workers), rows
        if self._registry:
            self.client.sync(self.client.scheduler.dgboost_jobs_note, id=self.id, rows=rows)

    @contextlib.contextmanager
    def _turn(self, job: JobSpec):
        """The job's workers to itself while inside: its turn in the cluster's queue, or (with no
        job table on the scheduler) a lock over them."""
        if self._cancelled:
            raise JobCancelled(self._cancelled)
        if self._registry:
            state = self.client.sync(self.client.scheduler.dgboost_jobs_acquire, id=self.id, attempt=job.name,
                                     workers=list(job.addresses))
            if state == "cancelled":
                self._cancel_here(f"dgboost job {self.id} was cancelled while queued")
                raise JobCancelled(self._cancelled)
            release = functools.partial(self.client.sync, self.client.scheduler.dgboost_jobs_release, id=self.id)
        else:
            lock = distributed.MultiLock(names=[f"dgboost-worker-{w}" for w in job.addresses], client=self.client)
            while not lock.acquire(timeout=_POLL_SECONDS):
                if self._cancelled:
                    raise JobCancelled(self._cancelled)
            release = lock.release
        self._status = "running"
        try:
            yield
        finally:
            release()

    def _start(self, run) -> None:
        threading.Thread(target=self._main, args=(run,), name=f"dgboost-job-{self.id}", daemon=True).start()

    def _main(self, run) -> None:
        try:
            with _listening(self.client, EVENT_TOPIC, f"dgboost-train-{self.id}", self):
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


_NO_JOB_TABLE: set[str] = set()  # schedulers where it could not be installed (warned once)


def install(client) -> None:
    """Install the cluster's job table (a scheduler plugin) now; every job makes sure of it anyway.
    Raises when dgboost cannot be imported where the scheduler runs."""
    from ._registry import JobRegistry

    client.register_plugin(JobRegistry())  # idempotent: once a scheduler


def _has_job_table(client) -> bool:
    """Whether the scheduler holds dgboost's job table, installing it if need be."""
    address = client.scheduler.address
    if address in _NO_JOB_TABLE:
        return False
    try:
        install(client)
    except Exception as error:  # noqa: BLE001 - the scheduler cannot unpickle it, say
        logger.warning("dgboost.dask: the job table could not be installed on the scheduler (%s: %s): jobs run "
                       "one at a time through a lock, but other clients, `dgboost jobs` and the dashboard's page "
                       "do not see them; install dgboost where the scheduler runs", type(error).__name__, error)
        _NO_JOB_TABLE.add(address)
        return False
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
    client = _client(client)
    install(client)
    found = client.sync(client.scheduler.dgboost_jobs_show, id=id)
    if found is None:
        raise KeyError(f"no dgboost job {id!r} on this cluster (or the id's start is not unique): dgboost jobs "
                       "lists them")
    return found


def cancel(client, id: str) -> str:
    """Cancel job ``id`` (or its unique start) from any client; returns its status before."""
    client = _client(client)
    install(client)
    before = client.sync(client.scheduler.dgboost_jobs_cancel, id=id, by=f"client {client.id}")
    if before == "unknown":
        raise KeyError(f"no dgboost job {id!r} on this cluster (or the id's start is not unique): dgboost jobs "
                       "lists them")
    return before


#: The topics' handlers of each client, by job: one subscription a topic serves every job of a client.
_HANDLERS: dict[tuple, dict] = {}
_HANDLERS_LOCK = threading.Lock()


@contextlib.contextmanager
def _listening(client, topic: str, job: str, receiver):
    """While inside, ``receiver.receive(message)`` gets the messages on ``topic`` of job ``job``
    and its restarts (their names start with it); nothing for a receiver of None."""
    if receiver is None:
        yield
        return
    key = (client.id, topic)
    with _HANDLERS_LOCK:
        handlers = _HANDLERS.setdefault(key, {})
        if not handlers:
            client.subscribe_topic(topic, functools.partial(_route, key))
        handlers[job] = receiver
    try:
        yield
    finally:
        with _HANDLERS_LOCK:
            handlers.pop(job, None)
            if not handlers:
                del _HANDLERS[key]
                client.unsubscribe_topic(topic)


def _route(key: tuple, event) -> None:
    _, message = event
    name = message.get("job") if isinstance(message, dict) else None
    if not isinstance(name, str):
        return
    with _HANDLERS_LOCK:
        receiver = next((r for job, r in _HANDLERS.get(key, {}).items() if name.startswith(job)), None)
    if receiver is not None:
        receiver.receive(message)


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
    missing_before: set = set()
    peers_failed_at = None  # when ranks first failed with only the collective errors a lost peer gives
    while True:
        _settle(tasks)
        reason = owner._cancel_reason()
        if reason is not None:
            _stop(client, job, tasks, reason, _workers(client))
            raise JobCancelled(reason)
        if tasks[0].status == "finished":  # the model is whole: the other ranks only close
            _settle_all(tasks, min(_STOP_GRACE_SECONDS, job.timeout))
            booster, phases, notes = tasks[0].result(timeout=job.timeout)
            logger.info("dgboost.dask: rank 0 took %s", ", ".join(f"{k} {v:.3f} s" for k, v in phases.items()))
            for note in notes:
                logger.warning("dgboost.dask job %s: rank 0 runs %s (the workers' logs tell each rank's pages)",
                               job.name, note)
            return booster
        failed = [(rank, t) for rank, t in enumerate(tasks) if t.status in ("error", "cancelled")]
        alive = _workers(client)
        # A worker counts as lost when two looks in a row miss it while its task is unfinished.
        missing = {w for w, t in zip(job.addresses, tasks) if w not in alive and t.status != "finished"}
        # A failed rank with a worker gone is the worker's loss: report that.
        lost = [(rank, w) for rank, w in enumerate(job.addresses)
                if w in missing and (w in missing_before or failed)]
        missing_before = missing
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
                    time.sleep(_POLL_SECONDS)
                    continue
            _stop(client, job, tasks, "another rank failed", alive)
            if first is not None and retryable(first[1]):
                rank, error = first
                raise _Interrupted(f"{type(error).__name__} on worker {job.addresses[rank]} (rank {rank}): {error}",
                                   noticed, job.addresses[rank], error)
            _raise_first(job, first)


def _settle_all(futures, seconds: float) -> None:
    """Wait up to ``seconds`` for ``futures`` to be done, however they end."""
    with contextlib.suppress(*_TIMEOUTS, *_CANCELLED):
        distributed.wait(futures, timeout=seconds)


def _settle(futures) -> None:
    """Wait until ``futures`` are done or _POLL_SECONDS pass; the caller looks at them again."""
    with contextlib.suppress(*_TIMEOUTS, *_CANCELLED):  # the caller looks at the cancelled ones
        distributed.wait(futures, timeout=_POLL_SECONDS)


def _stop(client, job: JobSpec, tasks, reason: str, alive) -> None:
    """Abort every rank still running and give them a moment to stop (the caller's
    _Futures cancels whatever is left)."""
    workers = [w for w in job.addresses if w in alive]
    if workers:
        try:
            client.run(abort_job, job.name, reason, workers=workers, on_error="ignore")
        except Exception:  # noqa: BLE001 - a worker gone meanwhile; its peers time out anyway
            logger.debug("dgboost.dask: could not reach every worker to abort %s", job.name, exc_info=True)
    running = [t for t, w in zip(tasks, job.addresses) if w in alive and t.status == "pending"]
    deadline = time.monotonic() + min(_STOP_GRACE_SECONDS, job.timeout)
    while running and time.monotonic() < deadline:
        _settle(running)
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
