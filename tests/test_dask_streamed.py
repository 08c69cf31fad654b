"""A Dask job whose rows are streamed into pages where they are read (dgboost/dask/_streamed.py):
the model is the held job's and dgboost.train's, byte for byte, while no worker holds its share
of the float input; bad input is still named before any rank starts, and the pages go after."""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402
from dgboost.dask._streamed import stream_setting, streams  # noqa: E402
from dgboost.params import TrainParams  # noqa: E402
from _queries import uneven_queries  # noqa: E402  (tests/_queries.py)

N_ROWS = 3000
HELD_TOPIC = "test-streamed-held"


@pytest.fixture(scope="module")
def client():
    with dgboost.dask.local_cluster("cpu", 3, threads_per_worker=1, silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((N_ROWS, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    weight = rng.uniform(0.5, 2.0, N_ROWS).astype(np.float32)
    return X, y, weight


def _bytes(booster, tmp_path, name):
    path = tmp_path / f"{name}.json"
    booster.save_model(path)
    return path.read_bytes()


def _streamed(client, *args, **kwargs):
    with dask.config.set({"dgboost.stream-partitions": True}):
        return dgboost.dask.train(client, *args, **kwargs)


# 8 features of 8 bits: 8 bytes a row; 1000 rows a worker: 8000 bytes, paged below that.
CASES = {
    "paged, every row": ({"max_device_matrix_bytes": 3000}, {}),
    "paged, gradient-based": ({"max_device_matrix_bytes": 4000, "subsample": 0.3, "sampling_method": "gradient_based",
                               "eval_metric": "auc"}, {}),
    "in core": ({"colsample_bynode": 0.7}, {}),
    "weights and margins": ({"max_device_matrix_bytes": 3000}, {"weight": True, "margin": True}),
    "lossguide, sampled": ({"max_device_matrix_bytes": 4000, "grow_policy": "lossguide", "max_leaves": 12,
                            "subsample": 0.5}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_streamed_rows_train_the_model_of_held_rows(client, data, case, tmp_path, caplog):
    X, y, weight = data
    extra, given = CASES[case]
    params = {"objective": "binary:logistic", "max_depth": 4, **extra}
    margin = np.linspace(-0.5, 0.5, N_ROWS).astype(np.float32) if given.get("margin") else None
    w = weight if given.get("weight") else None
    local = dgboost.train(params, X, y, sample_weight=w, base_margin=margin, num_boost_round=4, evals=[(X, y, "t")],
                          verbose_eval=False)
    chunked = lambda a: None if a is None else da.from_array(a, chunks=(450,) + a.shape[1:])  # noqa: E731
    dX, dy = chunked(X), chunked(y)
    with caplog.at_level(logging.INFO, logger="dgboost"):
        model = _streamed(client, {**params, "verbosity": 2}, dX, dy, sample_weight=chunked(w), base_margin=chunked(margin),
                          num_boost_round=4, evals=[(dX, dy, "t")], verbose_eval=False)
    assert "rows streamed into pages where they are read (7 partitions, 3000 rows)" in caplog.text
    assert ("runs out of core" in caplog.text) == ("max_device_matrix_bytes" in params)
    assert _bytes(model, tmp_path, "streamed") == _bytes(local, tmp_path, "local")
    assert model.evals_result() == local.evals_result()


def test_frames_whose_rows_are_unknown_are_read_for_the_sample_once_counted(client, data, tmp_path, caplog):
    """A DataFrame's partition lengths are known only once computed: "auto" streams it by an
    estimate of its rows (its first partition's, four times), the sample takes a pass of its
    own, and the model is still the one of the in-memory rows."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, _ = data
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    dX, dy = dd.from_pandas(frame, npartitions=4), dd.from_pandas(pd.Series(y), npartitions=4)
    params = {"max_depth": 3, "max_device_matrix_bytes": 3000}
    with caplog.at_level(logging.INFO, logger="dgboost"):
        model = dgboost.dask.train(client, {**params, "verbosity": 2}, dX, dy, num_boost_round=3)  # "auto"
    assert "rows streamed into pages where they are read (4 partitions, 3000 rows)" in caplog.text
    assert _bytes(model, tmp_path, "streamed") == _bytes(dgboost.train(params, frame, y, num_boost_round=3), tmp_path,
                                                         "local")


def test_csr_chunks_and_queries_stream(client, tmp_path):
    """Sparse partitions pack in sparse rows; ranking's shares are cut at query boundaries."""
    scipy_sparse = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N_ROWS, 30)).astype(np.float32)
    X[rng.random(X.shape) < 0.85] = np.nan  # few values a row: sparse rows are the smaller
    qid = uneven_queries(rng, N_ROWS, 120)
    y = np.clip(np.round(np.nan_to_num(X[:, 0]) + rng.standard_normal(N_ROWS) * 0.5 + 1), 0, 3).astype(np.float32)
    csr = scipy_sparse.csr_matrix(np.nan_to_num(X, nan=0.0))
    csr.eliminate_zeros()
    dense = np.where(np.nan_to_num(X, nan=0.0) == 0, np.nan, X).astype(np.float32)
    params = {"objective": "rank:ndcg", "max_depth": 3, "max_device_matrix_bytes": 8000}
    dX = da.from_array(csr, chunks=(500, 30), asarray=False)
    dy, dq = da.from_array(y, chunks=500), da.from_array(qid, chunks=500)
    model = _streamed(client, params, dX, dy, qid=dq, num_boost_round=3)
    local = dgboost.train(params, dense, y, qid=qid, num_boost_round=3)
    assert _bytes(model, tmp_path, "streamed") == _bytes(local, tmp_path, "local")


def test_streamed_rows_continue_a_model_with_its_margins(client, data, tmp_path):
    """init_model's margins are made where each piece is read, from its float values."""
    X, y, _ = data
    margin = np.linspace(-1, 1, N_ROWS).astype(np.float32)
    first = dgboost.train({"max_depth": 3}, X, y, num_boost_round=2)
    params = {"max_depth": 3, "max_device_matrix_bytes": 3000}
    local = dgboost.train(params, X, y, base_margin=margin, num_boost_round=3, init_model=first)
    dX, dy, dm = (da.from_array(a, chunks=400) for a in (X, y, margin))
    model = _streamed(client, params, dX, dy, base_margin=dm, num_boost_round=3, init_model=first)
    assert _bytes(model, tmp_path, "streamed") == _bytes(local, tmp_path, "local")


@pytest.mark.parametrize("ranking", [False, True], ids=["binary", "ranking"])
def test_eval_sets_stream_with_the_training_cuts(client, data, ranking, tmp_path, monkeypatch):
    """A streamed job's eval sets are packed where they go too (by the training rows' cuts), with
    init_model's margins: the metrics and the model of dgboost.train."""
    import dgboost.dask._streamed as streamed

    X, y, _ = data
    rng = np.random.default_rng(9)
    X_eval = (X[::2] * 1.1).astype(np.float32)
    y_eval = y[::2]
    params = {"objective": "binary:logistic", "max_depth": 3, "max_device_matrix_bytes": 3000,
              "eval_metric": ["logloss", "auc"]}
    qid = qid_eval = None
    if ranking:
        qid, qid_eval = uneven_queries(rng, N_ROWS, 60), uneven_queries(rng, len(y_eval), 40)
        params = {**params, "objective": "rank:ndcg", "eval_metric": ["ndcg@5", "map"]}
    first = dgboost.train(params, X, y, qid=qid, num_boost_round=2)
    local = dgboost.train(params, X, y, qid=qid, num_boost_round=3, evals=[(X_eval, y_eval, "valid")],
                          eval_qid=[qid_eval], init_model=first, verbose_eval=False)
    chunked = lambda a: None if a is None else da.from_array(a, chunks=400)  # noqa: E731
    packed, pack = [], streamed.pack_futures
    monkeypatch.setattr(streamed, "pack_futures", lambda *a, **k: packed.append(a[2].what) or pack(*a, **k))
    model = _streamed(client, params, chunked(X), chunked(y), qid=chunked(qid), num_boost_round=3,
                      evals=[(chunked(X_eval), chunked(y_eval), "valid")], eval_qid=[chunked(qid_eval)],
                      init_model=first, verbose_eval=False)
    assert packed == ["", "evals[0] "]  # the training rows', then the eval set's
    assert model.evals_result() == local.evals_result()
    assert _bytes(model, tmp_path, "streamed") == _bytes(local, tmp_path, "local")


class _LogHeldBytes(TrainingCallback):
    """On the coordinator, after the first round: the bytes its worker's Dask store holds
    (the job's pieces among them), as an event on HELD_TOPIC."""

    never_stops = True

    def after_iteration(self, model, epoch, evals_log):
        from dask.sizeof import sizeof
        from distributed import get_worker

        worker = get_worker()
        if epoch == 0:
            worker.log_event(HELD_TOPIC, sum(sizeof(value) for value in worker.data.values()))
        return False


def test_a_streamed_job_holds_no_share_of_the_float_input(client):
    """While the ranks train, the coordinator's worker holds its packed pages (files here) and
    labels, not its third of X's values, which a job that holds its rows keeps."""
    # 4.8 MB of float32, made on the workers block by block: nothing of X is held before the job.
    dX = da.random.RandomState(1).standard_normal((30000, 40), chunks=(2500, 40)).astype(np.float32)
    dy = (dX[:, 0] > 0).astype(np.float32)
    params = {"max_depth": 3, "max_device_matrix_bytes": 20000}
    held = {}
    for stream in (False, True):
        with dask.config.set({"dgboost.stream-partitions": stream}):
            dgboost.dask.train(client, params, dX, dy, num_boost_round=2, callbacks=[_LogHeldBytes()])
        held[stream] = [message for _, message in client.get_events(HELD_TOPIC)][-1]
    share = dX.nbytes // 3
    # The held job's bundles (the check is real): the partitions Dask put on the coordinator's
    # worker, at least one of the four of its share; the rows another rank sent it
    # (_shards.move_pieces) are in the rank's memory, not in Dask's store.
    assert held[False] >= share // 4, held
    assert held[True] < share // 4, held  # labels (40 kB), the pages' names


def test_the_decision_to_stream(client, data):
    X, y, _ = data
    dX = da.from_array(X, chunks=500)
    small = TrainParams.from_dict({"max_device_matrix_bytes": 3000})
    large = TrainParams.from_dict({"max_device_matrix_bytes": 10**9})
    assert streams(client, dX, small, "auto")  # a share of 1000 rows: 8000 bytes
    assert not streams(client, dX, large, "auto")
    assert not streams(client, dX, TrainParams.from_dict({}), "auto")  # a CPU: no budget
    assert stream_setting(categorical=False) == "auto"  # the default
    assert stream_setting(categorical=True) is False
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    assert streams(client, frame, small, "auto")  # its rows estimated from its first partition's
    assert not streams(client, frame, large, "auto")
    first_empty = frame.map_partitions(lambda part: part.iloc[:0] if part.index[0] == 0 else part)
    assert streams(client, first_empty, small, "auto")  # from the first partition with rows
    assert not streams(client, frame.map_partitions(lambda part: part.iloc[:0]), small, "auto")  # none has any
    unknown = dX[dX[:, 0] > -100]  # rows unknown until computed
    assert streams(client, unknown, small, "auto") and not streams(client, unknown, large, "auto")
    assert streams(client, frame, large, True) and not streams(client, dX, small, False)
    with dask.config.set({"dgboost.stream-partitions": True}):
        assert stream_setting(categorical=False) is True
        with pytest.raises(ValueError, match="stream-partitions=True: categorical features are not streamed"):
            stream_setting(categorical=True)
    with dask.config.set({"dgboost.stream-partitions": False}):
        assert stream_setting(categorical=False) is False
    with dask.config.set({"dgboost.stream-partitions": "yes"}):
        with pytest.raises(ValueError, match="dgboost.stream-partitions='yes' must be True, False or 'auto'"):
            stream_setting(categorical=False)
        with pytest.raises(ValueError, match="dgboost.stream-partitions='yes'"):  # at submit, before any task
            dgboost.dask.submit(client, {}, dX, da.from_array(y, chunks=500))


def test_bad_input_is_named_before_any_rank_starts(client, data):
    X, y, _ = data
    y = y.copy()
    y[1234] = np.nan
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    with pytest.raises(ValueError, match=r"at row 1234 \(partition 2, its row 234\)"):
        _streamed(client, {"max_device_matrix_bytes": 3000}, dX, dy, num_boost_round=2)
    with pytest.raises(ValueError, match="max_device_matrix_bytes=600 cannot hold two pages .* at least 1024"):
        _streamed(client, {"max_device_matrix_bytes": 600}, dX, da.from_array(data[1], chunks=500), num_boost_round=2)


def test_chunks_that_misstate_their_rows_and_eval_sets_of_other_widths_are_refused(client, data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    # A partition of 500 rows said to hold 400: the cut sample's row numbers would be wrong.
    lying = da.concatenate([da.from_delayed(dask.delayed(lambda: X[:500])(), (400, 8), np.float32),
                            da.from_array(X[500:], chunks=500)])
    lying_y = da.concatenate([da.from_delayed(dask.delayed(lambda: y[:500])(), (400,), np.float32),
                              da.from_array(y[500:], chunks=500)])
    with pytest.raises(ValueError, match=r"X's partitions hold \(500, 500.* rows where its chunks say \(400, 500"):
        _streamed(client, {"max_device_matrix_bytes": 3000}, lying, lying_y, num_boost_round=1)
    narrow = da.from_array(X[:, :7], chunks=500)
    with pytest.raises(ValueError, match=r"evals\[0\] X has 7 features but the training X has 8"):
        _streamed(client, {"max_device_matrix_bytes": 3000}, dX, dy, num_boost_round=1, evals=[(narrow, dy, "v")])


def test_the_pages_go_when_the_job_ends(client, data):
    X, y, _ = data
    dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    _streamed(client, {"max_device_matrix_bytes": 3000}, dX, dy, num_boost_round=2)

    def pages_left(dask_worker):
        return [name for name in os.listdir(dask_worker.local_directory) if name.startswith("dgboost-pages-")]

    left = client.run(pages_left)
    for _ in range(50):  # the futures' release reaches the workers a moment after train returns
        if not any(left.values()):
            break
        import time

        time.sleep(0.1)
        left = client.run(pages_left)
    assert not any(left.values()), left


def _labels_changing(marker: str, y):
    """y the first time it is read, y with a NaN after (a partition whose input changed)."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        return y
    changed = y.copy()
    changed[7] = np.nan
    return changed


def test_a_partition_changed_between_its_reads_is_named_at_once(client, data, tmp_path):
    X, y, _ = data
    labels = dask.delayed(_labels_changing, pure=False)(str(tmp_path / "read"), y[:500])
    dy = da.concatenate([da.from_delayed(labels, shape=(500,), dtype=np.float32), da.from_array(y[500:], chunks=500)])
    with pytest.raises(ValueError, match="partition 0 changed since it was first read: .*NaN"):
        _streamed(client, {"max_device_matrix_bytes": 3000}, da.from_array(X, chunks=500), dy, num_boost_round=2)


def test_a_page_file_pickles_as_its_rows_and_keeps_its_file(tmp_path):
    import pickle

    from dask.sizeof import sizeof

    from dgboost.data.pages import PackedRows, PageFile

    rows = np.arange(12, dtype=np.uint32).reshape(4, 3)
    (tmp_path / "pages").mkdir()
    path = str(tmp_path / "pages" / "page.npy")
    np.save(path, rows)
    page = PageFile(path)
    copy = pickle.loads(pickle.dumps(page))  # Dask spilling the piece
    assert isinstance(copy, np.ndarray) and np.array_equal(copy, rows) and os.path.exists(path)
    packed = PackedRows([page, copy], (4, 4), None, None)
    assert sizeof(packed) == rows.nbytes  # the file counts for nothing, the array for its bytes
    del page, packed
    assert not os.path.exists(path) and not (tmp_path / "pages").exists()  # the file and its directory


def test_pinned_pages_keep_within_half_a_workers_memory_limit(client, monkeypatch):
    """Pages pinned on a Dask worker stay under half its memory limit (Dask counts them, and past
    60% of it would spill them, unpinned), less those pinned already."""
    from dgboost import _settings
    from dgboost.data import pages

    limit = client.submit(_settings.worker_memory_limit, pure=False).result()  # in a task, as pack_piece is
    assert isinstance(limit, int) and limit > 0, limit
    assert _settings.worker_memory_limit() is None  # not on a worker
    monkeypatch.setattr(_settings, "worker_memory_limit", lambda: 1000)
    monkeypatch.setattr(pages, "_pinned_bytes", [300])
    assert pages._host_room() == 200
    monkeypatch.setattr(_settings, "worker_memory_limit", lambda: None)
    assert pages._host_room() > 200  # half the memory available


def _model_and_cuts(monkeypatch, params, X, y, rounds, **kwargs):
    """A model trained in one process, and the cuts its rows were binned by."""
    from dgboost import training

    agreed = []
    agree_cuts = training.agree_cuts
    monkeypatch.setattr(training, "agree_cuts", lambda *a, **k: agreed.append(agree_cuts(*a, **k)) or agreed[-1])
    model = dgboost.train(params, X, y, num_boost_round=rounds, **kwargs)
    return model, agreed[-1]


def _sparse_rows(rows):
    import scipy.sparse

    return scipy.sparse.csr_matrix(np.where(np.isnan(rows), 0, rows))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("case", ["binary", "multiclass, margins", "sparse", "oblivious"])
def test_a_kept_piece_continues_its_margins_from_its_bins(monkeypatch, case, device):
    """A restart's kept piece (``continue_piece``) walks the trees grown since it was packed on
    its bins: the margins predict makes from the float values, bit for bit, from rows binned
    on the cuts' own values (ties at every split) and missing ones; from its packed margins,
    or from the rows' base_margin, or the model's."""
    from dgboost.dask._streamed import _KEPT, _keep_here, continue_piece
    from dgboost.data.ellpack import EllpackLayout, row_stride
    from dgboost.data.pages import pack_rows

    rng = np.random.default_rng(3)
    n_rows, params = 2000, {"max_depth": 4, "max_bin": 16}
    X = rng.integers(0, 12, (n_rows, 6)).astype(np.float32) / 4  # 12 values a feature: a row on every cut
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 2.5).astype(np.float32)
    margin = None
    if case == "multiclass, margins":
        params.update(objective="multi:softprob", num_class=3)
        y = (np.nan_to_num(X[:, 0]) * 4 % 3).astype(np.float32)
        margin = rng.standard_normal((n_rows, 3)).astype(np.float32)
    if case == "oblivious":
        params["grow_policy"] = "symmetric"
    rows = _sparse_rows(X) if case == "sparse" else X
    model, cuts = _model_and_cuts(monkeypatch, params, rows, y, 6, base_margin=margin)
    assert any(len(tree.left) > 1 for tree in model.trees)
    layout = EllpackLayout.smaller(cuts, row_stride(rows))
    budget = 3000  # pages of 1500 bytes: several
    k = model.n_outputs
    xp = np
    if device == "cuda":
        import cupy as xp
    for trees_before in (0, 2 * k):  # packed without init_model, or with two rounds' margins
        packed = pack_rows(rows, cuts, xp, layout, budget)  # on a GPU: packed there, pages on the host
        assert len(packed.pages) > 1
        start = margin
        if trees_before:
            start = model[:2].predict(rows, output_margin=True, base_margin=margin).reshape(n_rows, k)
            packed = dataclasses.replace(packed, with_model=True)
        _keep_here((packed, y, None, start, None, None, None), "a-token", 60.0)  # as keep() leaves it on a worker
        continued = continue_piece("a-token", TrainParams(device=device), budget, model, trees_before)
        assert "a-token" not in _KEPT
        expected = model.predict(rows, output_margin=True, base_margin=margin).reshape(n_rows, k)
        assert continued[0].with_model and continued[0].pages is packed.pages
        assert continued[3].tobytes() == expected.astype(np.float32).tobytes(), trees_before
        if start is not None:
            assert start is not continued[3]  # the kept piece's margins are its own still


def test_a_restart_keeps_the_pieces_the_workers_left_packed():
    """plan_again: each worker left keeps the pieces it packed, whole, while its share allows;
    the rows of the pieces lost (and of those not kept) go to the workers short of theirs, and
    every row is planned once, in global order."""
    from dgboost.dask._shards import Piece
    from dgboost.dask._streamed import Kept, Packed, plan_again

    lengths = [700, 700, 700, 700, 700, 500]  # 4000 rows; a's 1334, b's 1333 (lost), c's 1333
    kept = Kept({"a": [Packed(Piece(0, 0, 700), 0, "t0"), Packed(Piece(1, 0, 634), 0, "t1")],
                 "c": [Packed(Piece(3, 567, 700), 0, "t3"), Packed(Piece(4, 0, 700), 0, "t4"),
                       Packed(Piece(5, 0, 500), 0, "t5")]}, trees=0, tokens=[])

    def rows(plan):
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        return sorted(r for pieces in plan.values() for p in pieces
                      for r in range(offsets[p.part] + p.start, offsets[p.part] + p.stop))

    plan, again, moved = plan_again(lengths, kept, ["a", "c"])
    assert rows(plan) == list(range(4000)) and moved == 1333
    assert [sum(p.n_rows for p in plan[w]) for w in "ac"] == [2000, 2000]
    assert {w: sorted(p.token for p in again[w].values()) for w in "ac"} == {"a": ["t0", "t1"], "c": ["t3", "t4", "t5"]}
    assert all(plan[w][i] == packed.piece for w in "ac" for i, packed in again[w].items())
    assert plan["a"][:2] == [Piece(0, 0, 700), Piece(1, 0, 634)]

    # A worker joined meanwhile ("b2"): it takes the lost rows; the others keep theirs.
    plan, again, moved = plan_again(lengths, kept, ["a", "b2", "c"])
    assert rows(plan) == list(range(4000)) and moved == 1333
    assert plan["b2"] == [Piece(1, 634, 700), Piece(2, 0, 700), Piece(3, 0, 567)]
    assert sum(len(a) for a in again.values()) == 5

    # Four workers: a share of 1000 rows cuts a's pieces, which are packed again.
    plan, again, moved = plan_again(lengths, kept, ["a", "b2", "c", "d"])
    assert rows(plan) == list(range(4000))
    assert [p.token for p in again["a"].values()] == ["t0"] and [p.token for p in again["c"].values()] == ["t3", "t4"]
    assert moved == 2000  # a and c keep 1000 rows each where they lie (the rest of t1 and t5 packed again)


def test_a_kept_piece_is_taken_again_where_its_pages_fit_the_new_budget():
    """_pages_fit: a kept piece's largest page (its rows, or a page for the budget it was cut
    for) at most the new rank's page; any page where the new rank is not paged."""
    from dgboost.dask._shards import Piece
    from dgboost.dask._streamed import Packed, _pages_fit
    from dgboost.data.ellpack import EllpackLayout

    layout = EllpackLayout(n_features=8, bits=8, missing_symbol=255, row_stride=8)  # 8 bytes a row
    one_page = Packed(Piece(0, 0, 700), 0, "t")
    paged = Packed(Piece(0, 0, 3000), 16000, "t")  # pages of 1000 rows
    assert _pages_fit(one_page, 0, layout, False) and _pages_fit(paged, 0, layout, False)
    assert _pages_fit(one_page, 700, layout, False) and not _pages_fit(one_page, 699, layout, False)
    assert _pages_fit(paged, 1000, layout, False) and not _pages_fit(paged, 999, layout, False)
    assert _pages_fit(Packed(Piece(0, 0, 500), 16000, "t"), 500, layout, False)  # one page of its 500 rows


def test_a_kept_piece_goes_at_its_time():
    """A piece kept for a restart that no attempt takes (its client gone, say) is dropped once
    its time has passed, by a thread that ends when none is left; one asked for then is gone."""
    import time

    from dgboost.dask import _streamed

    _streamed._keep_here("a piece", "soon", 0.2)
    _streamed._keep_here("another", "later", 60.0)
    assert {"soon", "later"} <= set(_streamed._KEPT)
    time.sleep(1.5)
    assert "soon" not in _streamed._KEPT and "later" in _streamed._KEPT
    with pytest.raises(_streamed.KeptPieceGone, match="no longer holds the packed piece soon"):
        _streamed.continue_piece("soon", TrainParams(), 0, None, 0)
    _streamed._drop_kept(["later"])
    deadline = time.monotonic() + 5
    while _streamed._SWEEPER[0] is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _streamed._SWEEPER[0] is None and not _streamed._KEPT
