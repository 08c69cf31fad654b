"""The benchmark data sets of ../shared/BENCHMARKS.md, and how each is scored.

The generators live in ``dgboost.datasets`` (the demo uses them too); their
docstrings give the formulas. The ranking set comes with the issue that adds ranking
objectives.
"""

from __future__ import annotations

import numpy as np

from dgboost.data.sparse import from_dense
from dgboost.datasets import (make_airline_like, make_bosch_like, make_clicklog_like, make_covtype_like,
                              make_higgs_like, make_wide, make_year_like)


def _auc(y, p):
    from sklearn.metrics import roc_auc_score

    return "AUC", float(roc_auc_score(y, p))


def _rmse(y, p):
    return "RMSE", float(np.sqrt(np.mean((np.asarray(p) - y) ** 2)))


def _accuracy(y, p):
    return "accuracy", float(np.mean(np.asarray(p).argmax(axis=1) == y))


#: name -> (objective, extra params, number of features, scorer)
TASKS = {
    "higgs": ("binary:logistic", {}, 28, _auc),
    "wide": ("binary:logistic", {}, 500, _auc),
    "year": ("reg:squarederror", {}, 90, _rmse),
    "covtype": ("multi:softprob", {"num_class": 7}, 54, _accuracy),
    # Sparse input (scipy CSR, on the host for both systems): a click log of hashed one-hot
    # fields, and the Bosch-like set given as CSR; "bosch" is the same rows as a dense
    # array with NaN.
    "clicklog": ("binary:logistic", {}, 100_000, _auc),
    "bosch": ("binary:logistic", {}, 968, _auc),
    "bosch-csr": ("binary:logistic", {}, 968, _auc),
    # Categorical columns as codes (8 numeric, then 5 categorical): both systems are told by
    # feature_types (XGBoost's through its DMatrix).
    "airline": ("binary:logistic", {"enable_categorical": True, "feature_types": ["q"] * 8 + ["c"] * 5}, 13, _auc),
}
_GENERATORS = {"higgs": make_higgs_like, "wide": make_wide, "year": make_year_like,
               "covtype": make_covtype_like, "clicklog": make_clicklog_like, "bosch": make_bosch_like,
               "airline": make_airline_like,
               "bosch-csr": lambda rows, seed: _as_csr(*make_bosch_like(rows, seed))}
#: The sets whose X is a scipy CSR matrix: it stays on the host (each system moves it).
SPARSE = {"clicklog", "bosch-csr"}


def _as_csr(X, y):
    return from_dense(X), y


def load(name: str, rows: int, test_rows: int, device: str = "cpu"):
    """(X, y, X_test, y_test); on the GPU as cupy arrays when ``device == "cuda"``, but for
    the sparse sets (SPARSE), whose matrices stay on the host."""
    X, y = _GENERATORS[name](rows, seed=0)
    X_test, y_test = _GENERATORS[name](test_rows, seed=1)
    if device == "cuda" and name not in SPARSE:
        import cupy

        X, y, X_test = cupy.asarray(X), cupy.asarray(y), cupy.asarray(X_test)
    return X, y, X_test, y_test
