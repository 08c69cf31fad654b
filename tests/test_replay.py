"""GPU rounds replayed from a CUDA graph (dgboost/replay.py): the model of every round
queued as calls, byte for byte; rounds that cannot be captured are not, and a capture
that fails leaves the job uncaptured, with the same model. Skipped without a GPU."""

import dask
import numpy as np
import pytest

import dgboost
from dgboost import replay
from dgboost.datasets import make_higgs_like
from dgboost.objectives.classification import Logistic

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

ROUNDS = 12


def _trained(params, X, y, graphs: bool, **kwargs):
    """(model bytes, evals_result, captures made, rounds replayed) of one training."""
    before = replay.counts()
    with dask.config.set({"dgboost.cuda-graphs": graphs}):
        booster = dgboost.train({**params, "device": "cuda"}, X, y, num_boost_round=ROUNDS, **kwargs)
    captures, replays = (after - was for after, was in zip(replay.counts(), before))
    return bytes(booster.save_raw("json")), booster.evals_result(), captures, replays


def _data(task="binary", rows=20_000):
    X, y = make_higgs_like(rows, seed=0, missing_fraction=0.05, task=task)
    return cp.asarray(X), cp.asarray(y)


CASES = {
    "logistic, eval set": ({"objective": "binary:logistic", "max_depth": 6, "eval_metric": ["logloss", "auc", "error"]},
                           "binary", True),
    "squared error, weights, monotone, max_leaves": (
        {"objective": "reg:squarederror", "max_depth": 5, "max_leaves": 12,
         "monotone_constraints": [1, -1] + [0] * 26, "eval_metric": ["rmse", "mae"]}, "regression", True),
    "poisson, its metric": ({"objective": "count:poisson", "max_depth": 4, "eval_metric": ["poisson-nloglik"]},
                            "count", True),
    "symmetric": ({"objective": "binary:logistic", "grow_policy": "symmetric", "max_depth": 5}, "binary", False),
    "depth 1": ({"objective": "binary:logistic", "max_depth": 1}, "binary", False),
    # Row sampling: each replayed round draws its own trees' rows (the tree's index on the device).
    "uniform rows, eval set": ({"objective": "binary:logistic", "max_depth": 6, "subsample": 0.7,
                                "eval_metric": ["logloss"]}, "binary", True),
    "gradient-based rows": ({"objective": "binary:logistic", "max_depth": 6, "subsample": 0.2,
                             "sampling_method": "gradient_based"}, "binary", False),
}


@pytest.mark.parametrize("case", list(CASES), ids=lambda c: c.replace(" ", "-"))
def test_replayed_rounds_make_the_model_of_rounds_queued_as_calls(case):
    params, task, with_eval = CASES[case]
    if task == "count":
        X, y = _data("regression")
        y = cp.floor(cp.abs(y) * 3)
    else:
        X, y = _data(task)
    kwargs = {}
    if with_eval:
        X_valid, y_valid = X[:4000] * 1.05, y[:4000]
        kwargs["evals"] = [(X, y, "train"), (X_valid, y_valid, "valid")]
    if task == "regression":
        kwargs["sample_weight"] = cp.linspace(0.5, 2.0, X.shape[0], dtype=cp.float32)
    graphed, graphed_log, captures, replays = _trained(params, X, y, True, **kwargs)
    queued, queued_log, no_captures, no_replays = _trained(params, X, y, False, **kwargs)
    # The first round warms the pool; the rest are the graph's.
    assert (captures, replays) == (1, ROUNDS - 1)
    assert (no_captures, no_replays) == (0, 0)
    assert graphed == queued
    assert graphed_log == queued_log


def test_multiclass_rounds_replay_every_class_tree():
    X, y = _data("multiclass")
    params = {"objective": "multi:softprob", "num_class": 4, "max_depth": 4, "eval_metric": ["mlogloss", "merror"]}
    graphed, graphed_log, captures, replays = _trained(params, X, y, True, evals=[(X, y, "train")])
    queued, queued_log, _, _ = _trained(params, X, y, False, evals=[(X, y, "train")])
    assert (captures, replays) == (1, ROUNDS - 1)
    assert graphed == queued and graphed_log == queued_log


def test_early_stopping_drops_a_replayed_round_and_keeps_the_best():
    X, y = _data("binary")
    X_valid, y_valid = X[:3000] * 1.3, y[:3000]
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.8, "eval_metric": ["logloss"],
              "device": "cuda"}
    models, replayed = [], []
    for graphs in (True, False):
        before = replay.counts()[1]
        with dask.config.set({"dgboost.cuda-graphs": graphs}):
            booster = dgboost.train(params, X, y, num_boost_round=200, evals=[(X_valid, y_valid, "valid")],
                                    early_stopping_rounds=2)
        models.append((bytes(booster.save_raw("json")), booster.best_iteration))
        replayed.append(replay.counts()[1] - before)
    assert replayed[0] >= 3 and replayed[1] == 0  # the rounds replayed, then none
    assert models[0] == models[1]
    assert models[0][1] < 198  # it stopped early


@pytest.mark.parametrize("params, reason", [
    ({"sampling_method": "goss"}, "GOSS"),
    ({"colsample_bynode": 0.5}, "column sampling"),
    ({"grow_policy": "lossguide", "max_leaves": 16, "max_depth": 0}, "growth policy"),
    ({"objective": "reg:absoluteerror"}, "reads the host"),
])
def test_rounds_that_differ_or_read_the_host_are_not_captured(params, reason, caplog):
    X, y = _data("binary")
    with caplog.at_level("DEBUG", logger="dgboost"):
        _, _, captures, replays = _trained({"objective": "binary:logistic", "max_depth": 4, "verbosity": 3, **params},
                                           X, y, True)
    assert (captures, replays) == (0, 0)
    assert "not captured" in caplog.text and reason in caplog.text


@pytest.mark.parametrize("breaks", ["host copy", "synchronisation"])
def test_a_capture_that_fails_leaves_the_rounds_uncaptured_and_the_model_unchanged(monkeypatch, caplog, breaks):
    """Gradients that copy from the host, or read it, in every round: the capture fails before
    anything ran, the job goes on uncaptured, and its model is the one of rounds queued as calls."""
    gradients = Logistic.gradients

    def reading(self, margins, label, weight):
        gpair = gradients(self, margins, label, weight)
        if breaks == "host copy":
            return gpair * cp.asarray(np.ones(1, np.float32))
        return gpair * float(cp.ones(1, np.float32).sum())

    monkeypatch.setattr(Logistic, "gradients", reading)
    X, y = _data("binary")
    params = {"objective": "binary:logistic", "max_depth": 5, "verbosity": 2}
    with caplog.at_level("INFO", logger="dgboost"):
        graphed, _, captures, replays = _trained(params, X, y, True)
    queued, _, _, _ = _trained(params, X, y, False)
    assert (captures, replays) == (0, 0)
    assert "rounds not captured as a CUDA graph" in caplog.text
    assert graphed == queued
    # The lane was given back: the next job captures.
    _, _, captures, _ = _trained({"objective": "reg:squarederror", "max_depth": 3}, X, y, True)
    assert captures == 1


def test_a_job_that_fails_mid_way_gives_the_lane_back_and_the_next_job_replays():
    from dgboost.callback import TrainingCallback

    class Boom(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            if epoch == 3:
                raise RuntimeError("boom at round 3")
            return False

    X, y = _data("binary")
    before = replay.counts()
    with pytest.raises(RuntimeError, match="boom at round 3"):
        dgboost.train({"objective": "binary:logistic", "max_depth": 4, "device": "cuda"}, X, y, num_boost_round=10,
                      callbacks=[Boom()])
    assert replay.counts()[0] == before[0] + 1  # it had captured its rounds
    _, _, captures, replays = _trained({"objective": "binary:logistic", "max_depth": 4}, X, y, True)
    assert (captures, replays) == (1, ROUNDS - 1)
