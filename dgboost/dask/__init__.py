"""Training and prediction on a Dask cluster: one GPU (or CPU process) per worker.

``train`` runs the single-process boosting loop (training.boost) on every
worker at once, each on a near-equal share of the rows; histograms are summed
over the workers (NCCL between GPUs, Dask's comms between CPU workers), the
coordinator (rank 0) picks the splits and every worker applies them. The model
is the same, bit for bit, as ``dgboost.train`` on the whole data, whatever the
number of workers or the partitioning.

A job's steps, as ../docs/architecture.md tells them (``submit`` checks, then runs the rest in a
thread of the client, ``_service.TrainingJob``):

1. check params and the collections' metadata (nothing computed yet), here;
2. one future per row partition (X, y, weight, margin together), its length,
   and the worker that holds it (``_placing``);
3. near-equal shares (``_shards.plan_shards``): rows stay where they are up to
   a worker's share, the rest move, from rank to rank once the ranks start
   (``_shards.move_pieces``: GPU to GPU over NCCL); the log says before and after;
4. the job's turn on its workers (the cluster's job table, ``_registry``), then one
   long task per worker, pinned to it, keyed ``dgboost-train-...`` (``_attempts``);
5. the client watches: a task's error, or a worker leaving the cluster, stops
   every rank (``_job.abort_message``) within a bounded time;
6. a lost worker resumes the job on the workers left from the coordinator's journal
   (``_restart``), up to ``max_restarts`` times; other errors raise here.

Settings (dask.config): ``dgboost.timeout`` (default "300s"), the longest any
one collective wait may take before the job is aborted; ``dgboost.keep-nccl``
(default True): a GPU worker keeps its NCCL communicator for the next job over
the same workers (``collective.nccl``); ``dgboost.cuda-graphs`` and
``dgboost.cuda-graphs-across-gpus``: where GPU rounds replay a CUDA graph (``replay``),
read on the client; on the scheduler ``dgboost.jobs.orphan-grace``
and ``dgboost.jobs.keep`` (``_registry``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import uuid

import dask
import distributed
import numpy as np

from .._settings import cuda_graphs
from ..backend import get_xp, to_numpy
from ..booster import Booster
from ..callback import on_terminal
from ..data.categories import resolve as resolve_categories
from ..data.inputs import check_feature_names, refuse_category_columns
from ..data.sparse import is_sparse
from ..tree.constraints import FeatureRules
from ..training import (BOUND_NAMES, BOUNDS, Options, aligned_list, check_bounds, check_continues_categories,
                        check_continues_features, check_continues_outputs, check_groups, eval_entries)
from . import _shards
from ._attempts import _Attempts
from ._job import ATTEMPT_PREFIX, JobSpec
from ._placing import _Futures, _rows, worker_info  # noqa: F401 - worker_info: dgboost info
from ._streamed import stream_setting, streamed_rows, streams
from ._service import JobCancelled, TrainingJob, _client, _has_job_table, cancel, install, job_info, jobs

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

_DEFAULT_TIMEOUT = "300s"


def train(client, params, X, y, **arguments) -> Booster:
    """Train a gradient-boosted tree model on the workers of a Dask cluster: ``submit``'s job,
    waited for (``submit(...).result()``; an interrupt of the wait cancels the job).

    Takes ``submit``'s arguments (``name=`` and ``priority=`` too) and returns its Booster, equal
    (bytes of its saved model) to dgboost.train's on the same rows.
    """
    return submit(client, params, X, y, **arguments).wait()


def submit(client, params, X, y, *, num_boost_round: int = 100, evals=(), sample_weight=None,
           base_margin=None, early_stopping_rounds: int | None = None, callbacks=None,
           verbose_eval: bool | int = False, init_model=None, feature_weights=None, qid=None,
           eval_qid=None, max_restarts: int = DEFAULT_MAX_RESTARTS, name: str | None = None,
           priority: int = 0, label_lower_bound=None, label_upper_bound=None) -> "TrainingJob":
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
    label_lower_bound, label_upper_bound : dask collections with X's row partitioning, optional
        survival:aft's bounds of each row's event time (XGBoost's names), in place of ``y``
        (pass ``y=None``); a ``y`` of two columns holds them too.
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
                            init_model=init_model, evals=evals)
    client = _client(client)
    categorical = options.params.enable_categorical
    _shards.check_collection(X, "X", features=True, enable_categorical=categorical)
    bounds = check_bounds(y, label_lower_bound, label_upper_bound, options.params)
    for what, bound in zip(BOUND_NAMES, bounds):
        _shards.check_collection(bound, what, features=False, like=X)
    if bounds:
        y = _shards.side_by_side(*bounds, BOUND_NAMES)
    label_name = BOUNDS if bounds else "y"
    if y is None:
        raise ValueError("y is required: pass the labels as a dask collection with X's partitions")
    _shards.check_collection(y, label_name, features=False, like=X)
    options = dataclasses.replace(options, params=options.params.with_targets(_target_columns(y, options.params)))
    if options.init_model is not None:
        check_continues_outputs(options.init_model, options.params)
    for what, value in (("sample_weight", sample_weight), ("base_margin", base_margin), ("qid", qid)):
        if value is not None:
            _shards.check_collection(value, what, features=False, like=X)
    check_groups(options.params, qid is not None)
    eval_specs = _check_evals(evals, X, y, categorical, aligned_list(eval_qid, evals, "eval_qid"), options.params,
                              qid, options.init_model)
    categories = _shards.column_categories(X, categorical)  # every partition codes its categories by these
    if _is_categorical(categories, options.params) and is_sparse(X._meta):
        raise TypeError("X's chunks are sparse: categorical features take dense rows (a dask array of dense "
                        "chunks, or a DataFrame)")
    timeout = _timeout()
    keep_nccl = _keep_nccl()
    stream = stream_setting(_is_categorical(categories, options.params))  # read now: the job reads later
    n_features = _shards.n_columns(X)
    if feature_weights is not None:
        feature_weights = np.asarray(to_numpy(feature_weights.compute() if hasattr(feature_weights, "compute")
                                              else feature_weights), dtype=np.float64)
    if n_features is not None:  # else checked once X's partitions are read, before any rank starts
        _check_features(options, n_features, X, categories, feature_weights)
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
        raise ValueError(f"max_restarts={max_restarts!r} must be an integer >= 0 (0: no restart)")
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ValueError(f"priority={priority!r} must be an integer (higher runs first)")
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name={name!r} must be a string")
    job_id = uuid.uuid4().hex[:16]
    spec = JobSpec(ATTEMPT_PREFIX + job_id, (), timeout, options,
                   tuple((set_name, is_training) for _, _, set_name, is_training, _ in eval_specs), n_features,
                   client_draws_progress=bool(options.period) and on_terminal(), keep_nccl=keep_nccl,
                   cuda_graphs=cuda_graphs(),
                   feature_weights=feature_weights, journal=max_restarts > 0)
    name = name or f"{options.params.objective}, {num_boost_round} rounds"
    job = TrainingJob(client, job_id, name, priority, options.num_boost_round, _has_job_table(client))

    def run() -> Booster:
        started = time.perf_counter()
        with _Futures(client) as futures:
            job._hold(futures)
            read = streamed_rows if streams(client, X, options.params, stream, futures) else _rows
            rows = read(client, futures, options.params, X, y, sample_weight, base_margin, "", categories, qid,
                        label_name)
            if sum(summary.n_rows for summary in rows.summaries) == 0:
                raise ValueError("X has no rows: training needs at least one")
            width = _shards.check_widths(rows.summaries, "")
            if rows.by_query:
                _shards.check_query_order(rows.summaries)
            if n_features is None:  # X's chunks did not say its features: its partitions have, before any rank
                _check_features(options, width, X, categories, feature_weights)
            evals = [None if is_training else  # a streamed job's streamed too, by its rows' cuts
                     _rows(client, futures, options.params, eval_X, eval_y, None, None, f"evals[{index}] ",
                           categories, eval_qid) if rows.stream is None else
                     streamed_rows(client, futures, options.params, eval_X, eval_y, None, None, f"evals[{index}] ",
                                   categories, eval_qid, cuts=rows.stream.cuts)
                     for index, (eval_X, eval_y, _, is_training, eval_qid) in enumerate(eval_specs)]
            for index, eval_rows in enumerate(evals):  # rows and features known only once read (unknown chunks)
                if eval_rows is None:
                    continue
                if sum(summary.n_rows for summary in eval_rows.summaries) == 0:
                    raise ValueError(f"evals[{index}] X has no rows: training and prediction need at least one")
                _shards.check_widths(eval_rows.summaries, f"evals[{index}] ", width)
                if eval_rows.by_query:
                    _shards.check_query_order(eval_rows.summaries, f"eval_qid[{index}]")
            return _Attempts(client, spec, rows, evals, max_restarts, started, job).run()

    job._start(run)
    return job


def _check_features(options: Options, n_features: int, X, categories, feature_weights) -> None:
    """Refuse the parameters that name X's features (monotone and interaction constraints,
    feature weights, categorical features) and an init_model whose features differ, where they
    do not fit its ``n_features``."""
    params, names = options.params, _shards.column_names(X)
    FeatureRules.resolve(params, n_features, names, feature_weights)
    resolved = resolve_categories(params, n_features, categories, feature_names=names)
    if options.init_model is not None:
        check_continues_features(options.init_model, n_features, names)
        check_continues_categories(options.init_model, resolved, params)


def _is_categorical(categories, params) -> bool:
    """Whether X has categorical features: a frame's category columns, or features typed "c"."""
    return categories is not None or "c" in (params.feature_types or ())


def _target_columns(y, params) -> int:
    """The targets of a dask y: a 2-D array's columns (but survival:aft's bounds), a DataFrame's."""
    if params.objective == "survival:aft":
        return 1
    if _shards.is_dask_array(y):
        return int(y.shape[1]) if y.ndim == 2 else 1
    return len(y.columns) if hasattr(y, "columns") else 1


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
    if device.startswith(("cuda", "gpu")):
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


def _check_evals(evals, X, y, enable_categorical: bool = False, qids=(), params=None, qid=None,
                 init_model: Booster | None = None) -> list[tuple]:
    """[(X, y, name, is_training, qid)] of checked eval sets (the training set: X, y and, if
    given, the training qid themselves). A frame's columns are checked against X's names, or,
    for an array X continuing ``init_model``, the model's (which it keeps, as dgboost.train;
    an X whose features differ from the model's is refused once they are known)."""
    names = _shards.column_names(X)
    if names is None and init_model is not None and _shards.n_columns(X) in (None, init_model.num_features):
        names = init_model.feature_names
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
            check_feature_names(names, _shards.column_names(eval_X), f"{where} X")
            if _shards.is_dask_frame(eval_X) and _shards.column_categories(X, enable_categorical) is None:
                refuse_category_columns(eval_X, f"{where} X")  # else coded by its own categories
        specs.append((eval_X, eval_y, name, is_training, eval_qid))
    return specs


