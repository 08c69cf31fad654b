"""Out of core (data/pages.py): a compressed matrix larger than max_device_matrix_bytes in pages,
streamed level by level (every row) or compacted a tree at a time (a row sample), gives the
in-core model byte for byte; bad budgets and full disks are refused clearly."""

import errno
import logging
import os
import types

import numpy as np
import pytest

import dgboost
from dgboost.data import pages as pages_module
from dgboost.data.ellpack import build_ellpack
from dgboost.data.pages import MIN_PAGE_ROWS, PagedMatrix, build_matrix
from dgboost.tree.grower import PagedGrower
from dgboost.data.sketch import compute_cuts, draw_sample

N_ROWS = 4000
#: Pages of about 300 rows of the 8-feature data below (8 bytes a row): a dozen or more pages.
BUDGET = 5000


def _data(seed=0, n_rows=N_ROWS, n_features=8):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (X[:, 0] + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + 0.5 * rng.standard_normal(n_rows) > 0)
    return X, y.astype(np.float32)


def _bytes(booster, path):
    booster.save_model(path)
    return path.read_bytes()


def _cuts(X):
    return compute_cuts(draw_sample(X, None, np.arange(X.shape[0]), X.shape[0], 0), 256)


def test_pages_hold_the_rows_of_the_in_core_matrix(tmp_path):
    X, _ = _data()
    cuts = _cuts(X)
    whole = build_ellpack(X, cuts)
    paged = build_matrix(X, cuts, np, BUDGET)
    assert isinstance(paged, PagedMatrix) and paged.n_pages >= 10
    assert max(paged.page_sizes) * paged.layout.bytes_per_row <= BUDGET // 2
    # On a CPU the pages are files of the spill directory.
    assert os.path.isdir(paged.where) and len(os.listdir(paged.where)) == paged.n_pages
    stacked = np.concatenate([page.packed for _, page in paged.pages()])
    np.testing.assert_array_equal(stacked, whole.packed)
    # A pass starts where the last one ended (on a GPU its last pages are still on the device).
    backward = list(paged.pages())
    assert [index for index, _ in backward] == list(range(paged.n_pages))[::-1]
    for index, page in backward:
        start = paged.starts[index]
        np.testing.assert_array_equal(page.packed, whole.packed[start:start + page.n_rows])
    assert [index for index, _ in paged.pages()] == list(range(paged.n_pages))
    rows = np.array([0, 5, 299, 300, 1234, N_ROWS - 1], dtype=np.int32)
    np.testing.assert_array_equal(paged.compact(rows).packed, whole.packed[rows])
    directory = paged.where
    paged.close()
    assert not os.path.exists(directory)


@pytest.mark.parametrize("extra", [
    {},
    {"grow_policy": "symmetric", "max_depth": 4},
    # A sample that fits the budget is gathered into one page; one over it is streamed.
    {"subsample": 0.3, "sampling_method": "gradient_based", "max_device_matrix_bytes": 12000},
    {"subsample": 0.3, "max_device_matrix_bytes": 12000},
    {"subsample": 0.5},
    {"subsample": 0.95, "sampling_method": "gradient_based"},
    {"sampling_method": "goss", "eta": 0.5},
    {"subsample": 0.5, "sampling_method": "gradient_based", "grow_policy": "lossguide", "max_leaves": 12},
    {"objective": "multi:softprob", "num_class": 3},
    {"max_leaves": 9, "colsample_bynode": 0.6, "monotone_constraints": "(1,0,0,0,0,0,0,-1)"},
], ids=lambda extra: ",".join(f"{k}={v}" for k, v in extra.items()) or "default")
def test_out_of_core_model_is_byte_identical_to_in_core(extra, tmp_path, caplog, monkeypatch):
    X, y = _data()
    extra = dict(extra)
    budget = extra.pop("max_device_matrix_bytes", BUDGET)
    gathered = []
    compact = PagedMatrix.compact
    monkeypatch.setattr(PagedMatrix, "compact",
                        lambda self, rows, out=None: gathered.append(len(rows)) or compact(self, rows, out))
    if extra.get("objective") == "multi:softprob":
        y = (np.nan_to_num(X[:, 0]) > 0.5).astype(np.float32) + (np.nan_to_num(X[:, 3]) > 0)
    params = {"objective": "binary:logistic", "max_depth": 5, "eval_metric": ["logloss", "auc"], **extra}
    if extra.get("objective") == "multi:softprob":
        params["eval_metric"] = "mlogloss"
    eval_X, eval_y = X[:2000], y[:2000]  # over every budget below: paged too
    local = dgboost.train(params, X, y, num_boost_round=6, evals=[(X, y, "train"), (eval_X, eval_y, "eval")],
                          verbose_eval=False)
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        paged = dgboost.train({**params, "max_device_matrix_bytes": budget}, X, y, num_boost_round=6,
                              evals=[(X, y, "train"), (eval_X, eval_y, "eval")], verbose_eval=False)
    assert "out of core" in caplog.text and "evals 'eval' X: out of core" in caplog.text
    gathers = extra.get("grow_policy") == "lossguide" or extra.get("subsample", 1) * N_ROWS * 8 <= budget
    assert bool(gathered) == gathers  # the sample gathered into one page, else the pages streamed
    assert _bytes(paged, tmp_path / "paged.json") == _bytes(local, tmp_path / "local.json")
    assert paged.evals_result() == local.evals_result()


def _paged(caplog, train, *args, **kwargs):
    """``train(*args, **kwargs)``, asserting it went out of core."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        booster = train(*args, **kwargs)
    assert "out of core" in caplog.text
    return booster


def test_row_blocks_read_as_the_joined_rows():
    from dgboost.data.inputs import RowBlocks

    X, _ = _data(n_rows=1000)
    blocks = RowBlocks([X[:300], X[300:300], X[300:700], X[700:]])  # an empty block among them
    assert blocks.shape == X.shape and len(blocks) == 1000
    np.testing.assert_array_equal(blocks[250:750], X[250:750])
    np.testing.assert_array_equal(blocks[990:2000], X[990:])
    rows = np.array([0, 299, 300, 301, 699, 700, 999])
    np.testing.assert_array_equal(blocks[rows], X[rows])
    assert blocks[5:5].shape == (0, X.shape[1])
    cuts = _cuts(X)
    np.testing.assert_array_equal(build_ellpack(blocks, cuts).packed, build_ellpack(X, cuts).packed)
    sample, joined = (draw_sample(data, None, np.arange(1000), 1000, 0) for data in (blocks, X))
    np.testing.assert_array_equal(sample.values, joined.values)


def test_values_larger_than_the_budget_stay_on_the_host_beside_an_in_core_matrix():
    """Data larger than the device whose matrix fits it: X's values stay on the host (never
    on the device whole), the matrix is built from them a chunk at a time, in core."""
    from dgboost.dask._job import _pieces_stay_apart
    from dgboost.data.pages import stays_on_host
    from dgboost.params import TrainParams

    n_rows, n_features = 1000, 12  # the widest matrix: 16 bytes a row; the float32 values 48
    assert not stays_on_host(n_rows, n_features, 48_000, 0, 256)  # no budget (a CPU's): nothing stays
    assert not stays_on_host(n_rows, n_features, 48_000, 64_000, 256)  # values and matrix fit together
    # Values that do not fit beside a matrix that does; a matrix that may not fit alone (values 0).
    assert stays_on_host(n_rows, n_features, 48_000, 63_999, 256) and not stays_on_host(n_rows, n_features, 0, 63_999, 256)
    assert stays_on_host(n_rows, n_features, 0, 15_999, 256) and not stays_on_host(n_rows, n_features, 0, 16_000, 256)
    X, _ = _data(n_rows=n_rows, n_features=n_features)
    shard = [(X[:400],), (X[400:],)]
    gpu = types.SimpleNamespace()  # a GPU worker's array module: the budgets below are given
    params = TrainParams.from_dict({"max_device_matrix_bytes": 50_000})
    assert _pieces_stay_apart(params, shard, gpu)  # a dense host X in pieces stays in them
    assert not _pieces_stay_apart(TrainParams.from_dict({"max_device_matrix_bytes": 64_000}), shard, gpu)
    assert _pieces_stay_apart(TrainParams.from_dict({}), shard, np)  # a CPU worker never joins them
    assert not _pieces_stay_apart(params, shard[:1], gpu) and not _pieces_stay_apart(params, shard[:1], np)
    categorical = TrainParams.from_dict({"max_device_matrix_bytes": 50_000, "enable_categorical": True})
    assert not _pieces_stay_apart(categorical, shard, gpu) and not _pieces_stay_apart(categorical, shard, np)


def test_sparse_and_categorical_input_out_of_core(tmp_path, caplog):
    scipy_sparse = pytest.importorskip("scipy.sparse")
    X, y = _data(1)
    csr = scipy_sparse.csr_matrix(np.nan_to_num(np.where(np.abs(X) < 1.0, np.nan, X), nan=0.0))
    params = {"max_depth": 4}
    local = dgboost.train(params, csr, y, num_boost_round=4)
    paged = _paged(caplog, dgboost.train, {**params, "max_device_matrix_bytes": 3000}, csr, y, num_boost_round=4)
    assert _bytes(paged, tmp_path / "a.json") == _bytes(local, tmp_path / "b.json")
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X[:, :4], columns=list("abcd"))
    frame["c"] = pd.Categorical(np.random.default_rng(2).integers(0, 9, N_ROWS))
    params = {"max_depth": 4, "enable_categorical": True}
    local = dgboost.train(params, frame, y, num_boost_round=4)
    paged = _paged(caplog, dgboost.train, {**params, "max_device_matrix_bytes": 2000}, frame, y, num_boost_round=4)
    assert _bytes(paged, tmp_path / "c.json") == _bytes(local, tmp_path / "d.json")


def test_continuing_a_model_out_of_core(tmp_path, caplog):
    X, y = _data(3)
    margin = np.random.default_rng(3).standard_normal(len(y)).astype(np.float32)
    first = dgboost.train({"max_depth": 3}, X, y, num_boost_round=3)
    local = dgboost.train({"max_depth": 3}, X, y, base_margin=margin, num_boost_round=3, init_model=first)
    paged = _paged(caplog, dgboost.train, {"max_depth": 3, "max_device_matrix_bytes": BUDGET}, X, y,
                   base_margin=margin, num_boost_round=3, init_model=first)
    assert _bytes(paged, tmp_path / "a.json") == _bytes(local, tmp_path / "b.json")


def test_the_pages_files_go_when_training_ends_or_fails(tmp_path):
    import dask

    X, y = _data()

    class Fails(dgboost.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            assert os.listdir(tmp_path), "the pages are on disk while training"
            raise RuntimeError("a callback failed")

    with dask.config.set({"dgboost.spill-directory": str(tmp_path)}):
        dgboost.train({"max_device_matrix_bytes": BUDGET}, X, y, num_boost_round=2)
        assert os.listdir(tmp_path) == []
        with pytest.raises(RuntimeError, match="a callback failed") as failure:
            dgboost.train({"max_device_matrix_bytes": BUDGET}, X, y, num_boost_round=2, callbacks=[Fails()])
        assert failure.value is not None and os.listdir(tmp_path) == []  # gone while the error is held


def test_a_budget_below_two_pages_names_the_parameter_and_the_least():
    X, y = _data()
    least = 2 * MIN_PAGE_ROWS * 8  # these rows: 8 bytes each
    with pytest.raises(ValueError, match=f"max_device_matrix_bytes=600 .* at least {least}"):
        dgboost.train({"max_device_matrix_bytes": 600}, X, y, num_boost_round=1)
    # Below what any matrix needs: refused with the parameters, before the data is read.
    with pytest.raises(ValueError, match="max_device_matrix_bytes=100 cannot hold two pages of 64 rows of any "
                                         "compressed matrix: give at least 512"):
        dgboost.train({"max_device_matrix_bytes": 100}, X, y, num_boost_round=1)
    with pytest.raises(ValueError, match="max_device_matrix_bytes"):
        dgboost.train({"max_device_matrix_bytes": -1}, X, y, num_boost_round=1)


def test_lossguide_from_every_row_out_of_core_is_refused():
    X, y = _data()
    with pytest.raises(ValueError, match="grow_policy='lossguide' trains out of core only from a row sample"):
        dgboost.train({"grow_policy": "lossguide", "max_device_matrix_bytes": BUDGET}, X, y, num_boost_round=1)


def test_a_full_spill_disk_names_the_directory_and_leaves_no_pages(tmp_path, monkeypatch):
    import dask

    X, y = _data()
    written = []

    def full_disk(path, array, allow_pickle=False):
        if len(written) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(path)
        with open(path, "wb") as file:
            np.lib.format.write_array(file, array, allow_pickle=allow_pickle)

    monkeypatch.setattr(pages_module.np, "save", full_disk)
    with dask.config.set({"dgboost.spill-directory": str(tmp_path)}):
        with pytest.raises(OSError, match=f"spill directory '{tmp_path}'.*No space left.*dgboost.spill-directory"):
            dgboost.train({"max_device_matrix_bytes": BUDGET}, X, y, num_boost_round=1)
    assert written and os.listdir(tmp_path) == []  # the pages written before were removed


def test_an_unwritable_spill_directory_is_named(tmp_path):
    import dask

    X, y = _data()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with dask.config.set({"dgboost.spill-directory": str(blocker / "pages")}):
        with pytest.raises(OSError, match="spill directory .*a-file/pages"):
            dgboost.train({"max_device_matrix_bytes": BUDGET}, X, y, num_boost_round=1)


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [{}, {"subsample": 0.3, "sampling_method": "gradient_based"},
                                   {"grow_policy": "symmetric"}],
                         ids=["every-row", "gradient-based", "symmetric"])
@pytest.mark.parametrize("host_memory", ["pinned", "disk"])
def test_gpu_out_of_core_model_equals_the_in_core(extra, host_memory, tmp_path):
    pytest.importorskip("cupy")
    import dask

    X, y = _data(4, n_rows=60_000, n_features=12)
    params = {"max_depth": 6, "objective": "binary:logistic", **extra}
    in_core = dgboost.train({**params, "device": "cuda"}, X, y, num_boost_round=8, evals=[(X, y, "t")],
                            verbose_eval=False)
    budget = 300_000 if "subsample" in extra else 100_000  # 720 kB of pages; the sample (216 kB) gathered
    config = {"dgboost.host-page-bytes": 0 if host_memory == "disk" else None,
              "dgboost.spill-directory": str(tmp_path / "spill")}
    with dask.config.set(config):
        paged = dgboost.train({**params, "device": "cuda", "max_device_matrix_bytes": budget}, X, y,
                              num_boost_round=8, evals=[(X, y, "t")], verbose_eval=False)
    assert _bytes(paged, tmp_path / "paged.json") == _bytes(in_core, tmp_path / "in_core.json")
    assert paged.evals_result() == in_core.evals_result()
    assert not (tmp_path / "spill").exists() or not os.listdir(tmp_path / "spill")  # the pages' files went


@pytest.mark.gpu
def test_gpu_values_larger_than_the_budget_stay_on_the_host_and_the_model_is_the_same(tmp_path, caplog, monkeypatch):
    """A host X whose values would not fit the budget beside its matrix stays on the host; its
    matrix, within the budget, is built in core from it a chunk at a time: the same model."""
    pytest.importorskip("cupy")
    from dgboost import training
    from dgboost.data import ellpack

    monkeypatch.setattr(ellpack, "_CHUNK_ENTRIES", 120_000)  # several chunks of the 60k x 12 values
    X, y = _data(4, n_rows=60_000, n_features=12)
    params = {"max_depth": 6, "objective": "binary:logistic", "device": "cuda"}
    moved = []
    to = training.Dataset.to
    monkeypatch.setattr(training.Dataset, "to", lambda self, xp, move_X=True: moved.append(move_X) or to(self, xp, move_X))
    in_core = dgboost.train(params, X, y, num_boost_round=8)
    assert moved == [True]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dgboost"):
        kept = dgboost.train({**params, "max_device_matrix_bytes": X.nbytes}, X, y, num_boost_round=8)
    assert moved == [True, False] and "out of core" not in caplog.text
    assert _bytes(kept, tmp_path / "kept.json") == _bytes(in_core, tmp_path / "in_core.json")


@pytest.mark.gpu
def test_gpu_out_of_core_categories_continuing_and_margins(tmp_path, caplog):
    pytest.importorskip("cupy")
    pd = pytest.importorskip("pandas")
    X, y = _data(6, n_rows=40_000, n_features=6)
    frame = pd.DataFrame(X, columns=list("abcdef"))
    frame["b"] = pd.Categorical(np.random.default_rng(6).integers(0, 30, len(y)))
    for params in ({"enable_categorical": True}, {"enable_categorical": True, "cat_encoding": "target_statistics"}):
        params = {"device": "cuda", "max_depth": 5, **params}
        in_core = dgboost.train(params, frame, y, num_boost_round=4)
        paged = _paged(caplog, dgboost.train, {**params, "max_device_matrix_bytes": 60_000}, frame, y,
                       num_boost_round=4)
        assert _bytes(paged, tmp_path / "a.json") == _bytes(in_core, tmp_path / "b.json")
    margin = np.random.default_rng(7).standard_normal(len(y)).astype(np.float32)
    first = dgboost.train({"device": "cuda"}, X, y, num_boost_round=2)
    in_core = dgboost.train({"device": "cuda"}, X, y, base_margin=margin, num_boost_round=3, init_model=first)
    paged = _paged(caplog, dgboost.train, {"device": "cuda", "max_device_matrix_bytes": 60_000}, X, y,
                   base_margin=margin, num_boost_round=3, init_model=first)
    assert _bytes(paged, tmp_path / "c.json") == _bytes(in_core, tmp_path / "d.json")


@pytest.mark.gpu
def test_gpu_pass_reuses_the_pages_the_last_left_and_a_gather_reads_them(monkeypatch):
    """A pass that starts where the last ended copies two pages fewer; a pass of another
    matrix through the same buffers sends them again; a sample gathered after a pass reads the
    pages left in the buffers (not the pinned ones, emptied here to tell them apart)."""
    cupy = pytest.importorskip("cupy")
    X, _ = _data()
    cuts = _cuts(X)
    whole = build_ellpack(X, cuts)
    paged = build_matrix(X, cuts, cupy, BUDGET)
    other = build_matrix(X[:3000], cuts, cupy, BUDGET, buffers=paged._buffers)
    assert isinstance(other, PagedMatrix) and paged.n_pages >= 10
    copied = []
    send = pages_module.PageBuffers.send
    monkeypatch.setattr(pages_module.PageBuffers, "send", lambda self, index, page, n_words, owner: (
        copied.append(self.held[index % 2] is None or self.held[index % 2][0] != (owner, index))
        or send(self, index, page, n_words, owner)))

    def a_pass(matrix):
        copied.clear()
        seen = {index: cupy.asnumpy(page.packed) for index, page in matrix.pages()}
        for index, packed in seen.items():
            np.testing.assert_array_equal(packed, whole.packed[matrix.starts[index]:matrix.starts[index + 1]])
        return sum(copied)

    assert a_pass(paged) == paged.n_pages
    assert a_pass(paged) == paged.n_pages - 2
    assert a_pass(paged) == paged.n_pages - 2
    assert a_pass(other) == other.n_pages
    assert a_pass(paged) == paged.n_pages  # backward, the fourth pass: pages 1 and 0 are left
    assert set(paged._buffers.holding(paged._token)) == {0, 1}
    for page in paged._pages[:2]:
        page[...] = 0  # the gather must take these pages' rows from the device buffers
    starts = paged.starts
    rows = np.array([0, 5, starts[1], starts[2] - 1, starts[2], starts[3] + 1, N_ROWS - 1], dtype=np.int32)
    np.testing.assert_array_equal(cupy.asnumpy(paged.compact(cupy.asarray(rows)).packed), whole.packed[rows])


@pytest.mark.gpu
def test_gpu_pages_of_pieces_reused_and_gathered_after_passes_whole_or_stopped():
    """Pieces packed apart and sent to the device together (a page of parts, _from_packed):
    after whole passes and passes stopped after a page, every page and every gathered sample
    holds the in-core matrix's rows."""
    cupy = pytest.importorskip("cupy")
    from dgboost.data.pages import PackedRows, pack_rows

    X, _ = _data()
    cuts = _cuts(X)
    whole = build_ellpack(X, cuts)
    pieces = [pack_rows(X[start:start + 100], cuts, cupy, whole.layout, BUDGET) for start in range(0, N_ROWS, 100)]
    paged = build_matrix(PackedRows.join(pieces), cuts, cupy, BUDGET)
    assert isinstance(paged, PagedMatrix) and any(isinstance(page, list) for page in paged._pages)
    rng = np.random.default_rng(5)
    for stop_early in (False, True, True, False, True):
        if stop_early:
            a_pass = paged.pages()
            next(a_pass)
            a_pass.close()
        for index, page in paged.pages():
            np.testing.assert_array_equal(cupy.asnumpy(page.packed),
                                          whole.packed[paged.starts[index]:paged.starts[index + 1]])
        rows = np.sort(rng.choice(N_ROWS, 500, replace=False)).astype(np.int32)
        assert paged._buffers.holding(paged._token)  # the gather reads some pages from the device
        np.testing.assert_array_equal(cupy.asnumpy(paged.compact(cupy.asarray(rows)).packed), whole.packed[rows])


@pytest.mark.gpu
def test_gpu_gathers_a_sample_from_the_pinned_pages_as_its_cpu_twin():
    """cuda.gather_page_rows reads the pages where they lie (pinned host memory) and writes
    what cpu.gather_page_rows does: pages of unequal rows, rows from some pages and none of
    others, the first and last rows."""
    cupy = pytest.importorskip("cupy")
    import cupyx

    from dgboost.kernels import cpu, cuda

    rng = np.random.default_rng(11)
    sizes, n_words = [5, 1, 700, 0, 333], 7
    pages = []
    for size in sizes:
        page = cupyx.empty_pinned((size, n_words), np.uint32)
        page[...] = rng.integers(0, 2**32, (size, n_words), dtype=np.uint32)
        pages.append(page)
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    n_rows = starts[-1]
    rows = np.unique(np.concatenate([[0, n_rows - 1], rng.choice(n_rows, 200, replace=False)]))
    rows = rows[(rows < 5) | (rows >= 706)]  # none of the 700-row page
    expected = cpu.gather_page_rows(rows, pages, starts, np.empty((len(rows), n_words), np.uint32))
    got = cuda.gather_page_rows(cupy.asarray(rows.astype(np.int32)), pages, starts,
                                cupy.empty((len(rows), n_words), np.uint32))
    np.testing.assert_array_equal(cupy.asnumpy(got), expected)
    assert cuda.gather_page_rows(cupy.empty(0, np.int32), pages, starts, cupy.empty((0, n_words), np.uint32)).size == 0
    # Rows of a larger matrix whose page 2 is the 700 rows: numbered from its first
    inside = np.sort(rng.choice(700, 50, replace=False)) + 1000
    expected = cpu.gather_page_rows(inside, [pages[2]], (0, 700), np.empty((50, n_words), np.uint32), base=1000)
    np.testing.assert_array_equal(expected, pages[2][inside - 1000])
    got = cuda.gather_page_rows(cupy.asarray(inside), [cupy.asarray(pages[2])], (0, 700),
                                cupy.empty((50, n_words), np.uint32), base=1000)
    np.testing.assert_array_equal(cupy.asnumpy(got), expected)


def _sizes_case(seed: int, n_pages: int):
    """(drawn, gathered, likely, page_ends) over pages of unequal rows, some empty (not the first)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 400, n_pages)
    sizes[1::3] = 0
    n = int(sizes.sum())
    drawn, gathered, likely = rng.random(n) < 0.3, rng.random(n) < 0.35, rng.random(n) < 0.33
    return drawn, gathered, likely, np.cumsum(sizes).astype(np.int64)


@pytest.mark.parametrize("given", ["both", "no-guess", "no-gathered"])
def test_sample_sizes_count_the_draw_the_misses_and_the_guess_by_page(given):
    """cpu.sample_sizes: the rows drawn, the drawn rows the gathered guess misses (and their
    mask), the next guess's rows through each page's end, and how far each limit is passed."""
    from dgboost.kernels import cpu

    drawn, gathered, likely, ends = _sizes_case(5, 9)
    gathered = None if given == "no-gathered" else gathered
    likely = None if given == "no-guess" else likely
    limits = (7, 28, 20_000, 1_000)
    sizes, missed = cpu.sample_sizes(drawn, gathered, likely, ends, limits)
    assert sizes.dtype == np.int64 and sizes.shape == (7 + len(ends),)
    n_missed = 0 if gathered is None else int((drawn & ~gathered).sum())
    assert (missed is None) == (gathered is None)
    if missed is not None:
        np.testing.assert_array_equal(missed, drawn & ~gathered)
    through = [0 if likely is None else int(likely[:end].sum()) for end in ends]
    assert sizes[:-4].tolist() == [int(drawn.sum()), n_missed, 0, *through]
    needed = through[-1] + through[-1] // 64 + 64
    assert sizes[-4:].tolist() == [n_missed - 7, int(drawn.sum()) * 28 - 20_000, needed * 28 - 20_000, needed - 1_000]


@pytest.mark.gpu
@pytest.mark.parametrize("n_pages", [1, 9, 5000])  # 5000: the pages' counts past shared memory
@pytest.mark.parametrize("given", ["both", "no-guess", "no-gathered"])
def test_gpu_sample_sizes_are_its_cpu_twins(n_pages, given):
    cupy = pytest.importorskip("cupy")

    from dgboost.kernels import cpu, cuda

    drawn, gathered, likely, ends = _sizes_case(n_pages, n_pages)
    gathered = None if given == "no-gathered" else gathered
    likely = None if given == "no-guess" else likely
    limits = (3, 28, 9_000, 500)
    expected = cpu.sample_sizes(drawn, gathered, likely, ends, limits)
    on_device = (None if a is None else cupy.asarray(a) for a in (drawn, gathered, likely, ends))
    got = cuda.sample_sizes(*on_device, limits)
    np.testing.assert_array_equal(cupy.asnumpy(got[0]), expected[0])
    assert (got[1] is None) == (expected[1] is None)
    if expected[1] is not None:
        np.testing.assert_array_equal(cupy.asnumpy(got[1]), expected[1])


def _sample_page_case(n_missed: int):
    """(gpair, drawn, guessed, missed, n_missed) of a sample page of 40 guessed rows and a room of 8."""
    rng = np.random.default_rng(n_missed)
    gpair = rng.standard_normal((300, 2)).astype(np.float32)
    drawn = rng.random(300) < 0.4
    gpair[~drawn] = 0
    guessed = np.sort(rng.choice(300, 40, replace=False))
    missed = np.concatenate([np.sort(rng.choice(np.flatnonzero(drawn), min(n_missed, 8), replace=False)),
                             np.full(8 - min(n_missed, 8), 299)])
    return gpair, drawn, guessed, missed, np.array([n_missed])


@pytest.mark.parametrize("n_missed", [0, 3, 8, 11])
def test_a_sample_page_holds_the_guess_then_the_misses_then_nothing(n_missed):
    """cpu.fill_sample_page: the guessed rows' pairs and flags, then the room's real misses
    (drawn), then nothing (zero, not drawn) to the page's end, whatever it held; with more
    misses than the room, the room is all misses."""
    from dgboost.kernels import cpu

    gpair, drawn, guessed, missed, count = _sample_page_case(n_missed)
    pairs, flags = np.full((60, 2), 7, np.float32), np.ones(60, bool)
    cpu.fill_sample_page(gpair, drawn, guessed, missed, count, pairs, flags)
    real = min(n_missed, 8)
    np.testing.assert_array_equal(pairs[:40], gpair[guessed])
    np.testing.assert_array_equal(flags[:40], drawn[guessed])
    np.testing.assert_array_equal(pairs[40:40 + real], gpair[missed[:real]])
    assert flags[40:40 + real].all() and not flags[40 + real:].any()
    assert not pairs[40 + real:].any()


@pytest.mark.gpu
@pytest.mark.parametrize("n_missed", [0, 3, 8, 11])
def test_gpu_sample_page_is_filled_as_its_cpu_twin(n_missed):
    cupy = pytest.importorskip("cupy")

    from dgboost.kernels import cpu, cuda

    case = _sample_page_case(n_missed)
    expected = cpu.fill_sample_page(*case, np.full((60, 2), 7, np.float32), np.ones(60, bool))
    got = cuda.fill_sample_page(*(cupy.asarray(a) for a in case), cupy.full((60, 2), 7, np.float32),
                                cupy.ones(60, bool))
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(cupy.asnumpy(g), e)


def _count_ahead(monkeypatch):
    """Of each tree grown from the rows a pass gathered ahead, (rows guessed, rows drawn, rows
    missed, room); and the trees grown from the sample gathered whole, a list of None."""
    seen, whole = [], []
    sample = pages_module.RowsAhead.sample
    grow_whole = PagedGrower._grow_whole

    def counted(self, drawn, missed, gpair):
        seen.append((self.n_rows, int(drawn.sum()), int(missed[1][0]), self.room))
        return sample(self, drawn, missed, gpair)

    monkeypatch.setattr(pages_module.RowsAhead, "sample", counted)
    monkeypatch.setattr(PagedGrower, "_grow_whole", lambda *args: whole.append(None) or grow_whole(*args))
    return seen, whole


@pytest.mark.parametrize("extra", [
    {"subsample": 0.3, "sampling_method": "gradient_based"},
    {"subsample": 0.3, "sampling_method": "gradient_based", "eta": 0.1, "grow_policy": "lossguide", "max_leaves": 16},
    {"subsample": 0.3},
    {"subsample": 0.25, "sampling_method": "gradient_based", "objective": "multi:softprob", "num_class": 3},
], ids=["gradient-based", "lossguide", "uniform", "multiclass"])
@pytest.mark.parametrize("room", ["room", "no-room"])
def test_a_pass_gathers_the_next_trees_likely_rows_and_the_model_is_the_same(extra, room, tmp_path, monkeypatch):
    """The pass that finds every row's leaf gathers the rows the next tree will likely draw
    (PagedGrower, RowsAhead): every tree after an output's first grows from them and the rows
    the guess missed, gathered after them; where the misses outnumber the room, the sample is
    gathered whole. Either way the model is the in-core one, byte for byte."""
    from dgboost.tree import grower as grower_module

    X, y = _data(2)
    if extra.get("objective") == "multi:softprob":
        y = (np.nan_to_num(X[:, 0]) > 0.5).astype(np.float32) + (np.nan_to_num(X[:, 3]) > 0)
    if room == "no-room":
        monkeypatch.setattr(grower_module, "ahead_room", lambda guessed: guessed * 0)
    params = {"objective": "binary:logistic", "max_depth": 5, **extra}
    in_core = dgboost.train(params, X, y, num_boost_round=8, verbose_eval=False)
    seen, whole = _count_ahead(monkeypatch)
    paged = dgboost.train({**params, "max_device_matrix_bytes": 12000}, X, y, num_boost_round=8,
                          verbose_eval=False)
    assert _bytes(paged, tmp_path / "paged.json") == _bytes(in_core, tmp_path / "in_core.json")
    n_outputs = extra.get("num_class", 1)
    first = 1 if "sampling_method" not in extra else n_outputs  # uniform draws are guessed from the first
    assert len(seen) == 8 * n_outputs - first
    missed = [m for _, _, m, _ in seen]
    over = sum(m > room for _, _, m, room in seen)  # trees grown again from the sample gathered whole
    assert len(whole) == first + over
    if "sampling_method" not in extra:  # uniform draws are known ahead: nothing missed
        assert missed == [0] * len(seen)
    elif room == "no-room":
        assert over > 0
    else:
        assert over == 0 and sum(missed) > 0


def test_mask_indices_refuses_a_wrong_count():
    from dgboost.kernels import cpu

    mask = np.array([True, False, True, True])
    np.testing.assert_array_equal(cpu.mask_indices(mask, 3), [0, 2, 3])
    with pytest.raises(ValueError, match="3 true entries, not 2"):
        cpu.mask_indices(mask, 2)
    np.testing.assert_array_equal(cpu.mask_indices(mask, 5, fill=9), [0, 2, 3, 9, 9])  # a count wanted
    np.testing.assert_array_equal(cpu.mask_indices(mask, 2, fill=9), [0, 2])


@pytest.mark.gpu
def test_gpu_pass_gathers_the_next_trees_likely_rows_and_mask_indices_twin(tmp_path, monkeypatch):
    """On a GPU the pass gathers the next tree's likely rows from the device buffers (pinned and
    on disk), the misses from the pages; the trees grown from them replay from a CUDA graph
    (or not, with dgboost.cuda-graphs False), and the model is the in-core one; cuda.mask_indices
    writes what its twin does without reading the count."""
    cupy = pytest.importorskip("cupy")
    import dask

    from dgboost import replay
    from dgboost.kernels import cpu, cuda

    mask = np.random.default_rng(3).random(100_003) < 0.3
    np.testing.assert_array_equal(cupy.asnumpy(cuda.mask_indices(cupy.asarray(mask), int(mask.sum()))),
                                  cpu.mask_indices(mask, int(mask.sum())))
    assert cuda.mask_indices(cupy.zeros(7, bool), 0).size == 0
    for count in (10, int(mask.sum()) + 5):
        np.testing.assert_array_equal(cupy.asnumpy(cuda.mask_indices(cupy.asarray(mask), count, fill=-1)),
                                      cpu.mask_indices(mask, count, fill=-1))
    X, y = _data(4, n_rows=60_000, n_features=12)
    params = {"max_depth": 6, "objective": "binary:logistic", "subsample": 0.3, "sampling_method": "gradient_based",
              "eta": 0.1, "device": "cuda"}
    in_core = dgboost.train(params, X, y, num_boost_round=8)
    for host_memory, graphs in (("pinned", True), ("disk", True), ("pinned", False)):
        seen, whole = _count_ahead(monkeypatch)
        before = {part: replay.counts(part) for part in ("tree", "draw")}
        with dask.config.set({"dgboost.host-page-bytes": 0 if host_memory == "disk" else None,
                              "dgboost.spill-directory": str(tmp_path / "spill"), "dgboost.cuda-graphs": graphs}):
            paged = dgboost.train({**params, "max_device_matrix_bytes": 300_000}, X, y, num_boost_round=8)
        assert _bytes(paged, tmp_path / "paged.json") == _bytes(in_core, tmp_path / "in_core.json")
        assert len(seen) == 7 and len(whole) == 1 and sum(m for _, _, m, _ in seen) > 0
        # The trees grown from the page (from the second tree on) and the draws (from the first):
        # each part's first run as calls, its second captured and replayed, as is each after
        ran = {part: tuple(now - then for now, then in zip(replay.counts(part), was)) for part, was in before.items()}
        assert ran == ({"tree": (1, 6), "draw": (1, 7)} if graphs else {"tree": (0, 0), "draw": (0, 0)})
    # Three classes: every output's draws replay as one part, each output's guess of its next tree
    # kept apart from the others' draws (a guess written over would miss more than the room, and
    # the tree would be grown again whole)
    y = (np.nan_to_num(X[:, 0]) > 0.5).astype(np.float32) + (np.nan_to_num(X[:, 3]) > 0)
    params = {**params, "objective": "multi:softprob", "num_class": 3}
    in_core = dgboost.train(params, X, y, num_boost_round=6)
    seen, whole = _count_ahead(monkeypatch)
    before = {part: replay.counts(part) for part in ("tree", "draw")}
    paged = dgboost.train({**params, "max_device_matrix_bytes": 300_000}, X, y, num_boost_round=6)
    assert _bytes(paged, tmp_path / "paged.json") == _bytes(in_core, tmp_path / "in_core.json")
    assert len(seen) == 15 and len(whole) == 3  # each output's first tree has no guess
    assert all(missed <= room for _, _, missed, room in seen)
    ran = {part: tuple(now - then for now, then in zip(replay.counts(part), was)) for part, was in before.items()}
    assert ran == {"tree": (1, 14), "draw": (1, 17)}
