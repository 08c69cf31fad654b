"""A Booster in XGBoost's JSON model format, for ``xgboost.Booster().load_model`` and the
servers that read it (treelite, Triton FIL).

The trees map node for node: both number nodes breadth first with a right child
right after its left sibling, both send ``x < threshold`` left and missing values
the learned default way. The intercept goes into ``base_score``, which XGBoost
keeps in output space for one-output objectives (probability, count, value) and
in margin space, one per class, for multiclass ones, as XGBoost 3 writes it.
"""

from __future__ import annotations

import math

import numpy as np

#: The XGBoost release whose JSON layout this writes.
XGBOOST_VERSION = [3, 2, 0]
#: XGBoost's "no parent" (the root's parent id).
_NO_PARENT = 2147483647


def xgboost_document(booster) -> dict:
    """``booster`` as an XGBoost JSON model document."""
    if booster.categories is not None and booster.categories.by_statistics:
        raise ValueError("this model encodes its categorical features by target statistics "
                         "(cat_encoding='target_statistics'), which XGBoost's model format cannot hold: save it as "
                         "dgboost's JSON, or train with cat_encoding='partition' to export it")
    odd = next((name for name in booster.feature_names or () if any(c in name for c in "[]<")), None)
    if odd is not None:  # XGBoost refuses them as names: the exported model would predict no frame there
        raise ValueError(f"feature name {odd!r} holds '[', ']' or '<', which XGBoost refuses in feature names: "
                         "rename the column (or set booster.feature_names) before exporting to XGBoost")
    params = booster.params
    n_outputs = booster.n_outputs
    objective = _objective(params)
    if booster.position_bias is not None:  # unbiased ranking: XGBoost reads its training's last biases
        objective["ti+"], objective["tj-"] = (list(map(float, part)) for part in booster.position_bias)
    trees = [_tree(tree, index, booster.num_features) for index, tree in enumerate(booster.trees)]
    rounds = len(booster.trees) // n_outputs
    return {
        "version": XGBOOST_VERSION,
        "learner": {
            "attributes": _attributes(booster),
            "feature_names": list(booster.feature_names or []),
            "feature_types": _feature_types(booster),
            "gradient_booster": {
                "name": "gbtree",
                "model": {
                    "cats": {"enc": [], "feature_segments": [], "sorted_idx": []},
                    "gbtree_model_param": {"num_parallel_tree": "1", "num_trees": str(len(trees))},
                    "iteration_indptr": [k * n_outputs for k in range(rounds + 1)],
                    "tree_info": [int(o) for o in booster.tree_outputs],
                    "trees": trees,
                },
            },
            "learner_model_param": {
                "base_score": _vector(_base_score(booster)),
                "boost_from_average": "0",  # base_score is the intercept itself, as XGBoost writes a given one
                "num_class": str(params.num_class if params.objective.startswith("multi:") else 0),
                "num_feature": str(booster.num_features),
                "num_target": str(1 if params.objective.startswith("multi:") else n_outputs),
            },
            "objective": objective,
        },
    }


def _feature_types(booster) -> list[str]:
    """XGBoost's feature types: "c" for a categorical feature, "float" for others (listed with
    feature names, or where a feature is categorical)."""
    if booster.categories is not None:
        return ["c" if c else "float" for c in booster.categories.categorical]
    return ["float"] * booster.num_features if booster.feature_names else []


def _base_score(booster) -> list[float]:
    """XGBoost's base_score: the intercept in output space (binary:logitraw's is its margin,
    as XGBoost reads it), or per-class margins."""
    margin = [float(m) for m in booster.base_margin]
    objective = booster.params.objective
    if objective.startswith("multi:"):
        return margin
    if objective in ("binary:logistic", "reg:logistic"):
        return [1.0 / (1.0 + math.exp(-m)) for m in margin]
    if objective in ("count:poisson", "reg:gamma", "reg:tweedie", "survival:aft", "survival:cox"):
        return [math.exp(m) for m in margin]
    return margin


def _objective(params) -> dict:
    name = params.objective
    if name.startswith("multi:"):
        return {"name": name, "softmax_multiclass_param": {"num_class": str(params.num_class)}}
    if name == "reg:pseudohubererror":
        return {"name": name, "pseudo_huber_param": {"huber_slope": _number(params.huber_slope)}}
    if name == "count:poisson":
        return {"name": name, "poisson_regression_param": {"max_delta_step": _number(params.effective_max_delta_step)}}
    if name == "reg:tweedie":
        return {"name": name, "tweedie_regression_param": {
            "tweedie_variance_power": _number(params.tweedie_variance_power)}}
    if name == "reg:quantileerror":
        return {"name": name, "quantile_loss_param": {"quantile_alpha": _vector(params.quantile_alpha)}}
    if name.startswith("rank:"):
        flag = lambda value: "1" if value else "0"  # noqa: E731
        return {"name": name, "lambdarank_param": {
            "lambdarank_bias_norm": _number(params.lambdarank_bias_norm),
            "lambdarank_normalization": flag(params.lambdarank_normalization),
            "lambdarank_num_pair_per_sample": str(params.num_pair),
            "lambdarank_pair_method": params.lambdarank_pair_method,
            "lambdarank_score_normalization": flag(params.lambdarank_score_normalization),
            "lambdarank_unbiased": flag(params.lambdarank_unbiased),
            "ndcg_exp_gain": flag(params.ndcg_exp_gain)}}
    if name == "survival:aft":
        return {"name": name, "aft_loss_param": {"aft_loss_distribution": params.aft_loss_distribution,
                                                 "aft_loss_distribution_scale": _number(params.aft_loss_distribution_scale)}}
    if name in ("reg:squaredlogerror", "reg:absoluteerror", "binary:hinge", "survival:cox"):
        return {"name": name}
    return {"name": name, "reg_loss_param": {"scale_pos_weight": _number(params.scale_pos_weight)}}


def _attributes(booster) -> dict:
    if booster.best_iteration is None:
        return {}
    attributes = {"best_iteration": str(booster.best_iteration)}
    if booster.best_score is not None and math.isfinite(booster.best_score):
        attributes["best_score"] = repr(float(booster.best_score))
    return attributes


def _tree(tree, index: int, num_feature: int) -> dict:
    n = tree.n_nodes
    leaf = tree.is_leaf
    parents = np.full(n, _NO_PARENT, dtype=np.int64)
    split = np.flatnonzero(~leaf)
    parents[tree.left[split]] = split
    parents[tree.right[split]] = split
    conditions = np.where(leaf, tree.value, tree.threshold).astype(np.float32)
    split_type = np.zeros(n, dtype=int)
    split_type[list(tree.categories)] = 1  # XGBoost's categorical split: the set's categories go right
    return {
        "base_weights": tree.value.astype(np.float32).tolist(),
        **tree.category_lists(),
        "default_left": tree.default_left.astype(int).tolist(),
        "id": index,
        "left_children": tree.left.astype(int).tolist(),
        "loss_changes": tree.gain.astype(np.float32).tolist(),
        "parents": parents.tolist(),
        "right_children": tree.right.astype(int).tolist(),
        "split_conditions": conditions.tolist(),
        "split_indices": np.where(leaf, 0, tree.feature).astype(int).tolist(),
        "split_type": split_type.tolist(),
        "sum_hessian": _covers(tree).tolist(),
        "tree_param": {"num_deleted": "0", "num_feature": str(num_feature), "num_nodes": str(n),
                       "size_leaf_vector": "1"},
    }


#: The cover written for a node no training row reached, at depth d: 2**-(_EMPTY_COVER + d) (float32
#: down to depth 85). XGBoost's TreeSHAP divides a child's cover by its parent's, and 0 / 0 is
#: NaN: these give a share that vanishes in float32 where a reached node leads to an empty one
#: (0 in dgboost's TreeSHAP), and below it leaves of 0 (a symmetric tree's) add nothing either way.
_EMPTY_COVER = 64


def _covers(tree) -> np.ndarray:
    """The nodes' covers as XGBoost reads them: the tree's, and for empty nodes the powers of
    two _EMPTY_COVER gives."""
    cover = tree.cover.astype(np.float32)
    empty = cover <= 0
    depth = tree.node_depths[empty].astype(np.int64)
    cover[empty] = np.ldexp(np.float32(1), -np.minimum(_EMPTY_COVER + depth, 149))
    return cover


def _vector(values) -> str:
    return "[" + ",".join(_number(v) for v in values) + "]"


def _number(value) -> str:
    """A float as XGBoost's parameter strings hold one (float32 precision suffices)."""
    return repr(float(np.float32(value)))


def trees_to_rows(booster) -> list[dict]:
    """One dict a node, as XGBoost's ``trees_to_dataframe`` columns."""
    names = booster.split_labels
    rows = []
    for t, tree in enumerate(booster.trees):
        for node in range(tree.n_nodes):
            leaf = tree.left[node] < 0
            by_set = node in tree.categories  # "Yes": in the set, which goes right
            ident = lambda n: f"{t}-{int(n)}"  # noqa: E731
            yes, no = (tree.right[node], tree.left[node]) if by_set else (tree.left[node], tree.right[node])
            rows.append({
                "Tree": t, "Node": node, "ID": ident(node),
                "Feature": "Leaf" if leaf else names[tree.feature[node]],
                "Split": float("nan") if leaf or by_set else float(tree.threshold[node]),
                "Yes": None if leaf else ident(yes),
                "No": None if leaf else ident(no),
                "Missing": None if leaf else ident(tree.left[node] if tree.default_left[node] else tree.right[node]),
                "Gain": float(tree.value[node]) if leaf else float(tree.gain[node]),
                "Cover": float(tree.cover[node]),
                "Category": tree.categories[node].tolist() if by_set else None,
            })
    return rows


def text_dump(booster, with_stats: bool = False) -> list[str]:
    """Each tree as XGBoost's text dump: one line a node, indented by depth."""
    names = booster.split_labels
    dumps = []
    for tree in booster.trees:
        lines = []

        def visit(node: int, depth: int) -> None:
            tab = "\t" * depth
            stats = f",cover={float(np.float32(tree.cover[node])):.9g}" if with_stats else ""  # float32, as exported
            if tree.left[node] < 0:
                lines.append(f"{tab}{node}:leaf={float(tree.value[node]):.9g}{stats}")
                return
            left, right = int(tree.left[node]), int(tree.right[node])
            missing = left if tree.default_left[node] else right
            gain = f",gain={float(np.float32(tree.gain[node])):.9g}" if with_stats else ""
            if node in tree.categories:  # XGBoost's form: "yes" the set's categories, which go right
                codes = ",".join(str(int(c)) for c in tree.categories[node])
                lines.append(f"{tab}{node}:[{names[tree.feature[node]]}:{{{codes}}}] "
                             f"yes={right},no={left},missing={missing}{gain}{stats}")
            else:
                lines.append(f"{tab}{node}:[{names[tree.feature[node]]}<{float(tree.threshold[node]):.9g}] "
                             f"yes={left},no={right},missing={missing}{gain}{stats}")
            visit(left, depth + 1)
            visit(right, depth + 1)

        visit(0, 0)
        dumps.append("\n".join(lines) + "\n")
    return dumps
