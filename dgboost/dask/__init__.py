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
import contextlib
import dataclasses
import logging
import os
import time
import uuid

import dask
import distributed
import numpy as np

from ..backend import get_xp, to_numpy
from ..booster import Booster
from ..callback import ProgressLine, on_terminal
from ..collective import CollectiveError
from ..data.categories import resolve as resolve_categories
from ..data.inputs import check_feature_names
from ..data.sparse import is_sparse
from ..tree.constraints import FeatureRules
from ..training import Options, aligned_list, check_groups, eval_entries
from . import _shards
from ._job import EVENT_TOPIC, JobSpec, abort_job, train_rank

__all__ = ["DaskDGBClassifier", "DaskDGBRanker", "DaskDGBRegressor", "local_cluster", "predict", "train"]


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
_DEFAULT_TIMEOUT = "300s"
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)  # the same class from Python 3.11


def train(client, params, X, y, *, num_boost_round: int = 100, evals=(), sample_weight=None,
          base_margin=None, early_stopping_rounds: int | None = None, callbacks=None,
          verbose_eval: bool | int = False, init_model=None, feature_weights=None, qid=None,
          eval_qid=None) -> Booster:
    """Train a gradient-boosted tree model on the workers of a Dask cluster.

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

    Returns
    -------
    Booster, equal (bytes of its saved model) to dgboost.train's on the same rows.
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
    for name, value in (("sample_weight", sample_weight), ("base_margin", base_margin), ("qid", qid)):
        if value is not None:
            _shards.check_collection(value, name, features=False, like=X)
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
    job_id = uuid.uuid4().hex[:16]
    started = time.perf_counter()
    with _Futures(client) as futures:
        job_workers, shards, runs = _share_rows(client, futures, options.params, X, y, sample_weight, base_margin,
                                                categories, qid)
        evals_of = _share_evals(client, futures, options.params, eval_specs, job_workers, categories)
        # Every piece (training and eval) in memory before any rank starts: a rank occupies
        # its worker's thread, so a slice still to be cut there would wait for the whole job.
        distributed.wait([f for w in job_workers for f in shards[w]]
                         + [f for w in job_workers for parts in evals_of[w] for f in parts])
        logger.info("dgboost.dask: shards ready in %.3f s", time.perf_counter() - started)
        job = JobSpec(f"dgboost-train-{job_id}", tuple(job_workers), timeout, options,
                      tuple((name, is_training) for _, _, name, is_training, _ in eval_specs), n_features,
                      client_draws_progress=bool(options.period) and on_terminal(), keep_nccl=keep_nccl,
                      feature_weights=feature_weights)
        return _run_job(client, job, shards, runs, evals_of, futures)


def _target_columns(y, params) -> int:
    """The targets of a dask y: a 2-D array's columns (but survival:aft's bounds), a DataFrame's."""
    if params.objective == "survival:aft":
        return 1
    if _shards.is_dask_array(y):
        return int(y.shape[1]) if y.ndim == 2 else 1
    return len(y.columns) if hasattr(y, "columns") else 1


def _share_rows(client, futures, params, X, y, weight, base_margin, categories=None, qid=None):
    """(the job's workers, each one's piece futures, each one's global row runs)."""
    bundles = futures.track(_bundles(client, params, X, y, weight, base_margin, "", categories, qid))
    summaries = _summaries(client, bundles)
    lengths = [summary.n_rows for summary in summaries]
    if sum(lengths) == 0:
        raise ValueError("X has no rows: training needs at least one")
    workers = sorted(_workers(client))
    if not workers:
        raise RuntimeError("the Dask cluster has no workers: start some (dask worker, dask cuda worker) "
                           "or use dgboost.dask.local_cluster()")
    holders = _holders(client, bundles, workers)
    plan = _plan(summaries, holders, workers, qid is not None)
    _log_balance(lengths, holders, plan, workers)
    job_workers = [w for w in workers if plan[w]]  # workers beyond the rows sit the job out
    shards = {w: [futures.track_one(_piece(client, bundles[p.part], p, lengths[p.part], holders[p.part]))
                  for p in plan[w]] for w in job_workers}
    runs = {w: _shards.global_runs(plan[w], lengths) for w in job_workers}
    return job_workers, shards, runs


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


def _share_evals(client, futures, params, eval_specs, job_workers, categories=None) -> dict[str, list[list]]:
    """Each job worker's bundles of each eval set (none for the training set, which it has); a
    ranking eval set's shares are cut at query boundaries too, so each query is scored whole."""
    evals_of: dict[str, list[list]] = {w: [] for w in job_workers}
    for index, (eval_X, eval_y, _, is_training, eval_qid) in enumerate(eval_specs):
        if is_training:
            for w in job_workers:
                evals_of[w].append([])
            continue
        parts = futures.track(_bundles(client, params, eval_X, eval_y, None, None, f"evals[{index}] ", categories,
                                       eval_qid))
        summaries = _summaries(client, parts)
        holders = _holders(client, parts, job_workers)
        if eval_qid is None:
            plan = _shards.plan_evals([s.n_rows for s in summaries], holders, job_workers)
            for w in job_workers:
                evals_of[w].append([parts[i] for i in plan[w]])
            continue
        plan = _plan(summaries, holders, job_workers, True)
        for w in job_workers:
            evals_of[w].append([futures.track_one(_piece(client, parts[p.part], p, summaries[p.part].n_rows,
                                                         holders[p.part])) for p in plan[w]])
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


def _holders(client, futures, workers) -> list:
    """The worker (of ``workers``) holding each future's result, or None."""
    distributed.wait(futures)
    who = client.who_has(futures)
    allowed = set(workers)
    return [next((w for w in who.get(f.key, ()) if w in allowed), None) for f in futures]


def _piece(client, bundle, piece, length: int, holder):
    """The future of one piece: the bundle itself when whole, else a slice cut where it lies."""
    if piece.start == 0 and piece.stop == length:
        return bundle
    placed = {"workers": [holder], "allow_other_workers": False} if holder else {}
    return client.submit(_shards.slice_bundle, bundle, piece.start, piece.stop, pure=False, **placed)


def _log_balance(lengths, holders, plan, workers) -> None:
    before = dict.fromkeys(workers, 0)
    for length, holder in zip(lengths, holders):
        if holder in before:
            before[holder] += length
    after = {w: sum(p.n_rows for p in plan[w]) for w in workers}
    moved = sum(p.n_rows for w in workers for p in plan[w] if holders[p.part] != w)
    logger.info("dgboost.dask: rows per worker before: %s", _shards.describe(before))
    logger.info("dgboost.dask: rows per worker after:  %s (%d rows moved)", _shards.describe(after), moved)


def _run_job(client, job: JobSpec, shards, runs, evals_of, futures: _Futures) -> Booster:
    from ..collective.host import CollectivePlugin

    client.register_plugin(CollectivePlugin())
    lock = distributed.MultiLock(names=[f"dgboost-worker-{w}" for w in job.addresses], client=client)
    lock.acquire()
    progress = _ProgressFromEvents(client, job) if job.client_draws_progress else None
    try:
        tasks = [futures.track_one(client.submit(
            train_rank, job, rank, shards[w], runs[w], evals_of[w], key=f"{job.name}-{rank}",
            workers=[w], allow_other_workers=False, pure=False, retries=0))
            for rank, w in enumerate(job.addresses)]
        booster = _watch(client, job, tasks)
        if progress is not None:
            progress.close(booster.num_boosted_rounds() - 1)
            progress = None
        return booster
    finally:
        lock.release()
        if progress is not None:  # the job failed: stop drawing at once
            progress.close()


class _ProgressFromEvents:
    """A progress bar on the client's terminal, drawn from the coordinator's round events."""

    def __init__(self, client, job: JobSpec):
        self.client, self.job = client, job
        self.line = ProgressLine(job.options.num_boost_round)
        self.line.start(0 if job.options.init_model is None else job.options.init_model.num_boosted_rounds())
        self.last_round = -1
        client.subscribe_topic(EVENT_TOPIC, self._on_event)

    def _on_event(self, event) -> None:
        _, message = event
        if isinstance(message, dict) and message.get("job") == self.job.name:
            if "note" in message:
                self.line.note = message["note"]
                return
            self.line.update(message["round"], message["metrics"])
            self.last_round = message["round"]

    def close(self, final_round: int | None = None) -> None:
        """Stop drawing, once the final round's event (if given) is drawn or a second has passed."""
        deadline = time.monotonic() + 1.0
        while final_round is not None and self.last_round < final_round and time.monotonic() < deadline:
            time.sleep(0.02)
        self.client.unsubscribe_topic(EVENT_TOPIC)
        self.line.close()


def _watch(client, job: JobSpec, tasks) -> Booster:
    """Rank 0's Booster once every task is done; a clear error, every rank stopped, on failure."""
    missing_before: set = set()
    while True:
        _settle(tasks)
        if all(t.status == "finished" for t in tasks):
            booster, phases, notes = tasks[0].result()
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
        if lost:
            rank, worker = lost[0]
            reason = (f"worker {worker} (rank {rank}) left the cluster during dgboost job {job.name} "
                      "(it died or was shut down)")
            _stop(client, job, tasks, reason, alive)
            raise RuntimeError(f"dgboost training failed: {reason}; the job was stopped on every worker. "
                               "Train again once the cluster is whole.")
        if failed:
            _stop(client, job, tasks, "another rank failed", alive)
            _raise_first(job, [(rank, t.exception()) for rank, t in enumerate(tasks) if t.status == "error"])


def _settle(futures) -> None:
    """Wait until ``futures`` are done or _POLL_SECONDS pass; the caller looks at them again."""
    with contextlib.suppress(*_TIMEOUTS):
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


def _raise_first(job: JobSpec, errors) -> None:
    """Raise the error that started the failure: a rank's own error before the ranks it stopped."""
    if not errors:
        raise RuntimeError(f"dgboost job {job.name} was cancelled")
    rank, error = next(((r, e) for r, e in errors if not isinstance(e, CollectiveError)), errors[0])
    where = f"worker {job.addresses[rank]} (rank {rank})"
    if isinstance(error, (ValueError, TypeError)):
        if hasattr(error, "add_note"):
            error.add_note(f"raised by dgboost.dask on {where}")
        raise error
    raise RuntimeError(f"dgboost training failed on {where}: {type(error).__name__}: {error}") from error
