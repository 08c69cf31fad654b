"""The boosting loop: exact small cases, determinism, objectives and training control."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dgboost
from dgboost.callback import EarlyStopping, EvaluationMonitor, TrainingCallback
from dgboost.collective import LocalCommunicator
from dgboost.objectives.metrics import make_metric


def test_one_split_tree_by_hand():
    # g = pred - y = (0.5, 0.5, -0.5, -0.5), h = 1: the split x < 2 separates them exactly.
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([0.0, 0.0, 1.0, 1.0])
    params = {"base_score": 0.5, "lambda": 0.0, "eta": 1.0, "max_depth": 1, "min_child_weight": 0}
    booster = dgboost.train(params, X, y, num_boost_round=1)
    tree = booster.trees[0]
    assert tree.left.tolist() == [1, -1, -1] and tree.right.tolist() == [2, -1, -1]
    assert tree.feature[0] == 0 and tree.threshold[0] == 2.0 and tree.split_bin[0] == 1
    assert tree.value[1:].tolist() == [-0.5, 0.5]
    assert tree.gain[0] == 1.0 and tree.cover.tolist() == [4.0, 2.0, 2.0]
    np.testing.assert_array_equal(booster.predict(X), y)


def test_missing_rows_follow_the_learned_direction():
    X = np.array([[0.0], [1.0], [np.nan], [np.nan]])
    y = np.array([0.0, 1.0, 1.0, 1.0])
    params = {"base_score": 0.5, "lambda": 0.0, "eta": 1.0, "max_depth": 1, "min_child_weight": 0}
    tree = dgboost.train(params, X, y, num_boost_round=1).trees[0]
    assert tree.threshold[0] == 1.0 and not tree.default_left[0]
    booster = dgboost.train(params, X, 1 - y, num_boost_round=1)
    np.testing.assert_array_equal(booster.predict(np.array([[np.nan], [5.0], [-5.0]])), [0.0, 0.0, 1.0])


def test_same_seed_gives_a_byte_identical_model(tmp_path, binary_data):
    X, y = binary_data
    params = {"objective": "binary:logistic", "subsample": 0.8, "seed": 3, "max_depth": 4}
    for name in ("a.json", "b.json"):
        dgboost.train(params, X, y, num_boost_round=8).save_model(tmp_path / name)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    dgboost.train({**params, "seed": 4}, X, y, num_boost_round=8).save_model(tmp_path / "c.json")
    assert (tmp_path / "c.json").read_bytes() != (tmp_path / "a.json").read_bytes()


@pytest.mark.parametrize("objective", ["binary:logistic", "reg:squarederror"])
def test_row_order_does_not_change_the_model(tmp_path, binary_data, objective):
    """Every row is in the cut sample at this size, so the model must not change."""
    X, y = binary_data
    order = np.random.default_rng(5).permutation(len(y))
    params = {"objective": objective, "max_depth": 5}
    dgboost.train(params, X, y, num_boost_round=10).save_model(tmp_path / "a.json")
    dgboost.train(params, X[order], y[order], num_boost_round=10).save_model(tmp_path / "b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_training_margins_equal_prediction_margins(binary_data):
    """The loop's margins (leaf gathers by row position, and binned routing of an eval
    copy) and prediction from raw values (tree traversal) hold the same float32 numbers:
    the metric computed from each is bit-for-bit equal."""
    X, y = binary_data
    booster = dgboost.train({"eval_metric": ["rmse", "mae"]}, X, y, num_boost_round=7,
                            evals=[(X, y, "train"), (X.copy(), y.copy(), "copy")])
    result = booster.evals_result()
    prediction = booster.predict(X)
    for name in ("rmse", "mae"):
        from_prediction = make_metric(name, booster.params)(y.astype(np.float32), prediction, None,
                                                            LocalCommunicator())
        assert result["train"][name][-1] == result["copy"][name][-1] == from_prediction


@pytest.mark.parametrize("objective, extra", [
    ("reg:squarederror", {}), ("reg:logistic", {}), ("reg:pseudohubererror", {}),
    ("binary:logistic", {}), ("binary:logitraw", {}), ("count:poisson", {}),
    ("multi:softmax", {"num_class": 3}), ("multi:softprob", {"num_class": 3}),
])
def test_every_objective_learns(objective, extra, rng):
    X = rng.standard_normal((800, 4)).astype(np.float32)
    signal = X[:, 0] + 0.5 * X[:, 1]
    if objective.startswith("multi"):
        y = np.digitize(signal, [-0.5, 0.5])
    elif objective == "count:poisson":
        y = rng.poisson(np.exp(0.5 * signal))
    elif objective.startswith(("binary", "reg:logistic")):
        y = (signal > 0).astype(float)
    else:
        y = signal
    params = {"objective": objective, **extra}
    booster = dgboost.train(params, X, y, num_boost_round=20, evals=[(X, y, "train")])
    history = booster.evals_result()["train"]
    (metric, values), = history.items()
    assert len(values) == 20 and values[-1] < values[0], (metric, values[0], values[-1])
    prediction = booster.predict(X)
    expected_shape = (800, 3) if objective == "multi:softprob" else (800,)
    assert prediction.shape == expected_shape and prediction.dtype == np.float32
    if objective == "multi:softprob":
        np.testing.assert_allclose(prediction.sum(axis=1), 1.0, rtol=1e-5)
    if objective == "multi:softmax":
        assert set(np.unique(prediction)) <= {0.0, 1.0, 2.0}
    if objective in ("binary:logistic", "reg:logistic"):
        assert prediction.min() > 0 and prediction.max() < 1
    margin = booster.predict(X, output_margin=True)
    assert margin.shape == ((800, 3) if objective.startswith("multi") else (800,))


def test_multiclass_grows_one_tree_per_class_per_round(rng):
    X = rng.standard_normal((300, 3))
    y = rng.integers(0, 4, 300)
    booster = dgboost.train({"objective": "multi:softprob", "num_class": 4}, X, y, num_boost_round=3)
    assert len(booster.trees) == 12 and booster.tree_outputs == [0, 1, 2, 3] * 3
    assert booster.num_boosted_rounds() == 3


def test_base_score_is_estimated_from_weighted_labels(rng):
    X = rng.standard_normal((1000, 2))
    y = (rng.random(1000) < 0.2).astype(float)
    weight = np.where(y == 1, 4.0, 1.0)  # weighted positive share: 0.5
    booster = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=0,
                            sample_weight=weight)
    expected = np.sum(weight * y) / np.sum(weight)
    assert booster.base_score == pytest.approx(expected, rel=1e-6)
    spw = dgboost.train({"objective": "binary:logistic", "scale_pos_weight": 4.0}, X, y, num_boost_round=0)
    assert spw.base_score == pytest.approx(expected, rel=1e-6)
    reg = dgboost.train({}, X, 3 * y + 1, num_boost_round=0)
    assert reg.base_score == pytest.approx(np.mean(3 * y + 1), rel=1e-6)
    given = dgboost.train({"objective": "binary:logistic", "base_score": 0.3}, X, y, num_boost_round=0)
    assert given.base_score == pytest.approx(0.3, rel=1e-6)
    np.testing.assert_allclose(given.predict(X[:3]), 0.3, rtol=1e-6)


def test_base_margin_replaces_the_base_score(binary_data):
    X, y = binary_data
    offset = np.full(len(y), 2.0)
    booster = dgboost.train({"objective": "binary:logistic", "base_score": 0.5}, X, y,
                            num_boost_round=3, base_margin=offset)
    with_offset = booster.predict(X, output_margin=True, base_margin=offset)
    np.testing.assert_allclose(with_offset - booster.predict(X, output_margin=True), 2.0, atol=1e-5)


def test_a_base_margins_memory_layout_changes_no_model_and_no_prediction():
    """The same base margins in C or Fortran order (a pandas frame's to_numpy is often the
    latter) give one model file and the same predictions: with 8 classes or more NumPy sums a
    Fortran-ordered row of margins in another order than a C-ordered one. The caller's array
    is left as it was."""
    rng = np.random.default_rng(11)
    n_rows, n_classes = 3000, 9
    X = rng.standard_normal((n_rows, 6)).astype(np.float32)
    y = (np.abs(X[:, 0] * 3 + X[:, 1]).astype(np.int64) % n_classes).astype(np.float32)
    margins = (rng.standard_normal((n_rows, n_classes)) * 2).astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": n_classes, "max_depth": 3}
    files, predictions = [], []
    for layout in (np.ascontiguousarray, np.asfortranarray):
        given = layout(margins)
        kept = given.copy(order="K")
        booster = dgboost.train(params, X, y, num_boost_round=4, base_margin=given)
        files.append(booster.save_raw())
        predictions.append(booster.predict(X, base_margin=given))
        np.testing.assert_array_equal(given, kept)
        assert given.flags.f_contiguous == (layout is np.asfortranarray)
    assert files[0] == files[1]
    np.testing.assert_array_equal(predictions[0].view(np.uint32), predictions[1].view(np.uint32))


def test_evals_and_early_stopping(binary_data):
    X, y = binary_data
    X_valid, y_valid = X[:200], 1 - y[:200]  # the opposite labels: validation gets worse
    booster = dgboost.train({"objective": "binary:logistic", "eval_metric": ["logloss", "error"]}, X, y,
                            num_boost_round=50, evals=[(X, y, "train"), (X_valid, y_valid, "valid")],
                            early_stopping_rounds=3)
    result = booster.evals_result()
    assert list(result) == ["train", "valid"] and list(result["valid"]) == ["logloss", "error"]
    rounds = booster.num_boosted_rounds()
    assert rounds < 50 and len(result["valid"]["error"]) == rounds
    errors = result["valid"]["error"]
    assert booster.best_iteration == int(np.argmin(errors)) and booster.best_score == min(errors)
    assert rounds == booster.best_iteration + 4


def test_early_stopping_maximises_auc(binary_data):
    X, y = binary_data
    stopper = EarlyStopping(2, metric_name="auc", save_best=True)
    booster = dgboost.train({"objective": "binary:logistic", "eval_metric": ["auc", "logloss"]}, X, y,
                            num_boost_round=200, evals=[(X[:300], y[:300], "valid")], callbacks=[stopper])
    aucs = booster.evals_result()["valid"]["auc"]
    assert booster.best_score == max(aucs[: booster.best_iteration + 1])
    assert booster.num_boosted_rounds() == booster.best_iteration + 1  # save_best cut the rest


def test_evaluation_monitor_prints_xgboost_style_lines(binary_data):
    X, y = binary_data
    out = io.StringIO()
    dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=5, evals=[(X, y, "train")],
                  callbacks=[EvaluationMonitor(period=2, file=out)])
    lines = out.getvalue().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["[0]", "[2]", "[4]"]
    assert lines[0].startswith("[0]\ttrain-logloss:0.")


def test_a_callback_can_stop_training(binary_data):
    class StopAtThree(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            return epoch == 2

    X, y = binary_data
    booster = dgboost.train({}, X, y, num_boost_round=10, callbacks=[StopAtThree()])
    assert booster.num_boosted_rounds() == 3


@pytest.mark.parametrize("lookahead", [1, 3])
def test_rounds_queued_ahead_change_neither_the_model_nor_the_callbacks(binary_data, monkeypatch, tmp_path,
                                                                      lookahead):
    """The GPU queues rounds ahead of the one it finishes (training._lookahead); the
    host path runs the same loop, so queueing ahead is checked here: the callbacks see
    the same rounds in the same order, and rounds queued past a stop are dropped."""
    from dgboost import training

    class Journal(TrainingCallback):
        def __init__(self):
            self.calls = []

        def before_iteration(self, model, epoch, evals_log):
            self.calls.append(("before", epoch, model.num_boosted_rounds()))
            return False

        def after_iteration(self, model, epoch, evals_log):
            self.calls.append(("after", epoch, model.num_boosted_rounds(),
                               {name: dict(m) for name, m in evals_log.items()}.__repr__()))
            return False

    X, y = binary_data
    X_valid, y_valid = X[:200], 1 - y[:200]

    def run(num_boost_round, path):
        journal = Journal()
        booster = dgboost.train({"objective": "binary:logistic", "eval_metric": ["logloss", "auc"],
                                 "subsample": 0.8}, X, y, num_boost_round=num_boost_round,
                                evals=[(X, y, "train"), (X_valid, y_valid, "valid")], early_stopping_rounds=3,
                                callbacks=[journal])
        booster.save_model(path)
        return journal.calls, path.read_bytes()

    for num_boost_round in (50, 2):  # stopped early; ended by the round count
        expected = run(num_boost_round, tmp_path / "plain.json")
        with monkeypatch.context() as patch:
            patch.setattr(training, "_lookahead", lambda xp: lookahead)
            assert run(num_boost_round, tmp_path / "ahead.json") == expected
    assert expected[0][-1][0] == "after"


def test_training_set_as_eval_matches_a_separate_copy(binary_data):
    X, y = binary_data
    same = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=5, evals=[(X, y, "t")])
    copy = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=5,
                         evals=[(X.copy(), y.copy(), "t")])
    assert same.evals_result() == copy.evals_result()


def test_iteration_range_uses_the_first_rounds(binary_data):
    X, y = binary_data
    booster = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=6)
    short = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=3)
    np.testing.assert_array_equal(booster.predict(X, iteration_range=(0, 3)), short.predict(X))
    np.testing.assert_array_equal(booster.predict(X, iteration_range=(0, 0)), booster.predict(X))
    np.testing.assert_array_equal(booster[:3].predict(X), short.predict(X))
    none = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=0)  # end 0: all of no rounds
    np.testing.assert_array_equal(none.predict(X, iteration_range=(0, 0)), none.predict(X))


def test_iteration_range_takes_integers_alone_and_an_empty_booster_is_refused(binary_data):
    X, y = binary_data
    booster = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=3)
    np.testing.assert_array_equal(booster.predict(X, iteration_range=(np.int64(0), np.int64(2))),
                                  booster.predict(X, iteration_range=(0, 2)))
    for bad in ((0, 1.7), "02", 5, (0, 1, 2)):  # 1.7 was taken as 1, "02" as (0, 2)
        with pytest.raises(TypeError, match=r"^iteration_range=.* must be a pair of integers \(begin, end\)$"):
            booster.predict(X, iteration_range=bad)
    empty = dgboost.Booster()  # a model to load into: it wrote a file its loader refused
    with pytest.raises(ValueError, match="^this Booster holds no model to save: train one"):
        empty.save_raw()
    with pytest.raises(ValueError, match="^this Booster holds no model to predict with: train one"):
        empty.predict(X)


def test_a_base_score_other_than_the_continued_models_is_refused(binary_data):
    """A continued model keeps init_model's intercept: another base_score was dropped, yet
    written into the model's parameters."""
    X, y = binary_data
    first = dgboost.train({"objective": "binary:logistic", "base_score": 0.3}, X, y, num_boost_round=2)
    with pytest.raises(ValueError, match=r"^base_score=0.6, but a continued model keeps init_model's intercept "
                                         r"\(its base_score=0.3\)"):
        dgboost.train({"objective": "binary:logistic", "base_score": 0.6}, X, y, num_boost_round=2, init_model=first)
    same = dgboost.train({"objective": "binary:logistic", "base_score": 0.3}, X, y, num_boost_round=2,
                         init_model=first)  # the same params dict again: as most continue a model
    assert same.num_boosted_rounds() == 4


def test_one_callback_given_alone_is_refused_naming_the_list_it_needs(binary_data):
    from dgboost.callback import EarlyStopping

    X, y = binary_data
    with pytest.raises(TypeError, match=r"^callbacks must be a list of callbacks, got one EarlyStopping"):
        dgboost.train({}, X, y, num_boost_round=2, evals=[(X, y, "train")], callbacks=EarlyStopping(2))
    with pytest.raises(TypeError, match=r"^callbacks must be a list of callbacks, got one EarlyStopping"):
        dgboost.DGBClassifier(n_estimators=2, callbacks=EarlyStopping(2)).fit(X, y, eval_set=[(X, y)])


def test_subsample_changes_trees_and_still_learns(binary_data):
    X, y = binary_data
    full = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=5)
    half = dgboost.train({"objective": "binary:logistic", "subsample": 0.5}, X, y, num_boost_round=5,
                         evals=[(X, y, "train")])
    assert not np.array_equal(full.predict(X), half.predict(X))
    losses = half.evals_result()["train"]["logloss"]
    assert losses[-1] < losses[0]


def test_deep_trees_and_tiny_data():
    X = np.arange(10, dtype=float)[:, None]
    booster = dgboost.train({"max_depth": 12, "min_child_weight": 0, "lambda": 0, "eta": 1}, X,
                            np.arange(10.0), num_boost_round=1)
    np.testing.assert_allclose(booster.predict(X), np.arange(10.0), atol=1e-5)
    one_row = dgboost.train({}, np.ones((1, 2)), np.array([3.0]), num_boost_round=2)
    assert one_row.predict(np.ones((1, 2)))[0] == pytest.approx(3.0)


def test_get_score(binary_data):
    X, y = binary_data
    booster = dgboost.train({"objective": "binary:logistic", "max_depth": 3}, X, y, num_boost_round=5)
    weight = booster.get_score("weight")
    total_gain = booster.get_score("total_gain")
    gain = booster.get_score("gain")
    splits = sum(int((~t.is_leaf).sum()) for t in booster.trees)
    assert sum(weight.values()) == splits and set(weight) <= {f"f{i}" for i in range(5)}
    assert max(total_gain, key=total_gain.get) == "f0"  # the strongest signal
    for name in weight:
        assert gain[name] == pytest.approx(total_gain[name] / weight[name])
    with pytest.raises(ValueError, match="importance_type='split'"):
        booster.get_score("split")


def test_verbosity_2_reports_the_compressed_matrix(binary_data, caplog):
    X, y = binary_data
    dgboost.train({"verbosity": 2}, X, y, num_boost_round=1)
    assert "compressed matrix: 600 rows x 5 features, dense, 8 bits a cell, 8 bytes a row" in caplog.messages
    caplog.clear()
    dgboost.train({"verbosity": 0}, X, y, num_boost_round=1)
    assert caplog.messages == []


def test_verbosity_2_prints_to_stderr_when_logging_is_not_configured(binary_data):
    code = ("import numpy as np, dgboost; X = np.random.default_rng(0).random((50, 3)); "
            "dgboost.train({'verbosity': 2}, X, X[:, 0], num_boost_round=1)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stderr.startswith("[dgboost] compressed matrix: 50 rows x 3 features")


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_upper_bound_allocation_grows_the_same_trees(tmp_path, binary_data, monkeypatch, objective):
    """On a GPU the grower allocates each level for every node splitting (padding
    slots inactive) instead of reading the split count; the trees must not change."""
    from dgboost.tree.grower import Grower

    X, y = binary_data
    params = {"objective": objective, "max_depth": 7, "min_child_weight": 3}
    if objective == "multi:softprob":
        params["num_class"] = 2
    dgboost.train(params, X, y, num_boost_round=4).save_model(tmp_path / "exact.json")
    monkeypatch.setattr(Grower, "_next_level_parents", lambda self, splits, n_bins: splits.n_nodes)
    dgboost.train(params, X, y, num_boost_round=4).save_model(tmp_path / "padded.json")
    assert (tmp_path / "exact.json").read_bytes() == (tmp_path / "padded.json").read_bytes()


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 300), st.integers(1, 4), st.randoms(use_true_random=False))
def test_model_does_not_depend_on_row_order_property(n_rows, n_features, random):
    """Every row is in the cut sample below 2**18 rows, so any permutation of the rows
    must give the same trees (integer weights keep tied cut weights exact). No row
    sampling here: its draws are keyed by row index, which a permutation changes."""
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    X = rng.integers(0, 6, size=(n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (rng.random(n_rows) < 0.5).astype(np.float32)
    weight = rng.integers(1, 4, n_rows).astype(np.float32)
    order = rng.permutation(n_rows)
    params = {"objective": "binary:logistic", "max_depth": 3, "min_child_weight": 0.5}
    first = dgboost.train(params, X, y, sample_weight=weight, num_boost_round=3)
    second = dgboost.train(params, X[order], y[order], sample_weight=weight[order], num_boost_round=3)
    assert first.base_score == second.base_score
    assert [t.to_dict() for t in first.trees] == [t.to_dict() for t in second.trees]


def test_the_thread_count_does_not_change_the_model(binary_data):
    """nthread (n_jobs) sets the CPU kernels' threads while training and predicting, the cores
    otherwise; histograms are exact integers, so the model file is the same for any count."""
    from dgboost.kernels import loops

    X, y = binary_data
    seen = []

    class Threads(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            seen.append(loops.threads())
            return False

    models = {}
    for params in ({"nthread": 1}, {"n_jobs": 3}, {"nthread": -1}, {}):
        seen.clear()
        booster = dgboost.train({"objective": "binary:logistic", "max_depth": 4, **params}, X, y,
                                num_boost_round=3, callbacks=[Threads()])
        count = next(iter(params.values()), 0)
        assert seen == [count if count > 0 else loops.cores()] * 3
        models[str(params)] = (booster.save_raw(), booster.predict(X).tobytes())
    assert len(set(models.values())) == 1
    assert loops.threads() == loops.cores()  # the setting ends with the call
    with pytest.raises(ValueError, match=r"nthread=-2 is out of range"):
        dgboost.train({"nthread": -2}, X, y, num_boost_round=1)


@pytest.mark.parametrize("objective, extra", [("reg:squarederror", {}), ("reg:pseudohubererror", {}),
                                              ("reg:pseudohubererror", {"huber_slope": 0.3}),
                                              ("binary:logistic", {}),
                                              ("binary:logistic", {"scale_pos_weight": 3.0}),
                                              ("multi:softprob", {"num_class": 4}), ("multi:softmax", {"num_class": 7}),
                                              ("multi:softprob", {"num_class": 11}), ("count:poisson", {})])
@pytest.mark.parametrize("n_threads", [1, 3, 7])
def test_training_gradients_equal_the_array_program_bit_for_bit(objective, extra, n_threads, monkeypatch):
    """The host's compiled gradient loops, on runs of rows on threads (runs not a multiple of
    any vector width), give the array program's bits: saturated sigmoids, huge residuals."""
    from dgboost.kernels import cpu, loops
    from dgboost.objectives import make_objective
    from dgboost.params import TrainParams

    monkeypatch.setattr(loops, "threads", lambda: n_threads)
    monkeypatch.setattr(cpu, "_ROWS_PER_THREAD", 1000)
    rng = np.random.default_rng(7)
    chosen = make_objective(TrainParams.from_dict({"objective": objective, **extra}))
    n_rows = 50_021
    margins = (3 * rng.standard_normal((n_rows, chosen.n_outputs))).astype(np.float32)
    margins[:50] = np.float32(100) * rng.choice([-1, 1], (50, chosen.n_outputs))  # saturated, residuals of 100
    if chosen.n_outputs > 1:  # rows with -inf and +inf margins (NaN probabilities), a -inf, a NaN
        margins[50, :2], margins[51, 0], margins[52, 1] = (-np.inf, np.inf), -np.inf, np.nan
    label = rng.integers(0, chosen.n_outputs if objective.startswith("multi") else 2, n_rows).astype(np.float32)
    for weight in (None, rng.random(n_rows).astype(np.float32)):
        with np.errstate(over="ignore", invalid="ignore"):  # exp(100) is inf in float32, as training meets it
            expected = chosen.gradients(margins, label, weight)
            got = chosen.training_gradients(margins, label, weight)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
        if chosen.n_outputs > 1:  # Fortran-ordered margins (a base_margin's): NumPy sums their rows otherwise
            with np.errstate(over="ignore", invalid="ignore"):
                fortran = np.asfortranarray(margins)
                expected = chosen.gradients(fortran, label, weight)
                got = chosen.training_gradients(fortran, label, weight)
            np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_each_call_sets_numbas_thread_count_whatever_set_it_before():
    """A kernel launch sets numba's thread count only when it changes, and each call of dgboost
    (``using_threads``) starts afresh: a count another library set in between is not kept."""
    import numba

    from dgboost.kernels import loops

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here")
    with loops.using_threads(2):
        assert loops._launch(numba.get_num_threads, ()) == 2
    numba.set_num_threads(1)  # another library's, between two of dgboost's calls
    with loops.using_threads(2):
        assert loops._launch(numba.get_num_threads, ()) == 2
        assert loops._launch(numba.get_num_threads, ()) == 2


@pytest.mark.parametrize("compiled", [True, False])
def test_scale_pos_weight_weights_positive_rows_once(compiled, monkeypatch):
    """Training's gradients weight a positive row by scale_pos_weight once, by the compiled
    loop and by the array program alike (the GPU's path: it had weighted them twice)."""
    from dgboost.objectives import make_objective
    from dgboost.objectives.classification import Logistic
    from dgboost.params import TrainParams

    if not compiled:
        monkeypatch.setattr(Logistic, "_loop_kind", None)
    weighted = make_objective(TrainParams.from_dict({"objective": "binary:logistic", "scale_pos_weight": 3.0}))
    plain = make_objective(TrainParams.from_dict({"objective": "binary:logistic"}))
    margins = np.array([[0.5], [-1.0], [2.0], [0.0]], dtype=np.float32)
    label = np.array([1, 0, 1, 0], dtype=np.float32)
    weight = np.array([1.0, 2.0, 0.5, 1.0], dtype=np.float32)
    for w in (None, weight):
        got = weighted.training_gradients(margins, label, w)
        np.testing.assert_array_equal(got, weighted.gradients(margins, label, w))
        expected = plain.gradients(margins, label, w) * np.where(label == 1, 3.0, 1.0).astype(np.float32)[:, None, None]
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("layer", ["workqueue", "omp"])
def test_trainings_in_threads_at_once_under_each_threading_layer(layer):
    """Three trainings of several threads each, from three threads of one process at once
    (as a Dask worker's tasks): numba's workqueue aborts a process whose threads launch
    parallel loops together, unless dgboost's launches take turns; the models are the same."""
    script = """
import threading, numba, dgboost
from dgboost.datasets import make_higgs_like
from dgboost.kernels import drivers
X, y = make_higgs_like(40_000, seed=0)
dgboost.train({"objective": "binary:logistic", "max_depth": 4, "nthread": 2}, X, y, num_boost_round=1)
assert drivers.background_compiles_done(timeout=300)  # a cold cache: the drivers, so that the trains use them
models = {}
def train(i):
    models[i] = dgboost.train({"objective": "binary:logistic", "max_depth": 4, "nthread": 2}, X, y,
                              num_boost_round=4).save_raw()
threads = [threading.Thread(target=train, args=(i,)) for i in range(3)]
[t.start() for t in threads]
[t.join() for t in threads]
print(numba.threading_layer(), len(models), len(set(models.values())))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NUMBA_THREADING_LAYER": layer})
    if layer == "omp" and "No threading layer could be loaded" in result.stderr:
        pytest.skip("numba's OpenMP layer needs libgomp, not on this machine")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [layer, "3", "1"]


#: A test script's lines: a child forked now trains on its parent's X and y with the script's
#: ``{params}`` for 3 rounds; ``forked`` is its model, ``process`` the child.
_FORKED_CHILD_TRAINS = """
def child(queue):
    queue.put(dgboost.train({params}, X, y, num_boost_round=3).save_raw())
context = multiprocessing.get_context("fork")
queue = context.Queue()
process = context.Process(target=child, args=(queue,))
process.start()
forked = queue.get(timeout=300)
process.join(60)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the forked child is POSIX's")
def test_a_cold_cache_trains_on_host_threads_while_the_drivers_compile_then_on_the_drivers(tmp_path):
    """With numba's cache empty, a parallel kernel's runs go on the host's threads while its
    driver compiles in the background, then on the driver, each driver compiled once: the same
    model all along, the same as one thread's and as a child's forked while drivers were
    queued, and the drivers in the cache for the next process."""
    script = """
import multiprocessing, dgboost
from dgboost.datasets import make_higgs_like
from dgboost.kernels import drivers
X, y = make_higgs_like(20_000, seed=0)
params = {"objective": "binary:logistic", "max_depth": 4}
calls, seen = {"host": 0, "driver": 0}, set()
ready = drivers.Driver.ready
def counted(driver, arguments):  # a kernel's runs: on the host's threads (None), or its driver's
    machine_code = ready(driver, arguments)
    calls["host" if machine_code is None else "driver"] += 1
    seen.add(driver)
    return machine_code
drivers.Driver.ready = counted
first = dgboost.train({**params, "nthread": 2}, X, y, num_boost_round=3).save_raw()
on_host = calls["host"]
threaded = {**params, "nthread": 2}
""" + _FORKED_CHILD_TRAINS.format(params="threaded") + """
assert drivers.background_compiles_done(timeout=300)
calls.update(host=0, driver=0)
later = dgboost.train({**params, "nthread": 2}, X, y, num_boost_round=3).save_raw()
one = dgboost.train({**params, "nthread": 1}, X, y, num_boost_round=3).save_raw()
print(on_host > 0, calls["host"], calls["driver"] > 0, {len(d.dispatcher.overloads) for d in seen},
      process.exitcode, first == later == one == forked)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "DGBOOST_COMPILE_HELPERS": "0"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "0", "True", "{1}", "0", "True"], result.stderr[-2000:]
    assert any(tmp_path.rglob("*_on_threads*.nbi")), "the drivers compiled in the background are in the cache"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
@pytest.mark.parametrize("layer", ["omp", "workqueue"])
def test_a_forked_child_trains_the_parents_model(layer):
    """A process forked after training on threads (multiprocessing's default on Linux before
    Python 3.14) trains too: GNU OpenMP cannot start threads in a forked child, so its loops
    run on one thread (and its gradients' thread pool is its own); the model is the same."""
    script = """
import multiprocessing, dgboost
from dgboost.datasets import make_higgs_like
X, y = make_higgs_like(70_000, seed=0)
params = {"objective": "binary:logistic", "max_depth": 4, "nthread": 2}
parent = dgboost.train(params, X, y, num_boost_round=3).save_raw()
""" + _FORKED_CHILD_TRAINS.format(params="params") + """
print(process.exitcode, forked == parent)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "NUMBA_THREADING_LAYER": layer})
    if layer == "omp" and "No threading layer could be loaded" in result.stderr:
        pytest.skip("numba's OpenMP layer needs libgomp, not on this machine")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["0", "True"], result.stderr[-2000:]
