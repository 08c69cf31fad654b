"""dgboost.dask on CPU LocalClusters (worker processes): the model equals dgboost.train's, byte
for byte, whatever the number of workers and the chunking; eval sets, early stopping, lazy
prediction, bad input, concurrent jobs and a worker lost mid-training."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
import uuid

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402
from dgboost.collective import CollectiveError  # noqa: E402
from dgboost.dask._shards import global_runs, plan_evals, plan_query_shards, plan_shards  # noqa: E402
from _queries import uneven_queries  # noqa: E402  (tests/_queries.py)
from _waiting import bundle_transfers, no_task_left, wait_for  # noqa: E402  (tests/_waiting.py)

N_ROWS = 3000


def _cluster(n_workers: int):
    return dgboost.dask.local_cluster("cpu", n_workers, threads_per_worker=1, silence_logs=logging.CRITICAL)


@pytest.fixture(scope="module", params=[1, 2, 3], ids=lambda n: f"{n}workers")
def client(request):
    with _cluster(request.param) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def client3():
    with _cluster(3) as cluster, distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(42)
    X = rng.standard_normal((N_ROWS, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 5] = np.nan  # an all-missing column
    weight = rng.uniform(0.5, 2.0, N_ROWS).astype(np.float32)
    return X, y, weight


def _model_bytes(booster, tmp_path, name):
    path = tmp_path / f"{name}.json"
    booster.save_model(path)
    return path.read_bytes()


CHUNKINGS = {
    "even": 700,
    "uneven": (1, 2500, 499),  # sizes far apart; with 3 workers the big chunk is cut
    "one-chunk": N_ROWS,  # more workers than chunks
}
PARAMS = {
    "binary": {"objective": "binary:logistic", "max_depth": 4, "eval_metric": ["logloss", "auc"],
               "subsample": 0.8},
    "symmetric": {"objective": "binary:logistic", "max_depth": 4, "grow_policy": "symmetric",
                  "colsample_bylevel": 0.8},
    "regression": {"objective": "reg:squarederror", "max_depth": 3, "min_child_weight": 2.0, "subsample": 0.5,
                   "sampling_method": "gradient_based"},
    "multiclass": {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "sampling_method": "goss",
                   "eta": 0.5},  # GOSS from the third round
    # The tree-shape parameters of one grower; the split rules they set travel to every rank.
    "constrained": {"objective": "reg:squarederror", "max_depth": 4, "grow_policy": "lossguide",
                    "monotone_constraints": (1, -1, 0, 0, 0, 0),
                    "interaction_constraints": [[0, 1, 2], [2, 3, 4, 5]], "colsample_bytree": 0.9,
                    "colsample_bylevel": 0.9, "colsample_bynode": 0.7, "max_leaves": 9, "max_greedy_nodes": 2},
}


def _labels(kind, X, y):
    if kind == "multiclass":
        return np.digitize(np.nan_to_num(X[:, 0]), [-0.5, 0.5]).astype(np.float32)
    if kind in ("regression", "constrained"):
        return (np.nan_to_num(X[:, 0]) * 2 + y).astype(np.float32)
    return y


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("kind", list(PARAMS))
def test_model_is_byte_identical_to_single_process(client, data, chunking, kind, tmp_path):
    X, y, weight = data
    y = _labels(kind, X, y)
    params = PARAMS[kind]
    use_weight = kind == "regression"
    expected = dgboost.train(params, X, y, num_boost_round=4, sample_weight=weight if use_weight else None,
                             evals=[(X, y, "train")])
    chunks = CHUNKINGS[chunking]
    dX, dy = da.from_array(X, chunks=(chunks, 6)), da.from_array(y, chunks=(chunks,))
    dw = da.from_array(weight, chunks=(chunks,)) if use_weight else None
    got = dgboost.dask.train(client, params, dX, dy, num_boost_round=4, sample_weight=dw,
                             evals=[(dX, dy, "train")])
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")
    assert got.evals_result() == expected.evals_result()


@pytest.mark.parametrize("n_partitions, encoding", [(1, "partition"), (4, "partition"), (4, "target_statistics")])
def test_categorical_frames_train_the_model_of_the_pandas_frame(client, data, n_partitions, encoding, tmp_path):
    """A dask DataFrame with category columns (strings, and integers with missing values): the
    model of dgboost.train on the pandas frame, byte for byte, on 1, 2 and 3 workers, by category
    sets and by ordered target statistics, with a categorical eval set; a partition whose categories come in another order is coded by value,
    and lazy prediction equals in-memory prediction."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, _ = data
    rng = np.random.default_rng(7)
    cities = np.array([f"city{i}" for i in range(25)], dtype=object)[rng.integers(0, 25, N_ROWS)]
    frame = pd.DataFrame({"city": pd.Categorical(cities, categories=sorted(set(cities))),
                          "kind": pd.Categorical(np.where(rng.random(N_ROWS) < 0.1, np.nan, rng.integers(0, 3, N_ROWS))),
                          "x0": X[:, 0], "x1": X[:, 1]})
    target = y + (frame["city"].cat.codes.to_numpy() % 3 == 0)
    params = {"enable_categorical": True, "max_depth": 4, "eval_metric": "rmse", "cat_encoding": encoding}
    expected = dgboost.train(params, frame, target, num_boost_round=4, evals=[(frame, target, "train")])
    dX = dd.from_pandas(frame, npartitions=n_partitions)
    dy = dd.from_pandas(pd.Series(target), npartitions=n_partitions)
    got = dgboost.dask.train(client, params, dX, dy, num_boost_round=4, evals=[(dX, dy, "train")])
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")
    assert got.evals_result() == expected.evals_result()
    np.testing.assert_array_equal(dgboost.dask.predict(client, got, dX).compute().to_numpy(), expected.predict(frame))


def test_unknown_dask_categories_are_refused_before_any_task(client3):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = pd.DataFrame({"city": ["a", "b", "c", "a"] * 10, "x": np.arange(40.0)})
    dX = dd.from_pandas(frame, npartitions=2).astype({"city": "category"})  # categories unknown to dask
    dy = dd.from_pandas(pd.Series(np.arange(40.0)), npartitions=2)
    with pytest.raises(ValueError, match=r"unknown categories.*X = X.categorize\(\)"):
        dgboost.dask.train(client3, {"enable_categorical": True}, dX, dy, num_boost_round=1)
    with pytest.raises(TypeError, match="enable_categorical=True"):
        dgboost.dask.train(client3, {}, dX.categorize(), dy, num_boost_round=1)


def _sparse_chunks(X, chunks, form="csr"):
    """A dask array of X's present values whose chunks are scipy sparse matrices of ``form``."""
    sp = pytest.importorskip("scipy.sparse")
    rows, columns = np.nonzero(~np.isnan(X))
    csr = sp.csr_matrix((X[rows, columns], (rows, columns)), shape=X.shape)
    return da.from_array(csr, chunks=(chunks, X.shape[1]), asarray=False).map_blocks(
        lambda block: block.asformat(form), dtype=np.float32)


@pytest.mark.parametrize("chunking", ["even", "uneven"])
def test_csr_chunks_train_the_model_of_the_dense_array(client, data, chunking, tmp_path):
    """Dask arrays of scipy CSR chunks: the model of dgboost.train on the dense array with NaN,
    byte for byte, on 1, 2 and 3 workers; prediction of sparse chunks too."""
    X, y, weight = data
    X = X.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.6] = np.nan
    params = {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.8, "eval_metric": ["logloss", "auc"]}
    expected = dgboost.train(params, X, y, num_boost_round=4, sample_weight=weight, evals=[(X, y, "train")])
    chunks = CHUNKINGS[chunking]
    dX, dy, dw = _sparse_chunks(X, chunks), da.from_array(y, chunks=(chunks,)), da.from_array(weight, chunks=(chunks,))
    got = dgboost.dask.train(client, params, dX, dy, num_boost_round=4, sample_weight=dw, evals=[(dX, dy, "train")])
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")
    assert got.evals_result() == expected.evals_result()
    np.testing.assert_array_equal(dgboost.dask.predict(client, got, dX).compute(), expected.predict(X))


@pytest.mark.parametrize("chunking", ["one-chunk", "uneven"])
@pytest.mark.parametrize("rows", ["dense", "csr", "ranking"])
def test_rows_a_worker_holds_for_others_go_rank_to_rank(client3, data, rows, chunking, tmp_path, caplog):
    """The rows a rank trains on that another job worker holds come from that worker's rank
    over the job's communicator once both have started (_shards.move_pieces: between GPUs over
    NCCL), not as Dask's transfers of the partitions or their slices; dense, CSR, and shares cut
    at query boundaries, whole partitions and slices of them. The model is one process's."""
    X, y, weight = data
    params = {"objective": "binary:logistic", "max_depth": 4, "eval_metric": "logloss"}
    extra, local_extra = {"sample_weight": weight}, {"sample_weight": weight}
    if rows == "ranking":
        X, y, qid = _ranking_data()
        params, extra, local_extra = {"objective": "rank:ndcg", "max_depth": 4}, {"qid": qid}, {"qid": qid}
    local = dgboost.train(params, X, y, num_boost_round=4, **local_extra)
    chunks = CHUNKINGS[chunking]
    dX = _sparse_chunks(X, chunks) if rows == "csr" else da.from_array(X, chunks=(chunks, X.shape[1]))
    given = {k: da.from_array(v, chunks=(chunks,)) for k, v in extra.items()}
    client3.run(lambda dask_worker: dask_worker.transfer_incoming_log.clear())
    with caplog.at_level(logging.INFO, logger="dgboost"):
        model = dgboost.dask.train(client3, dict(params, verbosity=2), dX, da.from_array(y, chunks=(chunks,)),
                                   num_boost_round=4, **given)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    moved = int(re.search(r"\((\d+) rows moved\)", caplog.text).group(1))
    assert moved > 0  # one partition of three workers, or the big one of three: cut and shared
    assert client3.run(bundle_transfers) == {w: [] for w in client3.scheduler_info()["workers"]}
    assert "rows moved in" in caplog.text  # rank 0 sends or receives: every rank does here
    # counted apart from the collectives' traffic a round: at least the X rows moved, 4 bytes a value
    mib = float(re.search(r"before them, ([\d.]+) MiB of rows rank to rank", caplog.text).group(1))
    assert mib * 2**20 >= moved * (4 if rows != "csr" else 0) * X.shape[1] * 0.99 and mib > 0


def _exchanges(job, rank, addresses):
    from dgboost.collective.host import DaskCommunicator

    comm = DaskCommunicator(job, rank, addresses, 30.0)
    try:
        grid = np.arange(6, dtype=np.float32).reshape(2, 3)
        sends = {0: [(2, grid), (2, np.array([-2**40], dtype=np.int64))],
                 1: [],
                 2: [(0, np.array([True, False])), (1, np.zeros((0, 3)))]}[rank]
        receives = {0: [(2, (2,), np.bool_, np)],
                    1: [(2, (0, 3), np.float64, np)],
                    2: [(0, (2, 3), np.float32, np), (0, (1,), np.int64, np)]}[rank]
        first = comm.exchange(sends, receives)
        total = comm.allreduce(np.array([rank]))  # the collectives' numbering goes on unaware
        again = comm.exchange([(0, grid * rank)] if rank == 2 else [],
                              [(2, (2, 3), np.float32, np)] if rank == 0 else [])
        return [a.tolist() for a in first], [a.dtype.str for a in first], total.tolist(), \
            [a.tolist() for a in again], (comm.traffic.calls, comm.traffic.bytes_sent)
    finally:
        comm.close()


def test_host_communicator_exchanges_point_to_point(client3):
    """``exchange`` sends arrays between the ranks named alone, in order, dtype and shape kept,
    numbered by pair so that a rank left out of it (rank 1 sends nothing) goes on in step with
    the collectives."""
    from dgboost.collective.host import CollectivePlugin

    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])
    futures = [client3.submit(_exchanges, "exchange-job", rank, workers, workers=[w], pure=False)
               for rank, w in enumerate(workers)]
    (first0, dtypes0, total0, again0, traffic0), (first1, dtypes1, _, again1, traffic1), \
        (first2, dtypes2, _, again2, traffic2) = client3.gather(futures)
    assert first0 == [[True, False]] and dtypes0 == ["|b1"] and again0 == [[[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]]
    assert first1 == [[]] and dtypes1 == ["<f8"] and again1 == []
    assert first2 == [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [-2**40]] and dtypes2 == ["<f4", "<i8"]
    assert total0 == [3]
    # the two exchanges and the all-reduce (an 8-byte number to each peer): a call each
    assert (traffic0, traffic1, traffic2) == ((3, 24 + 8 + 16), (3, 16), (3, 2 + 0 + 16 + 24))


def _slow_sender(job, rank, addresses, timeout):
    from dgboost.collective.host import DaskCommunicator
    from dgboost.dask._restart import retryable

    comm = DaskCommunicator(job, rank, addresses, timeout)
    try:
        if rank == 0:
            comm.exchange([(1, np.ones(50_000_000, np.float32))], [])  # 200 MB in 0.01 s: too slow
        else:
            comm.exchange([], [(0, (50_000_000,), np.float32, np)])
        return "done"
    except Exception as error:  # noqa: BLE001 - what each rank raised is the test's answer
        return type(error).__name__, retryable(error), str(error)
    finally:
        comm.close()


def test_a_send_past_the_timeout_is_not_taken_for_an_unreachable_peer(client3):
    """A peer that takes a message late is alive: the job fails with the time-out's advice, not
    as a lost connection (PeerUnreachable), which would restart it to send the same rows again."""
    from dgboost.collective.host import CollectivePlugin

    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])[:2]
    futures = [client3.submit(_slow_sender, "slow-send-job", rank, workers, timeout, workers=[w], pure=False)
               for rank, (w, timeout) in enumerate(zip(workers, (0.01, 30.0)))]
    (kind, retry, message), (other_kind, _, other) = client3.gather(futures)
    assert (kind, retry) == ("CollectiveError", False), message
    assert "could not deliver exchange" in message and "dgboost.timeout" in message
    assert other_kind == "CollectiveError" and "could not deliver" in other  # told at once, not after 30 s


def test_an_aborted_jobs_mail_is_dropped_and_later_mail_ignored():
    """A rank that never runs (cancelled once its job failed) never forgets its job's mailbox: the
    abort empties it, and what arrives after is not kept (rows another rank sent, say)."""
    from dgboost.collective.host import CollectivePlugin

    class Worker:
        handlers: dict = {}

    plugin = CollectivePlugin()
    plugin.setup(Worker())
    plugin.deliver("job", -1, 0, np.ones(3))
    plugin.deliver("other", 0, 1, np.ones(2))
    plugin.abort("job", "rank 0 gave up")
    plugin.deliver("job", -2, 0, np.ones(3))
    assert "job" not in plugin._mail and list(plugin._mail["other"]) == [(0, 1)]
    assert plugin.aborted("job") == "rank 0 gave up"


def test_an_exchange_refuses_a_peer_that_is_no_other_rank():
    from dgboost.collective.local import LocalCommunicator

    with pytest.raises(ValueError, match="no peer"):
        LocalCommunicator().exchange([(0, np.zeros(1))], [])
    assert LocalCommunicator().exchange([], []) == []


def test_speculative_lossguide_on_workers_whose_leaves_are_empty(client3, tmp_path, monkeypatch):
    """Lossguide one leaf a step, 16 nodes split ahead a step on every worker (the default),
    rows sorted by a feature so that many nodes hold no row of some worker: the model of one
    process splitting one node a step."""
    from dgboost.tree import lossguide

    rng = np.random.default_rng(8)
    X = rng.standard_normal((N_ROWS, 5)).astype(np.float32)
    X = X[np.argsort(X[:, 0])]
    y = (X[:, 0] * X[:, 1] + np.sin(3 * X[:, 0]) + 0.3 * rng.standard_normal(N_ROWS)).astype(np.float32)
    params = {"objective": "reg:squarederror", "grow_policy": "lossguide", "max_leaves": 40, "max_depth": 0,
              "min_child_weight": 3.0}
    monkeypatch.setattr(lossguide, "SPECULATION", 1)
    expected = dgboost.train(params, X, y, num_boost_round=3)

    def width():
        from dgboost.tree import lossguide as on_worker

        return on_worker.SPECULATION

    assert set(client3.run(width).values()) == {16}  # the workers' own processes, untouched
    got = dgboost.dask.train(client3, params, da.from_array(X, chunks=(1000, 5)), da.from_array(y, chunks=1000),
                             num_boost_round=3)
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")


def test_dataframes_with_feature_names(client3, data, tmp_path):
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, _ = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    labels = pd.Series(y, name="label")
    params = {"objective": "binary:logistic", "max_depth": 3}
    expected = dgboost.train(params, frame, labels, num_boost_round=3)
    dX, dy = dd.from_pandas(frame, npartitions=4), dd.from_pandas(labels, npartitions=4)
    got = dgboost.dask.train(client3, params, dX, dy, num_boost_round=3)
    assert got.feature_names == tuple(frame.columns)
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")
    predicted = dgboost.dask.predict(client3, got, dX)
    assert isinstance(predicted, dd.Series)
    result = predicted.compute()
    np.testing.assert_array_equal(result.index.to_numpy(), frame.index.to_numpy())
    np.testing.assert_array_equal(result.to_numpy(), expected.predict(frame))


def test_sampled_cuts_match_on_a_large_set(client3, tmp_path):
    """Past sketch.SKETCH_SAMPLE_ROWS rows the cut sample is drawn by hash: still identical."""
    from dgboost.data.sketch import SKETCH_SAMPLE_ROWS

    rng = np.random.default_rng(1)
    n = SKETCH_SAMPLE_ROWS + 40_000
    X = rng.standard_normal((n, 3)).astype(np.float32)
    y = (X[:, 0] > 0.1).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 2}
    expected = dgboost.train(params, X, y, num_boost_round=1)
    got = dgboost.dask.train(client3, params, da.from_array(X, chunks=(70_000, 3)),
                             da.from_array(y, chunks=70_000), num_boost_round=1)
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")


def test_eval_sets_and_early_stopping(client3, data):
    X, y, _ = data
    X_valid, y_valid = X[:900] * 1.1, y[:900]
    params = {"objective": "binary:logistic", "max_depth": 5, "eta": 0.6, "eval_metric": ["auc", "logloss"]}
    expected = dgboost.train(params, X, y, num_boost_round=60, evals=[(X_valid, y_valid, "valid")],
                             early_stopping_rounds=3)
    assert expected.num_boosted_rounds() < 60  # it did stop early
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    # A single eval partition: the other workers hold no eval rows.
    dXv, dyv = da.from_array(X_valid, chunks=(900, 6)), da.from_array(y_valid, chunks=900)
    got = dgboost.dask.train(client3, params, dX, dy, num_boost_round=60, evals=[(dXv, dyv, "valid")],
                             early_stopping_rounds=3)
    assert got.num_boosted_rounds() == expected.num_boosted_rounds()
    assert got.best_iteration == expected.best_iteration
    assert got.evals_result() == expected.evals_result()


def test_predict_is_lazy_and_keeps_order(client3, data):
    X, y, _ = data
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}
    labels = _labels("multiclass", X, y)
    booster = dgboost.train(params, X, labels, num_boost_round=3)
    dX = da.from_array(X, chunks=((5, 1995, 1000), 6))
    predicted = dgboost.dask.predict(client3, booster, dX)
    assert isinstance(predicted, da.Array) and predicted.shape == (N_ROWS, 3)
    np.testing.assert_array_equal(predicted.compute(), booster.predict(X))
    margins = dgboost.dask.predict(None, booster, dX, output_margin=True)
    np.testing.assert_array_equal(margins.compute(), booster.predict(X, output_margin=True))
    binary = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=2)
    one = dgboost.dask.predict(client3, binary, dX)
    assert one.shape == (N_ROWS,) and one.chunks == ((5, 1995, 1000),)
    np.testing.assert_array_equal(one.compute(), binary.predict(X))


@pytest.mark.parametrize("make, match", [
    (lambda X, y: (da.from_array(X, chunks=(1000, 3)), da.from_array(y, chunks=1000)), "chunked along its columns"),
    (lambda X, y: (da.from_array(X, chunks=(1000, 6)), da.from_array(y, chunks=((1500, 1000, 500),))), "row chunks"),
    (lambda X, y: (da.from_array(X, chunks=(1000, 6)), da.from_array(y[:2000], chunks=1000)), "partitions"),
    (lambda X, y: (da.from_array(X[:0], chunks=(1000, 6)), da.from_array(y[:0], chunks=1000)), "empty"),
    (lambda X, y: (da.from_array(X, chunks=(1000, 6)), y), "dask array or dask Series"),
    (lambda X, y: (X, da.from_array(y, chunks=1000)), "dask DataFrame"),
])
def test_bad_collections_are_named_before_any_work(client3, data, make, match):
    X, y, _ = data
    dX, dy = make(X, y)
    with pytest.raises((ValueError, TypeError), match=match):
        dgboost.dask.train(client3, {"objective": "binary:logistic"}, dX, dy, num_boost_round=1)


def test_bad_params_and_labels(client3, data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    with pytest.raises(ValueError, match="max_depth"):
        dgboost.dask.train(client3, {"max_depth": -1}, dX, dy)
    with pytest.raises(ValueError, match="monotone_constraints has 2 values but X has 6 features"):
        dgboost.dask.train(client3, {"monotone_constraints": (1, 0)}, dX, dy)
    bad = y.copy()
    bad[2500] = 3.0  # only the last partition's worker sees it
    started = time.monotonic()
    with pytest.raises(ValueError, match="y"):
        dgboost.dask.train(client3, {"objective": "binary:logistic"}, dX, da.from_array(bad, chunks=1000),
                           num_boost_round=2)
    assert time.monotonic() - started < 60
    with pytest.raises(ValueError, match="dgboost.timeout"):
        import dask

        with dask.config.set({"dgboost.timeout": "-1s"}):
            dgboost.dask.train(client3, {}, dX, dy, num_boost_round=1)
    with pytest.raises(ValueError, match="dgboost.keep-nccl='no' must be True or False"):
        with dask.config.set({"dgboost.keep-nccl": "no"}):
            dgboost.dask.train(client3, {}, dX, dy, num_boost_round=1)
    # The cluster is usable afterwards: no task left running, no lock held.
    assert not any(client3.processing().values())
    assert dgboost.dask.train(client3, {}, dX, dy, num_boost_round=1).num_boosted_rounds() == 1


def test_workers_beyond_the_rows_sit_the_job_out(client3, tmp_path):
    X = np.array([[0.0], [1.0]], dtype=np.float32)
    y = np.array([0.0, 1.0], dtype=np.float32)
    params = {"objective": "reg:squarederror", "min_child_weight": 0.0}
    expected = dgboost.train(params, X, y, num_boost_round=2)
    got = dgboost.dask.train(client3, params, da.from_array(X, chunks=(2, 1)), da.from_array(y, chunks=2),
                             num_boost_round=2)  # 2 rows, 3 workers: one trains on nothing and is left out
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")


def _dependencies(keys, dask_scheduler=None):
    return {key: sorted(str(d.key) for d in dask_scheduler.tasks[key].dependencies) for key in keys}


def test_the_partitions_tasks_take_the_params_as_one_key(client3, data):
    """Each partition's bundle task reads the job's TrainParams from one key of the graph, not
    a copy of its own (dask walks an argument's dataclass fields in every call, and pickles it
    into every task): its dependencies are X's and y's blocks and that one key."""
    from dask.core import flatten

    from dgboost.dask._placing import _bundles
    from dgboost.training import Options

    X, y, _ = data
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    params = Options.check({"max_depth": 3}, 1, None, None, False, has_evals=False, init_model=None).params
    bundles = _bundles(client3, params, dX, dy, None, None, "")
    try:
        distributed.wait(bundles)
        found = client3.run_on_scheduler(_dependencies, [b.key for b in bundles])
        blocks = {str(k) for k in flatten([dX.__dask_keys__(), dy.__dask_keys__()])}
        others = {d for deps in found.values() for d in deps if d not in blocks}
        assert len(found) == 6 and len(others) == 1, found
        assert all(len(deps) == 3 and others <= set(deps) for deps in found.values()), found
    finally:
        client3.cancel(bundles)


def test_weights_are_checked_over_every_shard(client3, data, tmp_path):
    X, y, _ = data
    weight = np.ones(N_ROWS, np.float32)
    weight[:1000] = 0.0  # the first worker's rows weigh nothing: fine, others do
    expected = dgboost.train({}, X, y, num_boost_round=2, sample_weight=weight)
    dX, dy, dw = (da.from_array(a, chunks=1000) for a in (X, y, weight))
    got = dgboost.dask.train(client3, {}, dX, dy, num_boost_round=2, sample_weight=dw)
    assert _model_bytes(got, tmp_path, "dask") == _model_bytes(expected, tmp_path, "local")
    with pytest.raises(ValueError, match="sample_weight is zero for every row"):
        dgboost.dask.train(client3, {}, dX, dy, num_boost_round=2, sample_weight=dw * 0)


def test_two_jobs_at_once_do_not_interleave(client3, data, tmp_path):
    X, y, _ = data
    params = [{"objective": "binary:logistic", "max_depth": 3}, {"objective": "reg:squarederror", "eta": 0.5}]
    expected = [_model_bytes(dgboost.train(p, X, y, num_boost_round=5), tmp_path, f"local{i}")
                for i, p in enumerate(params)]
    dX, dy = da.from_array(X, chunks=800), da.from_array(y, chunks=800)
    results = [None, None]

    def run(i):
        results[i] = dgboost.dask.train(client3, params[i], dX, dy, num_boost_round=5)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [_model_bytes(r, tmp_path, f"dask{i}") for i, r in enumerate(results)] == expected


class _Slow(TrainingCallback):
    """Makes every round take a while, so that a worker can be killed mid-training."""

    def after_iteration(self, model, epoch, evals_log):
        time.sleep(0.1)
        return False


def test_a_killed_worker_without_restarts_gives_a_clear_error_and_no_hang(data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    with _cluster(3) as cluster, distributed.Client(cluster) as client:
        victim = sorted(client.scheduler_info()["workers"])[-1]  # the last rank
        outcome = {}

        def run():
            try:
                dgboost.dask.train(client, {"max_depth": 3}, dX, dy, num_boost_round=500, callbacks=[_Slow()],
                                   max_restarts=0)
            except Exception as error:  # noqa: BLE001 - inspected below
                outcome["error"] = error

        thread = threading.Thread(target=run)
        thread.start()
        wait_for(lambda: any(str(k).startswith("dgboost-train") for keys in client.processing().values()
                             for k in keys), "training to start")
        time.sleep(1.0)
        pid = client.run(os.getpid, workers=[victim])[victim]
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        thread.join(90)
        assert not thread.is_alive(), "train() hung after a worker died"
        assert time.monotonic() - killed < 60
        error = outcome.get("error")
        assert isinstance(error, RuntimeError) and not isinstance(error, CollectiveError)
        assert victim in str(error) and "left the cluster" in str(error)
        client.wait_for_workers(3, timeout=60)
        no_task_left(client, timeout=30)  # the survivors' tasks stop
        # The lock was released: the restarted cluster trains.
        assert dgboost.dask.train(client, {}, dX, dy, num_boost_round=2).num_boosted_rounds() == 2


def _lone_rank(job, addresses, timeout):
    from dgboost.collective.host import DaskCommunicator

    comm = DaskCommunicator(job, 0, addresses, timeout)
    try:
        comm.allreduce(np.ones(3))
    finally:
        comm.close()


def _checked_after_abort(job, rank, addresses, folder):
    import pathlib

    from dgboost.collective.host import DaskCommunicator

    comm = DaskCommunicator(job, rank, addresses, 30.0)
    try:
        comm.check()  # a group that has not failed
        (pathlib.Path(folder) / f"checked-{rank}").touch()
        if rank == 1:  # once every rank has checked
            wait_for(lambda: len(list(pathlib.Path(folder).glob("checked-*"))) == len(addresses), "every rank's check")
            comm.abort("rank 1 gave up")
        else:
            wait_for(lambda: comm.aborted() is not None, "rank 1's abort")
        with pytest.raises(CollectiveError, match="rank 1 gave up") as raised:
            comm.check()
        return str(raised.value)
    finally:
        comm.close()


def test_check_raises_on_every_rank_once_one_aborted(client3, tmp_path):
    """``check`` (called after reading a collective's results on the host) raises the abort's
    reason on every rank, the aborting one included; before it, it raises nothing."""
    from dgboost.collective.host import CollectivePlugin
    from dgboost.collective.local import LocalCommunicator

    LocalCommunicator().check()
    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])
    job = f"checked-job-{uuid.uuid4().hex}"
    futures = [client3.submit(_checked_after_abort, job, rank, workers, str(tmp_path), workers=[w],
                              pure=False) for rank, w in enumerate(workers)]
    for message in client3.gather(futures):
        assert f"aborted dgboost job {job}: rank 1 gave up" in message


def test_a_ranks_error_after_its_group_failed_is_reported_as_the_groups_failure():
    """A rank whose own error comes after its group failed (garbage an aborted NCCL call left,
    read on the host, seen on four GPUs) raises the group's CollectiveError, so the job reports
    the first rank's error and may restart; before any failure its error is its own."""
    from types import SimpleNamespace

    from dgboost.collective.local import LocalCommunicator
    from dgboost.dask._job import _group_failure

    garbage = IndexError("index -2147483648 is out of bounds for axis 0 with size 12")
    assert _group_failure(LocalCommunicator(), garbage) is None

    def failed():
        raise CollectiveError("rank 0 aborted dgboost job j: CUDARuntimeError")

    group = SimpleNamespace(check=failed)
    assert str(_group_failure(group, garbage)) == "rank 0 aborted dgboost job j: CUDARuntimeError"
    assert _group_failure(group, ConnectionResetError("peer")) is None  # retryable: kept, the job restarts


class _GarbageAfterAbort(TrainingCallback):
    """After round 1 on every rank: rank 1 aborts the job (as its own failure would); rank 0 waits
    for the abort and then fails as a garbage read would, with an IndexError of its own."""

    every_rank = never_stops = True

    def after_iteration(self, model, epoch, evals_log):
        from distributed import get_client, get_worker

        from dgboost.collective.host import PLUGIN_NAME

        if epoch != 1:
            return False
        worker = get_worker()
        job, rank = worker.get_current_task().rsplit("-", 1)  # the task's key: the attempt, then the rank
        if rank == "1":
            get_client().run(lambda dask_worker: dask_worker.plugins[PLUGIN_NAME].abort(job, "rank 1 gave up"))
        elif rank == "0":
            wait_for(lambda: worker.plugins[PLUGIN_NAME].aborted(job) is not None, "rank 1's abort")
            raise IndexError("index -2147483648 is out of bounds for axis 0 with size 12")
        return False


def test_a_ranks_error_after_the_job_was_aborted_is_not_taken_for_its_cause(client3, data):
    """A rank that fails after its job was aborted (reading what an aborted collective left, as
    seen on four GPUs) raises the abort, not its own error, so the job reports the abort's cause
    (before, rank 0's IndexError, taken for a bug)."""
    X, y, _ = data
    with pytest.raises(RuntimeError, match="CollectiveError: rank 1 gave up") as raised:
        dgboost.dask.train(client3, {"max_depth": 2}, da.from_array(X, chunks=500), da.from_array(y, chunks=500),
                           num_boost_round=4, callbacks=[_GarbageAfterAbort()])
    assert "IndexError" not in str(raised.value)


def test_a_collective_wait_is_bounded_and_names_the_peer(client3):
    from dgboost.collective.host import CollectivePlugin

    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])
    started = time.monotonic()
    future = client3.submit(_lone_rank, "lonely-job", workers, 1.0, workers=[workers[0]], pure=False)
    with pytest.raises(CollectiveError, match=f"rank 1 \\({workers[1]}\\)"):
        future.result(timeout=60)
    assert time.monotonic() - started < 30


def _collectives(job, rank, addresses):
    from dgboost.collective.host import DaskCommunicator

    comm = DaskCommunicator(job, rank, addresses, 30.0)
    try:
        x = np.arange(4, dtype=np.int64) * (rank + 1)
        gathered = comm.allgather(np.full(rank + 1, rank, dtype=np.float32))
        return (comm.allreduce(x), comm.allreduce(x.astype(np.float64), "max"), comm.allreduce(x, "min"),
                comm.broadcast(x, root=1), [g.tolist() for g in gathered], gathered[0].dtype,
                (comm.traffic.calls, comm.traffic.bytes_sent))
    finally:
        comm.close()


def test_host_communicator_collectives(client3):
    from dgboost.collective.host import CollectivePlugin

    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])
    futures = [client3.submit(_collectives, "collectives-job", rank, workers, workers=[w], pure=False)
               for rank, w in enumerate(workers)]
    for rank, (total, high, low, broadcast, gathered, dtype, traffic) in enumerate(client3.gather(futures)):
        # What each rank sent its two peers: its allgather block (rank + 1 float32s), three
        # allreduces of 4 eight-byte numbers, and rank 1 the broadcast's
        assert traffic == (5, 2 * (4 * (rank + 1) + 3 * 32 + (32 if rank == 1 else 0)))
        np.testing.assert_array_equal(total, np.arange(4) * 6)
        np.testing.assert_array_equal(high, np.arange(4) * 3.0)
        assert high.dtype == np.float64
        np.testing.assert_array_equal(low, np.arange(4))
        np.testing.assert_array_equal(broadcast, np.arange(4) * 2)
        assert gathered == [[0.0], [1.0, 1.0], [2.0, 2.0, 2.0]] and dtype == np.float32


def _sliced_allreduces(job, rank, addresses):
    from dgboost.collective.host import DaskCommunicator

    comm = DaskCommunicator(job, rank, addresses, 30.0)
    try:
        floats, ints = _sliced_inputs(rank)
        results = [comm.allreduce(floats), comm.allreduce(floats, "max"), comm.allreduce(ints, "min")]
        reduced = [comm.reduce(floats, root=1), comm.reduce(ints[:4], root=1)]  # in slices; in one step
        return results, reduced, (comm.traffic.calls, comm.traffic.bytes_sent)
    finally:
        comm.close()


def _sliced_inputs(rank):
    """Big enough to go in slices (host.SLICED_BYTES), of a shape no slice edge keeps whole, and
    float sums whose bits depend on the order of the ranks."""
    rng = np.random.default_rng(rank)
    floats = rng.standard_normal((4001, 3)) * 10.0 ** rng.integers(-8, 9, (4001, 3))
    return floats, rng.integers(-2**40, 2**40, 9001)


def test_a_big_allreduce_among_three_goes_in_slices_with_the_bits_of_one_step(client3):
    """Among three ranks or more a big all-reduce is a reduce-scatter and an all-gather: each
    rank sends 2 (n - 1) / n of the array rather than n - 1 copies, and every element is
    reduced in rank order, as the one-step all-reduce does: the same bits. A reduce (the
    histograms, which the coordinator alone reads) gathers the slices' sums to its root."""
    import functools

    from dgboost.collective.host import SLICED_BYTES, CollectivePlugin

    client3.register_plugin(CollectivePlugin())
    workers = sorted(client3.scheduler_info()["workers"])
    futures = [client3.submit(_sliced_allreduces, "sliced-job", rank, workers, workers=[w], pure=False)
               for rank, w in enumerate(workers)]
    inputs = [_sliced_inputs(rank) for rank in range(3)]
    floats, ints = [f for f, _ in inputs], [i for _, i in inputs]
    assert min(floats[0].nbytes, ints[0].nbytes) >= SLICED_BYTES
    expected = [functools.reduce(np.add, floats), functools.reduce(np.maximum, floats),
                functools.reduce(np.minimum, ints)]
    assert not np.array_equal(expected[0], floats[2] + floats[1] + floats[0])  # the order shows in the bits
    for rank, (results, reduced, traffic) in enumerate(client3.gather(futures)):
        for got, want in zip(results, expected):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.tobytes() == want.tobytes()
        if rank == 1:  # reduce: the sums on root alone, the all-reduce's bits
            assert reduced[0].tobytes() == expected[0].tobytes()
            assert reduced[1].tolist() == functools.reduce(np.add, [i[:4] for i in ints]).tolist()
        # Each of the three: the two other slices, then its slice's sum to both peers (to root
        # alone in reduce, root keeping its own); a small reduce, its array to root
        slices = [np.array_split(np.arange(a.size), 3)[rank].size * a.itemsize for a in (floats[0], ints[0])]
        sent = 2 * (floats[0].nbytes - slices[0] + 2 * slices[0]) + (ints[0].nbytes - slices[1] + 2 * slices[1])
        sent += floats[0].nbytes - slices[0] + (slices[0] if rank != 1 else 0) + (32 if rank != 1 else 0)
        assert traffic == (5, sent)


class _ProfilerSeen(TrainingCallback):
    """On rank 0: whether its worker's statistical profiler ran, each round (a Dask event)."""

    never_stops = True

    def after_iteration(self, model, epoch, evals_log):
        from distributed import get_worker

        worker = get_worker()
        worker.log_event("test-profiler", worker.periodic_callbacks["profile"].is_running())
        return False


def test_a_rank_pauses_its_workers_sampling_profiler_and_starts_it_again(client3, data):
    X, y, _ = data
    running = lambda dask_worker: dask_worker.periodic_callbacks["profile"].is_running()  # noqa: E731
    wait_for(lambda: all(client3.run(running).values()), "every worker's profiler running")
    dgboost.dask.train(client3, {"max_depth": 2}, da.from_array(X, chunks=500), da.from_array(y, chunks=500),
                       num_boost_round=3, callbacks=[_ProfilerSeen()])
    assert [running for _, running in client3.get_events("test-profiler")] == [False] * 3
    wait_for(lambda: all(client3.run(running).values()), "every worker's profiler running again")


def test_the_client_logs_the_collectives_the_same_each_time(client3, data, caplog):
    """Rank 0's calls, and the bytes every rank sent: more than rank 0's, the root of the
    histograms' reduce, which sends none of them."""
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    lines = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dgboost"):
            dgboost.dask.train(client3, {"max_depth": 3, "verbosity": 2}, dX, dy, num_boost_round=4)
        # the rows moved rank to rank before the rounds (if any) are told apart, after them
        lines += [r.getMessage().split("; before them")[0] for r in caplog.records
                  if "the collectives:" in r.getMessage()]
    assert len(lines) == 2 and lines[0] == lines[1], lines
    calls, mib, all_kib, rank_0_kib = re.search(
        r"(\d+) calls; the ranks sent ([\d.]+) MiB, ([\d.]+) KiB a round \(rank 0 ([\d.]+) KiB\)", lines[0]).groups()
    assert int(calls) > 4 and float(mib) > 0
    assert float(all_kib) > 2 * float(rank_0_kib) > 0


def test_an_abort_wakes_the_events_waiting_on_its_job_and_no_other():
    """The NCCL watchdog waits on such an event: it aborts NCCL the moment the job's abort
    message arrives, not at its next look."""
    import threading
    import types

    from dgboost.collective.host import CollectivePlugin

    mailbox = CollectivePlugin()
    mailbox.setup(types.SimpleNamespace(handlers={}))
    ours, theirs, late = threading.Event(), threading.Event(), threading.Event()
    mailbox.wake_at_abort("job-a", ours)
    mailbox.wake_at_abort("job-b", theirs)
    mailbox.abort("job-a", "a peer left")
    assert ours.is_set() and not theirs.is_set()
    mailbox.wake_at_abort("job-a", late)  # asked after the abort: set at once
    assert late.is_set()
    mailbox.forget("job-b")
    mailbox.abort("job-b", "too late")  # a forgotten job's abort sets nothing
    assert not theirs.is_set()


# ---- the plan, without a cluster ---------------------------------------------------------------

@pytest.mark.parametrize("seed", range(30))
def test_plan_shares_every_row_once_and_evenly(seed):
    rng = np.random.default_rng(seed)
    workers = [f"w{i}" for i in range(rng.integers(1, 6))]
    lengths = rng.integers(0, 50, rng.integers(1, 9)).tolist()
    holders = [workers[rng.integers(len(workers))] if rng.random() < 0.8 else None for _ in lengths]
    plan = plan_shards(lengths, holders, workers)
    total = sum(lengths)
    shares = [sum(p.n_rows for p in plan[w]) for w in workers]
    assert sum(shares) == total and max(shares) - min(shares) <= 1
    covered = np.zeros(total, dtype=int)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for w in workers:
        runs = global_runs(plan[w], lengths)
        starts = [start for start, _ in runs]
        assert starts == sorted(starts)  # global order within a worker
        for piece in plan[w]:
            covered[offsets[piece.part] + piece.start:offsets[piece.part] + piece.stop] += 1
    assert (covered == 1).all()
    # Rows stay where they are up to a worker's share.
    for w, share in zip(workers, shares):
        held = sum(n for n, h in zip(lengths, holders) if h == w)
        kept = sum(p.n_rows for p in plan[w] if holders[p.part] == w)
        assert kept == min(held, share)


def test_plan_leaves_out_workers_beyond_the_rows():
    plan = plan_shards([2], ["a"], ["a", "b", "c", "d"])
    assert [sum(p.n_rows for p in plan[w]) for w in "abcd"] == [1, 1, 0, 0]
    assert plan_evals([5, 7, 1], ["x", "b", None], ["a", "b"]) == {"a": [0, 2], "b": [1]}


# ---- the Dask estimators -------------------------------------------------------------------

def test_dask_classifier_takes_category_frames(client3, data, tmp_path):
    """DaskDGBClassifier(enable_categorical=True) on a dask frame of a category column: the local
    estimator's model, predictions through the category codes of each partition."""
    pytest.importorskip("sklearn")
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, _ = data
    frame = pd.DataFrame({"city": pd.Categorical(np.array(["north", "south", "east", "west"])[
        np.arange(N_ROWS) % 4]), "x0": X[:, 0]})
    labels = np.where((frame["city"] == "north") ^ (frame["x0"] > 0), "yes", "no")
    local = dgboost.DGBClassifier(n_estimators=4, max_depth=3, enable_categorical=True).fit(frame, labels)
    dX, dy = dd.from_pandas(frame, npartitions=3), dd.from_pandas(pd.Series(labels), npartitions=3)
    model = dgboost.dask.DaskDGBClassifier(n_estimators=4, max_depth=3, enable_categorical=True,
                                           client=client3).fit(dX, dy)
    assert _model_bytes(model.get_booster(), tmp_path, "dask") == _model_bytes(local.get_booster(), tmp_path, "local")
    np.testing.assert_array_equal(model.predict(dX).compute(), local.predict(frame))


def test_dask_regressor_equals_the_local_one(client3, data, tmp_path):
    pytest.importorskip("sklearn")
    import pickle

    X, y, _ = data
    target = _labels("regression", X, y)
    local = dgboost.DGBRegressor(n_estimators=4, max_depth=3).fit(X, target)
    dX, dy = da.from_array(X, chunks=700), da.from_array(target, chunks=700)
    model = dgboost.dask.DaskDGBRegressor(n_estimators=4, max_depth=3, client=client3).fit(dX, dy)
    assert _model_bytes(model.get_booster(), tmp_path, "dask") == _model_bytes(local.get_booster(), tmp_path, "local")
    predicted = model.predict(dX)
    assert isinstance(predicted, da.Array)
    np.testing.assert_array_equal(predicted.compute(), local.predict(X))
    plain = model.to_local()
    assert type(plain) is dgboost.DGBRegressor and plain.get_params()["max_depth"] == 3
    np.testing.assert_array_equal(plain.predict(X), local.predict(X))
    again = pickle.loads(pickle.dumps(model))
    assert again.client is None and model.client is client3
    np.testing.assert_array_equal(again.get_booster().predict(X), local.predict(X))


def test_dask_classifier_maps_labels_lazily(client3, data):
    pytest.importorskip("sklearn")
    X, y, _ = data
    labels = np.where(y > 0, 7, 3)
    local = dgboost.DGBClassifier(n_estimators=5, max_depth=3).fit(X, labels)
    dX, dl = da.from_array(X, chunks=1000), da.from_array(labels, chunks=1000)
    model = dgboost.dask.DaskDGBClassifier(n_estimators=5, max_depth=3, client=client3)
    model.fit(dX, dl, eval_set=[(dX, dl)])
    assert list(model.classes_) == [3, 7]
    assert model.evals_result()["validation_0"] == local.fit(X, labels, eval_set=[(X, labels)]).evals_result()["validation_0"]
    proba = model.predict_proba(dX)
    assert isinstance(proba, da.Array) and proba.shape == (N_ROWS, 2)
    np.testing.assert_allclose(proba.compute(), local.predict_proba(X), rtol=0, atol=0)
    np.testing.assert_array_equal(model.predict(dX).compute(), local.predict(X))
    with pytest.raises(ValueError, match="not among the training classes"):
        model.fit(dX, dl, eval_set=[(dX, dl + 1)])


@pytest.mark.parametrize("objective, n_classes", [("multi:softmax", 3), ("multi:softprob", 2)])
def test_dask_classifier_multi_objectives_predict_as_the_local_one(client3, data, objective, n_classes):
    """multi:softmax's probabilities are its margins' softmax, a multi objective on two classes
    has a column a class: lazily, as the local estimator gives them."""
    pytest.importorskip("sklearn")
    X, y, _ = data
    labels = np.digitize(X[:, 0], [-0.5, 0.5]) if n_classes == 3 else (y > 0).astype(int)
    local = dgboost.DGBClassifier(n_estimators=4, max_depth=3, objective=objective).fit(X, labels)
    dX, dl = da.from_array(X, chunks=1000), da.from_array(labels, chunks=1000)
    model = dgboost.dask.DaskDGBClassifier(n_estimators=4, max_depth=3, objective=objective, client=client3)
    model.fit(dX, dl)
    proba = model.predict_proba(dX)
    assert proba.shape == (N_ROWS, n_classes)
    np.testing.assert_allclose(proba.compute(), local.predict_proba(X), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(model.predict(dX).compute(), local.predict(X))


def test_dask_classifier_on_dataframes_with_string_labels(client3, data):
    pytest.importorskip("sklearn")
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, _ = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    labels = pd.Series(np.array(["no", "yes"])[y.astype(int)], name="label")
    local = dgboost.DGBClassifier(n_estimators=3).fit(frame, labels)
    dX, dl = dd.from_pandas(frame, npartitions=3), dd.from_pandas(labels, npartitions=3)
    model = dgboost.dask.DaskDGBClassifier(n_estimators=3).fit(dX, dl)  # the default client
    assert list(model.classes_) == ["no", "yes"] and list(model.feature_names_in_) == list(frame.columns)
    predicted = model.predict(dX).compute()
    np.testing.assert_array_equal(predicted.to_numpy(), local.predict(frame))
    np.testing.assert_array_equal(predicted.index.to_numpy(), frame.index.to_numpy())
    np.testing.assert_allclose(model.predict_proba(dX).compute().to_numpy(), local.predict_proba(frame))


def test_continuing_and_a_rate_schedule_through_dask(client3, data, tmp_path):
    from dgboost.callback import LearningRateScheduler

    X, y, _ = data
    params = {"objective": "binary:logistic", "max_depth": 3, "subsample": 0.8}
    schedule = LearningRateScheduler(lambda r: 0.5 / (1 + r))
    first = dgboost.train(params, X, y, num_boost_round=3)
    expected = dgboost.train(params, X, y, num_boost_round=3, init_model=first, callbacks=[schedule])
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)
    got = dgboost.dask.train(client3, params, dX, dy, num_boost_round=3, init_model=first, callbacks=[schedule])
    assert got.save_raw() == expected.save_raw() and got.num_boosted_rounds() == 6


def test_continuing_with_an_eval_set_some_workers_hold_none_of(client3, data):
    X, y, _ = data
    params = {"objective": "binary:logistic", "max_depth": 3}
    first = dgboost.train(params, X, y, num_boost_round=2)
    expected = dgboost.train(params, X, y, num_boost_round=2, init_model=first, evals=[(X[:300], y[:300], "v")])
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)
    dvX, dvy = da.from_array(X[:300], chunks=300), da.from_array(y[:300], chunks=300)  # one worker's rows
    got = dgboost.dask.train(client3, params, dX, dy, num_boost_round=2, init_model=first, evals=[(dvX, dvy, "v")])
    assert got.save_raw() == expected.save_raw() and got.evals_result() == expected.evals_result()


def test_each_round_is_a_dask_event(client3, data):
    from dgboost.dask._job import EVENT_TOPIC

    X, y, _ = data
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    booster = dgboost.dask.train(client3, {"objective": "binary:logistic", "eval_metric": "auc"}, dX, dy,
                                 num_boost_round=4, evals=[(dX, dy, "train")])
    deadline = time.monotonic() + 10
    while True:
        events = [msg for _, msg in client3.get_events(EVENT_TOPIC) if "round" in msg]  # in the order sent
        mine = [msg for msg in events if msg["job"] == events[-1]["job"]] if events else []
        if len(mine) >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert [msg["round"] for msg in mine][-4:] == [0, 1, 2, 3]
    assert [msg["metrics"]["train"]["auc"] for msg in mine][-4:] == booster.evals_result()["train"]["auc"]


def test_a_progress_bar_on_the_clients_terminal(client3, data, terminal):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    dgboost.dask.train(client3, {"objective": "binary:logistic", "eval_metric": "auc"}, dX, dy,
                       num_boost_round=5, evals=[(dX, dy, "train")], verbose_eval=True)
    frames = terminal.text.split("\r")[1:]
    assert frames[0].startswith("[" + " " * 24 + "] 0/5 rounds, building the matrix")
    assert frames[-1].startswith("[" + "#" * 24 + "] 5/5 rounds  train-auc:0.")  # drawn before train returns
    assert "[0]\t" not in terminal.text  # no plain lines from the worker on a terminal


# ---- out of core: each worker's shard in pages (data/pages.py) -------------------------------------

@pytest.mark.parametrize("extra, budget", [({}, 2000), ({"subsample": 0.15, "sampling_method": "gradient_based"}, 5000)],
                         ids=["every-row", "gradient-based"])
def test_out_of_core_shards_train_the_in_core_model(client, data, extra, budget, tmp_path, caplog):
    X, y, weight = data
    params = {"objective": "binary:logistic", "max_depth": 4, "eval_metric": "auc", **extra}
    local = dgboost.train(params, X, y, sample_weight=weight, num_boost_round=5, evals=[(X, y, "t")],
                          verbose_eval=False)
    dX, dy, dw = (da.from_array(a, chunks=(700,) + a.shape[1:]) for a in (X, y, weight))
    # 6 features of 8 bits: 8 bytes a row: several pages on every worker (a sample of 15% gathered).
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        model = dgboost.dask.train(client, {**params, "max_device_matrix_bytes": budget}, dX, dy, sample_weight=dw,
                                   num_boost_round=5, evals=[(dX, dy, "t")], verbose_eval=False)
    assert "rank 0 runs out of core:" in caplog.text and "pages on disk" in caplog.text
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    assert model.evals_result() == local.evals_result()


def _no_ahead_room(none: bool) -> None:
    """On a worker: a gathered guess keeps no room for the rows it misses (tree/grower.py
    ``ahead_room``), or, ``none`` False, its room again."""
    from dgboost.tree import grower

    kept = grower.__dict__.setdefault("_kept_ahead_room", grower.ahead_room)
    grower.ahead_room = (lambda guessed: guessed * 0) if none else kept


def _count_grown_whole(start: bool) -> int | None:
    """On a worker: count the trees its paged grower grows from the whole sample (start), or
    the count so far, the count stopped."""
    from dgboost.tree.grower import PagedGrower

    kept = PagedGrower.__dict__.get("_kept_grow_whole", PagedGrower._grow_whole)
    if start:
        PagedGrower._kept_grow_whole, PagedGrower.grown_whole = kept, 0

        def counted(self, *args):
            PagedGrower.grown_whole += 1
            return kept(self, *args)

        PagedGrower._grow_whole = counted
        return None
    PagedGrower._grow_whole = kept
    return PagedGrower.grown_whole


@pytest.mark.parametrize("overflows", ["one-rank", "none"])
def test_out_of_core_ranks_grow_a_tree_again_together(client3, data, overflows, tmp_path):
    """Every rank's shard paged: the ranks decide together (one all-reduce a tree) whether a
    tree comes from their gathered guesses. Where one rank's guess has no room for the rows
    it misses, every rank grows those trees again from its whole sample; the model is the
    in-core one."""
    X, y, _ = data
    params = {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.3, "sampling_method": "gradient_based"}
    local = dgboost.train(params, X, y, num_boost_round=6)
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    workers = sorted(client3.scheduler_info()["workers"])
    if overflows == "one-rank":
        client3.run(_no_ahead_room, True, workers=[workers[1]])
    client3.run(_count_grown_whole, True)
    try:
        model = dgboost.dask.train(client3, {**params, "max_device_matrix_bytes": 5000}, dX, dy, num_boost_round=6)
    finally:
        counts = client3.run(_count_grown_whole, False)
        client3.run(_no_ahead_room, False)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    grown_whole = [counts[worker] for worker in workers]
    assert len(set(grown_whole)) == 1, grown_whole  # the same trees on every rank
    assert (grown_whole[0] > 1) == (overflows == "one-rank"), grown_whole  # the first tree has no guess


@pytest.mark.parametrize("method", ["uniform", "gradient_based"])
def test_out_of_core_on_some_ranks_and_in_core_on_others(client3, method, tmp_path):
    """Shares of 1001, 1000 and 1000 rows of 8 bytes and a budget of 8000 bytes: rank 0 trains
    out of core from its sample, the others in core, and their collectives stay in step."""
    rng = np.random.default_rng(42)
    X = rng.standard_normal((3001, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.3, "sampling_method": method}
    local = dgboost.train(params, X, y, num_boost_round=5)
    dX, dy = da.from_array(X, chunks=1001), da.from_array(y, chunks=1001)
    model = dgboost.dask.train(client3, {**params, "max_device_matrix_bytes": 8000}, dX, dy, num_boost_round=5)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")


def test_out_of_core_pieces_continue_a_model_with_margins(client3, data, tmp_path):
    """A rank's X left in its pieces (no joined copy) still starts from init_model's margins."""
    X, y, _ = data
    margin = np.linspace(-1, 1, N_ROWS).astype(np.float32)
    first = dgboost.train({"max_depth": 3}, X, y, num_boost_round=2)
    local = dgboost.train({"max_depth": 3}, X, y, base_margin=margin, num_boost_round=3, init_model=first)
    dX, dy, dm = (da.from_array(a, chunks=300) for a in (X, y, margin))
    model = dgboost.dask.train(client3, {"max_depth": 3, "max_device_matrix_bytes": 2000}, dX, dy, base_margin=dm,
                               num_boost_round=3, init_model=first)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")


def test_a_budget_below_two_pages_fails_every_rank_clearly(client3, data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    with pytest.raises(ValueError, match="max_device_matrix_bytes=600 cannot hold two pages .* at least 1024"):
        dgboost.dask.train(client3, {"max_device_matrix_bytes": 600}, dX, dy, num_boost_round=2)
    with pytest.raises(ValueError, match="max_device_matrix_bytes=500 .* at least 512"):  # before any task
        dgboost.dask.train(client3, {"max_device_matrix_bytes": 500}, dX, dy, num_boost_round=2)
    assert dgboost.dask.train(client3, {}, dX, dy, num_boost_round=1).num_boosted_rounds() == 1  # nothing hangs


# ---- ranking: shares cut at query boundaries ----------------------------------------------------

def _ranking_data():
    rng = np.random.default_rng(11)
    X = rng.standard_normal((N_ROWS, 6)).astype(np.float32)
    qid = uneven_queries(rng, N_ROWS, 150) * 3 + 5  # many spanning partitions; ids need only ascend
    y = np.clip(np.round(X[:, 0] + X[:, 1] * X[:, 2] + rng.standard_normal(N_ROWS) * 0.5 + 1), 0, 4)
    return X, y.astype(np.float32), qid


def test_plan_query_shards_never_splits_a_query():
    lengths = [10, 10, 10]
    starts = [np.array([0, 4, 9]), np.array([3]), np.array([0, 5])]  # queries [0,4) [4,9) [9,13) [13,20) [20,25) [25,30)
    plan = plan_query_shards(lengths, starts, ["a", "b"], ["a", "b"])
    offsets = [0, 10, 20]
    edges = sorted(offsets[p.part] + p.start for pieces in plan.values() for p in pieces)
    assert {e for e in edges if e not in (0, 10, 20)} <= {0, 4, 9, 13, 20, 25}
    sizes = [sum(p.n_rows for p in pieces) for pieces in plan.values()]
    assert sum(sizes) == 30 and sorted(sizes) == [13, 17]  # 13 is the query start nearest 15


@pytest.mark.parametrize("objective, method, metric", [("rank:ndcg", "topk", "ndcg@5"), ("rank:ndcg", "mean", "ndcg@5"),
                                                       ("rank:pairwise", "mean", "ndcg@5-"),
                                                       ("rank:map", "topk", ["map@5", "pre@3"])])
def test_ranking_model_is_byte_identical_on_any_workers(client, objective, method, metric, tmp_path):
    X, y, qid = _ranking_data()
    if objective == "rank:map":
        y = (y > 1).astype(np.float32)  # map and pre take relevant or not
    params = {"objective": objective, "max_depth": 4, "lambdarank_pair_method": method, "eval_metric": metric}
    local = dgboost.train(params, X, y, qid=qid, num_boost_round=6, evals=[(X, y, "t")], eval_qid=[qid])
    chunks = (700, 900, 400, 1000)
    dX, dy, dq = (da.from_array(a, chunks=(chunks,) + a.shape[1:]) for a in (X, y, qid))
    # The eval set as other collections, partitioned otherwise: its shares are cut at query
    # boundaries too (slices that must be made before any rank takes its worker's thread).
    eX, ey, eq = (da.from_array(a, chunks=((1500, 1500),) + a.shape[1:]) for a in (X, y, qid))
    model = dgboost.dask.train(client, params, dX, dy, qid=dq, num_boost_round=6,
                               evals=[(dX, dy, "train"), (eX, ey, "t")], eval_qid=[dq, eq])
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    assert model.evals_result()["t"] == local.evals_result()["t"] == model.evals_result()["train"]


def test_the_client_reports_how_uneven_query_boundaries_leave_the_shares(client3, caplog):
    X, y, qid = _ranking_data()
    dX, dy, dq = (da.from_array(a, chunks=(1000,) + a.shape[1:]) for a in (X, y, qid))
    with caplog.at_level(logging.INFO, logger="dgboost"):
        dgboost.dask.train(client3, {"objective": "rank:ndcg", "max_depth": 2, "verbosity": 2}, dX, dy, qid=dq,
                           num_boost_round=1)
    found = re.findall(r"shares cut at query boundaries: the largest ([0-9.]+) of an equal share", caplog.text)
    assert len(found) == 1
    largest_query = np.unique(qid, return_counts=True)[1].max()
    assert 1.0 <= float(found[0]) <= 1 + largest_query / (N_ROWS / 3)


def test_ranker_estimator_and_bad_query_order(client3, tmp_path):
    X, y, qid = _ranking_data()
    dX, dy, dq = (da.from_array(a, chunks=(1000,) + a.shape[1:]) for a in (X, y, qid))
    ranker = dgboost.dask.DaskDGBRanker(n_estimators=4, max_depth=3).fit(dX, dy, qid=dq)
    local = dgboost.DGBRanker(n_estimators=4, max_depth=3).fit(X, y, qid=qid)
    np.testing.assert_array_equal(ranker.predict(dX).compute(), local.predict(X))
    shuffled = np.concatenate([qid[1000:2000], qid[:1000], qid[2000:]])
    with pytest.raises(ValueError, match="^qid is not sorted across partitions"):
        dgboost.dask.train(client3, {"objective": "rank:ndcg"}, dX, dy, qid=da.from_array(shuffled, chunks=1000))
    with pytest.raises(ValueError, match=r"^eval_qid\[0\] is not sorted across partitions"):
        dgboost.dask.train(client3, {"objective": "rank:ndcg"}, dX, dy, qid=dq, evals=[(dX, dy, "v")],
                           eval_qid=[da.from_array(shuffled, chunks=1000)])
    with pytest.raises(ValueError, match="pass qid"):
        dgboost.dask.train(client3, {"objective": "rank:ndcg"}, dX, dy)


@pytest.mark.parametrize("objective", ["survival:aft", "survival:cox"])
def test_survival_model_is_byte_identical_on_any_workers(client, objective, tmp_path):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((N_ROWS, 5)).astype(np.float32)
    time = np.exp(0.5 * X[:, 0] + 0.5 * rng.standard_normal(N_ROWS)).astype(np.float32)
    if objective == "survival:aft":
        y = np.stack([time, np.where(rng.random(N_ROWS) < 0.3, np.inf, time)], axis=1).astype(np.float32)
    else:
        y = np.where(rng.random(N_ROWS) < 0.3, -time, time).astype(np.float32)
    params = {"objective": objective, "max_depth": 3}
    local = dgboost.train(params, X, y, num_boost_round=5, evals=[(X, y, "t")])
    dX, dy = da.from_array(X, chunks=(700, 5)), da.from_array(y, chunks=(700,) + y.shape[1:])
    model = dgboost.dask.train(client, params, dX, dy, num_boost_round=5, evals=[(dX, dy, "t")])
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    assert model.evals_result() == local.evals_result()


def test_several_targets_on_any_workers(client, tmp_path):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((N_ROWS, 4)).astype(np.float32)
    Y = np.stack([X[:, 0] + rng.standard_normal(N_ROWS), 2 * X[:, 1] * X[:, 2]], axis=1).astype(np.float32)
    local = dgboost.train({"max_depth": 3}, X, Y, num_boost_round=4, evals=[(X, Y, "t")])
    dX, dY = da.from_array(X, chunks=(800, 4)), da.from_array(Y, chunks=(800, 2))
    model = dgboost.dask.train(client, {"max_depth": 3}, dX, dY, num_boost_round=4, evals=[(dX, dY, "t")])
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    assert model.evals_result() == local.evals_result()


def test_unbiased_ranking_on_any_workers(client, tmp_path):
    X, y, qid = _ranking_data()
    params = {"objective": "rank:ndcg", "max_depth": 3, "lambdarank_unbiased": True,
              "lambdarank_num_pair_per_sample": 8}
    local = dgboost.train(params, X, y, qid=qid, num_boost_round=5)
    dX, dy, dq = (da.from_array(a, chunks=(900,) + a.shape[1:]) for a in (X, y, qid))
    model = dgboost.dask.train(client, params, dX, dy, qid=dq, num_boost_round=5)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")


def test_query_weights_are_checked_across_partitions(client3):
    X, y, qid = _ranking_data()
    weight = np.ones(N_ROWS, np.float32)
    spanning = qid[1000]  # a query spanning the first two partitions (chunks of 1000), if one does
    rows = np.flatnonzero(qid == spanning)
    assert rows.min() < 1000 <= rows.max()
    weight[1000:rows.max() + 1] = 2.0  # its rows in the second partition weigh otherwise
    dX, dy, dq, dw = (da.from_array(a, chunks=(1000,) + a.shape[1:]) for a in (X, y, qid, weight))
    with pytest.raises(ValueError, match="differs within query"):
        dgboost.dask.train(client3, {"objective": "rank:ndcg"}, dX, dy, qid=dq, sample_weight=dw, num_boost_round=1)
    with pytest.raises(ValueError, match="differs within a query"):
        dgboost.train({"objective": "rank:ndcg"}, X, y, qid=qid, sample_weight=weight, num_boost_round=1)


# Each of XGBoost's other objectives, weighted, with its metrics (several targets for one).
OBJECTIVES = {
    "reg:absoluteerror": {"eval_metric": ["mae", "mape"]},
    "reg:quantileerror": {"quantile_alpha": [0.2, 0.8], "eval_metric": "quantile"},
    "reg:squaredlogerror": {"eval_metric": ["rmsle", "mphe"]},
    "reg:gamma": {"eval_metric": ["gamma-nloglik", "gamma-deviance"]},
    "reg:tweedie": {"tweedie_variance_power": 1.3},  # its metric: tweedie-nloglik@1.3
    "binary:hinge": {"eval_metric": ["error", "aucpr"]},
    "count:poisson": {"eval_metric": "poisson-nloglik"},
}


@pytest.mark.parametrize("objective", [*OBJECTIVES, "reg:gamma/2 targets"])
def test_every_objective_is_byte_identical_on_any_workers(client, data, objective, tmp_path):
    X, y, weight = data
    name, _, targets = objective.partition("/")
    positive = np.exp(np.nan_to_num(X[:, 0]) * 0.5 + y).astype(np.float32)  # > 0 for gamma and the rest
    label = y if name == "binary:hinge" else positive
    if targets:
        label = np.stack([positive, np.exp(np.nan_to_num(X[:, 1]) * 0.3).astype(np.float32)], axis=1)
    params = {"objective": name, "max_depth": 3, **OBJECTIVES[name]}
    local = dgboost.train(params, X, label, sample_weight=weight, num_boost_round=4, evals=[(X, label, "t")])
    chunks = CHUNKINGS["uneven"]
    dX, dw = da.from_array(X, chunks=(chunks, 6)), da.from_array(weight, chunks=(chunks,))
    dy = da.from_array(label, chunks=(chunks,) + label.shape[1:])
    model = dgboost.dask.train(client, params, dX, dy, sample_weight=dw, num_boost_round=4, evals=[(dX, dy, "t")])
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    assert model.evals_result() == local.evals_result()
    assert all(np.isfinite(values).all() for values in local.evals_result()["t"].values())


def test_labels_an_objective_refuses_fail_the_job_clearly(client3, data):
    """Label values are not in a collection's metadata: the ranks check them before their first round."""
    X, y, _ = data
    dX = da.from_array(X, chunks=(1000, 6))
    for objective in ("reg:gamma", "reg:tweedie"):
        refused = rf"y has -0\.5 at row 0 \(partition 0, its row 0\): labels must .*{objective}"
        with pytest.raises(ValueError, match=refused):
            dgboost.dask.train(client3, {"objective": objective}, dX, da.from_array(y - 0.5, chunks=1000))
        no_task_left(client3)


def test_survival_bounds_as_xgboosts_keywords(client3, tmp_path):
    """label_lower_bound / label_upper_bound (xgboost.dask's DaskDMatrix names) in place of y, as
    1-D arrays or Series; the model of dgboost.train's; errors name them."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(9)
    X = rng.standard_normal((N_ROWS, 5)).astype(np.float32)
    lower = np.exp(0.5 * X[:, 0] + 0.5 * rng.standard_normal(N_ROWS)).astype(np.float32)
    upper = np.where(rng.random(N_ROWS) < 0.3, np.inf, lower).astype(np.float32)
    params = {"objective": "survival:aft", "max_depth": 3}
    local = dgboost.train(params, X, None, label_lower_bound=lower, label_upper_bound=upper, num_boost_round=3)
    dX = da.from_array(X, chunks=(700, 5))
    bounds = {"label_lower_bound": da.from_array(lower, chunks=700),
              "label_upper_bound": da.from_array(upper, chunks=700)}
    model = dgboost.dask.train(client3, params, dX, None, num_boost_round=3, **bounds)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    unknown = {name: bound.to_dask_dataframe().to_dask_array() for name, bound in bounds.items()}  # rows unknown
    model = dgboost.dask.train(client3, params, dX, None, num_boost_round=3, **unknown)
    assert _model_bytes(model, tmp_path, "unknown") == _model_bytes(local, tmp_path, "local")
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    series = {name: dd.from_pandas(pd.Series(b), npartitions=3) for name, b in (("label_lower_bound", lower),
                                                                                 ("label_upper_bound", upper))}
    model = dgboost.dask.train(client3, params, dd.from_pandas(frame, npartitions=3), None, num_boost_round=3,
                               **series)
    local = dgboost.train(params, frame, None, label_lower_bound=lower, label_upper_bound=upper, num_boost_round=3)
    assert _model_bytes(model, tmp_path, "series") == _model_bytes(local, tmp_path, "frame")
    crossed = upper.copy()
    crossed[1234] = lower[1234] - 0.5
    with pytest.raises(ValueError, match=r"label_lower_bound/label_upper_bound holds \[.*\] at row 1234 .*"
                                         "must be >= its lower bound"):
        dgboost.dask.train(client3, params, dX, None, label_lower_bound=bounds["label_lower_bound"],
                           label_upper_bound=da.from_array(crossed, chunks=700))
    with pytest.raises(ValueError, match="label_lower_bound was given without label_upper_bound"):
        dgboost.dask.train(client3, params, dX, None, label_lower_bound=bounds["label_lower_bound"])
    with pytest.raises(ValueError, match="not both"):
        dgboost.dask.train(client3, params, dX, bounds["label_lower_bound"], **bounds)
    with pytest.raises(TypeError, match="must both be 1-D dask arrays or both dask Series"):
        dgboost.dask.train(client3, params, dd.from_pandas(frame, npartitions=3), None,
                           label_lower_bound=da.from_array(lower, chunks=1000),
                           label_upper_bound=series["label_upper_bound"])
    with pytest.raises(ValueError, match="survival:aft's labels"):
        dgboost.dask.train(client3, {"objective": "reg:gamma"}, dX, None, **bounds)


def test_survival_ties_and_empty_eval_shards_on_any_workers(client, tmp_path):
    """Cox's tied times (its gradients depend on the rows' order within a tie: the global one on any
    split); survival:aft and several targets with an eval set on one partition (workers without its rows)."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((N_ROWS, 4)).astype(np.float32)
    time = np.round(np.exp(0.5 * X[:, 0] + 0.5 * rng.standard_normal(N_ROWS)), 1).astype(np.float32) + 0.1
    cox = np.where(rng.random(N_ROWS) < 0.3, -time, time).astype(np.float32)
    local = dgboost.train({"objective": "survival:cox", "max_depth": 3}, X, cox, num_boost_round=4)
    dX, dc = da.from_array(X, chunks=((1, 2500, 499), (4,))), da.from_array(cox, chunks=((1, 2500, 499),))
    model = dgboost.dask.train(client, {"objective": "survival:cox", "max_depth": 3}, dX, dc, num_boost_round=4)
    assert _model_bytes(model, tmp_path, "dask") == _model_bytes(local, tmp_path, "local")
    bounds = np.stack([time, np.where(rng.random(N_ROWS) < 0.3, np.inf, time)], axis=1).astype(np.float32)
    targets = np.stack([X[:, 0], X[:, 1] * X[:, 2]], axis=1)
    for params, y in (({"objective": "survival:aft"}, bounds), ({}, targets)):
        evals = [(da.from_array(X[:300], chunks=(300, 4)), da.from_array(y[:300], chunks=(300, y.shape[1])), "v")]
        model = dgboost.dask.train(client, {**params, "max_depth": 3}, da.from_array(X, chunks=(1000, 4)),
                                   da.from_array(y, chunks=(1000, y.shape[1])), num_boost_round=2, evals=evals)
        local = dgboost.train({**params, "max_depth": 3}, X, y, num_boost_round=2, evals=[(X[:300], y[:300], "v")])
        assert model.evals_result() == local.evals_result()
