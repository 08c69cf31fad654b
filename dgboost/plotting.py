"""Pictures of a model with matplotlib (the ``plot`` extra): importance, learning curves, a tree.

Each function draws on ``ax`` (a new figure's axes when None) and returns it.
"""

from __future__ import annotations

import numpy as np

from .booster import Booster

__all__ = ["plot_importance", "plot_metric", "plot_tree"]


def _axes(ax, figsize=None):
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def plot_importance(booster: Booster, ax=None, *, importance_type: str = "weight", max_num_features: int | None = None,
                    title: str = "Feature importance", show_values: bool = True):
    """Horizontal bars of ``booster.get_score(importance_type)``, largest on top."""
    score = _booster(booster).get_score(importance_type)
    if not score:
        raise ValueError("the model has no splits, so no feature has an importance to plot")
    items = sorted(score.items(), key=lambda item: item[1])
    if max_num_features is not None:
        items = items[-max_num_features:]
    names, values = zip(*items)
    ax = _axes(ax)
    bars = ax.barh(range(len(values)), values, align="center")
    ax.set_yticks(range(len(values)), labels=names)
    ax.set_xlabel(importance_type)
    ax.set_title(title)
    if show_values:
        for bar, value in zip(bars, values):
            ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:.4g}", va="center")
    return ax


def plot_metric(booster_or_result, metric: str | None = None, ax=None, *, title: str | None = None):
    """Learning curves: ``metric`` (default: the first recorded) per round, one line per eval set.

    Takes a Booster (its ``evals_result()``), a fitted estimator, or an evals_result dict.
    """
    result = booster_or_result
    if not isinstance(result, dict):
        result = booster_or_result.evals_result()
    if not result:
        raise ValueError("no evaluation history: train with evals=[...] (or eval_set=) to plot learning curves")
    metrics = [name for curves in result.values() for name in curves]
    metric = metric or metrics[0]
    if metric not in metrics:
        raise ValueError(f"metric={metric!r} was not recorded; the metrics are {sorted(set(metrics))}")
    ax = _axes(ax)
    for name, curves in result.items():
        if metric in curves:
            ax.plot(np.arange(len(curves[metric])), curves[metric], label=name)
    ax.set_xlabel("round")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} per round")
    ax.legend()
    ax.grid(True, alpha=0.3)
    return ax


def plot_tree(booster: Booster, tree_idx: int = 0, ax=None, *, precision: int = 4):
    """Tree ``tree_idx`` drawn top down: split nodes ``feature < threshold`` (the left branch
    is "yes"; "missing" marks where missing values go) and leaves with their values."""
    booster = _booster(booster)
    if not 0 <= tree_idx < len(booster.trees):
        raise ValueError(f"tree_idx={tree_idx} must be in [0, {len(booster.trees)}): the model's trees")
    tree = booster.trees[tree_idx]
    names = booster.split_labels
    x, y = _layout(tree)
    ax = _axes(ax, figsize=(max(6, 1.6 * int(tree.is_leaf.sum())), 1.5 * (tree.depth + 2)))
    for node in np.flatnonzero(~tree.is_leaf):
        for child, label in ((tree.left[node], "yes"), (tree.right[node], "no")):
            missing = bool(tree.default_left[node]) == (child == tree.left[node])
            ax.plot([x[node], x[child]], [y[node], y[child]], color="0.5", zorder=1)
            ax.text((x[node] + x[child]) / 2, (y[node] + y[child]) / 2,
                    label + (", missing" if missing else ""), fontsize=8, ha="center", color="0.3")
    for node in range(tree.n_nodes):
        if tree.is_leaf[node]:
            text, face = f"leaf={tree.value[node]:.{precision}g}", "#e8f1e4"
        else:
            text, face = f"{names[tree.feature[node]]} < {tree.threshold[node]:.{precision}g}", "#e4ecf7"
        ax.text(x[node], y[node], text, ha="center", va="center", fontsize=9, zorder=2,
                bbox={"boxstyle": "round", "facecolor": face, "edgecolor": "0.4"})
    ax.set_xlim(x.min() - 1, x.max() + 1)
    ax.set_ylim(y.min() - 0.5, 0.5)
    ax.axis("off")
    ax.set_title(f"tree {tree_idx}")
    return ax


def _layout(tree):
    """Node positions: leaves one unit apart left to right, parents over their children."""
    x = np.zeros(tree.n_nodes)
    y = np.zeros(tree.n_nodes)
    next_leaf = [0.0]

    def place(node: int, depth: int) -> float:
        y[node] = -depth
        if tree.is_leaf[node]:
            x[node] = next_leaf[0]
            next_leaf[0] += 1.0
        else:
            x[node] = (place(int(tree.left[node]), depth + 1) + place(int(tree.right[node]), depth + 1)) / 2
        return x[node]

    place(0, 0)
    return x, y


def _booster(model) -> Booster:
    """A Booster from a Booster or a fitted estimator."""
    return model.get_booster() if hasattr(model, "get_booster") else model
