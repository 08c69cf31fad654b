"""Models written in XGBoost's JSON format load in XGBoost and predict what dgboost predicts."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost

xgb = pytest.importorskip("xgboost")

OBJECTIVES = {
    "reg:squarederror": {},
    "reg:pseudohubererror": {"huber_slope": 1.5},
    "reg:logistic": {},
    "binary:logistic": {},
    "binary:logitraw": {},
    "count:poisson": {},
    "multi:softprob": {"num_class": 3},
    "multi:softmax": {"num_class": 3},
}


def _labels(objective, X, rng):
    score = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1])
    if objective.startswith("multi:"):
        return np.digitize(score, [-0.5, 0.5]).astype(np.float32)
    if objective in ("binary:logistic", "binary:logitraw"):
        return (score > 0).astype(np.float32)
    if objective == "reg:logistic":
        return (1 / (1 + np.exp(-score))).astype(np.float32)
    if objective == "count:poisson":
        return rng.poisson(np.exp(0.5 * score)).astype(np.float32)
    return (score + 0.1 * rng.standard_normal(len(score))).astype(np.float32)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_xgboost_predicts_what_dgboost_predicts(objective, tmp_path, rng):
    X = rng.standard_normal((800, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan  # missing values take the learned default direction
    y = _labels(objective, X, rng)
    model = dgboost.train({"objective": objective, "max_depth": 4, **OBJECTIVES[objective]}, X, y,
                          num_boost_round=12)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    loaded = xgb.Booster()
    loaded.load_model(path)
    assert loaded.num_boosted_rounds() == 12 and loaded.num_features() == 5
    data = xgb.DMatrix(X, missing=np.nan)
    theirs_margin = loaded.predict(data, output_margin=True)
    ours_margin = model.predict(X, output_margin=True)
    np.testing.assert_allclose(theirs_margin.reshape(ours_margin.shape), ours_margin, rtol=0, atol=1e-5)
    theirs = loaded.predict(data)
    ours = model.predict(X)
    np.testing.assert_allclose(theirs.reshape(ours.shape), ours, rtol=1e-5, atol=1e-5)


def test_feature_names_and_best_iteration_travel(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(rng.standard_normal((300, 3)).astype(np.float32), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(np.float32)
    model = dgboost.train({"objective": "binary:logistic", "eval_metric": "logloss"}, X, y, num_boost_round=30,
                          evals=[(X, y, "train")], early_stopping_rounds=2)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    loaded = xgb.Booster(model_file=str(path))
    assert loaded.feature_names == ["a", "b", "c"]
    assert int(loaded.attr("best_iteration")) == model.best_iteration
    with pytest.raises(ValueError, match="format='onnx' must be"):
        model.save_model(path, format="onnx")


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "multi:softprob"])
def test_contributions_equal_xgboosts_and_sum_to_the_margin(objective, tmp_path, rng):
    X = rng.standard_normal((150, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 4] = np.round(X[:, 4])  # a feature split several times on one path
    y = _labels(objective, X, rng)
    model = dgboost.train({"objective": objective, "max_depth": 5, **OBJECTIVES[objective]}, X, y,
                          num_boost_round=6)
    ours = model.predict(X, pred_contribs=True)
    margin = model.predict(X, output_margin=True)
    np.testing.assert_allclose(ours.sum(axis=-1), margin, rtol=0, atol=1e-4)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X, missing=np.nan), pred_contribs=True)
    np.testing.assert_allclose(ours, theirs.reshape(ours.shape), rtol=0, atol=1e-4)


def test_contributions_through_nodes_no_training_row_reached_equal_xgboosts(tmp_path, rng):
    """A symmetric tree has nodes no training row reached (cover 0): rows that reach them at
    predict time get contributions that sum to the margin and equal XGBoost's on the exported
    model (whose TreeSHAP failed on 0 / 0 covers)."""
    X = rng.standard_normal((2000, 8)).astype(np.float32)
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2])
    model = dgboost.train({"grow_policy": "symmetric", "max_depth": 6}, X, y, num_boost_round=3)
    assert any((tree.cover == 0).any() for tree in model.trees)
    T = (3 * rng.standard_normal((5000, 8))).astype(np.float32)
    leaves = model.predict(T, pred_leaf=True)
    assert any((tree.cover[leaves[:, k]] == 0).any() for k, tree in enumerate(model.trees))
    ours = model.predict(T, pred_contribs=True)
    np.testing.assert_allclose(ours.sum(axis=-1), model.predict(T, output_margin=True), rtol=0, atol=1e-5)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(T), pred_contribs=True)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("n_threads", [1, 3])
def test_contributions_of_deep_trees_on_threads_equal_xgboosts(n_threads, tmp_path, rng, monkeypatch):
    """The compiled TreeSHAP over rows in runs (three where n_threads is 3): deep trees, a
    feature split again and again on one path, missing values both ways."""
    from dgboost import explain
    from dgboost.kernels import loops

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(explain, "_ROWS_PER_THREAD", 64)
    X = rng.standard_normal((1000, 6)).astype(np.float32)
    X[rng.random(X.shape) < 0.15] = np.nan
    X[:, 2] = np.round(2 * X[:, 2])
    y = np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 2]) + 0.1 * rng.standard_normal(len(X)).astype(np.float32)
    model = dgboost.train({"objective": "reg:squarederror", "max_depth": 9}, X, y, num_boost_round=8)
    assert max(tree.depth for tree in model.trees) >= 8
    ours = model.predict(X, pred_contribs=True)
    assert ours.flags.c_contiguous
    np.testing.assert_allclose(ours.sum(axis=-1), model.predict(X, output_margin=True), rtol=0, atol=1e-4)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X, missing=np.nan), pred_contribs=True)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)


def test_leaf_indices_equal_xgboosts(tmp_path, rng):
    X = rng.standard_normal((200, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = _labels("multi:softprob", X, rng)
    model = dgboost.train({"objective": "multi:softprob", "num_class": 3, "max_depth": 4}, X, y, num_boost_round=3)
    ours = model.predict(X, pred_leaf=True)
    assert ours.shape == (200, 9) and ours.dtype == np.int32
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    theirs = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X, missing=np.nan), pred_leaf=True)
    np.testing.assert_array_equal(ours, theirs.astype(np.int32))
    # A leaf's id gives back the tree's value: the margins add up.
    values = np.stack([tree.value[ours[:, t]] for t, tree in enumerate(model.trees)], axis=1)
    np.testing.assert_allclose(values.reshape(200, 3, 3).sum(axis=1) + model.base_margin,
                               model.predict(X, output_margin=True), rtol=0, atol=1e-5)


def test_dumps_and_dataframe_match_xgboosts(tmp_path, rng):
    pytest.importorskip("pandas")
    X = rng.standard_normal((300, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = _labels("reg:squarederror", X, rng)
    model = dgboost.train({"max_depth": 3}, X, y, num_boost_round=2)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    loaded = xgb.Booster(model_file=str(path))
    ours, theirs = model.trees_to_dataframe(), loaded.trees_to_dataframe()
    assert list(ours.columns) == list(theirs.columns) and len(ours) == len(theirs)
    for column in ("Tree", "Node", "ID", "Feature", "Yes", "No", "Missing"):
        assert ours[column].fillna("").astype(str).tolist() == theirs[column].fillna("").astype(str).tolist(), column
    for column in ("Split", "Gain", "Cover"):
        np.testing.assert_allclose(ours[column].to_numpy(float), theirs[column].to_numpy(float), rtol=1e-5)
    dump = model.get_dump()
    assert len(dump) == 2 and dump[0].startswith("0:[f") and "yes=1,no=2,missing=" in dump[0]
    assert [line.split(":")[0].strip() for line in dump[0].splitlines()] == \
        [line.split(":")[0].strip() for line in loaded.get_dump()[0].splitlines()]
    model.dump_model(tmp_path / "dump.txt", with_stats=True)
    text = (tmp_path / "dump.txt").read_text()
    assert text.startswith("booster[0]:\n0:[f") and "gain=" in text and "cover=" in text


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob", "reg:squarederror"])
def test_treelite_serves_the_exported_model(objective, tmp_path, rng):
    pytest.importorskip("treelite")
    import treelite.gtil  # binds treelite, its gtil loaded

    X = rng.standard_normal((300, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = _labels(objective, X, rng)
    model = dgboost.train({"objective": objective, "max_depth": 3, **OBJECTIVES[objective]}, X, y, num_boost_round=5)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    served = treelite.gtil.predict(treelite.frontend.load_xgboost_model(str(path)), X)
    ours = model.predict(X)
    np.testing.assert_allclose(served.reshape(ours.shape), ours, rtol=0, atol=1e-6)


@pytest.mark.parametrize("objective", ["binary:logistic", "count:poisson", "reg:gamma"])
def test_xgboost_reads_a_model_of_no_rounds_as_its_intercept(objective, tmp_path, rng):
    """base_score is written as the intercept itself (boost_from_average 0): XGBoost took it for a
    margin where a file held no tree, and transformed it again."""
    X = rng.standard_normal((50, 3)).astype(np.float32)
    y = (rng.random(50) < 0.7).astype(np.float32) + (objective != "binary:logistic")
    model = dgboost.train({"objective": objective}, X, y, num_boost_round=0)
    model.save_model(tmp_path / "m.json", format="xgboost")
    theirs = xgb.Booster(model_file=str(tmp_path / "m.json")).predict(xgb.DMatrix(X))
    np.testing.assert_allclose(theirs, model.predict(X), rtol=1e-6)


def test_names_beyond_ascii_reach_xgboost_as_written(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"x": [1.0, 2, 3, 4], "é": [1.0, 0, 1, 0]})
    y = np.array([0, 1, 0, 1], np.float32)
    model = dgboost.train({}, frame, y, num_boost_round=2)
    model.save_model(tmp_path / "m.json", format="xgboost")
    theirs = xgb.Booster(model_file=str(tmp_path / "m.json"))
    assert theirs.feature_names == ["x", "é"]
    np.testing.assert_allclose(theirs.predict(xgb.DMatrix(frame)), model.predict(frame), rtol=1e-6)
    continued = dgboost.train({}, frame.to_numpy(np.float32), y, num_boost_round=1, init_model=model)
    assert continued.feature_names == ("x", "é")  # continued on an array, the model keeps its names
    with pytest.raises(ValueError, match="same names in another order"):
        continued.predict(frame[["é", "x"]])
    with pytest.raises(ValueError, match="same names in another order"):  # an eval frame, checked alike
        dgboost.train({}, frame.to_numpy(np.float32), y, num_boost_round=1, init_model=model,
                      evals=[(frame[["é", "x"]], y, "e")])
    with pytest.raises(ValueError, match=r"m.ubj.*name the file '.json'"):
        model.save_model(tmp_path / "m.ubj", format="xgboost")


def test_the_dump_routes_rows_as_the_model_does(rng):
    """Thresholds and leaves in the text dump have float32's nine digits: a row between the
    printed and the true threshold went the other way by the dump."""
    X = rng.standard_normal((200, 1)).astype(np.float32)
    model = dgboost.train({"max_depth": 1}, X, X[:, 0] + 0.1 * rng.standard_normal(200).astype(np.float32),
                          num_boost_round=1)
    threshold = model.trees[0].threshold[0]
    printed = float(model.get_dump()[0].splitlines()[0].split("<")[1].split("]")[0])
    assert np.float32(printed) == threshold
    with pytest.raises(TypeError, match=r"Booster\(params\) takes dgboost's TrainParams, got dict"):
        dgboost.Booster({"nthread": 4})


def test_an_xgboost_ubjson_file_of_no_trees_is_named_binary(tmp_path, rng):
    """An XGBoost UBJSON model can be valid UTF-8 (no tree in it): it is still named binary, not
    taken for a truncated JSON document."""
    X = rng.standard_normal((20, 2)).astype(np.float32)
    xgb.train({}, xgb.DMatrix(X, rng.standard_normal(20)), 0).save_model(tmp_path / "m.ubj")
    with pytest.raises(ValueError, match="not JSON text, but binary"):
        dgboost.Booster.load_model(tmp_path / "m.ubj")


def test_feature_names_set_by_hand_are_checked_before_a_file_is_written(tmp_path, rng):
    X = rng.standard_normal((30, 3)).astype(np.float32)
    model = dgboost.train({}, X, X[:, 0], num_boost_round=1)
    model.feature_names = ["x", "y"]  # 3 features: load_model would refuse the file
    for form in ("json", "xgboost"):
        with pytest.raises(ValueError, match="feature_names has 2 names for the model's 3 features"):
            model.save_model(tmp_path / "m.json", format=form)
    assert not (tmp_path / "m.json").exists()
    with pytest.raises(ValueError, match="feature_names has 2 names for the model's 3 features"):
        model.get_score()  # an IndexError of its own before


def test_names_xgboost_refuses_are_refused_at_export(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(rng.standard_normal((100, 2)), columns=["a<b", "x[1]"])
    model = dgboost.train({}, X, X["a<b"].to_numpy(), num_boost_round=2)
    with pytest.raises(ValueError, match=r"feature name 'a<b' holds '\[', '\]' or '<', which XGBoost refuses"):
        model.save_model(tmp_path / "m.json", format="xgboost")
    model.save_model(tmp_path / "m.json")  # dgboost's own format keeps them
    with pytest.raises(ValueError, match="may not contain"):  # the reason: XGBoost's own rule
        xgb.DMatrix(X, feature_names=list(X.columns))
