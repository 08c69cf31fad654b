"""dgboost.dask on GPUs (dask-cuda LocalCUDACluster, NCCL between the workers): the model equals
single-process GPU training byte for byte over 1, 2 and 4 GPUs; a rank failing mid-training
stops every rank through NCCL's abort, and the GPUs train again afterwards."""

from __future__ import annotations

import contextlib
import logging
import time

import dask
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402
from _queries import uneven_queries  # noqa: E402  (tests/_queries.py)
from _waiting import bundle_transfers, Slow, job_status, no_task_left, wait_for  # noqa: E402  (tests/_waiting.py)

N_ROWS = 20_000


def _gpu_count() -> int:
    from dgboost.backend import cuda_device_count

    return cuda_device_count()


@pytest.fixture(scope="module", params=[1, 2, 4], ids=lambda n: f"{n}gpus")
def cuda_client(request):
    pytest.importorskip("dask_cuda")
    n = request.param
    if _gpu_count() < n:
        pytest.skip(f"needs {n} GPUs, found {_gpu_count()}")
    # The fault tests below end workers' processes (a broken GPU its peers' too, seen on H200s),
    # twice within seconds. The cluster closes a worker's nanny for good where no worker of its
    # name is back distributed.deploy.lost-worker-timeout (15 s) after it left, so a worker that
    # died again meanwhile, and was restarting then, would be lost to the module's later tests.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}), \
            dgboost.dask.local_cluster("cuda", n, silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N_ROWS, 12)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    weight = rng.uniform(0.5, 2.0, N_ROWS).astype(np.float32)
    return X, y, weight


def _bytes(booster, tmp_path, name) -> bytes:
    path = tmp_path / f"{name}.json"
    booster.save_model(path)
    return path.read_bytes()


PARAMS = {
    "binary": {"objective": "binary:logistic", "max_depth": 6, "subsample": 0.7,
               "eval_metric": ["logloss", "auc"]},
    "regression": {"objective": "reg:squarederror", "max_depth": 5},
    "multiclass": {"objective": "multi:softprob", "num_class": 3, "max_depth": 4},
    # Tree shapes and sampling: every draw and every batch the same whatever the GPUs.
    "lossguide": {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 24, "max_depth": 0,
                  "max_greedy_nodes": 3, "colsample_bynode": 0.7, "monotone_constraints": [1] + [0] * 11},
    "symmetric": {"objective": "binary:logistic", "grow_policy": "symmetric", "max_depth": 5,
                  "colsample_bylevel": 0.8, "subsample": 0.6},
    "gradient_based": {"objective": "binary:logistic", "max_depth": 5, "sampling_method": "gradient_based",
                       "subsample": 0.3, "colsample_bytree": 0.8, "interaction_constraints": [[0, 1, 2], [3, 4]]},
    "goss": {"objective": "reg:squarederror", "max_depth": 4, "sampling_method": "goss", "max_leaves": 10},
    # Categorical features (columns 10 and 11 as codes): category-set splits, and target statistics
    # with pairs.
    "categories": {"objective": "binary:logistic", "max_depth": 5, "enable_categorical": True,
                   "feature_types": ["q"] * 10 + ["c", "c"]},
    "target_statistics": {"objective": "reg:squarederror", "max_depth": 5, "enable_categorical": True,
                          "feature_types": ["q"] * 10 + ["c", "c"], "cat_encoding": "target_statistics"},
}


@pytest.mark.parametrize("chunks_on", ["cupy", "numpy"])
@pytest.mark.parametrize("kind", list(PARAMS))
def test_model_is_byte_identical_to_one_gpu(cuda_client, data, kind, chunks_on, tmp_path):
    import cupy

    X, y, weight = data
    if kind == "multiclass":
        y = np.digitize(np.nan_to_num(X[:, 0]), [-0.5, 0.5]).astype(np.float32)
    if kind in ("categories", "target_statistics"):  # codes of 40 and 7 categories, some missing
        X = X.copy()
        X[:, 10] = np.where(np.isnan(X[:, 10]), np.nan, np.floor(np.abs(X[:, 10]) * 13) % 40)
        X[:, 11] = np.floor(np.abs(np.nan_to_num(X[:, 11])) * 5) % 7
    params = dict(PARAMS[kind], device="cuda")
    use_weight = kind == "regression"
    X_gpu, y_gpu = cupy.asarray(X), cupy.asarray(y)  # the same objects again in evals: the training set
    expected = dgboost.train(params, X_gpu, y_gpu, num_boost_round=6,
                             sample_weight=cupy.asarray(weight) if use_weight else None,
                             evals=[(X_gpu, y_gpu, "train")])
    move = cupy.asarray if chunks_on == "cupy" else (lambda a: a)
    dX = da.from_array(X, chunks=((1, 9000, 4999, 6000), 12)).map_blocks(move)
    dy = da.from_array(y, chunks=((1, 9000, 4999, 6000),)).map_blocks(move)
    dw = da.from_array(weight, chunks=((1, 9000, 4999, 6000),)).map_blocks(move) if use_weight else None
    got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=6, sample_weight=dw,
                             evals=[(dX, dy, "train")])
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")
    assert got.evals_result() == expected.evals_result()
    predicted = dgboost.dask.predict(cuda_client, got, dX).compute()
    # cupy chunks predict on the GPUs; numpy chunks on the CPU (the same to 1e-6).
    np.testing.assert_allclose(cupy.asnumpy(predicted) if chunks_on == "cupy" else predicted,
                               cupy.asnumpy(expected.predict(cupy.asarray(X))), rtol=0, atol=1e-6)


@pytest.mark.parametrize("across", [False, True], ids=["one-gpu-jobs", "across-gpus"])
def test_ranks_replay_their_rounds_and_train_the_model_of_rounds_queued_as_calls(cuda_client, data, across,
                                                                                 tmp_path):
    """A job's ranks run their rounds from one CUDA graph (dgboost/replay.py): a job of one GPU
    always, one of several unless the client turns dgboost.cuda-graphs-across-gpus off (NCCL's
    calls captured with the round); the model is the one of a GPU whose rounds are queued as calls."""
    import cupy

    from dgboost import replay

    X, y, weight = data
    params = {"objective": "binary:logistic", "max_depth": 6, "subsample": 0.8, "eval_metric": ["logloss", "auc"],
              "device": "cuda"}
    with dask.config.set({"dgboost.cuda-graphs": False}):
        X_gpu, y_gpu = cupy.asarray(X), cupy.asarray(y)
        expected = dgboost.train(params, X_gpu, y_gpu, num_boost_round=8, sample_weight=cupy.asarray(weight),
                                 evals=[(X_gpu, y_gpu, "train")])
    before = cuda_client.run(replay.counts)
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    with dask.config.set({"dgboost.cuda-graphs-across-gpus": across}):
        got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=8,
                                 sample_weight=da.from_array(weight, 5000), evals=[(dX, dy, "train")])
    after = cuda_client.run(replay.counts)
    replayed = across or len(after) == 1
    assert {worker: (after[worker][0] - before[worker][0], after[worker][1] - before[worker][1])
            for worker in after} == {worker: (1, 7) if replayed else (0, 0) for worker in after}
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")
    assert got.evals_result() == expected.evals_result()


# XGBoost's other objectives on GPUs: queries cut whole at worker boundaries, survival's
# row-order and all-rows reductions, the quantiles' several outputs and the majorised losses.
OBJECTIVES = {
    "rank:ndcg": {"lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 2, "eval_metric": "ndcg@5"},
    "rank:map": {"eval_metric": ["map@5", "pre@3"]},
    "survival:cox": {},
    "survival:aft": {"aft_loss_distribution": "logistic", "eval_metric": ["aft-nloglik",
                                                                          "interval-regression-accuracy"]},
    "reg:quantileerror": {"quantile_alpha": [0.2, 0.8]},
    "reg:absoluteerror": {"eval_metric": ["mae", "mape"]},
}


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_is_byte_identical_to_one_gpu(cuda_client, data, objective, tmp_path):
    import cupy

    X, y, _ = data
    rng = np.random.default_rng(3)
    score = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1] * X[:, 2])
    time = np.exp(0.5 * score + 0.3 * rng.standard_normal(N_ROWS)).astype(np.float32)
    qid = None
    if objective.startswith("rank:"):
        qid = uneven_queries(rng, N_ROWS, 300)  # some over a partition's edge
        y = np.clip(np.round(score + 1), 0, 4) if objective == "rank:ndcg" else (score > 0.5)
    elif objective == "survival:cox":
        y = np.where(rng.random(N_ROWS) < 0.3, -time, time)
    elif objective == "survival:aft":
        y = np.stack([time, np.where(rng.random(N_ROWS) < 0.3, np.inf, time)], axis=1)
    else:
        y = time
    y = y.astype(np.float32)
    params = dict(OBJECTIVES[objective], objective=objective, max_depth=5, device="cuda")
    queries = {} if qid is None else {"qid": qid, "eval_qid": [qid]}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=5,
                             evals=[(cupy.asarray(X), cupy.asarray(y), "t")], **queries)
    chunks = (1, 9000, 4999, 6000)
    dX = da.from_array(X, chunks=(chunks, 12)).map_blocks(cupy.asarray)
    dy = da.from_array(y, chunks=(chunks,) + y.shape[1:]).map_blocks(cupy.asarray)
    dq = None if qid is None else da.from_array(qid, chunks=chunks)
    queries = {} if qid is None else {"qid": dq, "eval_qid": [dq]}
    got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=5, evals=[(dX, dy, "t")], **queries)
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")
    assert got.evals_result() == expected.evals_result()


@pytest.mark.parametrize("extra", [{}, {"subsample": 0.1, "sampling_method": "gradient_based"}],
                         ids=["every-row", "gradient-based"])
def test_out_of_core_workers_train_the_in_core_model_of_one_gpu(cuda_client, data, extra, tmp_path, caplog):
    """Host chunks, each worker's matrix over its budget: pages (streamed, or the sample gathered),
    the model of one GPU in core."""
    import cupy

    X, y, _ = data
    params = {"objective": "binary:logistic", "max_depth": 6, "device": "cuda", **extra}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=5)
    dX = da.from_array(X, chunks=((1, 9000, 4999, 6000), 12))
    dy = da.from_array(y, chunks=((1, 9000, 4999, 6000),))
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        got = dgboost.dask.train(cuda_client, {**params, "max_device_matrix_bytes": 40_000}, dX, dy,
                                 num_boost_round=5)
    assert "out of core" in caplog.text
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")


@pytest.mark.parametrize("across", [False, True], ids=["one-gpu-jobs", "across-gpus"])
def test_paged_ranks_replay_their_trees_from_the_gathered_page(cuda_client, across, tmp_path):
    """Every rank's matrix paged, gradient-based sampling: the ranks decide together whether a
    tree comes from the page their last pass gathered, so they replay those trees from CUDA
    graphs (NCCL's calls captured with them) unless a job of several GPUs may not; the model
    is the in-core one of one GPU."""
    import cupy

    from dgboost import replay

    rng = np.random.default_rng(4)
    X = rng.standard_normal((60_000, 12)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(60_000) > 0).astype(np.float32)
    params = {"max_depth": 6, "objective": "binary:logistic", "subsample": 0.3, "sampling_method": "gradient_based",
              "eta": 0.1, "device": "cuda"}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=8)
    n = len(cuda_client.scheduler_info()["workers"])
    dX, dy = da.from_array(X, chunks=(60_000 // n, 12)), da.from_array(y, chunks=60_000 // n)
    parts = ("tree", "draw")
    count = lambda: {part: replay.counts(part) for part in parts}  # noqa: E731
    before = cuda_client.run(count)
    with dask.config.set({"dgboost.cuda-graphs-across-gpus": across}):
        got = dgboost.dask.train(cuda_client, {**params, "max_device_matrix_bytes": 300_000 // n}, dX, dy,
                                 num_boost_round=8)
    after = cuda_client.run(count)
    # The draws: the first as calls, the second captured and replayed, as are the others; the trees from the
    # page likewise from the second tree on (the first has no guess)
    replayed = {"tree": (1, 6), "draw": (1, 7)} if across or n == 1 else {"tree": (0, 0), "draw": (0, 0)}
    assert {worker: {part: tuple(a - b for a, b in zip(after[worker][part], before[worker][part])) for part in parts}
            for worker in after} == {worker: replayed for worker in after}
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")


STREAMED = {  # (the partitions' rows, the budget, more params)
    "paged": (4000, 40_000, {"subsample": 0.5}),
    "in-core": (4000, 0, {"subsample": 0.5}),
    # 40 partitions of 6000 bytes: several pieces a page on the device; a sample gathered from them.
    "small-pieces": (500, 40_000, {}),
    "small-pieces-sampled": (500, 40_000, {"subsample": 0.1, "sampling_method": "gradient_based"}),
}


@pytest.mark.parametrize("chunks_on", ["cupy", "numpy"])
@pytest.mark.parametrize("case", list(STREAMED))
def test_streamed_rows_continue_the_model_of_one_gpu(cuda_client, data, chunks_on, case, tmp_path, caplog):
    """Rows streamed into pages where they are read (dask/_streamed.py: the cut sample drawn
    there, the pieces packed on their GPU into pinned pages, init_model's margins made there):
    the model of one GPU in core."""
    import cupy

    X, y, weight = data
    chunk, budget, extra = STREAMED[case]
    params = {"objective": "binary:logistic", "max_depth": 6, "device": "cuda", "max_device_matrix_bytes": budget,
              "verbosity": 2, **extra}
    X_eval, y_eval = (X[::3] * 1.1).astype(np.float32), y[::3]  # an eval set streamed too, by the rows' cuts
    params["eval_metric"] = ["logloss", "auc"]
    first = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=2)
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), sample_weight=cupy.asarray(weight),
                             num_boost_round=4, init_model=first,
                             evals=[(cupy.asarray(X_eval), cupy.asarray(y_eval), "valid")], verbose_eval=False)
    move = (lambda a: cupy.asarray(a)) if chunks_on == "cupy" else (lambda a: a)  # noqa: E731
    dX, dy, dw, dX_eval, dy_eval = (da.from_array(move(a), chunks=(chunk,) + a.shape[1:], asarray=False)
                                    for a in (X, y, weight, X_eval, y_eval))
    with dask.config.set({"dgboost.stream-partitions": True}), caplog.at_level(logging.INFO, logger="dgboost"):
        got = dgboost.dask.train(cuda_client, params, dX, dy, sample_weight=dw, num_boost_round=4, init_model=first,
                                 evals=[(dX_eval, dy_eval, "valid")], verbose_eval=False)
    assert got.evals_result() == expected.evals_result()
    assert f"rows streamed into pages where they are read ({N_ROWS // chunk} partitions, 20000 rows)" in caplog.text
    assert ("out of core" in caplog.text) == bool(budget)
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")


@pytest.mark.parametrize("chunks_on", ["cupyx", "scipy"])
def test_csr_chunks_train_the_model_of_the_dense_array(cuda_client, data, chunks_on, tmp_path):
    """Dask arrays of CSR chunks (cupyx on the GPUs, or scipy moved there): the model of one
    GPU trained on the dense array with NaN, byte for byte."""
    import cupy
    import cupyx.scipy.sparse
    import scipy.sparse

    X, y, _ = data
    X = X.copy()
    X[np.random.default_rng(2).random(X.shape) < 0.7] = np.nan
    params = {"objective": "binary:logistic", "max_depth": 6, "subsample": 0.7, "device": "cuda"}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=6)
    rows, columns = np.nonzero(~np.isnan(X))
    csr = scipy.sparse.csr_matrix((X[rows, columns], (rows, columns)), shape=X.shape)
    chunks = ((1, 9000, 4999, 6000), 12)
    dX = da.from_array(csr, chunks=chunks, asarray=False)
    if chunks_on == "cupyx":
        dX = dX.map_blocks(cupyx.scipy.sparse.csr_matrix, dtype=np.float32)
    dy = da.from_array(y, chunks=(chunks[0],))
    got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=6)
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")
    predicted = dgboost.dask.predict(cuda_client, got, dX).compute()
    np.testing.assert_allclose(cupy.asnumpy(predicted) if chunks_on == "cupyx" else predicted,
                               cupy.asnumpy(expected.predict(cupy.asarray(X))), rtol=0, atol=1e-6)


def test_early_stopping_on_gpus(cuda_client, data):
    import cupy

    X, y, _ = data
    X_valid, y_valid = X[:3000] * 1.1, y[:3000]
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.6, "eval_metric": ["auc"],
              "device": "cuda"}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=80,
                             evals=[(cupy.asarray(X_valid), cupy.asarray(y_valid), "valid")],
                             early_stopping_rounds=3)
    got = dgboost.dask.train(cuda_client, params, da.from_array(X, chunks=(5000, 12)),
                             da.from_array(y, chunks=5000), num_boost_round=80,
                             evals=[(da.from_array(X_valid, chunks=(3000, 12)),
                                     da.from_array(y_valid, chunks=3000), "valid")],
                             early_stopping_rounds=3)
    assert got.best_iteration == expected.best_iteration
    assert got.evals_result() == expected.evals_result()


class _Boom(TrainingCallback):
    def after_iteration(self, model, epoch, evals_log):
        if epoch == 2:
            raise RuntimeError("boom at round 2")
        return False


def test_a_rank_failing_mid_training_stops_every_gpu(cuda_client, data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    params = {"max_depth": 6, "device": "cuda"}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="boom at round 2"):
        dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=50, callbacks=[_Boom()])
    assert time.monotonic() - started < 120
    no_task_left(cuda_client)
    from dgboost.collective.nccl import communicators_made

    made = cuda_client.run(communicators_made)
    assert dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=3).num_boosted_rounds() == 3
    # The failed job kept no communicator: on more than one GPU the next one made its own.
    n = len(made)
    assert sum(cuda_client.run(communicators_made).values()) == sum(made.values()) + (n if n > 1 else 0)


def test_the_next_job_over_the_same_gpus_reuses_the_nccl_communicator(cuda_client, data, tmp_path):
    """A job that ends well leaves its NCCL communicator to the next over the same workers:
    no new one is made and the model is the same. With dgboost.keep-nccl False a job
    frees its communicator, so the next one makes its own."""
    from dgboost.collective.nccl import communicators_made

    if len(cuda_client.scheduler_info()["workers"]) < 2:
        pytest.skip("one GPU: a one-rank job needs no NCCL")
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    params = {"objective": "binary:logistic", "max_depth": 4, "device": "cuda"}

    def made() -> int:
        return sum(cuda_client.run(communicators_made).values())

    def train():
        return dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=4)

    first = train()
    before = made()
    assert _bytes(train(), tmp_path, "second") == _bytes(first, tmp_path, "first")
    assert made() == before
    with dask.config.set({"dgboost.keep-nccl": False}):
        train()  # uses the kept communicator, then frees it
        assert made() == before
        train()
        assert made() == before + len(cuda_client.scheduler_info()["workers"])


def _nccl_sums(job, rank, addresses):
    import cupy

    from dgboost.collective.host import DaskCommunicator
    from dgboost.collective.nccl import NcclCommunicator

    comm = NcclCommunicator(DaskCommunicator(job, rank, addresses, 60.0), 60.0, keep=False)
    try:
        x = cupy.arange(5, dtype=cupy.int64) * (rank + 1) - 2**40
        root = comm.world_size - 1
        reduced, summed = comm.reduce(x, root=root), comm.allreduce(x)
        return cupy.asnumpy(reduced), cupy.asnumpy(summed), (comm.traffic.calls, comm.traffic.bytes_sent)
    finally:
        comm.close()


def test_nccl_reduce_sums_on_its_root_alone(cuda_client):
    """The coordinator's histograms go to it alone (ncclReduce): the root gets the exact sums
    the all-reduce gives every rank, and every other rank sends its whole array once."""
    from dgboost.collective.host import CollectivePlugin

    workers = sorted(cuda_client.scheduler_info()["workers"])
    n = len(workers)
    if n < 2:
        pytest.skip("one GPU: a one-rank job needs no NCCL")
    cuda_client.register_plugin(CollectivePlugin())
    futures = [cuda_client.submit(_nccl_sums, "nccl-sums-job", rank, workers, workers=[w], pure=False)
               for rank, w in enumerate(workers)]
    expected = np.arange(5, dtype=np.int64) * (n * (n + 1) // 2) - n * 2**40
    for rank, (reduced, summed, traffic) in enumerate(cuda_client.gather(futures)):
        np.testing.assert_array_equal(summed, expected)
        if rank == n - 1:
            np.testing.assert_array_equal(reduced, expected)
        assert traffic == (2, (40 if rank != n - 1 else 0) + int(2 * (n - 1) / n * 40))


def _nccl_exchange(job, rank, addresses):
    import cupy

    from dgboost.collective.host import DaskCommunicator
    from dgboost.collective.nccl import NcclCommunicator

    comm = NcclCommunicator(DaskCommunicator(job, rank, addresses, 60.0), 60.0, keep=False)
    try:
        n = comm.world_size
        right, left = (rank + 1) % n, (rank - 1) % n
        # Every rank sends its right neighbour device rows (float32, bool, an empty block) and a
        # host array, all at once: with two ranks each sends to the other (one group, no wait).
        rows = cupy.arange(12, dtype=cupy.float32).reshape(4, 3) + 100 * rank
        sends = [(right, rows), (right, rows[:, 0] > 101), (right, np.array([rank, -2**40])),
                 (right, cupy.zeros((0, 3), dtype=cupy.float64))]
        receives = [(left, (4, 3), np.float32, cupy), (left, (4,), np.bool_, cupy), (left, (2,), np.int64, np),
                    (left, (0, 3), np.float64, cupy)]
        got = comm.exchange(sends, receives)
        total = comm.allreduce(cupy.ones(1, dtype=cupy.int64))  # the collectives go on in step
        return ([cupy.asnumpy(a).tolist() if isinstance(a, cupy.ndarray) else a.tolist() for a in got],
                [isinstance(a, cupy.ndarray) for a in got], int(total[0]))
    finally:
        comm.close()


def test_nccl_exchange_moves_device_rows_between_ranks(cuda_client):
    """``NcclCommunicator.exchange``: device arrays by NCCL's send and receive in one group (any
    dtype, as bytes; each rank sending while it receives), host arrays by the host comms."""
    from dgboost.collective.host import CollectivePlugin

    workers = sorted(cuda_client.scheduler_info()["workers"])
    n = len(workers)
    if n < 2:
        pytest.skip("one GPU: a one-rank job needs no NCCL")
    cuda_client.register_plugin(CollectivePlugin())
    futures = [cuda_client.submit(_nccl_exchange, "nccl-exchange-job", rank, workers, workers=[w], pure=False)
               for rank, w in enumerate(workers)]
    for rank, (got, on_device, total) in enumerate(cuda_client.gather(futures)):
        left = (rank - 1) % n
        expected = np.arange(12, dtype=np.float32).reshape(4, 3) + 100 * left
        assert got == [expected.tolist(), (expected[:, 0] > 101).tolist(), [left, -2**40], []]
        assert on_device == [True, True, False, True] and total == n


@pytest.mark.parametrize("chunks_on", ["cupy", "numpy"])
def test_rows_one_gpu_worker_holds_reach_the_others_over_nccl(cuda_client, data, chunks_on, tmp_path, caplog):
    """One partition, held by one worker: the other ranks' shares of it come from its rank over
    NCCL (device chunks) or the host comms (host chunks), no Dask transfer of the partition or
    a slice of it; the model is one GPU's, byte for byte."""
    import cupy

    X, y, weight = data
    n = len(cuda_client.scheduler_info()["workers"])
    params = {"objective": "binary:logistic", "max_depth": 5, "device": "cuda", "verbosity": 2}
    expected = dgboost.train(params, cupy.asarray(X), cupy.asarray(y), num_boost_round=4,
                             sample_weight=cupy.asarray(weight))
    move = cupy.asarray if chunks_on == "cupy" else (lambda a: a)
    dX, dy, dw = (da.from_array(a, chunks=(N_ROWS,) + a.shape[1:]).map_blocks(move) for a in (X, y, weight))
    cuda_client.run(lambda dask_worker: dask_worker.transfer_incoming_log.clear())
    with caplog.at_level(logging.INFO, logger="dgboost"):
        got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=4, sample_weight=dw)
    assert _bytes(got, tmp_path, "dask") == _bytes(expected, tmp_path, "one")
    assert all(keys == [] for keys in cuda_client.run(bundle_transfers).values())
    if n > 1:
        assert "rows moved in" in caplog.text


def test_gpu_jobs_queue_and_a_cancel_frees_the_gpus_for_the_next(cuda_client, data, tmp_path):
    """The job service on GPU workers: a second and a third job wait their turn while the first
    runs; the first, cancelled mid-training (its NCCL ranks aborted), ends within seconds; the
    queued ones then run in priority order, each the single-process GPU model byte for byte."""
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    params = {**PARAMS["binary"], "device": "cuda"}
    first = dgboost.dask.submit(cuda_client, params, dX, dy, num_boost_round=1000, callbacks=[Slow(0.05)],
                                name="long")
    wait_for(lambda: first.status == "running" and (first.progress()["rounds_done"] or 0) >= 2, "two rounds", 120)

    low = dgboost.dask.submit(cuda_client, params, dX, dy, num_boost_round=8, name="low")
    wait_for(lambda: job_status(cuda_client, low.id) == "queued", "the low job queued", 120)
    high = dgboost.dask.submit(cuda_client, params, dX, dy, num_boost_round=6, name="high", priority=5)
    wait_for(lambda: job_status(cuda_client, high.id) == "queued", "the high job queued", 120)
    began = time.monotonic()
    first.cancel()
    with pytest.raises(dgboost.dask.JobCancelled):
        first.result(timeout=60)
    assert time.monotonic() - began < 15
    for job, rounds in ((high, 6), (low, 8)):
        got = job.result(timeout=180)
        expected = dgboost.train(params, X, y, num_boost_round=rounds)
        assert _bytes(got, tmp_path, f"{job.id}-got") == _bytes(expected, tmp_path, f"{job.id}-expected")
    table = {j["id"]: j for j in dgboost.dask.jobs(cuda_client)}
    assert table[high.id]["started"] < table[low.id]["started"]
    assert [table[j.id]["status"] for j in (first, high, low)] == ["cancelled", "finished", "finished"]


class _FailOnce(TrainingCallback):
    """On the coordinator after round ``at``, once (a marker file): raise a retryable error, or
    with ``kill`` SIGKILL the last rank's worker process ``kill`` (a pid)."""

    never_stops = True

    def __init__(self, at, marker, kill=None):
        self.at, self.marker, self.kill = at, str(marker), kill

    def after_iteration(self, model, epoch, evals_log):
        import os
        import signal

        if epoch == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            if self.kill is None:
                raise ConnectionResetError("a connection lost on purpose")
            os.kill(self.kill, signal.SIGKILL)
        return False


ACROSS = pytest.mark.parametrize("across", [False, True], ids=["rounds-as-calls", "rounds-captured"])


@contextlib.contextmanager
def _capturing_across(client, across, survivor=True):
    """A fault test's job whose rounds replay NCCL's calls captured in a CUDA graph (``across``;
    NCCL's abort then waits for the graph's destruction: dgboost/replay.py): a worker that lived
    through it captured rounds (``survivor``; a test where none need live looks itself)."""
    from dgboost import replay

    if across and len(client.scheduler_info()["workers"]) == 1:
        pytest.skip("one GPU: no collective to capture")
    before = client.run(replay.counts)
    with dask.config.set({"dgboost.cuda-graphs-across-gpus": across}):
        yield
    if across and survivor:
        after = client.run(replay.counts)
        assert any(after[w][0] > before[w][0] for w in before.keys() & after.keys())


@ACROSS
def test_a_lost_gpu_worker_or_connection_resumes_to_the_same_model(cuda_client, data, tmp_path, across):
    """Near the end of this module: it kills a worker (its nanny starts another). On one GPU a
    retryable error restarts the job; on more, the last GPU's worker is killed, the
    survivors' NCCL communicator is aborted and a new one made, and nothing hangs."""
    import os

    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    params = {**PARAMS["binary"], "device": "cuda"}
    expected = dgboost.train(params, X, y, num_boost_round=12)
    pids = cuda_client.run(os.getpid)
    victim = pids[sorted(pids)[-1]] if len(pids) > 1 else None
    started = time.monotonic()
    with _capturing_across(cuda_client, across):
        got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=12,
                                 callbacks=[_FailOnce(5, tmp_path / "once", kill=victim)])
    assert (tmp_path / "once").exists()
    assert _bytes(got, tmp_path, "restarted") == _bytes(expected, tmp_path, "expected")
    assert time.monotonic() - started < 180
    no_task_left(cuda_client)
    cuda_client.wait_for_workers(len(pids), timeout=120)
    assert dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=2).num_boosted_rounds() == 2


def test_a_streamed_job_keeps_the_survivors_pieces_past_a_lost_gpu_worker(cuda_client, data, tmp_path, caplog):
    """A streamed job (dask/_streamed.py) that loses the last GPU's worker: the workers left
    keep the pieces they packed (pinned pages on the host), continue their margins on the GPU
    from their bins, and pack the lost rows again; the model is one GPU's, byte for byte."""
    import os

    pids = cuda_client.run(os.getpid)
    if len(pids) == 1:
        pytest.skip("one GPU: no worker is left to keep its pieces")
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(2500, 12)), da.from_array(y, chunks=2500)
    params = {**PARAMS["binary"], "device": "cuda", "verbosity": 2}  # verbosity 2: the shares' log lines
    expected = dgboost.train(params, X, y, num_boost_round=12)
    victim = pids[sorted(pids)[-1]]
    with dask.config.set({"dgboost.stream-partitions": True}), caplog.at_level(logging.INFO, logger="dgboost"):
        got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=12,
                                 callbacks=[_FailOnce(5, tmp_path / "once", kill=victim)])
    assert (tmp_path / "once").exists()
    assert _bytes(got, tmp_path, "restarted") == _bytes(expected, tmp_path, "expected")
    share = N_ROWS // len(pids)
    assert f"({N_ROWS - share} rows' pages kept from the last attempt, {share} rows moved)" in caplog.text
    no_task_left(cuda_client)
    cuda_client.wait_for_workers(len(pids), timeout=120)


class _BreakTheGpu(TrainingCallback):
    """On the coordinator after round ``at``, once: a kernel writes where nothing is allocated,
    which leaves the process's CUDA context unusable (a sticky error). The marker file holds the
    rounds the job had captured as CUDA graphs in that process by then (dgboost.replay.counts)."""

    never_stops = True

    def __init__(self, at, marker):
        self.at, self.marker = at, str(marker)

    def before_training(self, model):
        from dgboost import replay

        self.captures = replay.counts()[0]
        return model

    def after_iteration(self, model, epoch, evals_log):
        import os

        import cupy

        from dgboost import replay

        if epoch == self.at and not os.path.exists(self.marker):
            with open(self.marker, "w") as marker:
                marker.write(str(replay.counts()[0] - self.captures))
            stray = cupy.RawKernel(r'extern "C" __global__ void stray() { ((int*)0x10)[threadIdx.x] = 1; }', "stray")
            stray((1,), (32,), ())
        return False


@ACROSS
def test_a_worker_whose_gpu_broke_is_replaced_and_the_job_resumes(cuda_client, data, tmp_path, across):
    """Last: a rank's CUDA context broken mid-job (an illegal address, which every later call of
    its process repeats): the worker's process ends, its nanny starts a fresh one, and the job
    resumes to the uninterrupted model; the cluster then trains again. A peer may find its own
    context broken too (seen on H200s, rounds captured or not; presumably its NCCL kernel read
    the broken rank's memory over P2P) and is replaced the same way: no survivor is asked for."""
    import os

    X, y, _ = data
    dX, dy = da.from_array(X, chunks=(5000, 12)), da.from_array(y, chunks=5000)
    params = {**PARAMS["binary"], "device": "cuda"}
    expected = dgboost.train(params, X, y, num_boost_round=10)
    before = cuda_client.run(os.getpid)
    with _capturing_across(cuda_client, across, survivor=False):
        got = dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=10,
                                 callbacks=[_BreakTheGpu(4, tmp_path / "once")])
    captured = int((tmp_path / "once").read_text())  # by the broken rank, before its break
    assert (captured > 0) == (across or len(before) == 1)  # one GPU's rounds are captured by default
    assert _bytes(got, tmp_path, "resumed") == _bytes(expected, tmp_path, "expected")
    cuda_client.wait_for_workers(len(before), timeout=120)
    assert set(cuda_client.run(os.getpid).values()) != set(before.values())  # a process was replaced
    assert dgboost.dask.train(cuda_client, params, dX, dy, num_boost_round=2).num_boosted_rounds() == 2
