"""Categorical features: which features are, their categories, and their codes.

A categorical feature enters training as category codes in its float32 column:
0, 1, ..., K - 1, NaN for missing. A pandas (or dask) ``category`` column gives
them (its ``cat.codes``, -1 missing) and its categories, which the model keeps,
so that a frame at predict time is coded by category value, not by its own
codes. An array's column that ``feature_types`` marks "c" holds the codes
itself; its K is the largest code of the training rows, plus one.

Each code is its own bin: the feature's cuts are 1, 2, ..., K - 1, so the bin of
code ``c`` is ``c`` (data/sketch.py's rule, ``x < cut`` left) and the histograms,
the compressed matrix and the partition kernels see bins as for any feature. A
split sends the categories of a set right (kernels: the split table's category
bits); missing values, and at predict time categories the model has not seen
(not among its categories, or a code of K or more), follow the split's learned
default direction.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .._dtypes import CUT_DTYPE, FEATURE_DTYPE

#: The most categories one feature may have: its codes are 0 .. MAX_CATEGORIES - 1. A split
#: carries a bit per category of the widest categorical feature.
MAX_CATEGORIES = 1 << 14


@dataclasses.dataclass(frozen=True)
class Categories:
    """Which features are categorical, and what their codes mean.

    Attributes
    ----------
    categorical : tuple of bool, one a feature
    values : tuple, one a feature: a categorical frame column's categories (a tuple of
        str, int or float, in code order), None for a numeric feature or one given as codes
    counts : tuple of int, one a feature: K, the codes of a categorical feature are 0 .. K - 1
        (0 for a numeric feature, or where K is not known yet: see ``with_counts``)
    statistics : with ``cat_encoding="target_statistics"``, one entry a feature: a categorical
        feature's target statistic of each code over the whole training set (a float32 array of
        K), None for a numeric feature; None for category-set splits
    prior : the training labels' mean, the statistics' prior (with ``statistics``)
    combinations : pairs (f1, f2) of input features combined into features of their own, after
        the inputs (target statistics): the code of a row's pair is ``c1 * K2 + c2``. The tuples
        above then cover the inputs and these features, in that order.
    """

    categorical: tuple[bool, ...]
    values: tuple
    counts: tuple[int, ...]
    statistics: tuple | None = None
    prior: float | None = None
    combinations: tuple = ()

    @property
    def n_features(self) -> int:
        """The features the trees split on: the inputs, then the combinations."""
        return len(self.categorical)

    @property
    def n_inputs(self) -> int:
        """The features of the rows given (without the combinations)."""
        return len(self.categorical) - len(self.combinations)

    def with_combinations(self, pairs) -> "Categories":
        """These categories with ``pairs`` of input features combined, features of their own."""
        pairs = tuple((int(a), int(b)) for a, b in pairs)
        counts = tuple(self.counts[a] * self.counts[b] for a, b in pairs)
        return dataclasses.replace(self, categorical=self.categorical + (True,) * len(pairs),
                                   values=self.values + (None,) * len(pairs), counts=self.counts + counts,
                                   combinations=self.combinations + pairs)

    def expand(self, X):
        """Rows of the inputs' codes with each combination's code appended (``c1 * K2 + c2``,
        missing where either is); ``X`` itself without combinations."""
        if not self.combinations:
            return X
        from ..backend import get_xp

        xp = get_xp(X)
        columns = [X[:, a] * FEATURE_DTYPE(self.counts[b]) + X[:, b] for a, b in self.combinations]
        return xp.ascontiguousarray(xp.concatenate([X, xp.stack(columns, axis=1).astype(FEATURE_DTYPE)], axis=1))

    def labels(self, names) -> tuple:
        """The trees' feature names: the inputs' ``names``, then each combination's "a*b"."""
        return tuple(names) + tuple(f"{names[a]}*{names[b]}" for a, b in self.combinations)

    def fold(self, contributions):
        """Per-feature contributions (..., n_features + 1: the trees' features, then the bias) as
        the inputs' (..., n_inputs + 1): a combination's shared equally by its two features."""
        if not self.combinations:
            return contributions
        n = self.n_inputs
        folded = np.concatenate([contributions[..., :n], contributions[..., -1:]], axis=-1)
        for index, (a, b) in enumerate(self.combinations):
            half = contributions[..., n + index] / 2
            folded[..., a] += half
            folded[..., b] += half
        return folded

    @property
    def indices(self) -> np.ndarray:
        """The categorical features' indices, ascending (int64)."""
        return np.flatnonzero(np.array(self.categorical, dtype=bool))

    @property
    def max_count(self) -> int:
        """The most categories of any categorical feature (0 without one)."""
        return max(self.counts, default=0)

    def with_counts(self, counts) -> "Categories":
        return dataclasses.replace(self, counts=tuple(int(c) for c in counts))

    def check_sets(self, tree, where: str) -> None:
        """A model file's tree: each category set on a categorical feature, its codes below the
        feature's count (ValueError)."""
        for node, codes in tree.categories.items():
            feature = int(tree.feature[node])
            if self.by_statistics or not self.categorical[feature] or (len(codes) and codes[-1] >= self.counts[feature]):
                raise ValueError(f"{where}: node {node}'s category set is not of a categorical feature's codes")

    def cuts(self, cuts):
        """``cuts`` (data/sketch.Cuts) with each categorical feature's replaced by 1 .. K - 1:
        a bin a category."""
        from .sketch import Cuts

        pieces, offsets = [], [0]
        for feature in range(self.n_features):
            if self.categorical[feature]:
                piece = np.arange(1, max(self.counts[feature], 1), dtype=CUT_DTYPE)
            else:
                piece = cuts.values[cuts.offsets[feature]:cuts.offsets[feature + 1]]
            pieces.append(piece)
            offsets.append(offsets[-1] + len(piece))
        values = np.concatenate(pieces) if pieces else np.zeros(0, CUT_DTYPE)
        return Cuts(values.astype(CUT_DTYPE), np.asarray(offsets, dtype=cuts.offsets.dtype))

    @property
    def by_statistics(self) -> bool:
        """The categorical features train as their target statistics (numeric features)."""
        return self.statistics is not None

    def encode(self, X):
        """Rows of codes (float32, numpy or cupy; codes the model has seen, or NaN) with each
        categorical feature's code replaced by its whole-set target statistic (NaN stays
        missing): a copy. ``X`` itself without statistics."""
        if not self.by_statistics:
            return X
        from ..backend import asarray, get_xp

        xp = get_xp(X)
        X = X.copy()
        for feature in self.indices.tolist():
            column = X[:, feature]
            present = ~xp.isnan(column)
            table = asarray(xp, self.statistics[feature], FEATURE_DTYPE)
            codes = xp.where(present, column, 0).astype(np.int64)
            X[:, feature] = xp.where(present, table[codes] if table.shape[0] else FEATURE_DTYPE(math.nan),
                                     FEATURE_DTYPE(math.nan))
        return X

    def to_dict(self) -> dict:
        """JSON-ready: the types ("c"/"q") and, by feature index, each categorical feature's
        categories (a list) or its count (codes); with target statistics, their tables (float32
        values, exactly) and prior."""
        n = self.n_inputs
        document = {
            "feature_types": ["c" if c else "q" for c in self.categorical[:n]],
            "categories": {str(f): (list(self.values[f]) if self.values[f] is not None else self.counts[f])
                           for f in self.indices.tolist() if f < n},
        }
        if self.combinations:
            document["combinations"] = [list(pair) for pair in self.combinations]
        if self.by_statistics:  # the inputs', then the combinations', by feature index
            document["target_statistics"] = {str(f): np.asarray(self.statistics[f], np.float32).tolist()
                                             for f in self.indices.tolist()}
            document["prior"] = float(self.prior)
        return document

    @classmethod
    def from_dict(cls, data, n_features: int, where: str) -> "Categories":
        """Parse ``to_dict``'s form; ValueError names what is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} is not an object")
        types = data.get("feature_types")
        if not isinstance(types, list) or len(types) != n_features or any(t not in ("c", "q") for t in types):
            raise ValueError(f"{where}.feature_types must be {n_features} of 'c' and 'q'")
        given = data.get("categories")
        categorical = tuple(t == "c" for t in types)
        if not isinstance(given, dict) or sorted(given) != sorted(str(f) for f, c in enumerate(categorical) if c):
            raise ValueError(f"{where}.categories must give each categorical feature's categories")
        values, counts = [None] * n_features, [0] * n_features
        for key, entry in given.items():
            feature = int(key)
            if isinstance(entry, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                               for v in entry):
                values[feature], counts[feature] = tuple(entry), len(entry)
            elif isinstance(entry, int) and not isinstance(entry, bool) and 0 <= entry <= MAX_CATEGORIES:
                counts[feature] = entry
            else:
                raise ValueError(f"{where}.categories[{key!r}] is neither a list of categories nor a count")
            if counts[feature] > MAX_CATEGORIES:
                raise ValueError(f"{where}.categories[{key!r}] has more than {MAX_CATEGORIES} categories")
        statistics = prior = None
        if not isinstance(data.get("combinations", []), list):
            raise ValueError(f"{where}.combinations must be a list of pairs of categorical features")
        if "target_statistics" in data:
            tables, prior = data["target_statistics"], data.get("prior")
            n_pairs = len(data.get("combinations", []))
            expected = sorted(list(given) + [str(n_features + i) for i in range(n_pairs)])
            if not isinstance(tables, dict) or sorted(tables) != expected \
                    or not isinstance(prior, (int, float)) or isinstance(prior, bool) or not math.isfinite(prior):
                raise ValueError(f"{where}.target_statistics must give each categorical feature's table, with a prior")
            statistics = [None] * n_features
            for key, table in tables.items():
                feature = int(key)
                if feature >= n_features:  # a combination's: read with the combinations below
                    continue
                if not isinstance(table, list) or len(table) != counts[feature] or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in table):
                    raise ValueError(f"{where}.target_statistics[{key!r}] must be {counts[feature]} finite numbers")
                statistics[feature] = np.asarray(table, dtype=FEATURE_DTYPE)
            statistics, prior = tuple(statistics), float(prior)
        pairs = data.get("combinations", [])
        if not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(f, int) and not isinstance(f, bool)
                                                            and 0 <= f < n_features and categorical[f] for f in p)
                for p in pairs):
            raise ValueError(f"{where}.combinations must be pairs of categorical features")
        if pairs and statistics is None:
            raise ValueError(f"{where}.combinations come with target statistics")
        inputs = cls(categorical, tuple(values), tuple(counts)).with_combinations(pairs)
        if statistics is not None:
            statistics = list(statistics) + [None] * len(pairs)
            for index in range(len(pairs)):
                table = tables.get(str(n_features + index))
                if not isinstance(table, list) or len(table) != inputs.counts[n_features + index] or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in table):
                    raise ValueError(f"{where}.target_statistics lacks combination {index}'s table of finite numbers")
                statistics[n_features + index] = np.asarray(table, dtype=FEATURE_DTYPE)
            statistics = tuple(statistics)
        return dataclasses.replace(inputs, statistics=statistics, prior=prior)


def is_category_dtype(dtype) -> bool:
    return type(dtype).__name__ == "CategoricalDtype"


def frame_categories(columns, dtypes, name: str, enable_categorical: bool) -> tuple | None:
    """Each column's categories (a tuple) where its dtype is ``category``, else None; None
    for a frame without category columns. Read from the dtypes alone: a dask frame's
    metadata, before anything is computed. A category column without ``enable_categorical``
    is an error naming it."""
    found = []
    for column, dtype in zip(columns, dtypes):
        if not is_category_dtype(dtype):
            found.append(None)
            continue
        if not enable_categorical:
            raise TypeError(f"{name} column {str(column)!r} is categorical (dtype {dtype}): pass "
                            "enable_categorical=True to train on its categories, or give its codes "
                            f"({name}[{str(column)!r}].cat.codes) as a numeric column")
        categories = getattr(dtype, "categories", None)
        if categories is None or _UNKNOWN in list(categories):  # a dask column whose categories are unknown
            raise ValueError(f"{name} column {str(column)!r} has unknown categories (a dask column read without "
                             "them): call X = X.categorize() first, so every partition codes them alike")
        odd = next((v for v in categories if not isinstance(v, (str, int, float, np.integer, np.floating))
                    or isinstance(v, (bool, np.bool_))), None)
        if odd is not None:
            raise TypeError(f"{name} column {str(column)!r} has a category of type {type(odd).__name__} ({odd!r}): "
                            "dgboost keeps categories as text or numbers; convert them, e.g. "
                            f"{name}[{str(column)!r}].cat.rename_categories(str)")
        if len(categories) > MAX_CATEGORIES:
            raise ValueError(f"{name} column {str(column)!r} has {len(categories)} categories; dgboost takes at most "
                             f"{MAX_CATEGORIES} a feature: merge rare ones, or encode the column as numbers")
        found.append(tuple(_plain(v) for v in categories))
    return tuple(found) if any(c is not None for c in found) else None


#: The category dask gives a column whose categories it does not know.
_UNKNOWN = "__UNKNOWN_CATEGORIES__"


def _plain(value):
    """A category as a JSON-ready Python value."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return str(value)


def _check_kind(values, known: tuple, where: str) -> None:
    """Refuse categories of another kind than the model's (text for numbers, or the reverse),
    which would all be unseen (missing): the column silently lost, where XGBoost refuses it."""
    def kind(value):
        return "text" if isinstance(value, str) else "numbers"

    have, want = {kind(v) for v in values}, {kind(v) for v in known}
    if values.size and known and have.isdisjoint(want):
        raise TypeError(f"{where} has categories of {' and '.join(sorted(have))} but the model's are "
                        f"{' and '.join(sorted(want))} ({list(known)[:5]}...): give them as in training (e.g. "
                        "astype(str) or astype(int) before astype('category'))")


def frame_codes(frame, categories: tuple, name: str) -> np.ndarray:
    """A pandas frame as float32 (n_rows, n_columns): numeric columns as numbers (NaN missing),
    a column with ``categories[j]`` (a tuple) as the codes of its values in that tuple, by
    value: NaN where missing or not one of them."""
    import pandas as pd

    out = np.empty(frame.shape, dtype=FEATURE_DTYPE)
    for j, column in enumerate(frame.columns):
        series = frame[column]
        known = categories[j] if categories is not None else None
        if known is None:
            if is_category_dtype(series.dtype):
                raise TypeError(f"{name} column {str(column)!r} is categorical here but was numeric in training: "
                                "give its numbers")
            out[:, j] = series.to_numpy(dtype=FEATURE_DTYPE, na_value=np.nan)
            continue
        if is_category_dtype(series.dtype):
            values = series.cat.categories
            if tuple(_plain(v) for v in values) == known:
                codes = series.cat.codes.to_numpy()
            else:
                _check_kind(values, known, f"{name} column {str(column)!r}")
                codes = series.cat.set_categories(pd.Index(known)).cat.codes.to_numpy()  # by value: others NaN
        else:
            raise TypeError(f"{name} column {str(column)!r} has dtype {series.dtype} but is categorical in the "
                            "model: give it as a category column (astype('category'))")
        out[:, j] = np.where(codes < 0, np.nan, codes).astype(FEATURE_DTYPE)
    return out


def check_codes(X, categorical: np.ndarray, name: str, feature_names=None) -> np.ndarray:
    """The largest code + 1 of each feature marked ``categorical`` (0 elsewhere) of a float32
    ``X`` (numpy or cupy), after checking that every such value is NaN or an integer in
    [0, MAX_CATEGORIES): a clear error naming the first bad row and column otherwise."""
    from ..backend import asarray, get_xp, to_numpy
    from .inputs import RowError

    xp = get_xp(X)
    counts = np.zeros(X.shape[1], dtype=np.int64)
    features = np.flatnonzero(categorical)
    if not features.size or not X.shape[0]:
        return counts
    # Every code column at once: one gather and a few whole-block passes (a column at a time
    # read X strided once a test, a few times a feature). NaN fails no comparison.
    codes = X[:, asarray(xp, features, np.intp)] if features.size < X.shape[1] else X
    good = (codes >= 0) & (codes < MAX_CATEGORIES) & (codes == xp.floor(codes))
    bad = ~(good | xp.isnan(codes))
    bad_columns = to_numpy(bad.any(axis=0))
    if bad_columns.any():
        at = int(np.flatnonzero(bad_columns)[0])
        feature, row = int(features[at]), int(to_numpy(xp.argmax(bad[:, at])))
        label = f"column {feature}" + (f" ({feature_names[feature]!r})" if feature_names else "")
        raise RowError(f"{name} has the value {float(X[row, feature])!r} in categorical {label} at row ", row,
                       f": category codes are integers from 0 to {MAX_CATEGORIES - 1} (NaN for missing)")
    largest = to_numpy(xp.max(xp.where(good, codes, -1), axis=0)).astype(np.int64)  # -1: a column all missing
    counts[features] = largest + 1
    return counts


def known_codes(X, categories: Categories, name: str = "X", feature_names=None):
    """Rows to bin or predict with a model's categories: their codes checked (``check_codes``),
    the codes the model has not seen made missing (``unseen_as_missing``), and, with target
    statistics, each code its whole-set statistic (``Categories.encode``)."""
    from . import sparse

    if sparse.is_sparse(X):
        raise TypeError(f"{name} is sparse: a model of categorical features takes dense rows (an array or a "
                        "DataFrame)")
    n = categories.n_inputs
    check_codes(X, np.array(categories.categorical[:n], dtype=bool), name, feature_names)
    return categories.encode(categories.expand(unseen_as_missing(X, categories)))


def unseen_as_missing(X, categories: Categories):
    """``X`` (float32, numpy or cupy) with every categorical code the model has not seen (K or
    more) made NaN, a copy where any is; ``X`` itself otherwise."""
    from ..backend import get_xp

    xp = get_xp(X)
    copied = False
    for feature in categories.indices.tolist():
        if feature >= categories.n_inputs:  # a combination: not among the rows' columns
            break
        column = X[:, feature]
        unseen = column >= categories.counts[feature]
        if bool(unseen.any()):
            if not copied:
                X, copied = X.copy(), True
            X[:, feature] = xp.where(unseen, FEATURE_DTYPE(math.nan), column)
    return X


def resolve(params, n_features: int, frame_values: tuple | None, name: str = "X",
            feature_names=None) -> Categories | None:
    """The training data's categorical features (their counts still to be agreed, see
    ``agree_counts``), from a frame's category columns and ``params.feature_types``; None
    where no feature is categorical. Checks the parameters that go with them."""
    types = params.feature_types
    if types is not None and len(types) != n_features:
        raise ValueError(f"feature_types has {len(types)} entries but {name} has {n_features} features: give one "
                         "type a feature")
    categorical = [False] * n_features
    values = [None] * n_features
    for feature, found in enumerate(frame_values or ()):
        if found is not None:
            categorical[feature], values[feature] = True, found
    for feature, kind in enumerate(types or ()):
        if kind == "c":
            categorical[feature] = True
        elif values[feature] is not None:
            raise ValueError(f"feature_types[{feature}]='q' but {name}'s column {feature} is a category column: "
                             "mark it 'c', or give its codes as numbers")
    if not any(categorical):
        return None
    if not params.enable_categorical:
        first = categorical.index(True)
        raise ValueError(f"feature_types marks feature {first} categorical ('c'): pass enable_categorical=True "
                         "to train on its categories")
    by_statistics = params.cat_encoding == "target_statistics"
    if params.grow_policy == "symmetric" and not by_statistics:
        raise ValueError("grow_policy='symmetric' does not take category-set splits (a level shares one split): "
                         "use cat_encoding='target_statistics', as CatBoost does, or grow depthwise or lossguide")
    if by_statistics and params.n_outputs > 1:
        raise ValueError(f"cat_encoding='target_statistics' takes one-output objectives (a mean label a category), "
                         f"not objective={params.objective!r}: use cat_encoding='partition'")
    monotone = params.monotone_constraints
    if monotone and not by_statistics:
        by_name = isinstance(monotone[0], tuple)  # the dict form: (name, direction) pairs
        names = list(feature_names or [])
        pairs = monotone if by_name else enumerate(monotone)
        for key, direction in pairs:
            feature = names.index(key) if by_name and key in names else key if not by_name else None
            if direction and feature is not None and feature < n_features and categorical[feature]:
                where = f"[{key!r}]" if by_name else f"[{key}]"
                raise ValueError(f"monotone_constraints{where}={direction}: feature {key!r} is categorical, "
                                 "whose categories have no order; constrain numeric features only")
    counts = tuple(len(v) if v is not None else 0 for v in values)
    return Categories(tuple(categorical), tuple(values), counts)


def agree_counts(categories: Categories | None, X, comm, name: str = "X", feature_names=None) -> Categories | None:
    """``categories`` with every categorical feature's count: a frame column's, its number of
    categories; a feature given as codes, the largest code of any rank's rows plus one (its
    codes checked here, on each rank's rows)."""
    if categories is None:
        return None
    from ..backend import asarray, get_xp, to_numpy
    from . import sparse

    if sparse.is_sparse(X):
        raise TypeError(f"{name} is sparse: categorical features take dense rows (an array or a DataFrame)")
    codes = np.array([c and v is None for c, v in zip(categories.categorical, categories.values)], dtype=bool)
    local = check_codes(X, codes, name, feature_names)
    if not codes.any():
        return categories
    xp = get_xp(X)
    agreed = to_numpy(comm.allreduce(asarray(xp, local), "max"))
    return categories.with_counts(np.where(codes, agreed, categories.counts))


#: Blocks of the random order of target statistics: a row's statistic sums the rows of the
#: blocks before its own. At most this many; fewer for features of many categories, so that a
#: feature's (block, category) sums stay near 2**20 entries.
_MOST_BLOCKS = 1024


def statistics_blocks(n_categories: int) -> int:
    """The blocks of the random order for a feature of ``n_categories`` (a power of two, 16 to 1024)."""
    blocks = _MOST_BLOCKS
    while blocks > 16 and blocks * max(n_categories, 1) > (1 << 20):
        blocks //= 2
    return blocks


def target_statistics(X, label, global_index, n_total: int, categories: Categories, seed: int, comm):
    """CatBoost's ordered target statistics of one rank's rows, the same on any number of ranks.

    Each row falls in one of ``statistics_blocks(K)`` blocks, drawn from (seed, its global index):
    the random order. A row's statistic of its category ``c`` is ``(S + prior) / (N + 1)``, where
    S and N are the label sum and count of the rows of category ``c`` in the blocks before the
    row's (never its own label), and ``prior`` is the mean label of every row. The sums are the
    labels in fixed point (data's power-of-two scale, 52 bits of headroom) held as float64
    integers, so every partial sum, ``bincount``'s on a GPU included, is exact, and one
    ``allreduce`` a feature of its (block, category) sums and counts makes them global. A
    missing code stays missing.

    Returns
    -------
    (X with each categorical feature's codes replaced by its statistics, a float32 copy;
    ``categories`` with the whole training set's statistic of each code and the prior)
    """
    from .._hashing import STREAM_TARGET_STATISTICS, stream_key, uniform
    from ..backend import get_xp, to_numpy

    xp = get_xp(X)
    fixed, scale = _fixed_labels(label, n_total, comm)
    total = float(to_numpy(comm.allreduce(xp.sum(fixed, keepdims=True)))[0])
    prior = total / scale / max(n_total, 1)
    draw = uniform(global_index, stream_key(seed, STREAM_TARGET_STATISTICS))
    X = X.copy()
    statistics = [None] * categories.n_features
    for feature in categories.indices.tolist():
        n_codes = max(categories.counts[feature], 1)
        n_blocks = statistics_blocks(n_codes)
        block = xp.minimum((draw * n_blocks).astype(np.int64), n_blocks - 1)
        column = X[:, feature]
        present = ~xp.isnan(column)
        code = xp.where(present, column, 0).astype(np.int64)
        cell = (block * n_codes + code)[present]
        sums = xp.bincount(cell, weights=fixed[present], minlength=n_blocks * n_codes)
        counts = xp.bincount(cell, minlength=n_blocks * n_codes).astype(np.float64)
        both = comm.allreduce(xp.stack([sums, counts]).reshape(2, n_blocks, n_codes))
        before = xp.cumsum(both, axis=1) - both  # the blocks before each block, exact
        ordered = (before[0] / scale + prior) / (before[1] + 1.0)
        X[:, feature] = xp.where(present, ordered[block, code], np.nan).astype(FEATURE_DTYPE)
        whole = both.sum(axis=1)
        table = to_numpy(((whole[0] / scale + prior) / (whole[1] + 1.0)).astype(FEATURE_DTYPE))
        statistics[feature] = table[:categories.counts[feature]]
    return X, dataclasses.replace(categories, statistics=tuple(statistics), prior=prior)


def _fixed_labels(label, n_total: int, comm, power: int = 1):
    """``label ** power`` in fixed point, held as float64 integers, and its scale: the largest
    power of two that keeps the sum over every rank's rows below 2**52 (fixed_point.py), so
    every partial sum, a GPU's ``bincount`` included, is exact."""
    from ..backend import get_xp, to_numpy
    from ..fixed_point import HISTOGRAM_HEADROOM_BITS, power_of_two_scale

    xp = get_xp(label)
    values = label.astype(np.float64) ** power
    largest = comm.allreduce(xp.max(xp.abs(values), keepdims=True) if values.shape[0] else xp.zeros(1), "max")
    scale = float(to_numpy(power_of_two_scale(largest, n_total, HISTOGRAM_HEADROOM_BITS))[0])
    return xp.rint(values * scale), scale


def choose_combinations(X, label, n_total: int, categories: Categories, most: int, comm) -> tuple:
    """Up to ``most`` pairs of categorical input features to combine, the same on every rank:
    each pair (of at most MAX_CATEGORIES pairs of categories) scored by how much better its
    categories' smoothed mean labels explain the label than the better of its two features',
    each explanation ``sum_c (S_c - N_c m)**2 / (N_c + 1) - v * n_c`` (S_c and N_c a category's
    label sum and count, ``m`` the mean label, ``v`` the label variance, ``n_c`` the categories
    with rows: what chance alone would explain). The pairs of positive score, the best first.
    Sums exact (fixed point, as target_statistics), scored on the host from them."""
    from ..backend import get_xp, to_numpy

    inputs = [f for f in categories.indices.tolist() if f < categories.n_inputs]
    pairs = [(a, b) for i, a in enumerate(inputs) for b in inputs[i + 1:]
             if categories.counts[a] * categories.counts[b] <= MAX_CATEGORIES]
    if most <= 0 or not pairs:
        return ()
    xp = get_xp(X)
    fixed, scale = _fixed_labels(label, n_total, comm)
    squares, square_scale = _fixed_labels(label, n_total, comm, power=2)
    moments = to_numpy(comm.allreduce(xp.stack([xp.sum(fixed), xp.sum(squares)])))
    mean = moments[0] / scale / max(n_total, 1)
    variance = max(moments[1] / square_scale / max(n_total, 1) - mean * mean, 0.0)

    def explained(codes, n_codes):
        present = ~xp.isnan(codes)
        code = codes[present].astype(np.int64)
        sums = xp.bincount(code, weights=fixed[present], minlength=n_codes)
        counts = xp.bincount(code, minlength=n_codes).astype(np.float64)
        both = to_numpy(comm.allreduce(xp.stack([sums, counts])))
        label_sums, row_counts = both[0] / scale, both[1]
        return float(np.sum((label_sums - row_counts * mean) ** 2 / (row_counts + 1.0))
                     - variance * np.count_nonzero(row_counts))

    alone = {f: explained(X[:, f], max(categories.counts[f], 1)) for f in inputs}
    scored = []
    for a, b in pairs:
        codes = X[:, a] * FEATURE_DTYPE(categories.counts[b]) + X[:, b]
        score = explained(codes, max(categories.counts[a] * categories.counts[b], 1)) - max(alone[a], alone[b])
        if score > 0:
            scored.append((-score, a, b))
    return tuple((a, b) for _, a, b in sorted(scored)[:most])
