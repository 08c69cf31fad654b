"""Training parameters: XGBoost's names, aliases and defaults, validated once.

``TrainParams.from_dict`` is the only place a user's params dict is read. It
resolves aliases, rejects unknown names with the nearest known one, and checks
every value against the range documented in ``PARAMETERS``. Everything below
the public entry points receives a frozen ``TrainParams`` and may trust it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from typing import Any, Callable, Mapping

import numpy as np

from ._dtypes import MIN_PAGE_ROWS, PACKED_WORD_DTYPE

OBJECTIVES = (
    "reg:squarederror",
    "reg:logistic",
    "reg:pseudohubererror",
    "binary:logistic",
    "binary:logitraw",
    "multi:softmax",
    "multi:softprob",
    "count:poisson",
    "reg:squaredlogerror",
    "reg:gamma",
    "reg:tweedie",
    "reg:absoluteerror",
    "reg:quantileerror",
    "binary:hinge",
    "rank:ndcg",
    "rank:pairwise",
    "rank:map",
    "survival:aft",
    "survival:cox",
)

RANKING = ("rank:ndcg", "rank:pairwise", "rank:map")
#: The objectives that train several targets, y of shape (n_rows, k): one output, and one tree a
#: round, a target (XGBoost's multi_strategy="one_output_per_tree").
MULTI_TARGET = ("reg:squarederror", "reg:pseudohubererror", "reg:squaredlogerror", "reg:absoluteerror",
                "reg:logistic", "binary:logistic", "reg:gamma", "reg:tweedie", "count:poisson", "binary:hinge")
#: The metrics of several targets: the weighted mean over rows of the mean over targets (XGBoost's).
MULTI_TARGET_METRICS = ("rmse", "mae", "mphe", "mape", "rmsle", "logloss", "error", "poisson-nloglik",
                        "gamma-nloglik", "gamma-deviance", "tweedie-nloglik")

#: The metric each objective reports when ``eval_metric`` is not given (XGBoost's; the
#: ranking objectives' and reg:tweedie's take their parameters: ``TrainParams.metrics``).
DEFAULT_METRIC = {
    "reg:squarederror": "rmse",
    "reg:logistic": "rmse",
    "reg:pseudohubererror": "mphe",
    "binary:logistic": "logloss",
    "binary:logitraw": "logloss",
    "multi:softmax": "mlogloss",
    "multi:softprob": "mlogloss",
    "count:poisson": "poisson-nloglik",
    "reg:squaredlogerror": "rmsle",
    "reg:gamma": "gamma-deviance",
    "reg:tweedie": "tweedie-nloglik",
    "reg:absoluteerror": "mae",
    "reg:quantileerror": "quantile",
    "binary:hinge": "error",
    "rank:ndcg": "ndcg",
    "rank:pairwise": "ndcg",
    "rank:map": "map",
    "survival:aft": "aft-nloglik",
    "survival:cox": "cox-nloglik",
}

#: Which objectives each metric makes sense for (by its name before any "@").
_REGRESSION = ("reg:squarederror", "reg:pseudohubererror", "count:poisson", "reg:squaredlogerror", "reg:gamma",
               "reg:tweedie", "reg:absoluteerror", "reg:quantileerror", "reg:logistic")
_PROBABILITY = ("reg:logistic", "binary:logistic", "binary:logitraw")
_MULTICLASS = ("multi:softmax", "multi:softprob")
_SINGLE_OUTPUT = tuple(o for o in OBJECTIVES if not o.startswith(("multi:", "survival:")) and o != "reg:quantileerror")
METRIC_OBJECTIVES = {
    "rmse": _SINGLE_OUTPUT,
    "mae": _SINGLE_OUTPUT,
    "mphe": _SINGLE_OUTPUT,
    "mape": _REGRESSION,
    "rmsle": _REGRESSION,
    "logloss": _PROBABILITY,
    "error": _PROBABILITY + ("binary:hinge",),
    "auc": _PROBABILITY + _MULTICLASS + ("binary:hinge",),
    "aucpr": _PROBABILITY + _MULTICLASS + ("binary:hinge",),
    "mlogloss": _MULTICLASS,
    "merror": _MULTICLASS,
    "poisson-nloglik": ("count:poisson",),
    "gamma-nloglik": ("reg:gamma",),
    "gamma-deviance": ("reg:gamma",),
    "tweedie-nloglik": ("reg:tweedie",),
    "quantile": ("reg:quantileerror",),
    "aft-nloglik": ("survival:aft",),
    "interval-regression-accuracy": ("survival:aft",),
    "cox-nloglik": ("survival:cox",),
    "ndcg": RANKING,
    "map": RANKING,
    "pre": RANKING,
}
METRICS = tuple(METRIC_OBJECTIVES)
#: Metrics that take "@k" (a cut-off: the first k documents of each query) and a trailing "-"
#: (a query with no relevant document scores 0 rather than 1).
RANKING_METRICS = ("ndcg", "map", "pre")


def parse_metric(name: str) -> tuple[str, float | int | None, bool]:
    """A metric's name as (its base name, its "@" argument or None, its trailing "-"):
    "ndcg@10-" is ("ndcg", 10, True), "tweedie-nloglik@1.5" ("tweedie-nloglik", 1.5, False).
    Raises ValueError for a name that is not a metric, saying which are."""
    base, at, argument = name.partition("@")
    minus = False
    if base.endswith("-") and base[:-1] in RANKING_METRICS:
        base, minus = base[:-1], True
    elif at and argument.endswith("-") and base in RANKING_METRICS:
        argument, minus = argument[:-1], True
    if base not in METRIC_OBJECTIVES:
        hint = difflib.get_close_matches(base, METRICS, n=1)
        suggestion = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ValueError(f"eval_metric {name!r} is not one of {', '.join(METRICS)} (ndcg, map and pre take "
                         f"'@k' and a trailing '-'; tweedie-nloglik takes '@rho', error '@threshold')."
                         f"{suggestion}")
    if not at:
        return base, None, minus
    if base in RANKING_METRICS:
        if not argument.isdigit() or int(argument) < 1:
            raise ValueError(f"eval_metric {name!r}: the cut-off after '@' must be an integer >= 1, as in "
                             f"'{base}@10'")
        return base, int(argument), minus
    if base == "tweedie-nloglik":
        rho = _at_number(argument)
        if not 1.0 < rho < 2.0:  # its loss divides by 1 - rho
            raise ValueError(f"eval_metric {name!r}: the variance power after '@' must be a number in (1, 2), as "
                             "in 'tweedie-nloglik@1.5'")
        return base, rho, False
    if base == "error":
        threshold = _at_number(argument)
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"eval_metric {name!r}: the threshold after '@' must be a number in [0, 1], as in "
                             "'error@0.7' (a row counts as positive where its prediction is above it)")
        return base, threshold, False
    raise ValueError(f"eval_metric {name!r}: {base!r} takes no '@' argument; write {base!r}")


def _at_number(text: str) -> float:
    """A metric's argument after '@' as a float; NaN (outside every range) where it is none."""
    try:
        return float(text)
    except ValueError:
        return math.nan


#: XGBoost parameters a user may bring that dgboost does not implement yet: named
#: apart so the error says "not supported yet" rather than "unknown".
NOT_YET_SUPPORTED = (
    "booster",
    "max_cached_hist_node",
    "num_parallel_tree",
    "refresh_leaf",
    "updater",
)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One parameter: its XGBoost name, aliases, default, accepted values and meaning."""

    name: str
    default: Any
    check: Callable[[str, Any], Any]  # returns the normalised value or raises
    range_text: str
    doc: str
    aliases: tuple[str, ...] = ()


def _number(lo: float, hi: float, *, lo_open=False, hi_open=False, integer=False):
    """A checker for a real (or integer) value in an interval."""
    lo_bracket = "(" if lo_open else "["
    hi_bracket = ")" if hi_open or hi == math.inf else "]"
    show = (lambda v: str(int(v))) if integer else (lambda v: f"{v:g}")  # noqa: E731
    text = f"{lo_bracket}{show(lo)}, {'inf' if hi == math.inf else show(hi)}{hi_bracket}"

    def check(name, value):
        wanted = numbers.Integral if integer else numbers.Real
        if isinstance(value, bool) or not isinstance(value, wanted):
            kind = "an integer" if integer else "a number"
            raise TypeError(f"{name}={value!r} must be {kind} in {text}")
        value = int(value) if integer else float(value)
        below = value <= lo if lo_open else value < lo
        above = value >= hi if hi_open else value > hi
        if math.isnan(value) or below or above:
            raise ValueError(f"{name}={value!r} is out of range: it must be in {text}")
        return value

    return check, text


def _choice(*options: str, later: Mapping[str, str] = {}):
    """A checker for one of a set of strings; ``later`` names values still to come."""
    text = ", ".join(repr(o) for o in options)

    def check(name, value):
        if value in options:
            return value
        if value in later:
            raise ValueError(f"{name}={value!r} is not available yet ({later[value]}); use one of {text}")
        hint = difflib.get_close_matches(str(value), options, n=1)
        suggestion = f" Did you mean {hint[0]!r}?" if hint else ""
        raise ValueError(f"{name}={value!r} is not one of {text}.{suggestion}")

    return check, text


def _check_device(name, value):
    if not isinstance(value, str):
        raise TypeError(f"{name}={value!r} must be a string: 'cpu', 'cuda' or 'cuda:N'")
    device = value.lower()
    if device == "gpu":  # XGBoost accepts "gpu" for the default CUDA device
        device = "cuda"
    kind, _, ordinal = device.partition(":")
    if kind == "cpu" and not ordinal:
        return "cpu"
    if kind == "cuda" and (not ordinal or ordinal.isdigit()):
        return device
    raise ValueError(f"{name}={value!r} is not a device: use 'cpu', 'cuda' or 'cuda:N'")


def _check_eval_metric(name, value):
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"{name}={value!r} must be a metric name or a list of them")
    for metric in names:
        parse_metric(metric)
    if len(set(names)) != len(names):
        raise ValueError(f"{name}={value!r} names a metric twice; list each once")
    return tuple(names)


def _check_quantile_alpha(name, value):
    """One quantile or a list of them, each in (0, 1), ascending (XGBoost's rule). Returns a tuple."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"{name}=[] names no quantile: give one in (0, 1), or a list of them")
    for index, alpha in enumerate(values):
        where = f"{name}[{index}]" if isinstance(value, (list, tuple)) else name
        if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0.0 < alpha < 1.0:
            raise ValueError(f"{where}={alpha!r} must be a quantile in (0, 1), such as 0.5 for the median")
    if any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(f"{name}={value!r} must be ascending without repeats (XGBoost's rule), e.g. [0.1, 0.5, 0.9]")
    return tuple(float(alpha) for alpha in values)


def _check_optional(check):
    def wrapped(name, value):
        return None if value is None else check(name, value)

    return wrapped


#: The fewest bytes a matrix budget can page: two pages of MIN_PAGE_ROWS rows of one packed word
#: (the narrowest a compressed row can be).
LEAST_MATRIX_BYTES = 2 * MIN_PAGE_ROWS * np.dtype(PACKED_WORD_DTYPE).itemsize


def _check_matrix_bytes(name, value):
    value = _CHECKS["bytes"][0](name, value)
    if 0 < value < LEAST_MATRIX_BYTES:
        raise ValueError(f"{name}={value} cannot hold two pages of {MIN_PAGE_ROWS} rows of any compressed matrix: "
                         f"give at least {LEAST_MATRIX_BYTES} (the data's rows may need more), or 0 for the automatic budget")
    return value


def _check_missing(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}={value!r} must be a number (NaN by default)")
    return float(value)


def _check_bool(name, value):
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise TypeError(f"{name}={value!r} must be True or False")
    return bool(value)


def _check_monotone(name, value):
    """XGBoost's forms: a list or tuple of -1/0/1 by feature, a dict by feature name, or the
    string "(1,0,-1)". Returns a tuple of directions, or a tuple of
    (feature, direction) pairs for the dict form."""
    if isinstance(value, str):
        text = value.strip()
        if not (len(text) >= 2 and text[0] in "([" and text[-1] in ")]"):
            raise ValueError(f"{name}={value!r} is not XGBoost's string form: write it as \"(1,0,-1)\"")
        try:
            value = [int(part) for part in text[1:-1].split(",") if part.strip()]
        except ValueError:
            raise ValueError(f"{name}={value!r} holds a value that is not an integer: write it as \"(1,0,-1)\"")
    if isinstance(value, dict):
        for feature, direction in value.items():
            if not isinstance(feature, str):
                raise TypeError(f"{name} has the key {feature!r}: a dict's keys are feature names (give "
                                "indices as a list, one value per feature)")
            _check_direction(name, direction, f"[{feature!r}]")
        return tuple((feature, int(direction)) for feature, direction in value.items())
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}={value!r} must be a list of -1/0/1 by feature, a dict by feature name, "
                        "or a string such as \"(1,0,-1)\"")
    for index, direction in enumerate(value):
        _check_direction(name, direction, f"[{index}]")
    return tuple(int(direction) for direction in value)


def _check_interactions(name, value):
    """XGBoost's forms: a list of lists of feature indices or names, or its JSON string
    "[[0, 1], [2, 3, 4]]". Returns a tuple of tuples."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(f"{name}={value!r} is not XGBoost's string form: write it as \"[[0, 1], [2, 3]]\"")
    if not isinstance(value, (list, tuple)) or not all(isinstance(group, (list, tuple)) for group in value):
        raise TypeError(f"{name}={value!r} must be a list of lists of features (indices or names), such as "
                        "[[0, 1], [2, 3, 4]]")
    for index, group in enumerate(value):
        for feature in group:
            if isinstance(feature, bool) or not isinstance(feature, (str, numbers.Integral)):
                raise TypeError(f"{name}[{index}] holds {feature!r}: features are indices or names")
            if not isinstance(feature, str) and feature < 0:
                raise ValueError(f"{name}[{index}] holds the feature index {feature}: indices are >= 0")
    return tuple(tuple(f if isinstance(f, str) else int(f) for f in group) for group in value)


def _check_feature_types(name, value):
    """XGBoost's list of feature types, one a feature: "c" categorical; "q" (or XGBoost's
    "float", "int", "i") numeric. Returns a tuple of "q" and "c"."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}={value!r} must be a list with one type a feature: 'c' (categorical) or 'q' "
                        "(numeric), as XGBoost's feature_types")
    types = []
    for index, kind in enumerate(value):
        if kind not in FEATURE_TYPES:
            raise ValueError(f"{name}[{index}]={kind!r} is not a feature type: use 'c' (categorical) or 'q' "
                             "(numeric; XGBoost's 'float', 'int' and 'i' mean the same)")
        types.append(FEATURE_TYPES[kind])
    return tuple(types)


#: XGBoost's feature type names, as dgboost keeps them: "c" categorical, "q" numeric.
FEATURE_TYPES = {"c": "c", "q": "q", "float": "q", "int": "q", "i": "q"}


def _check_direction(name, direction, where):
    if isinstance(direction, bool) or not isinstance(direction, numbers.Integral) or direction not in (-1, 0, 1):
        raise ValueError(f"{name}{where}={direction!r} must be -1 (decreasing), 0 (free) or 1 (increasing)")


_INF = math.inf
_CHECKS = {
    "objective": _choice(*OBJECTIVES),
    "eta": _number(0, 1),
    "max_depth": _number(0, _INF, integer=True),
    "max_leaves": _number(0, 2**31 - 1, integer=True),
    "max_greedy_nodes": _number(1, 2**31 - 1, integer=True),
    "min_child_weight": _number(0, _INF),
    "lambda": _number(0, _INF),
    "alpha": _number(0, _INF),
    "gamma": _number(0, _INF),
    "max_delta_step": _number(0, _INF),
    "max_bin": _number(2, 65536, integer=True),
    "base_score": _number(-_INF, _INF, lo_open=True, hi_open=True),
    "seed": _number(0, 2**63 - 1, integer=True),
    "subsample": _number(0, 1, lo_open=True),
    "colsample": _number(0, 1, lo_open=True),
    "rate": _number(0, 1, lo_open=True, hi_open=True),
    "sampling_method": _choice("uniform", "gradient_based", "goss"),
    "num_class": _number(2, 2**31 - 1, integer=True),
    "huber_slope": _number(0, _INF, lo_open=True),
    "tweedie_variance_power": _number(1, 2, lo_open=True, hi_open=True),
    "pair_method": _choice("topk", "mean"),
    "aft_distribution": _choice("normal", "logistic", "extreme"),
    "multi_strategy": _choice("one_output_per_tree", later={
        "multi_output_tree": "vector-leaf trees are not supported yet"}),
    "num_pair": _number(1, 2**31 - 1, integer=True),
    "bias_norm": _number(0, _INF),
    "scale_pos_weight": _number(0, _INF, lo_open=True),
    "verbosity": _number(0, 3, integer=True),
    "nthread": _number(-1, 2**31 - 1, integer=True),
    "bytes": _number(0, 2**62, integer=True),
    "grow_policy": _choice("depthwise", "lossguide", "symmetric"),
    "max_cat": _number(1, 2**31 - 1, integer=True),
    "cat_encoding": _choice("partition", "target_statistics"),
    "combinations": _number(0, 64, integer=True),
    "tree_method": _choice("hist", "auto", later={
        "approx": "dgboost builds histograms only: use 'hist'",
        "exact": "dgboost builds histograms only: use 'hist'",
    }),
}

PARAMETERS: tuple[Spec, ...] = (
    Spec("objective", "reg:squarederror", _CHECKS["objective"][0], _CHECKS["objective"][1],
         "The learning task and its loss."),
    Spec("eta", 0.3, *_CHECKS["eta"], "Step size shrinkage: every leaf value is multiplied by it.",
         aliases=("learning_rate",)),
    Spec("max_depth", 6, *_CHECKS["max_depth"], "Maximum depth of a tree; 0 for no limit, with lossguide alone."),
    Spec("max_leaves", 0, *_CHECKS["max_leaves"],
         "Most leaves a tree may have (0: no limit). Depthwise trees split a level's nodes in order "
         "until it is reached, as XGBoost's do."),
    Spec("max_greedy_nodes", 1, *_CHECKS["max_greedy_nodes"],
         "Lossguide: the best leaves split together in one step (one histogram launch and one collective), "
         "the same on every device; 1 splits one at a time, in XGBoost's order (the name is XGBoost's "
         "development branch's). Both are faster than XGBoost's lossguide on a GPU at 255 leaves: 1 by "
         "splitting the nodes likeliest to come next ahead on the device, 32 the more (docs/performance.md)."),
    Spec("min_child_weight", 1.0, *_CHECKS["min_child_weight"],
         "Minimum sum of hessians in a child for a split to be considered."),
    Spec("lambda", 1.0, *_CHECKS["lambda"], "L2 regularisation of leaf weights.",
         aliases=("reg_lambda",)),
    Spec("alpha", 0.0, *_CHECKS["alpha"], "L1 regularisation of leaf weights.", aliases=("reg_alpha",)),
    Spec("gamma", 0.0, *_CHECKS["gamma"],
         "Minimum loss reduction for a split; splits that gain less are not made.",
         aliases=("min_split_loss",)),
    Spec("max_delta_step", None, _check_optional(_CHECKS["max_delta_step"][0]),
         _CHECKS["max_delta_step"][1],
         "Largest absolute leaf weight before eta (0: no limit). Not given: 0, except 0.7 for "
         "count:poisson (trees and hessian), as in XGBoost."),
    Spec("max_bin", 256, *_CHECKS["max_bin"],
         "Symbols per feature in the compressed matrix, one of them kept for missing values: a "
         "feature gets at most max_bin - 1 value bins, so the default packs into 8 bits a cell."),
    Spec("base_score", None, _check_optional(_CHECKS["base_score"][0]), "finite; in (0, 1) for "
         "reg:logistic and binary:logistic, > 0 for count:poisson, reg:gamma, reg:tweedie, survival:cox and "
         "survival:aft, > -1 for reg:squaredlogerror",
         "Initial prediction, in output space (a probability for reg:logistic and "
         "binary:logistic, a margin for binary:logitraw and multiclass). Not given: estimated "
         "from the weighted labels (docs/parameters.md says how)."),
    Spec("seed", 0, *_CHECKS["seed"], "Seed of every random draw (cut sample, row sampling).",
         aliases=("random_state",)),
    Spec("subsample", 1.0, *_CHECKS["subsample"],
         "Fraction of rows drawn (uniformly, per tree) to build each tree."),
    Spec("sampling_method", "uniform", *_CHECKS["sampling_method"],
         "How subsample draws rows: 'uniform' (each row alike) or 'gradient_based' (XGBoost's minimal "
         "variance sampling: a row is drawn with probability proportional to sqrt(g^2 + 0.1 h^2), at "
         "most 1, and its pair divided by it); 'goss' (LightGBM's, dgboost's own here) keeps the "
         "top_rate of rows of largest |g h| and draws other_rate of the rows from the rest."),
    Spec("top_rate", 0.2, *_CHECKS["rate"], "GOSS: the fraction of rows of largest |g h| kept (dgboost's own)."),
    Spec("other_rate", 0.1, *_CHECKS["rate"],
         "GOSS: the fraction of all rows drawn from the others, their pairs scaled by "
         "(1 - top_rate) / other_rate (dgboost's own)."),
    Spec("colsample_bytree", 1.0, *_CHECKS["colsample"],
         "Fraction of the features drawn for each tree (at least one), by feature_weights where given."),
    Spec("colsample_bylevel", 1.0, *_CHECKS["colsample"],
         "Fraction of the tree's features drawn for each level of it."),
    Spec("colsample_bynode", 1.0, *_CHECKS["colsample"],
         "Fraction of the level's features drawn for each node: the rates multiply, as XGBoost's."),
    Spec("eval_metric", None, _check_optional(_check_eval_metric), "one or a list of: "
         + ", ".join(METRICS), "Metrics reported on every eval set; the last one drives early "
         "stopping. Not given: the objective's default."),
    Spec("disable_default_eval_metric", False, _check_bool, "True or False",
         "Report no metric when eval_metric is not given."),
    Spec("device", "cpu", _check_device, "'cpu', 'cuda', 'cuda:N' ('gpu' means 'cuda')",
         "Where training runs. Data on another device is copied there."),
    Spec("missing", math.nan, _check_missing, "any number",
         "The feature value that means 'missing'. NaN is always missing; in a sparse matrix so is an "
         "absent entry (a stored zero is 0)."),
    Spec("num_class", None, _check_optional(_CHECKS["num_class"][0]), _CHECKS["num_class"][1],
         "Number of classes, required by multi:softmax and multi:softprob."),
    Spec("grow_policy", "depthwise", *_CHECKS["grow_policy"],
         "How trees grow: 'depthwise' (XGBoost's: a level at a time, each node its own best split), "
         "'lossguide' (XGBoost's: the leaf of the largest gain first, up to max_leaves) or 'symmetric' "
         "(CatBoost's oblivious trees, dgboost's own here: every node of a level splits by the one split "
         "of the largest summed score; 2**max_depth leaves)."),
    Spec("tree_method", "hist", *_CHECKS["tree_method"],
         "Always the histogram method; accepted so XGBoost params dicts carry over."),
    Spec("huber_slope", 1.0, *_CHECKS["huber_slope"], "The delta of reg:pseudohubererror."),
    Spec("tweedie_variance_power", 1.5, *_CHECKS["tweedie_variance_power"],
         "reg:tweedie's variance power: near 1 like Poisson, near 2 like gamma."),
    Spec("quantile_alpha", None, _check_optional(_check_quantile_alpha), "a number in (0, 1) or an ascending list of them",
         "reg:quantileerror's quantiles, required by it: one output (and one tree a round) each."),
    Spec("num_target", None, _check_optional(_CHECKS["num_pair"][0]), _CHECKS["num_pair"][1],
         "Targets of multi-output regression: found from y's columns (give it to have them checked)."),
    Spec("multi_strategy", "one_output_per_tree", *_CHECKS["multi_strategy"],
         "Several targets train one tree a target a round (XGBoost's default; its multi_output_tree, "
         "vector-leaf trees, is not supported yet)."),
    Spec("aft_loss_distribution", "normal", *_CHECKS["aft_distribution"],
         "survival:aft's error distribution: log(time) = margin + scale * error."),
    Spec("aft_loss_distribution_scale", 1.0, *_CHECKS["huber_slope"], "survival:aft's scale of the error."),
    Spec("lambdarank_pair_method", "topk", *_CHECKS["pair_method"],
         "Ranking: the pairs of each query: 'topk' pairs each of the first k documents (by the model's "
         "order) with every document below it; 'mean' draws lambdarank_num_pair_per_sample partners of "
         "another label for each document."),
    Spec("lambdarank_num_pair_per_sample", None, _check_optional(_CHECKS["num_pair"][0]), _CHECKS["num_pair"][1],
         "Ranking: k of 'topk' (default 32), or the partners drawn for each document by 'mean' (default 1)."),
    Spec("lambdarank_unbiased", False, _check_bool, "True or False",
         "Ranking: unbiased LambdaMART: each query's rows are in the order they were shown (clicks' "
         "position bias), and the bias of the first k places is estimated while training, each pair's "
         "gradient divided by it."),
    Spec("lambdarank_bias_norm", 1.0, *_CHECKS["bias_norm"],
         "Ranking, unbiased: the p of the bias's Lp normalisation, the estimate raised to 1 / (1 + p) "
         "(XGBoost's code's default; its documentation says 2)."),
    Spec("lambdarank_normalization", True, _check_bool, "True or False",
         "Ranking: scale each query's gradients, by log2(1 + s) / s of their sum s with 'topk', by 1 / "
         "lambdarank_num_pair_per_sample with 'mean'."),
    Spec("lambdarank_score_normalization", True, _check_bool, "True or False",
         "Ranking: divide each pair's metric change by the gap between its two scores (plus 0.01)."),
    Spec("ndcg_exp_gain", True, _check_bool, "True or False",
         "Ranking: NDCG's gain of a relevance r is 2**r - 1 (labels then integers in [0, 31]); False: r."),
    Spec("scale_pos_weight", 1.0, *_CHECKS["scale_pos_weight"],
         "Weight multiplier of positive rows, for binary objectives."),
    Spec("verbosity", 1, *_CHECKS["verbosity"],
         "0 silent, 1 warnings, 2 info, 3 debug: the level of the 'dgboost' logger."),
    Spec("monotone_constraints", None, _check_optional(_check_monotone),
         "a list of -1/0/1 (one per feature), a dict by feature name, or \"(1,0,-1)\"",
         "Keep predictions increasing (1) or decreasing (-1) in a feature, XGBoost's way: a split "
         "whose children's weights go the other way is not made, and each node's weight stays "
         "within bounds its constrained ancestors set."),
    Spec("interaction_constraints", None, _check_optional(_check_interactions),
         "a list of lists of feature indices or names, or \"[[0, 1], [2, 3, 4]]\"",
         "Features allowed to interact, XGBoost's way: a node may split on the features its path "
         "used and on every feature of a set holding all of them (at the root, any feature)."),
    Spec("enable_categorical", False, _check_bool, "True or False",
         "Train on the category columns of a DataFrame (pandas or dask) as categorical features, each "
         "category its own bin, split by category sets (XGBoost's partition splits). Without it a "
         "category column is an error."),
    Spec("feature_types", None, _check_optional(_check_feature_types),
         "a list, one a feature, of 'c' (categorical) or 'q' (numeric)",
         "Which features are categorical: for arrays, whose categorical columns hold category codes "
         "(integers from 0; NaN missing). A DataFrame's category columns are categorical without it."),
    Spec("max_cat_to_onehot", 4, *_CHECKS["max_cat"],
         "A categorical feature of fewer categories than this splits one category against the rest; "
         "one of more, by a partition of its categories (ordered by their gradient statistics)."),
    Spec("max_cat_threshold", 64, *_CHECKS["max_cat"],
         "Partition splits: the most categories a split sends right."),
    Spec("cat_encoding", "partition", *_CHECKS["cat_encoding"],
         "How categorical features train (dgboost's own): 'partition' (category-set splits, XGBoost's) or "
         "'target_statistics' (CatBoost's ordered target statistics: each categorical feature becomes the "
         "prior-smoothed mean label of its category over the rows before the row in a random order, "
         "(sum + prior) / (count + 1); the whole training set's at predict time)."),
    Spec("max_cat_combinations", 2, *_CHECKS["combinations"],
         "Target statistics: the most pairs of categorical features combined into a feature of their own "
         "(its category a pair of categories; dgboost's own), chosen greedily before training by how much "
         "better the pair's mean labels explain the label than either feature's, past what chance gives; "
         "0 makes none. Not made with interaction_constraints."),
    Spec("nthread", None, _check_optional(_CHECKS["nthread"][0]), _CHECKS["nthread"][1],
         "Threads of the CPU kernels. Not given, 0 or -1: every core the process may use; on a "
         "Dask worker, the worker's thread count. The model does not depend on it.",
         aliases=("n_jobs",)),
    Spec("max_device_matrix_bytes", 0, _check_matrix_bytes, f"0 or [{LEAST_MATRIX_BYTES}, {2**62}]",
         "The most bytes the compressed matrix may take on the training device at once (dgboost's own). "
         "A rank whose matrix is larger trains out of core: its matrix in pages of at most half of it, in "
         "pinned host memory (or on disk, in the directory of Dask's config dgboost.spill-directory, where "
         "host memory is short; on a CPU always), streamed to the device; with subsample < 1 each tree's "
         "rows are gathered into one in-core page. 0: on a GPU half its free memory; on a CPU no limit. "
         "The model does not depend on it."),
)

_BY_NAME = {spec.name: spec for spec in PARAMETERS}
_ALIASES = {alias: spec.name for spec in PARAMETERS for alias in spec.aliases}


@dataclasses.dataclass(frozen=True)
class TrainParams:
    """Validated training parameters under their canonical XGBoost names."""

    objective: str = "reg:squarederror"
    eta: float = 0.3
    max_depth: int = 6
    max_leaves: int = 0
    max_greedy_nodes: int = 1
    min_child_weight: float = 1.0
    reg_lambda: float = 1.0
    alpha: float = 0.0
    gamma: float = 0.0
    max_delta_step: float | None = None
    max_bin: int = 256
    base_score: float | None = None
    seed: int = 0
    subsample: float = 1.0
    sampling_method: str = "uniform"
    top_rate: float = 0.2
    other_rate: float = 0.1
    colsample_bytree: float = 1.0
    colsample_bylevel: float = 1.0
    colsample_bynode: float = 1.0
    eval_metric: tuple[str, ...] | None = None
    disable_default_eval_metric: bool = False
    device: str = "cpu"
    missing: float = math.nan
    num_class: int | None = None
    grow_policy: str = "depthwise"
    tree_method: str = "hist"
    huber_slope: float = 1.0
    tweedie_variance_power: float = 1.5
    quantile_alpha: tuple[float, ...] | None = None
    num_target: int | None = None
    multi_strategy: str = "one_output_per_tree"
    aft_loss_distribution: str = "normal"
    aft_loss_distribution_scale: float = 1.0
    lambdarank_pair_method: str = "topk"
    lambdarank_num_pair_per_sample: int | None = None
    lambdarank_unbiased: bool = False
    lambdarank_bias_norm: float = 1.0
    lambdarank_normalization: bool = True
    lambdarank_score_normalization: bool = True
    ndcg_exp_gain: bool = True
    scale_pos_weight: float = 1.0
    verbosity: int = 1
    monotone_constraints: tuple | None = None
    interaction_constraints: tuple | None = None
    enable_categorical: bool = False
    feature_types: tuple[str, ...] | None = None
    max_cat_to_onehot: int = 4
    max_cat_threshold: int = 64
    cat_encoding: str = "partition"
    max_cat_combinations: int = 2
    nthread: int | None = None
    max_device_matrix_bytes: int = 0

    @classmethod
    def from_dict(cls, params: Mapping[str, Any] | None) -> "TrainParams":
        """Validate a user's params dict (XGBoost names or aliases)."""
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise TypeError(f"params must be a dict of parameter names to values, got {type(params).__name__}")
        values: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        for key, value in params.items():
            name = _canonical_name(key)
            if name in values:
                raise ValueError(
                    f"params gives {name!r} twice, as {given_as[name]!r} and {key!r}: keep one")
            given_as[name] = key
            values[name] = _BY_NAME[name].check(key, value)
        _check_together(values)
        return cls(**{_FIELD_OF.get(name, name): value for name, value in values.items()})

    @property
    def n_outputs(self) -> int:
        """Margins per row: num_class for multiclass objectives, one a quantile for
        reg:quantileerror, else 1."""
        if self.objective.startswith("multi:"):
            return self.num_class
        if self.objective == "reg:quantileerror":
            return len(self.quantile_alpha)
        return self.num_target or 1

    @property
    def num_pair(self) -> int:
        """Ranking's lambdarank_num_pair_per_sample: given, or 32 for 'topk', 1 for 'mean'."""
        if self.lambdarank_num_pair_per_sample is not None:
            return self.lambdarank_num_pair_per_sample
        return 32 if self.lambdarank_pair_method == "topk" else 1

    @property
    def effective_max_delta_step(self) -> float:
        """max_delta_step as trees and count:poisson use it: XGBoost's 0.7 for Poisson."""
        if self.max_delta_step is not None:
            return self.max_delta_step
        return 0.7 if self.objective == "count:poisson" else 0.0

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics to report on eval sets, in order (the last drives early stopping)."""
        if self.eval_metric is not None:
            return self.eval_metric
        if self.disable_default_eval_metric:
            return ()
        metric = DEFAULT_METRIC[self.objective]
        if self.objective == "reg:tweedie":
            return (f"{metric}@{self.tweedie_variance_power:g}",)
        if self.objective in RANKING and self.lambdarank_pair_method == "topk":
            return (f"{metric}@{self.num_pair}",)  # XGBoost's: the pairs' cut-off
        return (metric,)

    def with_targets(self, n_targets: int, name: str = "y") -> "TrainParams":
        """These parameters for labels of ``n_targets`` columns: num_target set (1: left as
        given), checked against the objective and a num_target given."""
        if n_targets == 1 and not (self.num_target or 1) > 1:
            return self
        if self.num_target is not None and self.num_target != n_targets:
            raise ValueError(f"num_target={self.num_target} but {name} has {n_targets} columns: give one target a column")
        if self.objective not in MULTI_TARGET:
            raise ValueError(f"{name} has {n_targets} columns (several targets), which objective={self.objective!r} "
                             f"does not take; the objectives of several targets are {', '.join(MULTI_TARGET)}")
        values = {spec.name: getattr(self, _FIELD_OF.get(spec.name, spec.name)) for spec in PARAMETERS}
        _check_together({**{k: v for k, v in values.items() if v is not None}, "num_target": n_targets})
        return dataclasses.replace(self, num_target=n_targets)

    def to_dict(self) -> dict[str, Any]:
        """The parameters under their XGBoost names, JSON-friendly (NaN and infinities as the strings
        "nan", "inf" and "-inf", which JSON has no numbers for: ``missing=np.inf`` is allowed)."""
        out = {}
        for spec in PARAMETERS:
            value = getattr(self, _FIELD_OF.get(spec.name, spec.name))
            if isinstance(value, float) and not math.isfinite(value):
                value = str(value)  # "nan", "inf" or "-inf"
            elif spec.name == "monotone_constraints" and value and isinstance(value[0], tuple):
                value = dict(value)  # the dict form, by feature name
            elif isinstance(value, tuple):
                value = [list(v) if isinstance(v, tuple) else v for v in value]
            out[spec.name] = value
        return out


# ``lambda`` is a Python keyword, so its dataclass field carries XGBoost's alias.
_FIELD_OF = {"lambda": "reg_lambda"}


def _canonical_name(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"params keys must be strings, got {key!r}")
    if key in _BY_NAME:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    if key in NOT_YET_SUPPORTED:
        raise ValueError(f"params[{key!r}]: XGBoost's {key!r} is not supported by dgboost yet; remove it")
    known = sorted(_BY_NAME) + sorted(_ALIASES)
    hint = difflib.get_close_matches(key, known, n=1)
    suggestion = f" Did you mean {hint[0]!r}?" if hint else ""
    raise ValueError(f"params[{key!r}] is not a dgboost parameter.{suggestion} "
                     "docs/parameters.md lists them all.")


def _check_together(values: dict[str, Any]) -> None:
    """Rules that involve more than one parameter."""
    objective = values.get("objective", _BY_NAME["objective"].default)
    multiclass = objective.startswith("multi:")
    num_class = values.get("num_class")
    if multiclass and num_class is None:
        raise ValueError(f"objective={objective!r} needs num_class (the number of classes, >= 2)")
    if not multiclass and num_class is not None:
        raise ValueError(f"num_class={num_class} is only for multi:softmax and multi:softprob, "
                         f"not objective={objective!r}; remove it")
    if values.get("max_depth") == 0 and values.get("grow_policy") != "lossguide":
        raise ValueError("max_depth=0 (no limit) needs grow_policy='lossguide', whose trees stop at max_leaves; "
                         "give a depth, or grow by loss")
    if values.get("grow_policy") == "symmetric":
        for name in ("monotone_constraints", "interaction_constraints", "max_leaves"):
            if values.get(name):
                raise ValueError(f"{name} does not apply to grow_policy='symmetric' (a level's nodes share one "
                                 "split): remove it, or grow depthwise")
    if values.get("sampling_method") == "goss":
        if values.get("subsample", 1.0) < 1.0:
            raise ValueError(f"subsample={values['subsample']!r} with sampling_method='goss': GOSS draws its rows by "
                             "top_rate and other_rate; remove subsample")
        top, other = values.get("top_rate", 0.2), values.get("other_rate", 0.1)
        if top + other > 1.0:
            raise ValueError(f"top_rate={top!r} and other_rate={other!r} add up to more than 1: lower one")
    base_score = values.get("base_score")
    if base_score is not None:
        if objective in ("reg:logistic", "binary:logistic") and not 0.0 < base_score < 1.0:
            raise ValueError(f"base_score={base_score!r} must be a probability in (0, 1) "
                             f"for objective={objective!r}")
        if objective == "count:poisson" and base_score <= 0.0:
            raise ValueError(f"base_score={base_score!r} must be > 0 for count:poisson")
    if objective == "reg:quantileerror" and values.get("quantile_alpha") is None:
        raise ValueError("objective='reg:quantileerror' needs quantile_alpha: the quantile to fit, e.g. 0.5 for the "
                         "median, or a list of them")
    if objective != "reg:quantileerror" and values.get("quantile_alpha") is not None:
        raise ValueError(f"quantile_alpha is only for objective='reg:quantileerror', not {objective!r}; remove it")
    if (values.get("num_target") or 1) > 1 and objective not in MULTI_TARGET:
        raise ValueError(f"num_target={values['num_target']} (several targets) does not fit objective={objective!r}; "
                         f"the objectives of several targets are {', '.join(MULTI_TARGET)}")
    if base_score is not None and objective in ("reg:gamma", "reg:tweedie", "survival:cox", "survival:aft") \
            and base_score <= 0.0:
        raise ValueError(f"base_score={base_score!r} must be > 0 for objective={objective!r} (its link is log)")
    if base_score is not None and objective == "reg:squaredlogerror" and base_score <= -1.0:
        raise ValueError(f"base_score={base_score!r} must be > -1 for objective='reg:squaredlogerror'")
    for metric in values.get("eval_metric") or ():
        metric, *_ = parse_metric(metric)
        if (values.get("num_target") or 1) > 1 and metric not in MULTI_TARGET_METRICS:
            raise ValueError(f"eval_metric {metric!r} does not take several targets; those that do: "
                             f"{', '.join(MULTI_TARGET_METRICS)}")
        if objective not in METRIC_OBJECTIVES[metric]:
            fits = ", ".join(METRIC_OBJECTIVES[metric])
            raise ValueError(f"eval_metric {metric!r} does not fit objective={objective!r}; "
                             f"it is for: {fits}")
