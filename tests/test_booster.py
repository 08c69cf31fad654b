"""The model file: round trips, and damaged or foreign files refused with clear errors."""

import json
import pickle

import numpy as np
import pytest

import dgboost


@pytest.fixture
def model(binary_data):
    X, y = binary_data
    return dgboost.train({"objective": "binary:logistic", "max_depth": 3}, X, y, num_boost_round=4,
                         evals=[(X, y, "train")], early_stopping_rounds=2)


def test_round_trip_predicts_identically(tmp_path, model, binary_data):
    X, _ = binary_data
    path = tmp_path / "model.json"
    model.save_model(path)
    loaded = dgboost.Booster.load_model(path)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.best_iteration == model.best_iteration and loaded.best_score == model.best_score
    loaded.save_model(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_load_into_an_existing_booster_as_xgboost_spells_it(tmp_path, model, binary_data):
    X, _ = binary_data
    model.save_model(tmp_path / "m.json")
    other = dgboost.train({}, X[:, :2], np.zeros(len(X)), num_boost_round=1)
    assert other.load_model(tmp_path / "m.json") is other
    np.testing.assert_array_equal(other.predict(X), model.predict(X))
    empty = dgboost.Booster()
    empty.load_model(tmp_path / "m.json")
    np.testing.assert_array_equal(empty.predict(X), model.predict(X))


def test_a_path_that_is_no_file_is_refused_naming_the_method(tmp_path, model):
    with pytest.raises(TypeError, match=r"^save_model\(path=3\): path must be a file path"):
        model.save_model(3)
    with pytest.raises(ValueError, match="it is a directory; give the file to write"):
        model.save_model(tmp_path)
    with pytest.raises(TypeError, match=r"^load_model\(path=None\): path must be a file path"):
        dgboost.Booster.load_model(None)
    with pytest.raises(ValueError, match="cannot be read .is a directory.: give a model file"):
        dgboost.Booster.load_model(tmp_path)


def test_file_is_versioned_json(tmp_path, model):
    model.save_model(tmp_path / "m.json")
    document = json.loads((tmp_path / "m.json").read_text())
    assert document["format"] == "dgboost-model" and document["version"] == 1
    assert document["checksum"].startswith("sha256:")
    assert document["learner"]["objective"] == "binary:logistic"


def test_truncated_file(tmp_path, model):
    model.save_model(tmp_path / "m.json")
    text = (tmp_path / "m.json").read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="not a complete JSON document.*truncated"):
        dgboost.Booster.load_model(tmp_path / "cut.json")


def test_tampered_file(tmp_path, model):
    model.save_model(tmp_path / "m.json")
    document = json.loads((tmp_path / "m.json").read_text())
    document["trees"][0]["values"][1] += 1.0
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match="modified or damaged: its checksum does not match"):
        dgboost.Booster.load_model(tmp_path / "bad.json")


def _swap_root_children(tree):
    tree["left_children"][0], tree["right_children"][0] = tree["right_children"][0], tree["left_children"][0]


def _resign(document):
    from dgboost.booster import _with_checksum

    document.pop("checksum")
    return json.dumps(_with_checksum(document))


@pytest.mark.parametrize("damage, message", [
    (lambda d: d["trees"][0]["left_children"].__setitem__(0, 0), "child id does not follow"),
    (lambda d: _swap_root_children(d["trees"][0]), "not its left sibling's"),
    (lambda d: d["trees"][0].__setitem__("split_indices", [99] + d["trees"][0]["split_indices"][1:]),
     "outside"),
    (lambda d: d["trees"][0].pop("values"), "lacks 'values'"),
    (lambda d: d["learner"].__setitem__("base_margin", []), "base_margin"),
    (lambda d: d["learner"]["params"].__setitem__("eta", 7), "parameters are invalid"),
    (lambda d: d.__setitem__("tree_outputs", [1] * len(d["tree_outputs"])), "tree_outputs"),
])
def test_structurally_invalid_content_is_refused_even_with_a_valid_checksum(tmp_path, model, damage, message):
    model.save_model(tmp_path / "m.json")
    document = json.loads((tmp_path / "m.json").read_text())
    damage(document)
    (tmp_path / "bad.json").write_text(_resign(document))
    with pytest.raises(ValueError, match=message):
        dgboost.Booster.load_model(tmp_path / "bad.json")


def test_foreign_and_newer_files(tmp_path):
    xgboost_like = {"learner": {"gradient_booster": {}}, "version": [3, 0, 0]}
    (tmp_path / "xgb.json").write_text(json.dumps(xgboost_like))
    with pytest.raises(ValueError, match="not a dgboost model.*looks like an XGBoost model"):
        dgboost.Booster.load_model(tmp_path / "xgb.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a dgboost model"):
        dgboost.Booster.load_model(tmp_path / "list.json")
    (tmp_path / "new.json").write_text(json.dumps({"format": "dgboost-model", "version": 9}))
    with pytest.raises(ValueError, match="format version 9; this dgboost .* reads versions 1 to 2"):
        dgboost.Booster.load_model(tmp_path / "new.json")


def test_save_is_atomic_and_leaves_no_temporary(tmp_path, model):
    path = tmp_path / "m.json"
    path.write_text("previous")
    model.save_model(path)
    assert path.read_text().startswith('{"format":"dgboost-model"')
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_pickle(model, binary_data):
    X, _ = binary_data
    model.predict(X)  # fills the device-copy cache, which pickling drops
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.predict(X), model.predict(X))


def test_multiclass_and_feature_names_round_trip(tmp_path, rng):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rng.standard_normal((200, 3)), columns=["a", "b", "c"])
    y = rng.integers(0, 3, 200)
    model = dgboost.train({"objective": "multi:softprob", "num_class": 3}, frame, y, num_boost_round=3)
    model.save_model(tmp_path / "m.json")
    loaded = dgboost.Booster.load_model(tmp_path / "m.json")
    assert loaded.feature_names == ("a", "b", "c") and loaded.n_outputs == 3
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))
    assert set(model.get_score()) <= {"a", "b", "c"}


def test_forest_depth_is_the_deepest_trees(rng):
    """Forest.depth, found over all nodes at once, is the depth of the deepest tree, for trees
    of different depths (a stump, a chain, full trees) in any order."""
    from dgboost.tree.predict import Forest

    X = rng.standard_normal((3000, 4)).astype(np.float32)
    y = (X[:, 0] * 3 + np.sin(X[:, 1] * 4) + rng.standard_normal(3000)).astype(np.float32)
    models = [dgboost.train({"objective": "reg:squarederror", "max_depth": depth, "min_child_weight": weight},
                            X, y, num_boost_round=3) for depth, weight in ((1, 1.0), (7, 200.0), (4, 1.0))]
    trees = [tree for model in models for tree in model.trees]
    for order in (trees, trees[::-1], trees[3:6]):
        forest = Forest.from_trees(order, [0] * len(order), np)
        assert forest.depth == max(tree.depth for tree in order)
    assert Forest.from_trees([], [], np).depth == 0


def test_a_slice_takes_some_rounds_or_is_refused(rng):
    """booster[a:b] is rounds a to b (negative bounds from the end) and booster[i] one round,
    as iteration_range predicts them; a slice of no round, or beyond the model, is refused
    (it gave a model of no trees, which predicts the base score)."""
    X = rng.standard_normal((300, 4)).astype(np.float32)
    y = X[:, 0] + 0.1 * rng.standard_normal(300).astype(np.float32)
    booster = dgboost.train({"max_depth": 3}, X, y, num_boost_round=10)
    for rounds, (begin, end) in ((slice(2, 5), (2, 5)), (slice(-3, None), (7, 10)), (slice(None, -2), (0, 8)),
                                 (3, (3, 4)), (-1, (9, 10)), (np.int64(0), (0, 1)), (slice(None), (0, 10))):
        sliced = booster[rounds]
        assert sliced.num_boosted_rounds() == end - begin
        np.testing.assert_array_equal(sliced.predict(X), booster.predict(X, iteration_range=(begin, end)))
    for rounds in (slice(5, 2), slice(3, 3), slice(None, 0), slice(0, 11), slice(100, 200), slice(-11, None)):
        with pytest.raises(ValueError, match=r"a slice needs 0 <= begin < end <= 10"):
            booster[rounds]
    with pytest.raises(IndexError, match=r"booster\[10\]: the model has 10 rounds"):
        booster[10]
    for rounds in (slice(0, 10, 2), True, slice(1.5, 3), "a"):
        with pytest.raises(TypeError, match="index a Booster with a round or a slice of rounds"):
            booster[rounds]


def test_get_fscore_is_the_split_count(model):
    assert model.get_fscore() == model.get_score("weight") and model.get_fscore()
