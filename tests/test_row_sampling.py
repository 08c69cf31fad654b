"""Row sampling (subsample with sampling_method uniform, gradient_based, and GOSS): the rows
drawn alone are read, with the model zeroed pairs give; gradient-based sampling's threshold is
exact and its pairs unbiased; GOSS keeps the largest; accuracy; bad input; the radix step's
GPU twin and the same model on the GPU."""

import numpy as np
import pytest

import dgboost
from dgboost._hashing import tree_key
from dgboost.collective import LocalCommunicator
from dgboost.data.inputs import RowSpans
from dgboost.kernels import bucket_counts, cpu
from dgboost.params import TrainParams
from dgboost.tree.sampling import RowSampler


def _data(rng, n_rows=4000, n_features=6):
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0] * X[:, 1] + np.sin(X[:, 2]) - X[:, 3]) + 0.2 * rng.standard_normal(n_rows)
    return X, y.astype(np.float32)


def _sampler(n_rows, **params):
    return RowSampler(TrainParams.from_dict(params), n_rows, 1, RowSpans.contiguous(0, n_rows), LocalCommunicator())


def test_a_tree_index_given_keys_the_draw_as_the_trees_key_does():
    """sample_rows given the stream's base and the tree's index (as a GPU round holds it on the
    device) draws what it draws given the tree's key: stream_key is tree_key of stream_base."""
    from dgboost._hashing import STREAM_ROW_SUBSAMPLE, stream_base, stream_key

    rng = np.random.default_rng(3)
    gpair = np.stack([rng.standard_normal(5000), rng.uniform(0.1, 0.3, 5000)], axis=1).astype(np.float32)
    index = np.arange(5000, dtype=np.int64) * 7
    assert stream_key(11, STREAM_ROW_SUBSAMPLE, 23) == tree_key(stream_base(11, STREAM_ROW_SUBSAMPLE), 23)
    base = stream_base(11, STREAM_ROW_SUBSAMPLE)
    by_key = cpu.sample_rows(gpair, index, stream_key(11, STREAM_ROW_SUBSAMPLE, 23), cpu.UNIFORM, None, None, None,
                             0.4, 1.0)
    by_index = cpu.sample_rows(gpair, index, base, cpu.UNIFORM, None, None, None, 0.4, 1.0,
                               tree_at=np.array([23], dtype=np.int64))
    other = cpu.sample_rows(gpair, index, base, cpu.UNIFORM, None, None, None, 0.4, 1.0,
                            tree_at=np.array([24], dtype=np.int64))
    np.testing.assert_array_equal(by_index[1], by_key[1])
    np.testing.assert_array_equal(by_index[0], by_key[0])
    assert not np.array_equal(other[1], by_key[1])


def test_bucket_counts_by_hand():
    keys = np.array([0, 1, 1, 2048 + 5, 2048 * 3, 2048 + 7, 2**20], np.int64)
    counts, sums = bucket_counts(keys, 11, 9, np.zeros(3, np.int64))  # bits [11, 20) of the keys below 2**20
    assert counts[0] == 3 and counts[1] == 2 and counts[3] == 1 and counts.sum() == 6 and len(counts) == 512
    assert sums[0] == 2 and sums[1] == 2 * 2048 + 12 and sums[3] == 3 * 2048
    counts, sums = bucket_counts(keys, 0, 11, np.array([1, 0, 0]))  # within bucket 1: by the low 11 bits
    assert counts[5] == 1 and counts[7] == 1 and counts.sum() == 2 and sums[7] == 2048 + 7


def test_the_rows_drawn_alone_give_the_model_zeroed_pairs_give(monkeypatch, tmp_path):
    X, y = _data(np.random.default_rng(0))
    params = {"max_depth": 5, "subsample": 0.3}
    compacted = dgboost.train(params, X, y, num_boost_round=5)
    draw = RowSampler.draw
    monkeypatch.setattr(RowSampler, "draw", lambda self, gpair, tree: (draw(self, gpair, tree)[0], None))
    zeroed = dgboost.train(params, X, y, num_boost_round=5)  # every row read, the left-out pairs zero
    compacted.save_model(tmp_path / "a.json")
    zeroed.save_model(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


@pytest.mark.parametrize("rate", [0.05, 0.2, 0.5, 0.9])
def test_gradient_based_threshold_is_exact(rate):
    rng = np.random.default_rng(int(rate * 100))
    n_rows = 50_000
    gpair = np.stack([rng.standard_normal(n_rows) * rng.exponential(1, n_rows),
                      rng.uniform(0.01, 0.25, n_rows)], axis=1).astype(np.float32)
    gpair[:100] = 0  # rows with nothing to give are never drawn
    sampler = _sampler(n_rows, subsample=rate, sampling_method="gradient_based")
    from dgboost.kernels import cpu

    keys = cpu.sample_keys(gpair, cpu.MVS, cpu.sample_magnitude_max(gpair, cpu.MVS))
    mu = int(sampler._mvs_threshold(keys)[0])
    from fractions import Fraction

    def expected(m):  # exactly
        return sum(int(k) if k < m else m for k in keys.tolist()) / Fraction(m)

    assert expected(mu) >= Fraction(rate) * n_rows > expected(mu + 1)
    scaled, drawn = sampler.draw(gpair, 0)  # a mask of the rows drawn
    assert drawn.dtype == bool and abs(drawn.sum() - rate * n_rows) < 4 * np.sqrt(rate * n_rows)
    assert not drawn[:100].any()  # rows with nothing to give are never drawn
    np.testing.assert_array_equal(scaled.any(axis=1), drawn)


@pytest.mark.parametrize("rate", [0.2, 0.05])
def test_gradient_based_draws_its_share_where_magnitudes_are_alike(rate):
    """Logistic loss's first round: two magnitudes, near each other. The threshold is then about
    the largest key / subsample, which must still be within the keys' range (it was not: half
    the rows were drawn at subsample 0.2)."""
    rng = np.random.default_rng(3)
    n_rows = 200_000
    label = rng.random(n_rows) < 0.53
    gpair = np.stack([0.53 - label, np.full(n_rows, 0.53 * 0.47)], axis=1).astype(np.float32)
    _, drawn = _sampler(n_rows, subsample=rate, sampling_method="gradient_based").draw(gpair, 0)
    assert abs(drawn.sum() - rate * n_rows) < 4 * np.sqrt(rate * n_rows)


def test_gradient_based_pairs_are_unbiased():
    rng = np.random.default_rng(1)
    n_rows = 2000
    gpair = np.stack([rng.standard_normal(n_rows), rng.uniform(0.05, 0.25, n_rows)], axis=1).astype(np.float32)
    sampler = _sampler(n_rows, subsample=0.2, sampling_method="gradient_based")
    totals = np.array([sampler.draw(gpair, tree)[0].astype(np.float64).sum(axis=0) for tree in range(400)])
    spread = totals.std(axis=0) / np.sqrt(len(totals))
    assert np.all(np.abs(totals.mean(axis=0) - gpair.sum(axis=0)) < 4 * spread)


def test_goss_keeps_the_largest_and_scales_the_rest():
    rng = np.random.default_rng(2)
    n_rows = 10_000
    gpair = np.stack([rng.standard_normal(n_rows), rng.uniform(0.05, 0.25, n_rows)], axis=1).astype(np.float32)
    sampler = _sampler(n_rows, sampling_method="goss", top_rate=0.2, other_rate=0.1, eta=1.0)
    scaled, drawn = sampler.draw(gpair, tree_index=5)
    drawn = np.flatnonzero(drawn)
    magnitude = np.abs(gpair[:, 0].astype(np.float64) * gpair[:, 1])
    top = np.argsort(-magnitude)[:2000]
    assert np.isin(top, drawn).all()
    others = np.setdiff1d(drawn, top)
    assert abs(len(others) - 1000) < 4 * np.sqrt(1000)
    np.testing.assert_array_equal(scaled[top], gpair[top])
    np.testing.assert_allclose(scaled[others], gpair[others] * 8.0, rtol=1e-7)  # (1 - 0.2) / 0.1
    warm = _sampler(n_rows, sampling_method="goss", eta=0.1)  # as LightGBM: no GOSS in the first 1/eta rounds
    assert warm.draw(gpair, tree_index=9)[1] is None and warm.draw(gpair, tree_index=10)[1] is not None


def test_sampled_models_stay_accurate():
    from dgboost.datasets import make_higgs_like
    from sklearn.metrics import roc_auc_score

    X, y = make_higgs_like(60_000, seed=0)
    X_test, y_test = make_higgs_like(20_000, seed=1)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1}
    auc = {}
    for name, extra in [("all", {}), ("gradient_based", {"subsample": 0.2, "sampling_method": "gradient_based"}),
                        ("goss", {"sampling_method": "goss"})]:
        booster = dgboost.train({**params, **extra}, X, y, num_boost_round=60)
        auc[name] = roc_auc_score(y_test, booster.predict(X_test))
    assert auc["gradient_based"] > auc["all"] - 0.003, auc  # the bound, at subsample 0.2
    assert auc["goss"] > auc["all"] - 0.003, auc


@pytest.mark.parametrize("params, message", [
    ({"sampling_method": "goss", "subsample": 0.5}, "with sampling_method='goss'"),
    ({"sampling_method": "goss", "top_rate": 0.6, "other_rate": 0.5}, "add up to more than 1"),
    ({"other_rate": 0.0}, r"other_rate=0.0 is out of range"),
    ({"sampling_method": "mvs"}, "sampling_method='mvs' is not one of"),
])
def test_bad_sampling_parameters(params, message):
    X, y = _data(np.random.default_rng(3), 100)
    with pytest.raises(ValueError, match=message):
        dgboost.train(params, X, y)


@pytest.mark.gpu
def test_bucket_counts_equal_their_twin():
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cpu, cuda

    keys = np.random.default_rng(4).integers(0, 2**31, 300_000)
    keys[:1000] = keys[0]  # a crowded bucket
    for shift, bits, prefix in ((20, 11, 0), (9, 11, int(keys[0] >> 20)), (0, 9, int(keys[0] >> 9)), (0, 9, 5)):
        state = np.array([prefix, 0, 0])
        for host, device in zip(cpu.bucket_counts(keys, shift, bits, state),
                                cuda.bucket_counts(cp.asarray(keys), shift, bits, cp.asarray(state))):
            np.testing.assert_array_equal(device.get(), host)


@pytest.mark.gpu
@pytest.mark.parametrize("n_keys, rule", [
    (300_000, (0, 1, 0, 3 * 300_000, 10)),  # subsample 0.3: (above t + below) 10 >= 3 n t
    (2**32 - 1, (0, 1, (2**91 + 12345) >> 62, (2**91 + 12345) & (2**62 - 1), 2**60)),  # 128-bit products
    (300_000, (1, 0, 0, 60_000, 1)),  # GOSS's count
    (5, (0, 1, 0, 10**6, 1)),  # nothing holds: least - 1
])
def test_radix_search_steps_equal_their_twin(n_keys, rule):
    """The search's steps on the device (choose_bucket, 128-bit where its products need it)
    end where the twin's Python integers end, from the same all-reduced bucket totals."""
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cpu, cuda
    from dgboost.tree.sampling import _RADIX_STEPS

    rng = np.random.default_rng(n_keys % 1000)
    keys = rng.integers(0, 2**31, min(n_keys, 300_000))
    host_state, device_state = np.zeros(3, np.int64), cp.zeros(3, np.int64)
    for shift, bits in _RADIX_STEPS:
        totals = np.concatenate(cpu.bucket_counts(keys, shift, bits, host_state))
        if n_keys > len(keys):  # as if every key stood for many: counts past 2**31, sums past 2**62
            totals[:1 << bits] *= n_keys // len(keys)
            totals[1 << bits:] = np.minimum(totals[1 << bits:] * (n_keys // len(keys)), 2**62 // (1 << bits))
        cpu.choose_bucket(totals, host_state, shift, bits, rule)
        cuda.choose_bucket(cp.asarray(totals), device_state, shift, bits, rule)
        np.testing.assert_array_equal(device_state.get(), host_state)


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [{"subsample": 0.3, "sampling_method": "gradient_based"},
                                   {"sampling_method": "goss", "eta": 0.5}, {"subsample": 0.3}])
def test_sampled_model_file_is_identical_to_the_cpus(extra, tmp_path):
    cp = pytest.importorskip("cupy")
    X, y = _data(np.random.default_rng(5), 30_000)
    params = {"max_depth": 7, "eta": 0.3, **extra}
    dgboost.train(params, X, y, num_boost_round=12).save_model(tmp_path / "cpu.json")
    dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y),
                  num_boost_round=12).save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()


def _array_draw(gpair, index, key, kind, keys, threshold, largest, rate, weight):
    """The draw as NumPy array expressions (the compiled loops' reference): uniform draws of the
    global indices, then MVS's probabilities, GOSS's top, float64 scaling rounded once."""
    from dgboost._hashing import uniform

    draws = uniform(index, key)
    if kind == cpu.UNIFORM:
        keep = draws < rate
        return np.where(keep[:, None], gpair, np.float32(0)), keep
    if kind == cpu.MVS:
        probability = np.where(largest > 0, np.minimum(1.0, keys / np.maximum(threshold, 1).astype(np.float64)), 1.0)
        keep = draws < probability
        scaled = (gpair.astype(np.float64) / np.where(keep, probability, 1.0)[:, None]).astype(np.float32)
        return np.where(keep[:, None], scaled, np.float32(0)), keep
    top = keys >= threshold
    keep = top | (draws < rate)
    scaled = (gpair.astype(np.float64) * np.where(top, 1.0, weight)[:, None]).astype(np.float32)
    return np.where(keep[:, None], scaled, np.float32(0)), keep


def _array_magnitudes(gpair, kind):
    g, h = gpair[:, 0].astype(np.float64), gpair[:, 1].astype(np.float64)
    return np.sqrt(g * g + 0.1 * (h * h)) if kind == cpu.MVS else np.abs(g * h)


@pytest.mark.parametrize("kind", ["mvs", "goss", "uniform", "zero"])
@pytest.mark.parametrize("threads", [1, 3])
def test_compiled_draws_equal_the_array_formula(kind, threads):
    """cpu.sample_magnitude_max, sample_keys and sample_rows (compiled loops over runs of rows)
    give the NumPy array expressions' values, bit for bit, on one thread or several; the draws
    alone are the draws of the pairs."""
    from dgboost.kernels import loops

    rng = np.random.default_rng(17)
    n_rows = 30_011
    gpair = np.stack([rng.standard_normal(n_rows) * rng.exponential(1, n_rows),
                      rng.uniform(0.01, 0.25, n_rows)], axis=1).astype(np.float32)
    gpair[::97] = 0
    gpair[5::101, 0] = -0.0
    if kind == "zero":
        gpair[:] = 0
    index = np.arange(7, n_rows + 7, dtype=np.int64) * 5
    code = {"mvs": cpu.MVS, "goss": cpu.GOSS, "uniform": cpu.UNIFORM, "zero": cpu.MVS}[kind]
    key = tree_key(2024, 9)
    with loops.using_threads(threads):
        arguments = (None, None, None)
        if code != cpu.UNIFORM:
            largest = cpu.sample_magnitude_max(gpair, code)
            np.testing.assert_array_equal(largest, _array_magnitudes(gpair, code).max(keepdims=True))
            keys = cpu.sample_keys(gpair, code, largest * 1.5)
            _, exponent = np.frexp(largest * 1.5)
            expected_keys = np.rint(_array_magnitudes(gpair, code) * np.ldexp(1.0, (31 - exponent).astype(np.int32)))
            np.testing.assert_array_equal(keys, expected_keys.astype(np.int64))
            assert keys.dtype == np.int64
            arguments = (keys, np.array([int(np.quantile(keys, 0.7))]), largest)
        pairs, drawn = cpu.sample_rows(gpair, index, key, code, *arguments, 0.3, 2.5)
        alone = cpu.sample_rows(None, index, key, code, *arguments, 0.3, 2.5)
    expected_pairs, expected_drawn = _array_draw(gpair, index, key, code, *arguments, 0.3, 2.5)
    assert pairs.dtype == np.float32 and drawn.dtype == bool and alone[0] is None
    np.testing.assert_array_equal(drawn, expected_drawn)
    np.testing.assert_array_equal(alone[1], expected_drawn)
    np.testing.assert_array_equal(pairs.view(np.uint32), expected_pairs.view(np.uint32))  # signs of zeros too
    assert 0 < drawn.sum() <= n_rows and (drawn.all() if kind == "zero" else not drawn.all())


def test_compiled_magnitudes_keep_a_nan_and_no_rows():
    gpair = np.array([[1.0, 0.2], [np.nan, 0.1], [3.0, 0.1]], dtype=np.float32)
    assert np.isnan(cpu.sample_magnitude_max(gpair, cpu.MVS)[0])
    assert cpu.sample_magnitude_max(np.zeros((0, 2), np.float32), cpu.GOSS).tolist() == [0.0]
    assert cpu.sample_rows(np.zeros((0, 2), np.float32), np.zeros(0, np.int64), 3, cpu.UNIFORM, None, None, None,
                           0.5, 1.0)[0].shape == (0, 2)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["mvs", "goss", "uniform", "zero"])
def test_sampling_kernels_equal_their_twins(kind):
    """The magnitudes' largest, the keys and the draw with its scaled pairs, bit for bit."""
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cpu, cuda

    rng = np.random.default_rng(7)
    n_rows = 100_003
    gpair = np.stack([rng.standard_normal(n_rows) * rng.exponential(1, n_rows),
                      rng.uniform(0.01, 0.25, n_rows)], axis=1).astype(np.float32)
    if kind == "zero":
        gpair[:] = 0  # nothing to draw by: every row
    index = np.arange(5, n_rows + 5, dtype=np.int64) * 3  # global indices need not be contiguous
    code = {"mvs": cpu.MVS, "goss": cpu.GOSS, "uniform": cpu.UNIFORM, "zero": cpu.MVS}[kind]
    arguments, device_arguments = (None, None, None), (None, None, None)
    if code != cpu.UNIFORM:
        largest = cpu.sample_magnitude_max(gpair, code)
        device_largest = cuda.sample_magnitude_max(cp.asarray(gpair), code)
        np.testing.assert_array_equal(device_largest.get(), largest)
        keys = cpu.sample_keys(gpair, code, largest)
        device_keys = cuda.sample_keys(cp.asarray(gpair), code, device_largest)
        np.testing.assert_array_equal(device_keys.get(), keys)
        threshold = np.array([int(np.quantile(keys, 0.8))])
        arguments, device_arguments = (keys, threshold, largest), (device_keys, cp.asarray(threshold), device_largest)
    expected = cpu.sample_rows(gpair, index, 12345, code, *arguments, 0.3, 2.5)
    got = cuda.sample_rows(cp.asarray(gpair), cp.asarray(index), 12345, code, *device_arguments, 0.3, 2.5)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g.get(), e)
    # Keyed by a tree index on the device (a replayed round's): the key of that tree.
    keyed = cpu.sample_rows(gpair, index, tree_key(999, 41), code, *arguments, 0.3, 2.5)
    got = cuda.sample_rows(cp.asarray(gpair), cp.asarray(index), 999, code, *device_arguments, 0.3, 2.5,
                           tree_at=cp.array([41], dtype=np.int64))
    for g, e in zip(got, keyed):
        np.testing.assert_array_equal(g.get(), e)
    assert 0 < expected[1].sum() <= n_rows and (expected[1].all() if kind == "zero" else not expected[1].all())


@pytest.mark.parametrize("method", ["uniform", "gradient_based", "goss"])
def test_the_guess_of_a_trees_sample_before_its_gradients(method):
    """RowSampler.likely: uniform draws are the tree's own; gradient-based ones are guessed from
    the output's last keys, raised by LIKELY_SLACK, and take nearly every row the tree draws when
    gradients change a little; nothing is guessed before a first draw, by a sampler that does
    not remember, for another tree than the next, or for GOSS."""
    from dgboost.tree.sampling import LIKELY_SLACK

    rng = np.random.default_rng(5)
    n_rows = 20_000
    sampler = _sampler(n_rows, **({"eta": 0.5} if method == "goss" else {"subsample": 0.25}), sampling_method=method)
    sampler.remembers = True
    gpair = np.stack([rng.standard_normal(n_rows), rng.uniform(0.1, 0.3, n_rows)], axis=1).astype(np.float32)
    assert sampler.likely(0) is None  # no draw yet
    sampler.draw(gpair, 2)  # GOSS's warm-up is 1 / eta = 2 rounds
    guess = sampler.likely(3)
    if method == "goss":
        assert guess is None
        return
    moved = gpair * np.float32(1.02) + np.float32(0.01) * rng.standard_normal(gpair.shape).astype(np.float32)
    _, drawn = sampler.draw(moved, 3)
    if method == "uniform":
        np.testing.assert_array_equal(guess, drawn)
        return
    assert guess.sum() <= n_rows * 0.25 * float(LIKELY_SLACK) * 1.05
    assert (drawn & ~guess).sum() <= drawn.sum() // 100  # rows the guess missed
    assert (guess & ~drawn).sum() > 0
    assert sampler.likely(5) is None  # guessed: tree 4 alone
    forgetful = _sampler(n_rows, subsample=0.25, sampling_method=method)
    forgetful.draw(gpair, 0)
    assert forgetful.likely(1) is None


def _draw_cases(kind):
    """(gpair, global index, sample_rows's arguments after the key) of a draw of ``kind``."""
    rng = np.random.default_rng(8)
    gpair = np.stack([rng.standard_normal(50_000), rng.uniform(0.1, 0.3, 50_000)], axis=1).astype(np.float32)
    keys = rng.integers(0, 2**20, 50_000)
    args = {"uniform": (cpu.UNIFORM, None, None, None, 0.3, 1.0),
            "mvs": (cpu.MVS, keys, np.array([2**19]), np.array([1.5]), 1.0, 1.0),
            "goss": (cpu.GOSS, keys, np.array([2**19 + 2**18]), np.array([1.5]), 0.2, 4.0)}[kind]
    return gpair, np.arange(50_000, dtype=np.int64) * 3, args


@pytest.mark.parametrize("kind", ["uniform", "mvs", "goss"])
def test_the_draws_alone_are_the_draws_of_the_pairs(kind):
    """sample_rows without pairs (RowSampler.likely's) draws the rows it draws with them."""
    gpair, index, args = _draw_cases(kind)
    _, drawn = cpu.sample_rows(gpair, index, 77, *args)
    alone, draws = cpu.sample_rows(None, index, 77, *args)
    assert alone is None and 0 < drawn.sum() < len(drawn)
    np.testing.assert_array_equal(draws, drawn)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["uniform", "mvs", "goss"])
def test_gpu_draws_alone_equal_their_twin(kind):
    """cuda.sample_rows without pairs writes its twin's draws, and with them its pairs."""
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cuda

    gpair, index, args = _draw_cases(kind)
    pairs, drawn = cpu.sample_rows(gpair, index, 77, *args)
    on_device = [None if a is None else cp.asarray(a) for a in args[1:4]]
    alone, draws = cuda.sample_rows(None, cp.asarray(index), 77, args[0], *on_device, *args[4:])
    assert alone is None
    np.testing.assert_array_equal(draws.get(), drawn)
    np.testing.assert_array_equal(cuda.sample_rows(cp.asarray(gpair), cp.asarray(index), 77, args[0], *on_device,
                                                   *args[4:])[0].get(), pairs)


@pytest.mark.parametrize("params, guessed", [({"subsample": 0.3}, True),
                                             ({"subsample": 0.3, "sampling_method": "gradient_based"}, True),
                                             ({"sampling_method": "goss"}, False), ({}, False)])
def test_trees_of_a_paged_grower_are_replayed_only_where_its_sampler_guesses(params, guessed):
    """replay.why_not_trees: a paged grower whose sampler never guesses (GOSS, every row) takes
    no graph (nor the device's lane); one that guesses is refused here only for the host."""
    import types

    from dgboost import replay
    from dgboost.tree.grower import PagedGrower

    comm = LocalCommunicator()
    grower = PagedGrower(types.SimpleNamespace(comm=comm), None, True, _sampler(100, **params))
    reason = replay.why_not_trees(np, grower, None, comm, (True, True))
    assert reason == ("on the host" if guessed else "not a paged grower of a row sample guessed ahead")
    if guessed:  # a rank of several that decides alone (a peer in core: tree/grower.py agree_on_pages)
        grower.together = False
        assert replay.why_not_trees(np, grower, None, comm, (True, True)) == \
            "a peer's rows are in core, or not gathered ahead"


@pytest.mark.parametrize("share", [0.0, 0.2, 1.0])
def test_rows_drawn_first_keep_each_side_in_order(share):
    """A sampled tree's starting ridx: the drawn rows ascending, then the others ascending, and
    the root's end (the drawn count); on a GPU the twin's, bit for bit."""
    mask = np.random.default_rng(2).random(10_007) < share
    ridx, root_end = cpu.rows_drawn_first(mask)
    assert ridx.dtype == np.int32 and root_end.dtype == np.int32 and root_end.tolist() == [mask.sum()]
    np.testing.assert_array_equal(ridx, np.concatenate([np.flatnonzero(mask), np.flatnonzero(~mask)]))
    empty, end = cpu.rows_drawn_first(np.zeros(0, bool))
    assert empty.shape == (0,) and end.tolist() == [0]


@pytest.mark.gpu
@pytest.mark.parametrize("share", [0.0, 0.2, 1.0])
def test_gpu_rows_drawn_first_equal_their_twin(share):
    cp = pytest.importorskip("cupy")
    from dgboost.kernels import cuda

    mask = np.random.default_rng(2).random(10_007) < share
    for got, expected in zip(cuda.rows_drawn_first(cp.asarray(mask)), cpu.rows_drawn_first(mask)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.get(), expected)
    assert cuda.rows_drawn_first(cp.zeros(0, bool))[1].get().tolist() == [0]
