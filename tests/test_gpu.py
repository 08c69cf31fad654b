"""The same engine on a CUDA GPU through cupy: kernels equal their NumPy twins exactly,
models equal the CPU's. Skipped where no GPU is found (marker ``gpu``)."""

import numpy as np
import pytest

import dgboost
from dgboost import kernels
from dgboost.datasets import make_higgs_like
from dgboost.ellpack import build_ellpack
from dgboost.sketch import Sample, compute_cuts

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


def _matrix_inputs(n_rows, n_features, max_bin, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 0] = np.nan  # an all-missing column
    if n_features > 1:
        X[:, 1] = 3.0  # a single-bin column
    cuts = compute_cuts(Sample(np.arange(n_rows), X, np.ones(n_rows, np.float32)), max_bin)
    return X, cuts, rng


# Awkward sizes: one row, rows not a multiple of a block, 28 and 500 features, 2 to 256 bins.
CASES = [(1, 28, 256), (1000, 28, 256), (777, 500, 64), (3000, 5, 2), (4099, 28, 256)]


@pytest.mark.parametrize("n_rows, n_features, max_bin", CASES)
def test_kernels_equal_their_numpy_twins(n_rows, n_features, max_bin):
    X, cuts, rng = _matrix_inputs(n_rows, n_features, max_bin, n_rows)
    host = build_ellpack(X, cuts)
    device = build_ellpack(cp.asarray(X), cuts)
    np.testing.assert_array_equal(device.packed.get(), host.packed)
    np.testing.assert_array_equal(device.unpack().get(), host.unpack())

    layout = host.layout
    gpair = rng.integers(-2**40, 2**40, size=(n_rows, 2))
    gpair[:, 1] = np.abs(gpair[:, 1])
    slot = rng.integers(-1, 4, size=n_rows).astype(np.int32)
    args = (layout.bits, layout.cells_per_word, layout.n_features, layout.missing_symbol)
    hist = kernels.build_histograms(host.packed, *args, host.bin_offsets, gpair, slot, 4)
    hist_gpu = kernels.build_histograms(device.packed, *args, device.bin_offsets, cp.asarray(gpair),
                                        cp.asarray(slot), 4)
    np.testing.assert_array_equal(hist_gpu.get(), hist)

    n_bins = np.diff(host.bin_offsets)
    feature_of_bin = np.repeat(np.arange(n_features), n_bins).astype(np.int32)
    node_sums = hist.sum(axis=1) + rng.integers(0, 2**30, size=(4, 2))  # some missing mass
    active = np.array([True, True, False, True])
    scales = np.array([2.0**20, 2.0**21])
    rules = kernels.Regularisation(1.0, 0.0, 1.0, 0.0, 0.0)
    table = kernels.evaluate_splits(hist, node_sums, active, feature_of_bin, host.bin_offsets, scales, rules)
    table_gpu = kernels.evaluate_splits(cp.asarray(hist), cp.asarray(node_sums), cp.asarray(active),
                                        cp.asarray(feature_of_bin), device.bin_offsets, cp.asarray(scales), rules)
    for name, value in table.items():
        np.testing.assert_array_equal(table_gpu[name].get(), value, err_msg=name)

    positions = rng.integers(1, 3, size=n_rows).astype(np.int32)
    split = (np.array([2, 3], np.int32), np.array([0, 1], np.int32), np.array([True, False]),
             np.array([3, 5], np.int32))
    moved = kernels.update_positions(host.packed, layout.bits, layout.cells_per_word,
                                     layout.missing_symbol, positions, 1, *split)
    moved_gpu = kernels.update_positions(device.packed, layout.bits, layout.cells_per_word,
                                         layout.missing_symbol, cp.asarray(positions), 1,
                                         *(cp.asarray(a) for a in split))
    np.testing.assert_array_equal(moved_gpu.get(), moved)


def test_squarederror_model_file_is_identical_to_the_cpus(tmp_path):
    X, y = make_higgs_like(20_000, seed=0, task="regression")
    X_valid, y_valid = make_higgs_like(5_000, seed=1, task="regression")
    params = {"max_depth": 6, "eta": 0.1, "subsample": 0.8, "eval_metric": ["rmse", "mae"]}
    cpu = dgboost.train(params, X, y, num_boost_round=30, evals=[(X_valid, y_valid, "valid")],
                        early_stopping_rounds=5)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=30,
                        evals=[(cp.asarray(X_valid), cp.asarray(y_valid), "valid")], early_stopping_rounds=5)
    cpu.save_model(tmp_path / "cpu.json")
    gpu.save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()
    assert gpu.evals_result() == cpu.evals_result()
    # numpy data with device="cuda" is copied to the GPU and trains the same model.
    moved = dgboost.train({**params, "device": "cuda"}, X, y, num_boost_round=30,
                          evals=[(X_valid, y_valid, "valid")], early_stopping_rounds=5)
    moved.save_model(tmp_path / "moved.json")
    assert (tmp_path / "moved.json").read_bytes() == (tmp_path / "cpu.json").read_bytes()


def test_logistic_predictions_within_1e6_of_the_cpus():
    X, y = make_higgs_like(20_000, seed=0)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1}
    cpu = dgboost.train(params, X, y, num_boost_round=30)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=30)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), atol=1e-6, rtol=0)


def test_predictions_come_back_in_the_inputs_family():
    X, y = make_higgs_like(2_000, seed=0)
    booster = dgboost.train({"objective": "binary:logistic", "device": "cuda"}, X, y, num_boost_round=5)
    on_gpu = booster.predict(cp.asarray(X))
    on_cpu = booster.predict(X)
    assert isinstance(on_gpu, cp.ndarray) and isinstance(on_cpu, np.ndarray)
    # Margins are the same float32 sums; the sigmoid's exp may differ by an ulp.
    np.testing.assert_array_equal(booster.predict(cp.asarray(X), output_margin=True).get(),
                                  booster.predict(X, output_margin=True))
    np.testing.assert_allclose(on_gpu.get(), on_cpu, atol=1e-6, rtol=0)


@pytest.mark.parametrize("objective, extra", [
    ("multi:softprob", {"num_class": 4}), ("count:poisson", {}), ("reg:pseudohubererror", {}),
])
def test_other_objectives_agree_with_the_cpu(objective, extra):
    X, y = make_higgs_like(10_000, seed=0, task="multiclass")
    if objective == "count:poisson":
        y = np.floor(y * 1.5)
    params = {"objective": objective, "max_depth": 5, **extra}
    cpu = dgboost.train(params, X, y, num_boost_round=10)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=10)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), atol=1e-5, rtol=1e-5)
