"""scikit-learn estimators: ``DGBRegressor`` and ``DGBClassifier``, as XGBoost's sklearn API.

Constructor arguments take XGBoost's scikit-learn names (``n_estimators``,
``learning_rate``, ``reg_lambda``, ``random_state`` ...); ``None`` means the
training default (docs/parameters.md). ``fit`` checks the data with
scikit-learn's own validation (numpy, pandas, lists; NaN is missing), or passes
cupy arrays straight to the GPU. Needs scikit-learn (``pip install dgboost[test]``
or scikit-learn itself).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin

from .backend import get_xp, is_cupy_array, to_numpy
from .booster import Booster
from .callback import TrainingCallback
from .objectives.base import _softmax
from .training import train

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError:  # pragma: no cover - older scikit-learn
    def _validate_data(estimator, *args, **kwargs):
        return estimator._validate_data(*args, **kwargs)

from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

__all__ = ["DGBClassifier", "DGBRegressor"]

#: Constructor arguments passed to ``train`` as training parameters (None: the default).
_PARAMS = ("max_depth", "max_bin", "learning_rate", "verbosity", "objective", "gamma", "min_child_weight",
           "max_delta_step", "subsample", "reg_alpha", "reg_lambda", "scale_pos_weight", "base_score",
           "random_state", "missing", "eval_metric", "device", "huber_slope", "tree_method", "grow_policy",
           "n_jobs", "monotone_constraints", "interaction_constraints", "colsample_bytree", "colsample_bylevel",
           "colsample_bynode", "max_leaves", "sampling_method", "top_rate", "other_rate", "max_greedy_nodes",
           "enable_categorical", "feature_types", "max_cat_to_onehot", "max_cat_threshold", "tweedie_variance_power",
           "quantile_alpha", "lambdarank_pair_method", "lambdarank_num_pair_per_sample", "lambdarank_normalization",
           "lambdarank_score_normalization", "ndcg_exp_gain", "lambdarank_unbiased", "lambdarank_bias_norm",
           "aft_loss_distribution", "aft_loss_distribution_scale")


class _DGBModel(BaseEstimator):
    """What the regressor and the classifier share."""

    def __init__(self, *, n_estimators: int = 100, max_depth=None, max_bin=None, learning_rate=None,
                 verbosity=None, objective=None, gamma=None, min_child_weight=None, max_delta_step=None,
                 subsample=None, reg_alpha=None, reg_lambda=None, scale_pos_weight=None, base_score=None,
                 random_state=None, missing=np.nan, eval_metric=None, early_stopping_rounds=None,
                 callbacks=None, device=None, huber_slope=None, tree_method=None, grow_policy=None, n_jobs=None,
                 monotone_constraints=None, interaction_constraints=None, colsample_bytree=None,
                 colsample_bylevel=None, colsample_bynode=None, feature_weights=None, max_leaves=None,
                 sampling_method=None, top_rate=None, other_rate=None, max_greedy_nodes=None,
                 enable_categorical=None, feature_types=None, max_cat_to_onehot=None, max_cat_threshold=None,
                 tweedie_variance_power=None, quantile_alpha=None, lambdarank_pair_method=None,
                 lambdarank_num_pair_per_sample=None, lambdarank_normalization=None,
                 lambdarank_score_normalization=None, ndcg_exp_gain=None, lambdarank_unbiased=None,
                 lambdarank_bias_norm=None, aft_loss_distribution=None, aft_loss_distribution_scale=None):
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_bin = max_bin
        self.learning_rate = learning_rate
        self.verbosity = verbosity
        self.objective = objective
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.reg_alpha = reg_alpha
        self.reg_lambda = reg_lambda
        self.scale_pos_weight = scale_pos_weight
        self.base_score = base_score
        self.random_state = random_state
        self.missing = missing
        self.eval_metric = eval_metric
        self.early_stopping_rounds = early_stopping_rounds
        self.callbacks = callbacks
        self.device = device
        self.huber_slope = huber_slope
        self.tree_method = tree_method
        self.grow_policy = grow_policy
        self.n_jobs = n_jobs
        self.monotone_constraints = monotone_constraints
        self.interaction_constraints = interaction_constraints
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.feature_weights = feature_weights
        self.max_leaves = max_leaves
        self.sampling_method = sampling_method
        self.top_rate = top_rate
        self.other_rate = other_rate
        self.max_greedy_nodes = max_greedy_nodes
        self.enable_categorical = enable_categorical
        self.feature_types = feature_types
        self.max_cat_to_onehot = max_cat_to_onehot
        self.max_cat_threshold = max_cat_threshold
        self.tweedie_variance_power = tweedie_variance_power
        self.quantile_alpha = quantile_alpha
        self.lambdarank_pair_method = lambdarank_pair_method
        self.lambdarank_num_pair_per_sample = lambdarank_num_pair_per_sample
        self.lambdarank_normalization = lambdarank_normalization
        self.lambdarank_score_normalization = lambdarank_score_normalization
        self.ndcg_exp_gain = ndcg_exp_gain
        self.lambdarank_unbiased = lambdarank_unbiased
        self.lambdarank_bias_norm = lambdarank_bias_norm
        self.aft_loss_distribution = aft_loss_distribution
        self.aft_loss_distribution_scale = aft_loss_distribution_scale

    # ---- scikit-learn protocol ----
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    def get_booster(self) -> Booster:
        """The trained model."""
        check_is_fitted(self, "_Booster")
        return self._Booster

    def evals_result(self) -> dict:
        """Every eval set's metrics per round: ``{"validation_0": {"rmse": [...]}, ...}``."""
        check_is_fitted(self, "_Booster")
        return self._Booster.evals_result()

    @property
    def best_iteration(self) -> int | None:
        return self.get_booster().best_iteration

    @property
    def best_score(self) -> float | None:
        return self.get_booster().best_score

    @property
    def feature_importances_(self) -> np.ndarray:
        """Each feature's mean split gain (XGBoost's default "gain"), normalised to sum to 1."""
        booster = self.get_booster()
        score = booster.get_score("gain")
        names = booster.feature_labels
        values = np.array([score.get(name, 0.0) for name in names], dtype=np.float32)
        total = values.sum()
        return values / total if total > 0 else values

    # ---- shared steps ----
    def _train_params(self, extra: dict) -> dict:
        params = {name: getattr(self, name) for name in _PARAMS if getattr(self, name) is not None}
        if isinstance(params.get("random_state"), np.random.RandomState):  # scikit-learn's; an int drawn, as XGBoost
            params["random_state"] = int(params["random_state"].randint(np.iinfo(np.int32).max))
        return params | extra

    def _check(self, X, y=None, *, reset: bool):
        """(X, y) checked by scikit-learn (cupy arrays and cupyx sparse matrices pass as they are,
        for the GPU; a scipy sparse matrix comes back as CSR)."""
        if is_cupy_array(X):
            if reset:
                self.n_features_in_ = int(X.shape[1])
                self.__dict__.pop("feature_names_in_", None)  # a frame's, fitted before: not this array's
            return X, y
        if self.enable_categorical and type(X).__name__ == "DataFrame":  # its category columns reach dgboost
            if reset:
                self.n_features_in_ = int(X.shape[1])
                self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
            elif X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input")
            return X, y
        kwargs = {"ensure_all_finite": "allow-nan", "dtype": [np.float32, np.float64], "reset": reset,
                  "accept_sparse": "csr"}
        if y is None:
            return _validate_data(self, X, **kwargs), None
        multi_output = isinstance(self, RegressorMixin)  # several targets: y of shape (n_rows, k)
        return _validate_data(self, X, y, y_numeric=not isinstance(self, ClassifierMixin), multi_output=multi_output,
                              **kwargs)

    def _fit(self, X, y, params: dict, sample_weight, base_margin, eval_set, verbose, init_model=None,
             **queries) -> None:
        if sample_weight is not None and not is_cupy_array(X) and type(X).__name__ != "DataFrame" \
                and not any(v is not None for v in queries.values()):
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float32)
        booster = self._run(train, X, y, params, sample_weight, base_margin, eval_set, verbose, init_model,
                            check_eval_X=lambda eval_X: self._check(eval_X, reset=False)[0], **queries)
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            booster.feature_names = tuple(str(name) for name in names)
        self._Booster = booster

    def _run(self, trainer, X, y, params: dict, sample_weight, base_margin, eval_set, verbose, init_model,
             check_eval_X, **queries) -> Booster:
        """``trainer`` (dgboost.train, or dgboost.dask.train with a client) with this estimator's
        arguments; eval sets named validation_0, 1, ..., their labels mapped as y's were;
        ``queries``: a ranker's qid, group, eval_qid and eval_group, where given."""
        evals = []
        for index, entry in enumerate(eval_set or ()):
            if not isinstance(entry, (list, tuple)) or len(entry) != 2:
                raise TypeError(f"eval_set[{index}] must be a pair (X, y), got {entry!r:.80}")
            evals.append((check_eval_X(entry[0]), self._eval_labels(entry[1]), f"validation_{index}"))
        rounds = 100 if self.n_estimators is None else self.n_estimators  # None: the training default, as XGBoost's
        return trainer(params, X, y, num_boost_round=rounds, evals=evals, sample_weight=sample_weight,
                       base_margin=base_margin, early_stopping_rounds=self.early_stopping_rounds,
                       callbacks=_listed(self.callbacks), verbose_eval=verbose,
                       init_model=_booster_of(init_model), feature_weights=self.feature_weights,
                       **{name: value for name, value in queries.items() if value is not None})

    def _eval_labels(self, y):
        return y

    def _margins(self, X, output_margin: bool, iteration_range):
        check_is_fitted(self, "_Booster")
        X, _ = self._check(X, reset=False)
        best = self._Booster.best_iteration
        pair = hasattr(iteration_range, "__len__") and len(iteration_range) == 2  # else predict says what it is
        if best is not None and (iteration_range is None or (pair and iteration_range[1] == 0)):
            iteration_range = (0, best + 1)  # end 0 too, as XGBoost's estimators take it
        return self._Booster.predict(X, output_margin=output_margin, iteration_range=iteration_range)


def _booster_of(model):
    """A fitted estimator's Booster; a Booster, a path or None as they are."""
    return model.get_booster() if isinstance(model, _DGBModel) else model


def _required(estimator, y):
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None")
    return y


class DGBRegressor(RegressorMixin, _DGBModel):
    """Gradient-boosted trees for regression (``objective`` default ``reg:squarederror``); a y of
    shape (n_rows, k) trains k targets (one tree a target a round), and predicts k columns."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y, *, sample_weight=None, base_margin=None, eval_set=None, verbose=False, init_model=None):
        """Train on (X, y); ``eval_set`` is a list of (X, y) pairs, named validation_0, 1, ...;
        ``init_model`` (a Booster, a path or a fitted estimator) continues its training."""
        X, y = self._check(X, _required(self, y), reset=True)
        self._fit(X, y, self._train_params({}), sample_weight, base_margin, eval_set, verbose, init_model)
        return self

    def predict(self, X, *, output_margin: bool = False, iteration_range=None):
        """Predictions of the best iteration (after early stopping), else of every tree."""
        return self._margins(X, output_margin, iteration_range)


class DGBClassifier(ClassifierMixin, _DGBModel):
    """Gradient-boosted trees for classification: binary (``binary:logistic``) or multiclass
    (``multi:softprob``), chosen from the labels. Labels of any type are mapped to
    0..n_classes-1 for training and back in ``predict``; ``classes_`` holds them."""

    def fit(self, X, y, *, sample_weight=None, base_margin=None, eval_set=None, verbose=False, init_model=None):
        """Train on (X, y); ``eval_set`` is a list of (X, y) pairs, named validation_0, 1, ...;
        ``init_model`` (a Booster, a path or a fitted estimator) continues its training."""
        X, y = self._check(X, _required(self, y), reset=True)
        y = to_numpy(y)
        check_classification_targets(y)
        classes, encoded = np.unique(y, return_inverse=True)
        params = self._train_params(self._learn_classes(classes))
        self._fit(X, encoded.astype(np.float32), params, sample_weight, base_margin, eval_set, verbose, init_model)
        return self

    def _learn_classes(self, classes) -> dict:
        """Keep the sorted labels ``classes``; the objective (and num_class) they call for."""
        self.classes_ = np.asarray(classes)
        if len(self.classes_) < 2:
            raise ValueError(f"y has one class ({self.classes_[0]!r}): a classifier needs at least two")
        self.n_classes_ = len(self.classes_)
        objective = self.objective
        if isinstance(objective, str) and objective.startswith("multi:"):
            return {"objective": objective, "num_class": self.n_classes_}
        if self.n_classes_ == 2:
            return {"objective": objective or "binary:logistic"}
        if objective is None or (isinstance(objective, str) and objective.startswith("binary:")):
            return {"objective": "multi:softprob", "num_class": self.n_classes_}  # XGBoost's switch
        return {"objective": objective}  # the parameters' check says what is wrong with it

    def _eval_labels(self, y):
        return encode_labels(y, self.classes_)

    def predict_proba(self, X, *, iteration_range=None) -> np.ndarray:
        """Class probabilities, shape (n_rows, n_classes), columns in ``classes_`` order (for
        ``multi:softmax``, whose predictions are classes, the softmax of its margins, as XGBoost's)."""
        if self.get_booster().params.objective == "multi:softmax":
            return _softmax(self._margins(X, True, iteration_range))  # multi:softprob's transform
        return two_columns(self._margins(X, False, iteration_range))

    def predict(self, X, *, output_margin: bool = False, iteration_range=None):
        """The most probable class of each row (its label); margins with ``output_margin``."""
        if output_margin:
            return self._margins(X, True, iteration_range)
        probabilities = to_numpy(self.predict_proba(X, iteration_range=iteration_range))
        return self.classes_[probabilities.argmax(axis=1)]


class DGBRanker(_DGBModel):
    """Gradient-boosted trees for learning to rank (``objective`` default ``rank:ndcg``):
    rows come in queries, given by ``qid`` (a query id a row, ascending) or ``group`` (the
    queries' sizes), as XGBRanker takes them; ``predict`` returns scores to sort a query by."""

    def fit(self, X, y, *, group=None, qid=None, sample_weight=None, base_margin=None, eval_set=None,
            eval_group=None, eval_qid=None, verbose=False, init_model=None):
        """Train on (X, y) of queries ``qid`` or ``group``; ``sample_weight`` is one a query (or
        one a row, equal within each query); ``eval_set`` a list of (X, y) pairs with their
        queries in ``eval_qid`` or ``eval_group``."""
        if qid is None and group is None and type(X).__name__ == "DataFrame" and "qid" in X.columns:
            raise ValueError("X has a 'qid' column: pass it as qid=X.pop('qid') (XGBRanker reads it from the frame; "
                             "dgboost takes it as an argument, so it is never a feature)")
        X, y = self._check(X, _required(self, y), reset=True)
        params = self._train_params({"objective": self.objective or "rank:ndcg"})
        self._fit(X, y, params, sample_weight, base_margin, eval_set, verbose, init_model, qid=qid, group=group,
                  eval_qid=eval_qid, eval_group=eval_group)
        return self

    def predict(self, X, *, output_margin: bool = False, iteration_range=None):
        """Each row's score: sorting a query's rows by it, descending, ranks them."""
        return self._margins(X, output_margin, iteration_range)


def _listed(callbacks):
    """The estimator's ``callbacks`` as a new list (train checks what it holds; one callback
    given alone is left as it is, for train to say so)."""
    if callbacks is None or isinstance(callbacks, TrainingCallback):
        return callbacks
    return list(callbacks)


def encode_labels(y, classes: np.ndarray) -> np.ndarray:
    """Labels as float32 codes into the sorted ``classes``; a label not among them raises."""
    values = to_numpy(y).reshape(-1)
    codes = np.searchsorted(classes, values)
    unknown = (codes >= len(classes)) | (classes[np.minimum(codes, len(classes) - 1)] != values)
    if unknown.any():
        raise ValueError(f"labels {sorted(set(values[unknown].tolist()))[:5]} are not among the training "
                         f"classes {classes.tolist()[:10]}")
    return codes.astype(np.float32)


def two_columns(probabilities):
    """A binary model's P(class 1) as (P(class 0), P(class 1)) columns; others as they are."""
    if probabilities.ndim != 1:
        return probabilities
    xp = get_xp(probabilities)
    return xp.stack([1.0 - probabilities, probabilities], axis=1)
