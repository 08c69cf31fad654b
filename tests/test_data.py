"""Input validation: every bad input is refused before any work, naming the argument and the fix."""

import numpy as np
import pandas as pd
import pytest

import dgboost
from dgboost.kernels import cpu
from dgboost.data.inputs import make_dataset

PARAMS = {"objective": "binary:logistic"}


def _xy(n=20, f=3):
    rng = np.random.default_rng(1)
    return rng.standard_normal((n, f)), (rng.random(n) > 0.5).astype(float)


def test_length_mismatch_between_X_and_y():
    X, y = _xy()
    with pytest.raises(ValueError, match="y has 19 rows but X has 20"):
        dgboost.train(PARAMS, X, y[:-1])


def test_length_mismatch_of_weights():
    X, y = _xy()
    with pytest.raises(ValueError, match="sample_weight has 21 rows but X has 20"):
        dgboost.train(PARAMS, X, y, sample_weight=np.ones(21))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_labels(bad):
    X, y = _xy()
    y[7] = bad
    with pytest.raises(ValueError, match="y has a non-finite value .* at row 7"):
        dgboost.train(PARAMS, X, y)


def test_negative_weights():
    X, y = _xy()
    weight = np.ones(20)
    weight[3] = -0.5
    with pytest.raises(ValueError, match=r"sample_weight is negative \(-0.5\) at row 3"):
        dgboost.train(PARAMS, X, y, sample_weight=weight)


def test_all_zero_weights():
    X, y = _xy()
    with pytest.raises(ValueError, match="zero for every row"):
        dgboost.train(PARAMS, X, y, sample_weight=np.zeros(20))


def test_binary_labels_outside_zero_one():
    X, y = _xy()
    y[4] = 2
    with pytest.raises(ValueError, match=r"y has 2.0 at row 4: labels must be 0 or 1"):
        dgboost.train(PARAMS, X, y)


def test_reg_logistic_accepts_fractions_but_not_outside_unit_interval():
    X, y = _xy()
    y[0] = 0.3
    dgboost.train({"objective": "reg:logistic"}, X, y, num_boost_round=1)
    y[1] = 1.2
    with pytest.raises(ValueError, match=r"labels must be in \[0, 1\]"):
        dgboost.train({"objective": "reg:logistic"}, X, y)


@pytest.mark.parametrize("bad", [3.0, -1.0, 1.5])
def test_multiclass_labels_outside_range(bad):
    X, y = _xy()
    y[5] = bad
    with pytest.raises(ValueError, match=r"integers in \[0, num_class=3\)"):
        dgboost.train({"objective": "multi:softmax", "num_class": 3}, X, y)


def test_poisson_labels_negative():
    X, y = _xy()
    y[2] = -1
    with pytest.raises(ValueError, match="labels must be >= 0"):
        dgboost.train({"objective": "count:poisson"}, X, y)


def test_no_rows():
    with pytest.raises(ValueError, match="X has no rows"):
        dgboost.train(PARAMS, np.zeros((0, 3)), np.zeros(0))


def test_no_features():
    with pytest.raises(ValueError, match=r"X has no features \(shape \(5, 0\)\)"):
        dgboost.train(PARAMS, np.zeros((5, 0)), np.zeros(5))


def test_non_numeric_column_is_named():
    X, y = _xy()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["b"] = ["x"] * 20
    with pytest.raises(TypeError, match="X column 'b' has dtype .* not numeric"):
        dgboost.train(PARAMS, frame, y)


def test_a_complex_column_is_refused_not_cut_to_its_real_part():
    X, y = _xy()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["a"] = frame["a"] + 1j  # numeric to pandas: cast to float32, its imaginary part would go
    with pytest.raises(TypeError, match="X column 'a' has dtype complex128, which is not numeric"):
        dgboost.train(PARAMS, frame, y)


def test_a_value_beyond_float32_is_named_as_such():
    X, y = _xy()
    X = X.astype(np.float64)
    X[3, 1] = 1e39  # finite in float64, infinite once float32
    with pytest.raises(ValueError, match=r"X has an infinite value at row 3, column 1 \(or one beyond float32's range"):
        dgboost.train(PARAMS, X, y)


def test_categorical_column_says_how_to_fix():
    X, y = _xy()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["c"] = pd.Categorical(["u", "v"] * 10)
    with pytest.raises(TypeError, match=r"cat.codes"):
        dgboost.train(PARAMS, frame, y)


@pytest.mark.parametrize("cells_at_a_time", [1 << 24, 7])
def test_inf_in_features_names_row_and_column(monkeypatch, cells_at_a_time):
    monkeypatch.setattr(cpu, "_INFINITE_CHUNK_CELLS", cells_at_a_time)  # 7: about two rows a chunk
    X, y = _xy()
    X[6, 2] = -np.inf
    X[9, 0] = np.inf
    with pytest.raises(ValueError, match="X has an infinite value at row 6, column 2"):
        dgboost.train(PARAMS, X, y)


def test_one_dimensional_X_says_reshape():
    with pytest.raises(ValueError, match=r"reshape\(-1, 1\)"):
        dgboost.train(PARAMS, np.zeros(5), np.zeros(5))


def test_a_sparse_matrix_with_too_few_labels_is_named():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(ValueError, match="y has 2 rows but X has 3"):
        dgboost.train(PARAMS, scipy_sparse.csr_matrix(np.eye(3)), np.zeros(2))


def test_object_array_is_refused():
    with pytest.raises(TypeError, match="not numeric"):
        dgboost.train(PARAMS, np.array([["a"], ["b"]], dtype=object), np.zeros(2))


def test_eval_set_shape_and_name_errors():
    X, y = _xy()
    with pytest.raises(ValueError, match=r"evals\[0\] X has 2 features but the training X has 3"):
        dgboost.train(PARAMS, X, y, evals=[(X[:, :2], y, "valid")])
    with pytest.raises(TypeError, match=r"evals\[0\] must be a tuple \(X, y, name\)"):
        dgboost.train(PARAMS, X, y, evals=[(X, y)])
    with pytest.raises(ValueError, match="repeats the eval set name 'v'"):
        dgboost.train(PARAMS, X, y, evals=[(X, y, "v"), (X[:5], y[:5], "v")])
    bad = y.copy()
    bad[0] = 3
    with pytest.raises(ValueError, match=r"evals\[0\] y has 3.0 at row 0"):
        dgboost.train(PARAMS, X, y, evals=[(X, bad, "v")])


def test_training_arguments_are_checked():
    X, y = _xy()
    with pytest.raises(ValueError, match="num_boost_round=-1 must be an integer >= 0"):
        dgboost.train(PARAMS, X, y, num_boost_round=-1)
    with pytest.raises(ValueError, match="early_stopping_rounds needs an eval set"):
        dgboost.train(PARAMS, X, y, early_stopping_rounds=3)
    with pytest.raises(TypeError, match="callbacks\\[0\\] is a str"):
        dgboost.train(PARAMS, X, y, callbacks=["print"])
    with pytest.raises(ValueError, match="y is required"):
        dgboost.train(PARAMS, X, None)


def test_base_margin_shape_is_checked():
    X, y = _xy()
    with pytest.raises(ValueError, match=r"base_margin must have shape \(20, 3\)"):
        dgboost.train({"objective": "multi:softprob", "num_class": 3}, X, y % 3,
                      base_margin=np.zeros(20))


def test_missing_value_parameter_marks_missing_without_touching_user_data():
    X = np.array([[1.0, -999.0], [2.0, 3.0]])
    before = X.copy()
    data = make_dataset(X, np.array([0.0, 1.0]), missing=-999.0)
    assert np.isnan(data.X[0, 1]) and data.X[1, 1] == 3.0
    np.testing.assert_array_equal(X, before)


def test_float32_labels_and_weights_are_taken_as_they_are_and_left_unchanged():
    """A C-ordered float32 label or weight is used in place (a copy of a shard's labels was a
    large part of a Dask partition's checks); another dtype or layout is converted; training
    leaves the caller's arrays as they were."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    weight = rng.random(300).astype(np.float32) + 0.5
    data = make_dataset(X, y, weight=weight)
    assert np.shares_memory(data.label, y) and np.shares_memory(data.weight, weight)
    strided = np.stack([y, y], axis=1)[:, 0]
    converted = make_dataset(X, strided, weight=weight.astype(np.float64))
    assert converted.label.flags.c_contiguous and converted.weight.dtype == np.float32
    kept = y.copy(), weight.copy()
    dgboost.train({"objective": "binary:logistic", "max_depth": 3}, X, y, num_boost_round=3, sample_weight=weight,
                  evals=[(X, y, "train")])
    np.testing.assert_array_equal(y, kept[0])
    np.testing.assert_array_equal(weight, kept[1])


def test_dataframe_keeps_feature_names_and_nullable_values():
    frame = pd.DataFrame({"age": pd.array([1, None, 3], dtype="Int64"), "flag": [True, False, True]})
    data = make_dataset(frame, [0, 1, 0])
    assert data.feature_names == ("age", "flag")
    assert np.isnan(data.X[1, 0]) and data.X.dtype == np.float32


def test_lists_are_accepted():
    data = make_dataset([[1, 2], [3, 4]], [0, 1])
    assert data.X.shape == (2, 2) and data.label.dtype == np.float32


def test_predict_checks_features():
    X, y = _xy()
    booster = dgboost.train(PARAMS, pd.DataFrame(X, columns=["a", "b", "c"]), y, num_boost_round=2)
    with pytest.raises(ValueError, match="X has 2 features but the model was trained on 3"):
        booster.predict(X[:, :2])
    with pytest.raises(ValueError, match="same names in another order"):
        booster.predict(pd.DataFrame(X, columns=["c", "b", "a"]))
    with pytest.raises(ValueError, match=r"iteration_range=\(0, 5\) must satisfy"):
        booster.predict(X, iteration_range=(0, 5))


def test_an_eval_frame_with_a_category_column_where_training_had_none_is_refused():
    """Coded by its own categories, the eval set's metric was of other numbers than the
    training column's, with no error (predict refused the same frame)."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.integers(0, 5, 300).astype(float), "b": rng.random(300)})
    y = X["a"].to_numpy() * 2
    as_categories = X.assign(a=pd.Categorical(X["a"].map({0: "z", 1: "y", 2: "x", 3: "w", 4: "v"})))
    with pytest.raises(TypeError, match=r"evals\[0\] X column 'a' is categorical .* training X held no category"):
        dgboost.train({"enable_categorical": True}, X, y, num_boost_round=2, evals=[(as_categories, y, "valid")])
    model = dgboost.train({"enable_categorical": True, "feature_types": ["c", "q"]}, X.to_numpy(), y, num_boost_round=2)
    with pytest.raises(TypeError, match=r"X\['a'\].cat.codes where the model took codes"):
        model.predict(as_categories)  # the model took codes: "pass enable_categorical=True" was no fix


def test_an_eval_set_without_labels_is_refused_before_training():
    X = np.random.default_rng(1).standard_normal((50, 3)).astype(np.float32)
    y = X[:, 0]
    with pytest.raises(ValueError, match=r"evals\[0\] has no labels \(y is None\)"):
        dgboost.train({}, X, y, num_boost_round=2, evals=[(X, None, "valid")])


def test_dask_collections_name_dgboost_dask():
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")
    X = pd.DataFrame(np.random.default_rng(2).random((60, 3)), columns=list("abc"))
    y = X["a"].to_numpy()
    frame, array, series = dd.from_pandas(X, npartitions=2), da.from_array(X.to_numpy()), dd.from_pandas(X["a"], 2)
    for X_given, y_given, name in ((frame, y, "X"), (array, y, "X"), (X, series, "y")):
        with pytest.raises(TypeError, match=f"{name} is a dask .*dgboost.dask.train"):
            dgboost.train({}, X_given, y_given, num_boost_round=2)
    model = dgboost.train({}, X, y, num_boost_round=2)
    with pytest.raises(TypeError, match="X is a dask DataFrame: .*dgboost.dask.predict"):
        model.predict(frame)


def test_targets_as_a_list_of_rows_train_as_an_array_does():
    X = np.random.default_rng(3).standard_normal((200, 3)).astype(np.float32)
    Y = np.stack([X[:, 0], X[:, 1]], axis=1)
    as_list = dgboost.train({}, X, Y.tolist(), num_boost_round=2)  # was "y must be 1-D", read as one target
    assert as_list.save_raw() == dgboost.train({}, X, Y, num_boost_round=2).save_raw()


def test_bounds_and_feature_weights_of_text_are_refused_as_y_is():
    X = np.random.default_rng(4).random((100, 2))
    lower = np.arange(1, 101.0)
    with pytest.raises(TypeError, match="label_lower_bound has dtype <U32, which is not numeric"):
        dgboost.train({"objective": "survival:aft"}, X, None, num_boost_round=2, label_lower_bound=lower.astype(str),
                      label_upper_bound=lower + 1)  # parsed silently before
    with pytest.raises(TypeError, match="feature_weights has dtype <U1, which is not numeric"):
        dgboost.train({"colsample_bynode": 0.5}, X, lower, num_boost_round=2, feature_weights=np.array(["1", "2"]))


def test_a_ranking_eval_set_without_queries_names_eval_qid():
    rng = np.random.default_rng(5)
    X, y = rng.random((60, 3)), rng.integers(0, 3, 60)
    qid = np.repeat(np.arange(6), 10)
    with pytest.raises(ValueError, match=r"pass evals\[0\]'s query ids in eval_qid=\[...\]"):
        dgboost.train({"objective": "rank:ndcg"}, X, y, qid=qid, num_boost_round=2, evals=[(X[:30], y[:30], "v")])
