"""Training control: continuing from a model, learning-rate schedules and checkpoints."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost
from dgboost.callback import LearningRateScheduler, TrainingCheckpoint


@pytest.fixture
def task(binary_data):
    return binary_data


@pytest.mark.parametrize("params", [{"objective": "binary:logistic", "subsample": 0.7, "max_depth": 3},
                                    {"objective": "multi:softprob", "num_class": 2, "max_depth": 2}])
def test_continuing_equals_training_in_one_go(task, params, tmp_path):
    X, y = task
    whole = dgboost.train(params, X, y, num_boost_round=10)
    first = dgboost.train(params, X, y, num_boost_round=6)
    first.save_model(tmp_path / "first.json")
    for init in (first, tmp_path / "first.json"):
        continued = dgboost.train(params, X, y, num_boost_round=4, init_model=init)
        assert continued.save_raw() == whole.save_raw()
    assert first.num_boosted_rounds() == 6  # the init model is not changed


def test_init_model_must_fit(task):
    X, y = task
    model = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=2)
    with pytest.raises(ValueError, match="continue it with the same objective"):
        dgboost.train({"objective": "reg:squarederror"}, X, y, num_boost_round=2, init_model=model)
    with pytest.raises(ValueError, match="trained on 5 features but X has 4"):
        dgboost.train({"objective": "binary:logistic"}, X[:, :4], y, num_boost_round=2, init_model=model)
    with pytest.raises(TypeError, match="init_model must be a dgboost.Booster"):
        dgboost.train({}, X, y, init_model=42)


def test_learning_rate_schedule(task):
    X, y = task
    constant = dgboost.train({"eta": 0.3}, X, y, num_boost_round=5)
    scheduled = dgboost.train({"eta": 0.9}, X, y, num_boost_round=5,
                              callbacks=[LearningRateScheduler([0.3] * 5)])
    assert scheduled.trees[-1].value.tolist() == constant.trees[-1].value.tolist()
    decaying = dgboost.train({}, X, y, num_boost_round=5,
                             callbacks=[LearningRateScheduler(lambda r: 0.3 if r < 2 else 0.05)])
    assert decaying.trees[1].value.tolist() == constant.trees[1].value.tolist()
    assert np.abs(decaying.trees[4].value).max() < np.abs(constant.trees[4].value).max()
    with pytest.raises(ValueError, match="has 3 rates but training runs to round 4"):  # before any round
        dgboost.train({}, X, y, num_boost_round=5, callbacks=[LearningRateScheduler([0.1, 0.1, 0.1])])
    with pytest.raises(ValueError, match="rates must be > 0"):
        dgboost.train({}, X, y, num_boost_round=2, callbacks=[LearningRateScheduler(lambda r: -1.0)])


def test_checkpoints(task, tmp_path):
    X, y = task
    model = dgboost.train({}, X, y, num_boost_round=10,
                          callbacks=[TrainingCheckpoint(tmp_path / "every" / "model-{round}.json", interval=3),
                                     TrainingCheckpoint(tmp_path / "last.json", interval=4)])
    written = sorted(p.name for p in (tmp_path / "every").iterdir())
    assert written == ["model-2.json", "model-5.json", "model-8.json", "model-9.json"]  # no temporary left
    assert dgboost.Booster.load_model(tmp_path / "every" / "model-5.json").num_boosted_rounds() == 6
    assert (tmp_path / "last.json").read_bytes() == model.save_raw()
    continued = dgboost.train({}, X, y, num_boost_round=4, init_model=tmp_path / "every" / "model-5.json")
    assert continued.save_raw() == model.save_raw()


def test_a_checkpoint_given_to_a_second_run_saves_its_end(task, tmp_path):
    """The same TrainingCheckpoint in two runs (a refit estimator's callbacks): the second run's
    model is written at its end, though its last round is the first run's last round number."""
    X, y = task
    checkpoint = TrainingCheckpoint(tmp_path / "model.json", interval=100)
    dgboost.train({}, X, y, num_boost_round=5, callbacks=[checkpoint])
    (tmp_path / "model.json").unlink()
    second = dgboost.train({"max_depth": 2}, X, y, num_boost_round=5, callbacks=[checkpoint])
    assert (tmp_path / "model.json").read_bytes() == second.save_raw()


def test_callbacks_take_numpy_integers(task, tmp_path):
    """Counts from numpy (a grid search's, a config's), as XGBoost's callbacks take them."""
    from dgboost.callback import EarlyStopping

    X, y = task
    checkpoint = TrainingCheckpoint(tmp_path / "model.json", interval=np.int64(2))
    model = dgboost.train({}, X, y, num_boost_round=4, evals=[(X, y, "train")],
                          callbacks=[EarlyStopping(np.int64(2)), checkpoint])
    assert checkpoint.interval == 2 and (tmp_path / "model.json").read_bytes() == model.save_raw()
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        EarlyStopping(np.float64(2.0))


@pytest.mark.parametrize("given, error, message", [
    ({"maximize": "no"}, TypeError, r"maximize='no' must be True or False"),  # a truthy string maximised rmse
    ({"save_best": 1}, TypeError, r"save_best=1 must be True or False"),
    ({"min_delta": float("nan")}, ValueError, r"min_delta=nan must be a finite number >= 0"),  # never improved
    ({"min_delta": "0.1"}, ValueError, r"min_delta='0.1' must be a finite number >= 0"),
    ({"min_delta": -1.0}, ValueError, r"min_delta=-1.0 must be a finite number >= 0"),
    ({"metric_name": 3}, TypeError, r"metric_name=3 must be a string"),
])
def test_early_stopping_refuses_what_it_cannot_use_when_made(given, error, message):
    from dgboost.callback import EarlyStopping

    with pytest.raises(error, match=f"^{message}"):
        EarlyStopping(2, **given)
    EarlyStopping(2, maximize=np.bool_(True), min_delta=np.float32(0.5), metric_name="rmse")  # numpy's, as XGBoost


def test_callbacks_refuse_when_made_or_before_any_round_what_would_fail_later(task, tmp_path):
    """Each was found only at its round (a rate past the list, a write to a path's string) or
    wrote somewhere unasked (a checkpoint at "None")."""
    from dgboost.callback import EvaluationMonitor

    X, y = task
    with pytest.raises(ValueError, match=r"^callbacks\[0\]: LearningRateScheduler has 2 rates but training runs to "
                                         r"round 4"):
        dgboost.train({}, X, y, num_boost_round=5, callbacks=[LearningRateScheduler([0.1, 0.1])])
    first = dgboost.train({}, X, y, num_boost_round=2, callbacks=[LearningRateScheduler([0.1, 0.2])])
    with pytest.raises(ValueError, match="has 3 rates but training runs to round 3 .rounds count from init_model"):
        dgboost.train({}, X, y, num_boost_round=2, init_model=first, callbacks=[LearningRateScheduler([0.1] * 3)])
    dgboost.train({}, X, y, num_boost_round=2, init_model=first, callbacks=[LearningRateScheduler([0.1] * 4)])
    # Training that may stop early is left to run: the rate of a round it reaches is checked then.
    from dgboost.callback import TrainingCallback

    class StopAfterTwo(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            return epoch >= 1

    stopped = dgboost.train({}, X, y, num_boost_round=50, callbacks=[LearningRateScheduler([0.3] * 3), StopAfterTwo()])
    assert stopped.num_boosted_rounds() == 2
    from dgboost.callback import EarlyStopping

    with pytest.raises(ValueError, match=r"^callbacks\[0\]: EarlyStopping metric_name='rmsee' is not reported; "
                                         r"the metrics are \['rmse'\]"):
        dgboost.train({}, X, y, num_boost_round=3, evals=[(X, y, "v")], callbacks=[EarlyStopping(2, "rmsee")])
    with pytest.raises(ValueError, match=r"^callbacks\[0\]: EarlyStopping data_name='valid' is not an eval set"):
        dgboost.train({}, X, y, num_boost_round=3, evals=[(X, y, "v")],
                      callbacks=[EarlyStopping(2, data_name="valid")])
    with pytest.raises(TypeError, match="file must be a stream with write"):
        EvaluationMonitor(file=str(tmp_path / "log.txt"))
    with pytest.raises(TypeError, match="^TrainingCheckpoint path=None must be a file path"):
        TrainingCheckpoint(None)
    with pytest.raises(ValueError, match="is a directory: give the file to write"):
        TrainingCheckpoint(tmp_path)


def test_checkpoints_to_an_fsspec_url(task):
    fsspec = pytest.importorskip("fsspec")
    X, y = task
    model = dgboost.train({}, X, y, num_boost_round=3, callbacks=[TrainingCheckpoint("memory://ckpt/model.json", 2)])
    with fsspec.open("memory://ckpt/model.json", "rb") as stream:
        assert stream.read() == model.save_raw()


def test_a_progress_bar_on_a_terminal(task, terminal):
    X, y = task
    dgboost.train({"eval_metric": "auc", "objective": "binary:logistic"}, X, y, num_boost_round=4,
                  evals=[(X, y, "train")], verbose_eval=True)
    frames = terminal.text.split("\r")[1:]
    assert frames[0].startswith("[" + " " * 24 + "] 0/4 rounds, building the matrix")
    assert frames[-1].startswith("[" + "#" * 24 + "] 4/4 rounds  train-auc:0.") and "ETA 0s" in frames[-1]
    assert terminal.text.endswith("\n") and terminal.text.count("\n") == 1  # one line, redrawn


def test_the_progress_bar_says_when_training_runs_out_of_core(task, terminal):
    X, y = task
    dgboost.train({"max_device_matrix_bytes": 4096}, X, y, num_boost_round=2, verbose_eval=True,
                  evals=[(X, y, "train")])
    last = terminal.text.split("\r")[-1]
    assert last.startswith("[" + "#" * 24 + "] 2/2 rounds (out of core: ") and " pages on disk)" in last


def test_lines_when_not_on_a_terminal(task, capsys):
    X, y = task
    dgboost.train({"eval_metric": "rmse"}, X, y, num_boost_round=3, evals=[(X, y, "train")], verbose_eval=True)
    assert capsys.readouterr().out.splitlines()[0].startswith("[0]\ttrain-rmse:")


def test_callback_arguments_xgboost_users_give_are_taken_or_named_at_once(tmp_path, capsys):
    from dgboost.callback import EvaluationMonitor
    from dgboost.sklearn import DGBRegressor

    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = X[:, 0].copy()
    # numpy rates (a schedule of np.linspace, say) are rates: they were refused as "not > 0"
    schedule = LearningRateScheduler(list(np.linspace(0.3, 0.1, 3, dtype=np.float32)))
    scheduled = dgboost.train({}, X, y, num_boost_round=3, callbacks=[schedule])
    plain = dgboost.train({}, X, y, num_boost_round=3,
                          callbacks=[LearningRateScheduler([float(r) for r in np.linspace(0.3, 0.1, 3, dtype=np.float32)])])
    assert scheduled.save_raw() == plain.save_raw()
    with pytest.raises(TypeError, match="a rate is a number"):
        dgboost.train({}, X, y, num_boost_round=1, callbacks=[LearningRateScheduler(lambda epoch: "0.3")])
    with pytest.raises(ValueError, match=r"path '.*ck\{x\}.*': the only field it may hold is \{round\}"):
        TrainingCheckpoint(str(tmp_path / "ck{x}" / "m.json"))  # before any round, not at the first save
    with pytest.raises(ValueError, match=r"EvaluationMonitor\(period=0\): period must be an integer >= 1"):
        EvaluationMonitor(period=0)
    monitor = EvaluationMonitor(period=100)
    dgboost.train({}, X, y, num_boost_round=3, evals=[(X, y, "v")], callbacks=[monitor])
    capsys.readouterr()
    dgboost.train({}, X, y, num_boost_round=3, callbacks=[monitor])  # no eval set: nothing to print
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match=r"eval_set=\[\(X_valid, y_valid\)\]"):
        DGBRegressor(n_estimators=3, early_stopping_rounds=2).fit(X, y)
    state = np.random.RandomState(0)
    seeded = DGBRegressor(n_estimators=3, subsample=0.5, random_state=state).fit(X, y)
    again = DGBRegressor(n_estimators=3, subsample=0.5,
                         random_state=int(np.random.RandomState(0).randint(np.iinfo(np.int32).max))).fit(X, y)
    np.testing.assert_array_equal(seeded.predict(X), again.predict(X))  # scikit-learn's RandomState: an int drawn
