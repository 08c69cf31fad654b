"""The generated data sets: shapes, determinism, and the documented structure."""

import numpy as np
import pytest

from dgboost import datasets


@pytest.mark.parametrize("make, n_features", [
    (datasets.make_higgs_like, 28), (datasets.make_year_like, 90), (datasets.make_covtype_like, 54),
    (datasets.make_wide, 500), (datasets.make_airline_like, 13),
])
def test_shapes_dtypes_and_seeds(make, n_features):
    X, y = make(300, seed=4)
    assert X.shape == (300, n_features) and X.dtype == np.float32 and y.dtype == np.float32
    again, _ = make(300, seed=4)
    other, _ = make(300, seed=5)
    np.testing.assert_array_equal(X, again)
    assert not np.array_equal(np.nan_to_num(X), np.nan_to_num(other))


def test_higgs_like_missing_values_only_in_columns_7_to_9():
    X, y = datasets.make_higgs_like(20_000, seed=0)
    missing = np.isnan(X).mean(axis=0)
    assert np.all(missing[[7, 8, 9]] > 0.04) and np.all(missing[[7, 8, 9]] < 0.06)
    assert missing.sum() == missing[[7, 8, 9]].sum()
    assert set(np.unique(y)) == {0.0, 1.0}


def test_higgs_like_tasks():
    _, classes = datasets.make_higgs_like(5_000, seed=0, task="multiclass")
    assert set(np.unique(classes)) == {0.0, 1.0, 2.0, 3.0}
    _, target = datasets.make_higgs_like(5_000, seed=0, task="regression")
    assert 1.5 < target.std() < 2.5
    with pytest.raises(ValueError, match="task='ranking'"):
        datasets.make_higgs_like(10, task="ranking")


def test_covtype_like_has_seven_classes_and_one_hot_blocks():
    X, y = datasets.make_covtype_like(5_000, seed=0)
    assert set(np.unique(y)) == set(range(7))
    np.testing.assert_array_equal(X[:, 10:14].sum(axis=1), 1)
    np.testing.assert_array_equal(X[:, 14:].sum(axis=1), 1)


def test_airline_like_codes_and_missing_origins():
    X, y = datasets.make_airline_like(20_000, seed=0)
    for column, cardinality in zip(range(8, 13), datasets.AIRLINE_CATEGORIES):
        codes = X[:, column][~np.isnan(X[:, column])]
        assert np.array_equal(codes, np.floor(codes)) and codes.min() == 0 and codes.max() < cardinality
        counts = np.bincount(codes.astype(int), minlength=cardinality)
        assert counts[0] > counts[-1]  # the first categories are the busiest
    assert np.isnan(X[:, :12]).sum() == 0 and 0.02 < np.isnan(X[:, 12]).mean() < 0.04
    assert 0.2 < y.mean() < 0.6
