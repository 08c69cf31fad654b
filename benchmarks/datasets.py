"""The benchmark data sets of ../shared/BENCHMARKS.md, and how each is scored.

The generators live in ``dgboost.datasets`` (the demo uses them too); their
docstrings give the formulas. The ranking set's rows come in queries (``QUERY_SETS``):
its generator also returns the query ids, which both systems train on and the score
(NDCG@10) reads.
"""

from __future__ import annotations

import numpy as np

from dgboost.data.sparse import from_dense
from dgboost.datasets import (make_airline_like, make_bosch_like, make_clicklog_like, make_covtype_like,
                              make_higgs_like, make_ranking_like, make_wide, make_year_like)


def _auc(y, p):
    from sklearn.metrics import roc_auc_score

    return "AUC", float(roc_auc_score(y, p))


def _rmse(y, p):
    return "RMSE", float(np.sqrt(np.mean((np.asarray(p) - y) ** 2)))


def _accuracy(y, p):
    return "accuracy", float(np.mean(np.asarray(p).argmax(axis=1) == y))


def _ndcg10(y, p, qid):
    return "NDCG@10", ndcg_at(y, p, qid, 10)


def ndcg_at(y, p, qid, k: int) -> float:
    """Mean over queries of NDCG@k, gain 2**y - 1 (XGBoost's), ties in the order of the
    rows; a query with nothing relevant scores 1 (XGBoost's). A plain NumPy reference."""
    y, p, qid = np.asarray(y, np.float64), np.asarray(p, np.float64), np.asarray(qid)
    starts = np.flatnonzero(np.concatenate([[True], qid[1:] != qid[:-1]]))
    place = np.arange(len(y)) - np.repeat(starts, np.diff(np.append(starts, len(y))))
    discount = np.where(place < k, 1.0 / np.log2(place + 2.0), 0.0)
    found = np.add.reduceat((2.0 ** y[np.lexsort((-p, qid))] - 1.0) * discount, starts)
    best = np.add.reduceat((2.0 ** y[np.lexsort((-y, qid))] - 1.0) * discount, starts)
    return float(np.mean(np.where(best > 0, found / np.where(best > 0, best, 1.0), 1.0)))


#: name -> (objective, extra params, number of features, scorer)
TASKS = {
    "higgs": ("binary:logistic", {}, 28, _auc),
    # The higgs-like set and 22 columns of noise: the 2M x 50 shape of issue 24's shallow trees.
    "higgs50": ("binary:logistic", {}, 50, _auc),
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
    # Queries of 10-100 documents, relevance 0-4, 136 features (MSLR-WEB's shape).
    "ranking": ("rank:ndcg", {}, 136, _ndcg10),
}
def _make_higgs50(rows: int, seed: int):
    """make_higgs_like's rows (its label) beside 22 columns of N(0, 1) noise from their own seed."""
    X, y = make_higgs_like(rows, seed)
    noise = np.random.default_rng(1_000_003 + seed).standard_normal((rows, 22), dtype=np.float32)
    return np.concatenate([X, noise], axis=1), y


_GENERATORS = {"higgs": make_higgs_like, "higgs50": _make_higgs50, "wide": make_wide, "year": make_year_like,
               "covtype": make_covtype_like, "clicklog": make_clicklog_like, "bosch": make_bosch_like,
               "airline": make_airline_like, "ranking": make_ranking_like,
               "bosch-csr": lambda rows, seed: _as_csr(*make_bosch_like(rows, seed))}
#: The sets whose X is a scipy CSR matrix: it stays on the host (each system moves it).
SPARSE = {"clicklog", "bosch-csr"}
#: The sets whose rows come in queries: their generators return (X, y, qid), their scorers take qid.
QUERY_SETS = {"ranking"}


def _as_csr(X, y):
    return from_dense(X), y


def load(name: str, rows: int, test_rows: int, device: str = "cpu"):
    """(X, y, X_test, y_test); on the GPU as cupy arrays when ``device == "cuda"``, but for
    the sparse sets (SPARSE), whose matrices stay on the host."""
    return load_with_queries(name, rows, test_rows, device)[:4]


def load_with_queries(name: str, rows: int, test_rows: int, device: str = "cpu"):
    """``load``'s (X, y, X_test, y_test), then (qid, qid_test): numpy query ids for the
    sets of QUERY_SETS, else (None, None)."""
    train, test = _GENERATORS[name](rows, seed=0), _GENERATORS[name](test_rows, seed=1)
    (X, y), (X_test, y_test) = train[:2], test[:2]
    queries = (train[2], test[2]) if name in QUERY_SETS else (None, None)
    if device == "cuda" and name not in SPARSE:
        import cupy

        X, y, X_test = cupy.asarray(X), cupy.asarray(y), cupy.asarray(X_test)
    return X, y, X_test, y_test, *queries
