"""Cut points: exact for few distinct values, weighted quantiles, partition-invariant sample."""

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from dgboost.data import sketch, sparse
from dgboost.data.sketch import Sample, compute_cuts, draw_sample


def _sample(values, weights=None):
    values = np.asarray(values, dtype=np.float32).reshape(len(values), -1)
    weights = np.ones(len(values), np.float32) if weights is None else np.asarray(weights, np.float32)
    return Sample(np.arange(len(values)), values, weights)


def _bins(cuts, feature, x):
    lo, hi = cuts.offsets[feature], cuts.offsets[feature + 1]
    return np.searchsorted(cuts.values[lo:hi], np.asarray(x, np.float32), side="right")


def test_few_distinct_values_get_one_bin_each():
    cuts = compute_cuts(_sample([3.0, 1.0, 2.0, 1.0, 3.0]), max_bin=256)
    np.testing.assert_array_equal(cuts.values, [2.0, 3.0])
    np.testing.assert_array_equal(_bins(cuts, 0, [1.0, 2.0, 3.0]), [0, 1, 2])
    assert cuts.n_bins.tolist() == [3]


def test_missing_only_and_constant_features_have_one_bin():
    cuts = compute_cuts(_sample(np.array([[np.nan, 5.0], [np.nan, 5.0]])), max_bin=256)
    assert cuts.n_bins.tolist() == [1, 1]
    assert cuts.bin_offsets.tolist() == [0, 1, 2]


def test_value_bins_leave_one_symbol_for_missing():
    values = np.arange(1000, dtype=np.float32)
    cuts = compute_cuts(_sample(values), max_bin=16)
    assert cuts.n_bins[0] == 15
    # Unweighted uniform values: every bin holds about 1000 / 15 of them.
    counts = np.bincount(_bins(cuts, 0, values), minlength=15)
    assert counts.min() >= 60 and counts.max() <= 70


def test_weights_move_the_quantiles():
    values = np.arange(100, dtype=np.float32)
    weights = np.where(values < 50, 9.0, 1.0)  # 90% of the weight below 50
    cuts = compute_cuts(_sample(values, weights), max_bin=11)  # 10 value bins
    assert np.sum(cuts.values < 50) >= 8


def test_threshold_of_last_bin_sends_every_value_left():
    cuts = compute_cuts(_sample([1.0, 2.0, 3.0]), max_bin=256)
    thresholds = cuts.threshold(np.array([0, 0]), np.array([0, 2]))
    assert thresholds[0] == 2.0 and thresholds[1] == sketch.ALL_VALUES_LEFT


@settings(max_examples=60, deadline=None)
@given(arrays(np.float32, st.integers(1, 300), elements=st.floats(-1e6, 1e6, width=32)),
       st.integers(2, 64))
def test_bins_round_trip(values, max_bin):
    """Every value falls in the bin whose bounds contain it, bins are ordered like values."""
    cuts = compute_cuts(_sample(values), max_bin)
    bins = _bins(cuts, 0, values)
    assert bins.min() >= 0 and bins.max() < cuts.n_bins[0] <= max_bin - 1
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(bins[order]) >= 0)
    inner = cuts.values
    for value, b in zip(values, bins):
        assert (b == 0 or inner[b - 1] <= value) and (b == len(inner) or value < inner[b])
    if len(np.unique(values)) <= max_bin - 1:  # exact: each distinct value alone in its bin
        assert len(np.unique(bins)) == len(np.unique(values))


def test_sample_does_not_depend_on_partitioning(monkeypatch):
    monkeypatch.setattr(sketch, "SKETCH_SAMPLE_ROWS", 500)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5000, 3)).astype(np.float32)
    whole = draw_sample(X, None, np.arange(5000), 5000, seed=7)
    assert 350 < len(whole.global_index) < 650
    pieces = [(0, 1234), (1234, 1300), (1300, 5000)]
    parts = [draw_sample(X[a:b], None, np.arange(a, b), 5000, seed=7) for a, b in pieces]
    merged = Sample.merge(parts[::-1])  # rank order does not matter either
    np.testing.assert_array_equal(merged.global_index, whole.global_index)
    np.testing.assert_array_equal(merged.values, whole.values)
    other_seed = draw_sample(X, None, np.arange(5000), 5000, seed=8)
    assert not np.array_equal(other_seed.global_index, whole.global_index)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 40), st.integers(1, 5), st.integers(0, 2**40), st.booleans())
def test_a_sample_travels_as_bytes_bit_for_bit(m, n_features, seed, as_csr):
    """One collective carries a rank's sample rows: index, weight and values (NaN too, or a
    CSR matrix's entries) come back the same."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((m, n_features)).astype(np.float32)
    values[rng.random(values.shape) < 0.3] = np.nan
    if as_csr:
        values = sparse.from_dense(values)
    sample = Sample(np.sort(rng.choice(2**40, m, replace=False)), values, rng.random(m).astype(np.float32))
    packed = sample.to_bytes()
    assert packed.dtype == np.uint8 and packed.ndim == 1
    back = Sample.from_bytes(packed, n_features)
    assert back.is_sparse == as_csr
    parts = (lambda s: (s.global_index, s.weights) + ((s.values.indptr, s.values.indices, s.values.data)
                                                      if as_csr else (s.values,)))
    for got, expected in zip(parts(back), parts(sample)):
        assert got.shape == expected.shape
        assert got.astype(expected.dtype).tobytes() == expected.tobytes()


def test_cuts_do_not_depend_on_how_many_features_are_sorted_at_once(monkeypatch):
    rng = np.random.default_rng(5)
    values = np.round(rng.standard_normal((900, 7)), 1)
    values[rng.random(values.shape) < 0.2] = np.nan
    weights = rng.gamma(1.0, 1.0, 900)
    whole = compute_cuts(_sample(values, weights), max_bin=8)
    monkeypatch.setattr(sketch, "_SORT_CELLS", 1000)  # one feature at a time
    chunked = compute_cuts(_sample(values, weights), max_bin=8)
    np.testing.assert_array_equal(chunked.offsets, whole.offsets)
    np.testing.assert_array_equal(chunked.values, whole.values)
    assert whole.n_bins.max() == 7  # the quantile path ran, not only the exact one
