"""Generated, seeded data sets (nothing is downloaded), as ../shared/BENCHMARKS.md defines them.

Each generator returns ``(X, y)`` as float32 numpy arrays; the same seed gives
the same rows. Test sets come from another seed of the same generator (the
hidden coefficients have their own fixed seed, shared by every call).
"""

from __future__ import annotations

import numpy as np

from ._dtypes import FEATURE_DTYPE, LABEL_DTYPE

_COEFFICIENT_SEED = 20260101
_CHUNK_ROWS = 1 << 20


def make_higgs_like(n_rows: int, seed: int = 0, missing_fraction: float = 0.05, task: str = "binary"):
    """Classification with 28 features, in the manner of the Higgs data set.

    ``X ~ N(0, 1)``; ``w`` is 28 standard normals (fixed seed, the same for train
    and test); the score is
    ``z = 0.3 (X.w) + sin(x0 x1) + 0.5 x2 x3 - |x4| + 0.3 [x5 > 0.5] x6``; then
    ``missing_fraction`` of the entries of columns 7, 8 and 9, drawn
    independently, are set to NaN. The label depends on ``task``:

    - ``"binary"`` (BENCHMARKS.md's set): ``y ~ Bernoulli(sigmoid(z))``;
    - ``"regression"``: ``y = z + N(0, 0.5**2)``;
    - ``"multiclass"``: ``y`` = the number of the thresholds (-1, 0, 1) below
      ``z + Logistic(0, 0.5)`` noise: four classes.
    """
    if task not in ("binary", "regression", "multiclass"):
        raise ValueError(f"task={task!r} must be 'binary', 'regression' or 'multiclass'")
    weights = np.random.default_rng(_COEFFICIENT_SEED).standard_normal(28)
    X = np.empty((n_rows, 28), dtype=FEATURE_DTYPE)
    y = np.empty(n_rows, dtype=LABEL_DTYPE)
    rng = np.random.default_rng(seed)
    for start in range(0, n_rows, _CHUNK_ROWS):  # chunks bound the float64 temporaries
        stop = min(start + _CHUNK_ROWS, n_rows)
        x = rng.standard_normal((stop - start, 28))
        z = (0.3 * (x @ weights) + np.sin(x[:, 0] * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3]
             - np.abs(x[:, 4]) + 0.3 * (x[:, 5] > 0.5) * x[:, 6])
        if task == "binary":
            y[start:stop] = rng.random(stop - start) < 1.0 / (1.0 + np.exp(-z))
        elif task == "regression":
            y[start:stop] = z + 0.5 * rng.standard_normal(stop - start)
        else:
            y[start:stop] = np.digitize(z + rng.logistic(0.0, 0.5, stop - start), [-1.0, 0.0, 1.0])
        x[:, 7:10][rng.random((stop - start, 3)) < missing_fraction] = np.nan
        X[start:stop] = x
    return X, y


#: The airline-like set's categorical columns: their cardinalities (day of week, month, hour of
#: departure, carrier, origin airport), as columns 8 to 12.
AIRLINE_CATEGORIES = (7, 12, 24, 30, 300)


def make_airline_like(n_rows: int, seed: int = 0):
    """Classification (is a flight delayed?) with 8 numeric and 5 categorical columns, in the
    manner of the airline data set.

    Columns 0-7: ``N(0, 1)``. Columns 8-12: category codes of AIRLINE_CATEGORIES's
    cardinalities (7, 12, 24, 30, 300), drawn with probability proportional to
    ``1 / (code + 2)`` (a few busy airports and carriers, many small ones); 3% of column 12's
    entries are NaN (missing). Each categorical column ``c`` has an effect table ``e_c`` of
    normals scaled by (0.3, 0.3, 0.5, 0.5, 0.8), and the carrier and hour interact through a
    (30, 24) table of ``N(0, 0.4**2)`` (fixed seed, the same for train and test):
    ``z = sum_c e_c[x_c] + t[x_11, x_10] + 0.4 x0 - 0.3 x1 x2 + 0.5 sin(x3) - 1``
    (a missing origin adds nothing); ``y ~ Bernoulli(sigmoid(z))``. Use with
    ``feature_types = ["q"] * 8 + ["c"] * 5`` and ``enable_categorical=True``.
    """
    tables = np.random.default_rng(_COEFFICIENT_SEED + 5)
    effects = [scale * tables.standard_normal(k) for k, scale in zip(AIRLINE_CATEGORIES, (0.3, 0.3, 0.5, 0.5, 0.8))]
    interaction = 0.4 * tables.standard_normal((30, 24))
    X = np.empty((n_rows, 13), dtype=FEATURE_DTYPE)
    y = np.empty(n_rows, dtype=LABEL_DTYPE)
    rng = np.random.default_rng(seed)
    for start in range(0, n_rows, _CHUNK_ROWS):
        stop = min(start + _CHUNK_ROWS, n_rows)
        n = stop - start
        x = rng.standard_normal((n, 8))
        z = 0.4 * x[:, 0] - 0.3 * x[:, 1] * x[:, 2] + 0.5 * np.sin(x[:, 3]) - 1.0
        codes = []
        for k, effect in zip(AIRLINE_CATEGORIES, effects):
            p = 1.0 / (np.arange(k) + 2.0)
            code = rng.choice(k, size=n, p=p / p.sum())
            z += effect[code]
            codes.append(code)
        z += interaction[codes[3], codes[2]]
        missing = rng.random(n) < 0.03
        z -= np.where(missing, effects[4][codes[4]], 0.0)  # a missing origin adds nothing
        y[start:stop] = rng.random(n) < 1.0 / (1.0 + np.exp(-z))
        X[start:stop, :8] = x
        X[start:stop, 8:] = np.stack(codes, axis=1)
        X[start:stop, 12][missing] = np.nan
    return X, y


def make_year_like(n_rows: int, seed: int = 0):
    """Regression with 90 features, in the manner of YearPredictionMSD.

    ``X ~ N(0, 1)`` with columns 45-89 equal to columns 0-44 plus N(0, 0.5)
    noise (correlated timbre features); ``v`` is 45 normals / sqrt(45) (fixed
    seed); ``y = 1998 + 6 (X[:, :45].v) + 4 sin(2 x0) + 3 x1 x2 - 2 |x3| + N(0, 4)``.
    """
    coefficients = np.random.default_rng(_COEFFICIENT_SEED + 1).standard_normal(45) / np.sqrt(45)
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n_rows, 45))
    X = np.concatenate([base, base + 0.5 * rng.standard_normal((n_rows, 45))], axis=1)
    y = (1998 + 6 * (base @ coefficients) + 4 * np.sin(2 * base[:, 0]) + 3 * base[:, 1] * base[:, 2]
         - 2 * np.abs(base[:, 3]) + 4 * rng.standard_normal(n_rows))
    return X.astype(FEATURE_DTYPE), y.astype(LABEL_DTYPE)


def make_covtype_like(n_rows: int, seed: int = 0):
    """Seven-class classification with 54 features, in the manner of Covertype.

    Columns 0-9 are ``N(0, 1)`` (terrain), 10-13 a one-hot of 4 areas, 14-53 a
    one-hot of 40 soil types. Class scores ``s_k = X[:, :10].W_k + b_k +
    0.8 sin((k + 1) x0) + A[area, k] + S[soil, k]`` with W, A, S normal (fixed
    seed) and ``b = (1.5, 1.7, 0, -1.5, -1, -0.5, 0)`` (two large classes, as in
    Covertype); ``y = argmax_k (s_k + Gumbel noise)``, i.e. drawn from softmax(s).
    """
    coefficients = np.random.default_rng(_COEFFICIENT_SEED + 2)
    terrain_weights = coefficients.standard_normal((10, 7))
    area_effect = coefficients.standard_normal((4, 7))
    soil_effect = coefficients.standard_normal((40, 7))
    bias = np.array([1.5, 1.7, 0.0, -1.5, -1.0, -0.5, 0.0])
    rng = np.random.default_rng(seed)
    terrain = rng.standard_normal((n_rows, 10))
    area = rng.integers(0, 4, n_rows)
    soil = rng.integers(0, 40, n_rows)
    scores = (terrain @ terrain_weights + bias + 0.8 * np.sin(np.arange(1, 8) * terrain[:, :1])
              + area_effect[area] + soil_effect[soil])
    y = np.argmax(scores + rng.gumbel(size=scores.shape), axis=1)
    X = np.zeros((n_rows, 54), dtype=FEATURE_DTYPE)
    X[:, :10] = terrain
    X[np.arange(n_rows), 10 + area] = 1
    X[np.arange(n_rows), 14 + soil] = 1
    return X, y.astype(LABEL_DTYPE)


def make_wide(n_rows: int, seed: int = 0):
    """Binary classification with 500 features, in the manner of scikit-learn's
    ``make_classification`` (the out-of-core paper's shape).

    Columns 0-49 are informative: each row's class ``c`` is a fair coin, its
    cluster one of two per class, at a vertex of the hypercube ``{-1, 1}**50``
    (fixed seed), plus ``N(0, 1)`` noise. Columns 50-99 are redundant: the
    informative columns times a fixed normal 50 x 50 matrix / sqrt(50). Columns
    100-499 are ``N(0, 1)`` noise. 1% of the labels are flipped.
    """
    coefficients = np.random.default_rng(_COEFFICIENT_SEED + 3)
    vertices = coefficients.choice([-1.0, 1.0], size=(4, 50))  # clusters 0, 1: class 0; 2, 3: class 1
    mixing = coefficients.standard_normal((50, 50)) / np.sqrt(50)
    X = np.empty((n_rows, 500), dtype=FEATURE_DTYPE)
    y = np.empty(n_rows, dtype=LABEL_DTYPE)
    rng = np.random.default_rng(seed)
    for start in range(0, n_rows, _CHUNK_ROWS // 8):
        stop = min(start + _CHUNK_ROWS // 8, n_rows)
        rows = stop - start
        label = rng.integers(0, 2, rows)
        informative = vertices[2 * label + rng.integers(0, 2, rows)] + rng.standard_normal((rows, 50))
        X[start:stop, :50] = informative
        X[start:stop, 50:100] = informative @ mixing
        X[start:stop, 100:] = rng.standard_normal((rows, 400))
        y[start:stop] = np.where(rng.random(rows) < 0.01, 1 - label, label)
    return X, y


def make_clicklog_like(n_rows: int, seed: int = 0, n_features: int = 100_000, n_fields: int = 45):
    """Binary classification on sparse one-hot rows, in the manner of a click log: X is a
    scipy.sparse CSR matrix (float32 ones), y float32.

    The ``n_features`` columns are cut into ``n_fields`` fields of consecutive columns,
    field ``f`` getting a share proportional to ``1 / (f + 1)`` (a few large vocabularies,
    many small). Each row takes each field with probability 0.9 (about 40 entries a row),
    and in a field of ``s`` columns the value of rank ``floor(s**u) - 1``, ``u`` uniform
    (a log-uniform, heavy-headed choice: popular values recur, the tail is long). ``w``
    holds one ``N(0, 0.15**2)`` weight a column (fixed seed); the click is
    ``y ~ Bernoulli(sigmoid(-1 + sum of the row's w))``.
    """
    import scipy.sparse

    share = 1.0 / np.arange(1, n_fields + 1)
    sizes = np.maximum(1, np.floor(n_features * share / share.sum()).astype(np.int64))
    sizes[0] += n_features - sizes.sum()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    weights = np.random.default_rng(_COEFFICIENT_SEED + 4).normal(0.0, 0.15, n_features)
    rng = np.random.default_rng(seed)
    columns, counts, labels = [], [], []
    for start in range(0, n_rows, _CHUNK_ROWS):
        rows = min(_CHUNK_ROWS, n_rows - start)
        rank = np.minimum(np.floor(sizes ** rng.random((rows, n_fields))).astype(np.int64) - 1, sizes - 1)
        present = rng.random((rows, n_fields)) < 0.9
        column = starts + rank  # (rows, fields), ascending within a row
        score = -1.0 + np.where(present, weights[column], 0.0).sum(axis=1)
        labels.append(rng.random(rows) < 1.0 / (1.0 + np.exp(-score)))
        columns.append(column[present].astype(np.int32))  # row-major: each row's fields in order
        counts.append(present.sum(axis=1))
    indices = np.concatenate(columns) if columns else np.zeros(0, np.int32)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts) if counts else [])]).astype(np.int64)
    X = scipy.sparse.csr_matrix((np.ones(len(indices), FEATURE_DTYPE), indices, indptr), shape=(n_rows, n_features))
    y = np.concatenate(labels).astype(LABEL_DTYPE) if labels else np.zeros(0, LABEL_DTYPE)
    return X, y


def make_bosch_like(n_rows: int, seed: int = 0, n_features: int = 968, n_stations: int = 52):
    """Rare-failure classification with most values missing, in the manner of the Bosch
    production line set: X float32 with NaN, y float32.

    The columns are cut into ``n_stations`` stations of consecutive columns (as even as
    they divide). A row passes each station with probability 0.2 and has values, ``N(0,
    1)``, at the columns of the stations it passed, NaN elsewhere: about 80% of the
    entries are missing, in blocks. ``y ~ Bernoulli(sigmoid(z))`` with ``z = -4 + x0 +
    0.8 x_s - 0.6 |x_t| + 0.7 [station 3 passed] + 0.5 [station 7 not passed]``, where
    ``s`` and ``t`` are the first columns of stations 5 and 11 and a missing ``x`` counts
    0: a few percent of the rows fail.
    """
    station_of_column = np.arange(n_features) * n_stations // n_features
    first = np.searchsorted(station_of_column, np.arange(n_stations))
    X = np.empty((n_rows, n_features), dtype=FEATURE_DTYPE)
    y = np.empty(n_rows, dtype=LABEL_DTYPE)
    rng = np.random.default_rng(seed)
    for start in range(0, n_rows, _CHUNK_ROWS // 16):
        stop = min(start + _CHUNK_ROWS // 16, n_rows)
        rows = stop - start
        passed = rng.random((rows, n_stations)) < 0.2
        values = rng.standard_normal((rows, n_features), dtype=np.float32)
        values[~passed[:, station_of_column]] = np.nan
        known = np.nan_to_num(values[:, [0, first[5], first[11]]])
        z = (-4.0 + known[:, 0] + 0.8 * known[:, 1] - 0.6 * np.abs(known[:, 2]) + 0.7 * passed[:, 3]
             + 0.5 * ~passed[:, 7])
        y[start:stop] = rng.random(rows) < 1.0 / (1.0 + np.exp(-z))
        X[start:stop] = values
    return X, y


#: The ranking set's relevance grades 0-4 by share of documents, as in MSLR-WEB (about).
_RELEVANCE_SHARES = (0.52, 0.32, 0.13, 0.02, 0.01)


def make_ranking_like(n_rows: int, seed: int = 0):
    """Learning to rank with 136 features, in the manner of MSLR-WEB: ``(X, y, qid)``.

    Queries of 10 to 100 documents (uniform sizes, the last query cut to fit ``n_rows``),
    ``qid`` their ascending ids. Columns 0-9 are query features (one ``N(0, 1)`` draw a
    query, the same on its rows); columns 10-135 document features, ``N(0, 1)``. Each
    document's latent relevance is ``z = 0.4 (x[10:42].w) + 0.5 sin(x10 x11) + x12 [x13 > 0]
    + 0.3 x0 x14 + q + N(0, 0.6**2)``, ``w`` 32 standard normals (fixed seed) and ``q`` a
    query's own ``N(0, 0.5**2)`` shift; the grade ``y`` (0-4) cuts ``z`` at the normal
    quantiles that give grades 0..4 to 52 / 32 / 13 / 2 / 1 % of the documents.
    """
    weights = np.random.default_rng(_COEFFICIENT_SEED + 7).standard_normal(32)
    rng = np.random.default_rng(seed)
    sizes = rng.integers(10, 101, n_rows // 10 + 2)
    ends = np.cumsum(sizes)
    sizes = sizes[: int(np.searchsorted(ends, n_rows)) + 1]
    sizes[-1] -= int(sizes.sum()) - n_rows
    qid = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
    X = np.empty((n_rows, 136), dtype=FEATURE_DTYPE)
    X[:, :10] = np.repeat(rng.standard_normal((sizes.shape[0], 10)), sizes, axis=0)
    shift = np.repeat(0.5 * rng.standard_normal(sizes.shape[0]), sizes)
    y = np.empty(n_rows, dtype=LABEL_DTYPE)
    spread = np.sqrt(0.16 * 32 + 0.5 ** 2 * 0.43 + 0.5 + 0.09 + 0.25 + 0.36)  # z's standard deviation, about
    from statistics import NormalDist

    cuts = [NormalDist(0.0, spread).inv_cdf(p) for p in np.cumsum(_RELEVANCE_SHARES)[:-1]]
    for start in range(0, n_rows, _CHUNK_ROWS // 4):
        stop = min(start + _CHUNK_ROWS // 4, n_rows)
        x = rng.standard_normal((stop - start, 126))
        X[start:stop, 10:] = x
        z = (0.4 * (x[:, :32] @ weights) + 0.5 * np.sin(x[:, 0] * x[:, 1]) + x[:, 2] * (x[:, 3] > 0)
             + 0.3 * X[start:stop, 0] * x[:, 4] + shift[start:stop] + 0.6 * rng.standard_normal(stop - start))
        y[start:stop] = np.digitize(z, cuts)
    return X, y, qid
