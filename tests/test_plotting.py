"""Pictures: importance bars, learning curves, a tree, and dgboost train --plot."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import dgboost  # noqa: E402
from dgboost.plotting import plot_importance, plot_metric, plot_tree  # noqa: E402


@pytest.fixture
def model(binary_data):
    X, y = binary_data
    valid = (X[:200], y[:200], "valid")
    return dgboost.train({"objective": "binary:logistic", "max_depth": 3, "eval_metric": ["logloss", "auc"]},
                         X, y, num_boost_round=8, evals=[(X, y, "train"), valid])


def test_importance_bars_largest_on_top(model):
    ax = plot_importance(model, importance_type="gain", max_num_features=3)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    score = model.get_score("gain")
    assert labels == sorted(score, key=score.get)[-3:]  # ascending, so the largest is drawn on top
    assert [round(b.get_width(), 6) for b in ax.patches] == [round(score[n], 6) for n in labels]
    plt.close("all")


def test_learning_curves_of_every_eval_set(model):
    ax = plot_metric(model, "auc")
    assert [line.get_label() for line in ax.get_lines()] == ["train", "valid"]
    np.testing.assert_allclose(ax.get_lines()[1].get_ydata(), model.evals_result()["valid"]["auc"])
    with pytest.raises(ValueError, match="metric='rmse' was not recorded"):
        plot_metric(model, "rmse")
    plt.close("all")


def test_a_tree_shows_its_splits_and_leaves(model):
    ax = plot_tree(model, tree_idx=2)
    texts = [t.get_text() for t in ax.texts]
    tree = model.trees[2]
    assert sum(t.startswith("leaf=") for t in texts) == int(tree.is_leaf.sum())
    assert sum(" < " in t for t in texts) == int((~tree.is_leaf).sum())
    with pytest.raises(ValueError, match="tree_idx=99"):
        plot_tree(model, tree_idx=99)
    plt.close("all")


def test_train_writes_learning_curves(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    from dgboost.cli import main

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.standard_normal((400, 3)), columns=["a", "b", "c"])
    frame["label"] = (frame["a"] > 0).astype(float)
    frame.to_csv(tmp_path / "t.csv", index=False)
    (tmp_path / "job.toml").write_text(f'train = "{tmp_path / "t.csv"}"\nlabel_column = "label"\n'
                                       f'model = "{tmp_path / "m.json"}"\nobjective = "binary:logistic"\n'
                                       f'[evals]\ntrain = "{tmp_path / "t.csv"}"\n')
    assert main(["train", str(tmp_path / "job.toml"), "num_boost_round=3", "--plot", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
