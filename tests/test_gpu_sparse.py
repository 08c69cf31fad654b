"""Sparse input on a GPU: the CUDA kernels of sparse rows equal their CPU twins, and cupyx CSR
input trains the model of the dense array with NaN, on the device and on the host."""

import numpy as np
import pytest

import dgboost
from dgboost.data import sparse
from dgboost.data.ellpack import EllpackLayout, build_ellpack
from dgboost.data.sketch import Sample, compute_cuts
from dgboost.kernels import cpu, cuda
from dgboost.tree.predict import Forest
from test_kernels import grouped  # rows of each slot as ridx ranges

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")
cupyx_sparse = pytest.importorskip("cupyx.scipy.sparse")
sp = pytest.importorskip("scipy.sparse")


def _missing_heavy(n_rows, n_features, missing, seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n_rows, n_features)), 2).astype(np.float32)
    X[rng.random(X.shape) < missing] = np.nan
    X[: n_rows // 10, 0] = 0.0
    return X, rng


# Rows of few and of many entries; bins in shared memory and past it (2000 features of
# 256 bins); one row; no entry in a row.
CASES = [(1, 40, 256, 0.8), (3001, 40, 256, 0.8), (20_000, 300, 64, 0.95), (5_000, 2_000, 256, 0.99)]


@pytest.mark.parametrize("n_rows, n_features, max_bin, missing", CASES)
def test_sparse_kernels_equal_their_twins(n_rows, n_features, max_bin, missing):
    X, rng = _missing_heavy(n_rows, n_features, missing, n_rows)
    if n_rows > 1:
        X[1] = np.nan  # a row without entries
    cuts = compute_cuts(Sample(np.arange(n_rows), X, np.ones(n_rows, np.float32)), max_bin)
    host = build_ellpack(X, cuts)
    csr = sparse.from_dense(cp.asarray(X))
    for device in (build_ellpack(cp.asarray(X), cuts), build_ellpack(csr, cuts)):
        assert device.layout == host.layout and host.layout.is_sparse == (n_rows > 1)  # one row: one bit a cell
        np.testing.assert_array_equal(device.packed.get(), host.packed)
    assert cuda.most_present(cp.asarray(X)) == cpu.most_present(X)
    from dgboost.data import ellpack

    with pytest.MonkeyPatch.context() as patch:  # a host CSR matrix packed on the GPU, 1000 entries at a time
        patch.setattr(ellpack, "_CHUNK_ENTRIES", 1000)
        chunked = build_ellpack(sparse.from_dense(X), cuts, cp)
    np.testing.assert_array_equal(chunked.packed.get(), host.packed)
    dense = EllpackLayout.for_cuts(cuts)  # dense rows from the CSR matrix's entries
    arguments = (cuts.values, cuts.offsets.tolist(), cuts.bin_offsets.tolist(), dense.bits, dense.cells_per_word,
                 dense.n_words, dense.missing_symbol, False)
    np.testing.assert_array_equal(
        cuda.quantise_sparse(csr.data, csr.indices, csr.indptr, cp.asarray(cuts.values), *arguments[1:]).get(),
        cpu.quantise_and_pack(X, cuts.values, cuts.offsets.tolist(), *arguments[3:7]))

    if not host.layout.is_sparse:
        return
    layout, device = host.layout, build_ellpack(csr, cuts)
    gpair = rng.standard_normal((n_rows, 2)).astype(np.float32) * np.float32(1e3)
    gpair[:, 1] = np.abs(gpair[:, 1])
    scales = np.array([2.0**30, 2.0**27])
    slot = rng.choice([-1, 0, 1, 3], size=n_rows).astype(np.int32)
    ridx, seg_begin, seg_end = grouped(slot, 4)
    on = lambda arrays: tuple(cp.asarray(a) for a in arrays)  # noqa: E731
    histogram_arguments = (layout.bits, layout.cells_per_word, layout.row_stride, host.n_bins_total)
    expected = cpu.build_sparse_histograms(host.packed, *histogram_arguments, gpair, scales, ridx, seg_begin, seg_end)
    got = cuda.build_sparse_histograms(device.packed, *histogram_arguments, *on((gpair, scales, ridx, seg_begin,
                                                                                  seg_end)))
    np.testing.assert_array_equal(got.get(), expected)

    split = (rng.integers(0, n_features, 4).astype(np.int32), rng.integers(0, 8, 4).astype(np.int32),
             rng.random(4) < 0.5, np.array([4, -1, 6, 8], np.int32))
    expected = cpu.partition_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                                  seg_begin, seg_end, *split, feature_bins=cuts.bin_offsets)
    got = cuda.partition_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                              *on((ridx, seg_begin, seg_end) + split), feature_bins=device.bin_offsets)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.get(), e)
    node_arrays = (split[0][:3], split[1][:3], split[2][:3], np.array([1, -1, -1], np.int32))
    np.testing.assert_array_equal(
        cuda.route_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                        *on(node_arrays), 1, device.bin_offsets).get(),
        cpu.route_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, *node_arrays, 1,
                       cuts.bin_offsets))


def test_sparse_histograms_in_global_memory_equal_their_twin(monkeypatch):
    """Bins that do not fit a block's shared memory are summed in global memory."""
    monkeypatch.setattr(cuda, "_shared_budget", lambda device: 0)
    test_sparse_kernels_equal_their_twins(3001, 40, 256, 0.8)


@pytest.mark.parametrize("grow_policy", ["depthwise", "symmetric"])
def test_prediction_of_csr_rows_equals_its_twin(grow_policy):
    """Both prediction kernels (a walk; oblivious levels) on CSR rows: the CPU twin's margins,
    which are the dense rows' margins."""
    X, rng = _missing_heavy(4000, 50, 0.7, 3)
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(np.float32)
    booster = dgboost.train({"objective": "binary:logistic", "max_depth": 5, "grow_policy": grow_policy}, X, y,
                            num_boost_round=6)
    start = rng.standard_normal((len(X), 1)).astype(np.float32)

    def margins(module, rows, xp):
        forest = Forest.from_trees(booster.trees, booster.tree_outputs, xp)
        if grow_policy == "symmetric":
            levels = forest.oblivious
            return module.predict_oblivious(rows, levels.feature, levels.threshold, levels.default_left,
                                            levels.leaf_value, forest.outputs_device, levels.depth, xp.array(start))
        return module.predict_margins(rows, forest.left, forest.right, forest.feature, forest.threshold,
                                      forest.default_left, forest.value, forest.roots, forest.outputs_device,
                                      forest.depth, xp.array(start))

    rows = sparse.from_dense(X)
    expected = margins(cpu, rows, np)
    np.testing.assert_array_equal(expected, margins(cpu, X, np))
    np.testing.assert_array_equal(margins(cuda, sparse.to_device(rows, cp), cp).get(), expected)


@pytest.mark.parametrize("params", [
    {"objective": "reg:squarederror", "max_depth": 6, "subsample": 0.8},
    {"objective": "reg:squarederror", "grow_policy": "lossguide", "max_leaves": 31, "max_depth": 0},
], ids=["depthwise", "lossguide"])
def test_cupyx_csr_trains_the_model_of_the_dense_array_and_of_the_cpu(params, tmp_path):
    X, rng = _missing_heavy(20_000, 60, 0.85, 7)
    y = (np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1]) - np.isnan(X[:, 2]) + rng.standard_normal(20_000)
         ).astype(np.float32)
    host_csr = sp.csr_matrix(sparse.from_dense(X))
    gpu_params = {**params, "device": "cuda"}
    models = {
        "cpu dense": dgboost.train(params, X, y, num_boost_round=10),
        "cpu csr": dgboost.train(params, host_csr, y, num_boost_round=10),
        "gpu dense": dgboost.train(gpu_params, cp.asarray(X), cp.asarray(y), num_boost_round=10),
        "gpu csr": dgboost.train(gpu_params, cupyx_sparse.csr_matrix(host_csr), cp.asarray(y), num_boost_round=10),
        "scipy to gpu": dgboost.train(gpu_params, host_csr, y, num_boost_round=10),
    }
    files = {}
    for name, model in models.items():
        model.save_model(tmp_path / "model.json")
        files[name] = (tmp_path / "model.json").read_bytes()
    assert len(set(files.values())) == 1, {name: len(f) for name, f in files.items()}
    gpu = models["gpu csr"]
    on_device = gpu.predict(cupyx_sparse.csr_matrix(host_csr))
    assert isinstance(on_device, cp.ndarray)
    np.testing.assert_array_equal(on_device.get(), models["cpu dense"].predict(X))
    np.testing.assert_array_equal(gpu.predict(cupyx_sparse.csr_matrix(host_csr[:100]), pred_leaf=True).get(),
                                  models["cpu dense"].predict(X[:100], pred_leaf=True))


@pytest.mark.parametrize("constrained", [False, True])
def test_split_evaluation_of_many_few_bin_features_equals_its_twin(constrained):
    """A warp a feature (one-hot columns: one or two bins; one of 70 bins, past a warp's width)
    and a block a node to choose among them: the twin's split table, bit for bit."""
    from dgboost import kernels

    rng = np.random.default_rng(5)
    n_features, n_nodes = 3000, 5
    n_bins = rng.choice([1, 1, 2, 3], n_features)
    n_bins[17] = 70
    bin_offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    feature_of_bin = np.repeat(np.arange(n_features), n_bins).astype(np.int32)
    hist = np.stack([rng.integers(-2**20, 2**20, (n_nodes, bin_offsets[-1])),
                     rng.integers(0, 2**20, (n_nodes, bin_offsets[-1]))], axis=-1)
    node_sums = hist.sum(axis=1) // 50 + rng.integers(0, 2**24, size=(n_nodes, 2))  # missing mass
    active = np.array([True, True, False, True, True])
    scales = np.array([2.0**20, 2.0**21])
    extra = {}
    if constrained:
        extra = {"allowed": rng.random((n_nodes, n_features)) < 0.7,
                 "monotone": rng.integers(-1, 2, n_features).astype(np.int8),
                 "bounds": np.array([[-np.inf, np.inf], [-0.5, 0.5], [0.0, np.inf], [-1.0, 0.1], [-np.inf, 0.0]])}
    for rules in (kernels.Regularisation(1.0, 0.0, 1.0, 0.0, 0.0), kernels.Regularisation(0.5, 2.0, 0.0, 0.7, 0.1)):
        table = cpu.evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, **extra)
        table_gpu = cuda.evaluate_splits(cp.asarray(hist), cp.asarray(node_sums), cp.asarray(active),
                                         cp.asarray(feature_of_bin), cp.asarray(bin_offsets), cp.asarray(scales),
                                         rules, **{k: cp.asarray(v) for k, v in extra.items()})
        np.testing.assert_array_equal(table_gpu.get(), table, err_msg=str(rules))
        assert table[:, 0].sum() >= 2  # splits were found
