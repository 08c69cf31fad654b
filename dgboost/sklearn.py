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

from .backend import is_cupy_array, to_numpy
from .booster import Booster
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
           "random_state", "missing", "eval_metric", "device", "huber_slope", "tree_method", "grow_policy")


class _DGBModel(BaseEstimator):
    """What the regressor and the classifier share."""

    def __init__(self, *, n_estimators: int = 100, max_depth=None, max_bin=None, learning_rate=None,
                 verbosity=None, objective=None, gamma=None, min_child_weight=None, max_delta_step=None,
                 subsample=None, reg_alpha=None, reg_lambda=None, scale_pos_weight=None, base_score=None,
                 random_state=None, missing=np.nan, eval_metric=None, early_stopping_rounds=None,
                 callbacks=None, device=None, huber_slope=None, tree_method=None, grow_policy=None):
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

    # ---- scikit-learn protocol ----
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
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
        names = booster.feature_names or tuple(f"f{i}" for i in range(booster.num_features))
        values = np.array([score.get(name, 0.0) for name in names], dtype=np.float32)
        total = values.sum()
        return values / total if total > 0 else values

    # ---- shared steps ----
    def _train_params(self, extra: dict) -> dict:
        params = {name: getattr(self, name) for name in _PARAMS if getattr(self, name) is not None}
        return params | extra

    def _check(self, X, y=None, *, reset: bool):
        """(X, y) checked by scikit-learn (cupy arrays pass as they are, for the GPU)."""
        if is_cupy_array(X):
            if reset:
                self.n_features_in_ = int(X.shape[1])
            return X, y
        kwargs = {"ensure_all_finite": "allow-nan", "dtype": [np.float32, np.float64], "reset": reset}
        if y is None:
            return _validate_data(self, X, **kwargs), None
        return _validate_data(self, X, y, y_numeric=not isinstance(self, ClassifierMixin), **kwargs)

    def _fit(self, X, y, params: dict, sample_weight, base_margin, eval_set, verbose, init_model=None) -> None:
        if sample_weight is not None and not is_cupy_array(X):
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float32)
        evals = []
        for index, entry in enumerate(eval_set or ()):
            if not isinstance(entry, (list, tuple)) or len(entry) != 2:
                raise TypeError(f"eval_set[{index}] must be a pair (X, y), got {entry!r:.80}")
            eval_X, eval_y = self._check(entry[0], reset=False)[0], self._eval_labels(entry[1])
            evals.append((eval_X, eval_y, f"validation_{index}"))
        booster = train(params, X, y, num_boost_round=self.n_estimators, evals=evals,
                        sample_weight=sample_weight, base_margin=base_margin,
                        early_stopping_rounds=self.early_stopping_rounds,
                        callbacks=None if self.callbacks is None else list(self.callbacks), verbose_eval=verbose,
                        init_model=_booster_of(init_model))
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            booster.feature_names = tuple(str(name) for name in names)
        self._Booster = booster

    def _eval_labels(self, y):
        return y

    def _margins(self, X, output_margin: bool, iteration_range):
        check_is_fitted(self, "_Booster")
        X, _ = self._check(X, reset=False)
        if iteration_range is None and self._Booster.best_iteration is not None:
            iteration_range = (0, self._Booster.best_iteration + 1)
        return self._Booster.predict(X, output_margin=output_margin, iteration_range=iteration_range)


def _booster_of(model):
    """A fitted estimator's Booster; a Booster, a path or None as they are."""
    return model.get_booster() if isinstance(model, _DGBModel) else model


def _required(estimator, y):
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the target y is None")
    return y


class DGBRegressor(RegressorMixin, _DGBModel):
    """Gradient-boosted trees for regression (``objective`` default ``reg:squarederror``)."""

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
        self.classes_, encoded = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"y has one class ({self.classes_[0]!r}): a classifier needs at least two")
        self.n_classes_ = len(self.classes_)
        objective = {"objective": self.objective or "binary:logistic"} if self.n_classes_ == 2 else \
            {"objective": self.objective or "multi:softprob", "num_class": self.n_classes_}
        self._fit(X, encoded.astype(np.float32), self._train_params(objective), sample_weight, base_margin,
                  eval_set, verbose, init_model)
        return self

    def _eval_labels(self, y):
        y = to_numpy(y).reshape(-1)
        codes = np.searchsorted(self.classes_, y)
        unknown = (codes >= len(self.classes_)) | (self.classes_[np.minimum(codes, len(self.classes_) - 1)] != y)
        if unknown.any():
            raise ValueError(f"eval_set labels {sorted(set(y[unknown].tolist()))[:5]} are not among the "
                             f"training classes {self.classes_.tolist()[:10]}")
        return codes.astype(np.float32)

    def predict_proba(self, X, *, iteration_range=None) -> np.ndarray:
        """Class probabilities, shape (n_rows, n_classes), columns in ``classes_`` order."""
        probabilities = self._margins(X, False, iteration_range)
        if probabilities.ndim == 1:
            module = type(probabilities).__module__.split(".")[0]
            xp = np if module == "numpy" else __import__(module)
            return xp.stack([1.0 - probabilities, probabilities], axis=1)
        return probabilities

    def predict(self, X, *, output_margin: bool = False, iteration_range=None):
        """The most probable class of each row (its label); margins with ``output_margin``."""
        if output_margin:
            return self._margins(X, True, iteration_range)
        probabilities = to_numpy(self.predict_proba(X, iteration_range=iteration_range))
        return self.classes_[probabilities.argmax(axis=1)]
