"""Input adapters and validation: numpy, cupy, pandas, lists, scipy and cupyx sparse matrices.

Everything a user passes is checked here, before any training work, and turned
into a ``Dataset``: float32 features with NaN for missing, float32 labels,
weights and margins, all on one device. The user's objects are never modified:
a value equal to ``missing`` is replaced in dgboost's own copy.
"""

from __future__ import annotations

import dataclasses
import math
from types import ModuleType
from typing import Any, Sequence

import numpy as np

from .._dtypes import FEATURE_DTYPE, LABEL_DTYPE, MARGIN_DTYPE, ROW_INDEX_DTYPE, WEIGHT_DTYPE
from ..backend import asarray, get_xp, is_cupy_array, to_numpy
from ..kernels import first_infinite
from . import sparse
from .categories import frame_categories, frame_codes, is_category_dtype


@dataclasses.dataclass(frozen=True)
class RowSpans:
    """The global indices of one rank's rows: runs ``(start, length)`` in ascending order.

    A single process holds one run from 0. A Dask worker holds the slices of
    partitions it was given, each a run at its place in the whole data set, so
    every random draw keyed by global row index is the same however the rows
    were split.
    """

    runs: tuple[tuple[int, int], ...]

    def __post_init__(self):
        ends = [start + length for start, length in self.runs]
        if any(length < 0 for _, length in self.runs) or \
                any(start < end for (start, _), end in zip(self.runs[1:], ends)):
            raise ValueError(f"row runs must be ascending and disjoint, got {self.runs}")

    @classmethod
    def contiguous(cls, start: int, length: int) -> "RowSpans":
        return cls(((int(start), int(length)),))

    @property
    def n_rows(self) -> int:
        return sum(length for _, length in self.runs)

    def global_index(self, xp):
        """Each row's global index, ascending: array of shape (n_rows,), int64, on ``xp``."""
        parts = [xp.arange(start, start + length, dtype=ROW_INDEX_DTYPE) for start, length in self.runs]
        return xp.concatenate(parts) if parts else xp.zeros(0, dtype=ROW_INDEX_DTYPE)


class RowBlocks:
    """A dense float32 X held as consecutive blocks of rows, never joined (a Dask worker's
    pieces of its shard: a CPU worker's always, a GPU worker's where X stays on the host): the
    compressed matrix, its pages and the cut sample read it a slice at a time. Behaves as the
    rows it holds for ``shape``, ``dtype`` and row indexing (a slice or ascending indices),
    which copies just those rows.
    """

    ndim = 2
    dtype = np.dtype(FEATURE_DTYPE)

    def __init__(self, blocks: Sequence):
        if any(b.ndim != 2 or b.dtype != FEATURE_DTYPE or b.shape[1] != blocks[0].shape[1] for b in blocks):
            raise ValueError("RowBlocks takes 2-D float32 blocks of one column count")
        self.blocks = [block for block in blocks if block.shape[0]] or list(blocks[:1])
        self.starts = np.cumsum([0] + [int(block.shape[0]) for block in self.blocks])
        self.shape = (int(self.starts[-1]), int(self.blocks[0].shape[1]))

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows):
        """Rows ``rows`` (a slice of step 1, or ascending indices), copied into one array."""
        if isinstance(rows, slice):
            start, stop, step = rows.indices(self.shape[0])
            if step != 1:
                raise IndexError("RowBlocks takes slices of step 1")
            first = int(np.searchsorted(self.starts, start, side="right")) - 1
            parts = [block[max(start - begin, 0):stop - begin]
                     for block, begin in zip(self.blocks[first:], self.starts[first:]) if begin < stop]
        else:
            rows = np.asarray(rows, dtype=np.int64)
            block_of = np.searchsorted(self.starts, rows, side="right") - 1
            parts = [self.blocks[b][rows[block_of == b] - self.starts[b]] for b in np.unique(block_of)]
        if not parts:
            return np.zeros((0, self.shape[1]), FEATURE_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclasses.dataclass(frozen=True)
class Dataset:
    """One rank's validated rows.

    Attributes
    ----------
    X : array of shape (n_rows, n_features), float32, C-contiguous; NaN is missing. Or a
        CSR matrix of that shape (data/sparse.py): an absent entry is missing. Or, on the
        host for pages, RowBlocks
    label : array of shape (n_rows,), float32, or None
    weight : array of shape (n_rows,), float32, or None (every row weighs 1)
    base_margin : array of shape (n_rows, n_outputs), float32, or None
    feature_names : tuple of str, or None
    frame_categories : tuple, one entry a column of a DataFrame X: its categories where it is a
        category column (X holds their codes), else None; or None (no category column)
    group : numpy array of shape (n_groups + 1,), int64, or None: the query groups of ranking,
        each group's first row then n_rows (XGBoost's group pointer); always on the host
    All other arrays live on one device.
    """

    X: Any
    label: Any = None
    weight: Any = None
    base_margin: Any = None
    feature_names: tuple[str, ...] | None = None
    frame_categories: tuple | None = None
    group: Any = None

    @property
    def n_rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def xp(self) -> ModuleType:
        """The array module of the device these rows train on (their labels', where given:
        a sparse X on the host stays there, see ``to``)."""
        return get_xp(self.X if self.label is None else self.label)

    def to(self, xp: ModuleType, move_X: bool = True) -> "Dataset":
        """This dataset on ``xp``'s device; but a sparse X on the host stays there for a GPU,
        as does any X where ``move_X`` is False (training.to_device: one that would not fit the
        device beside its compressed matrix): the compressed matrix is built from it on the
        device a chunk of rows at a time (ellpack.build_ellpack), so the device never holds the
        whole of X."""
        if self.xp is xp:
            return self
        move = lambda a: None if a is None else asarray(xp, a)  # noqa: E731
        if not move_X:
            X = self.X
        elif not sparse.is_sparse(self.X):
            X = move(self.X)
        else:
            X = self.X if get_xp(self.X) is np else sparse.to_device(self.X, xp)
        return dataclasses.replace(self, X=X, label=move(self.label),
                                   weight=move(self.weight), base_margin=move(self.base_margin))


def make_dataset(X, y=None, *, weight=None, base_margin=None, missing: float = math.nan,
                 n_outputs: int = 1, where: str = "", check_finite: bool = True,
                 allow_empty: bool = False, shard: bool = False, enable_categorical: bool = False,
                 categories: tuple | None = None, qid=None, group=None, label_columns: int = 1,
                 label_bounds: bool = False, label_name: str = "y") -> Dataset:
    """Validate user inputs and gather them into a :class:`Dataset` on X's device.

    ``where`` prefixes every argument name in error messages (e.g. ``"evals[0] "``).
    ``allow_empty`` admits an X without rows: a worker's share of an eval set may be empty.
    ``shard``: these are one worker's rows, so weights may all be zero here (the caller
    checks that some row of the whole data set weighs more than 0). ``enable_categorical``
    and ``categories``: see ``features``. ``qid`` or ``group``: ranking's query groups
    (``query_groups``); a ``weight`` is then one a group, or one a row equal within each group.
    ``label_name``: what errors call ``y``.
    """
    X, feature_names, frame_categories = features(X, missing=missing, where=where, check_finite=check_finite,
                                                  allow_empty=allow_empty, enable_categorical=enable_categorical,
                                                  categories=categories)
    xp = get_xp(X)
    n_rows = X.shape[0]
    if y is None:
        label = None
    elif label_columns == 1:
        label = vector(y, f"{where}{label_name}", n_rows, xp, LABEL_DTYPE)
    elif label_bounds:
        label = _bounds(y, f"{where}{label_name}", n_rows, label_columns, xp)
    else:  # several targets
        label = margins(y, f"{where}{label_name}", n_rows, label_columns, xp)
    ptr = None if qid is None and group is None else query_groups(qid, group, n_rows, where)
    if weight is not None:
        if ptr is not None:
            weight = _row_weights(weight, ptr, f"{where}sample_weight")
        weight = vector(weight, f"{where}sample_weight", n_rows, xp, WEIGHT_DTYPE)
        _check_weights(weight, f"{where}sample_weight", some_positive=not shard)
    if base_margin is not None:
        base_margin = margins(base_margin, f"{where}base_margin", n_rows, n_outputs, xp)
    return Dataset(X, label, weight, base_margin, feature_names, frame_categories, ptr)


def query_groups(qid, group, n_rows: int, where: str = "") -> np.ndarray:
    """Ranking's query groups as XGBoost's group pointer: (n_groups + 1,) int64 on the host.

    ``qid``: one query id a row (integers), ascending, so each query's rows are contiguous
    (XGBoost's rule); ``group``: the queries' sizes in row order, summing to ``n_rows``.
    """
    if qid is not None and group is not None:
        raise ValueError(f"{where}qid and {where}group both give the query groups: pass one")
    if group is not None:
        sizes = to_numpy(as_array(group, f"{where}group")).reshape(-1)
        check_numeric_dtype(sizes.dtype, f"{where}group")
        if sizes.size and (np.any(sizes < 1) or np.any(sizes != np.floor(sizes))):
            raise ValueError(f"{where}group must hold the queries' sizes, integers >= 1; it holds "
                             f"{sizes[(sizes < 1) | (sizes != np.floor(sizes))][0]!r}")
        if int(sizes.sum()) != n_rows:
            raise ValueError(f"{where}group's sizes add up to {int(sizes.sum())} rows but X has {n_rows}: give "
                             "each query's row count, in row order")
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = to_numpy(as_array(qid, f"{where}qid"))
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.shape[0] != n_rows:
        raise ValueError(f"{where}qid must give one query id a row of X ({n_rows}), got shape {values.shape}")
    check_numeric_dtype(values.dtype, f"{where}qid")
    if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
        row = int(np.flatnonzero(~np.isfinite(values))[0])
        raise RowError(f"{where}qid is {values[row].item()!r} at row ", row, ": query ids must be finite")
    if values.dtype.kind == "f" and np.any(values != np.floor(values)):  # XGBoost casts them to integers
        row = int(np.flatnonzero(values != np.floor(values))[0])
        raise RowError(f"{where}qid is {values[row].item()!r} at row ", row, ": query ids must be integers")
    down = np.flatnonzero(values[1:] < values[:-1])
    if down.size:
        row = int(down[0]) + 1
        raise RowError(f"{where}qid is not sorted: {values[row]!r} at row ", row,
                       f" follows {values[row - 1]!r}; each query's rows must be contiguous and the ids ascending "
                       "(XGBoost's rule): sort the rows by qid, e.g. order = np.argsort(qid, kind='stable')")
    starts = np.flatnonzero(values[1:] != values[:-1]) + 1
    return np.concatenate([[0], starts, [n_rows]] if n_rows else [[0]]).astype(np.int64)


def _row_weights(weight, ptr: np.ndarray, name: str):
    """A ranking weight one a row: XGBoost's one a group spread over its rows, or one a row
    checked equal within each group (a query is weighed as a whole)."""
    values = as_array(weight, name)
    n_groups, n_rows = ptr.shape[0] - 1, int(ptr[-1])
    if values.ndim == 1 and values.shape[0] == n_groups and n_groups != n_rows:
        return np.repeat(to_numpy(values), np.diff(ptr))
    if values.ndim == 1 and values.shape[0] == n_rows and n_rows:
        host = to_numpy(values)
        first = np.repeat(host[ptr[:-1]], np.diff(ptr))
        differs = host != first
        if host.dtype.kind == "f":  # a NaN is no difference here: the weights' own check names it as not finite
            differs &= ~np.isnan(host) & ~np.isnan(first)
        differs = np.flatnonzero(differs)
        if differs.size:
            row = int(differs[0])
            raise RowError(f"{name} differs within a query at row ", row, ": ranking weighs each query as a whole; "
                           "give one weight a query (n_groups values) or the same weight on each of its rows")
    return values


def features(X, *, missing: float = math.nan, where: str = "", check_finite: bool = True,
             allow_empty: bool = False, enable_categorical: bool = False, categories: tuple | None = None):
    """``X`` as a C-contiguous float32 array (NaN = missing), or a sparse matrix as
    dgboost's CSR copy (``sparse.canonical``: absent entries missing), its feature names,
    and a DataFrame's categories (data/categories.py).

    A DataFrame's category columns become their codes: with ``categories`` (a model's, one
    entry a column: a tuple of categories or None), the codes of each value among them (by
    value: NaN where not one of them); else, with ``enable_categorical``, the column's own,
    its categories returned; without either, a category column is an error.

    Returns
    -------
    (array of shape (n_rows, n_features), float32, or a CSR matrix of that shape, on X's
    device; tuple of str or None; tuple of each column's categories or None, or None)
    """
    name = f"{where}X"
    feature_names = frame_categories = None
    refuse_dask(X, name)
    if sparse.is_sparse(X):
        X = sparse.canonical(X, missing, name)
        _check_shape(X, name, allow_empty)
        return X, feature_names, frame_categories
    if is_dataframe(X):
        X, feature_names, frame_categories = _dataframe_to_numpy(X, name, enable_categorical, categories)
    elif isinstance(X, (list, tuple)):
        X = np.asarray(X)
    elif not (isinstance(X, np.ndarray) or is_cupy_array(X)):
        raise TypeError(f"{name} must be a 2-D numpy or cupy array or a pandas DataFrame, "
                        f"got {type(X).__name__}")
    if X.ndim != 2:
        fix = f"; for one feature use {name}.reshape(-1, 1)" if X.ndim == 1 else ""
        raise ValueError(f"{name} must be 2-D (n_rows, n_features), got shape {X.shape}{fix}")
    check_numeric_dtype(X.dtype, name)
    _check_shape(X, name, allow_empty)
    xp = get_xp(X)
    X = xp.ascontiguousarray(X, dtype=FEATURE_DTYPE)
    if not math.isnan(missing):
        is_missing = X == FEATURE_DTYPE(missing)
        if frame_categories is not None:  # a category column's codes are not values: `missing` is not theirs
            is_missing[:, [j for j, c in enumerate(frame_categories) if c is not None]] = False
        X = xp.where(is_missing, FEATURE_DTYPE(math.nan), X)
    if check_finite:
        _check_no_inf(X, name, feature_names)
    return X, feature_names, frame_categories


def _check_shape(X, name: str, allow_empty: bool) -> None:
    if X.shape[0] == 0 and not allow_empty:
        raise ValueError(f"{name} has no rows: training and prediction need at least one")
    if X.shape[1] == 0:
        raise ValueError(f"{name} has no features (shape {X.shape}): give at least one column")


def vector(values, name: str, n_rows: int, xp: ModuleType, dtype):
    """A per-row vector: shape (n_rows,) or (n_rows, 1), finite, as ``dtype`` on ``xp``."""
    values = as_array(values, name)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D with one value per row, got shape {values.shape}")
    if values.shape[0] != n_rows:
        raise ValueError(f"{name} has {values.shape[0]} rows but X has {n_rows}: give one value per row of X")
    check_numeric_dtype(values.dtype, name)
    values = xp.ascontiguousarray(asarray(xp, values), dtype=dtype)  # no copy where it is one already
    _check_finite(values, name)
    return values


def _bounds(values, name: str, n_rows: int, n_columns: int, xp: ModuleType):
    """Labels of several columns a row (survival:aft's [lower, upper]), float32; +inf allowed
    (an unbounded upper end), NaN and -inf not."""
    values = as_array(values, name)
    if values.ndim != 2 or values.shape != (n_rows, n_columns):
        raise ValueError(f"{name} must have shape ({n_rows}, {n_columns}) (for survival:aft each row's lower and upper "
                         f"bound of its event time), got {values.shape}")
    check_numeric_dtype(values.dtype, name)
    values = asarray(xp, values).astype(LABEL_DTYPE)
    bad = xp.isnan(values) | (values == -np.inf)
    if bool(bad.any()):
        row = _first_bad_row(bad)
        raise RowError(f"{name} has {values[row].tolist()} at row ", row, f": {name} must hold numbers (inf only as an "
                       "upper bound)")
    return values


def margins(values, name: str, n_rows: int, n_outputs: int, xp: ModuleType):
    """Base margins as (n_rows, n_outputs) float32."""
    values = as_array(values, name)
    if values.ndim == 1 and n_outputs == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape != (n_rows, n_outputs):
        raise ValueError(f"{name} must have shape ({n_rows}, {n_outputs}) (one value per row and "
                         f"output), got {values.shape}")
    check_numeric_dtype(values.dtype, name)
    # A copy in C order whatever the caller's layout: softmax sums a row of margins, and NumPy
    # sums a Fortran-ordered row in another order from 8 classes up (the same margins would make
    # another model, or other predictions, by their layout).
    values = asarray(xp, values).astype(MARGIN_DTYPE, order="C")
    _check_finite(values, name)
    return values


def as_array(values, name):
    """``values`` as an array: a frame's or Series' (cudf's on the device), a list's; numpy and
    cupy arrays as they are. Anything else raises, naming ``name``."""
    refuse_dask(values, name)
    if is_dataframe(values) or type(values).__name__ == "Series":
        return values.to_cupy() if _is_cudf(values) else values.to_numpy()
    if isinstance(values, (list, tuple)):
        return np.asarray(values)
    if isinstance(values, np.ndarray) or is_cupy_array(values):
        return values
    raise TypeError(f"{name} must be a numpy or cupy array, a pandas Series or a list, "
                    f"got {type(values).__name__}")


def check_numeric_dtype(dtype, name):
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} has dtype {dtype}, which is not numeric: convert it to numbers "
                        f"(float32 is what dgboost uses)")


class RowError(ValueError):
    """Bad input at one row. The message names the row; a Dask job, which finds it in
    one partition, names the row's place in the whole data set instead (``in_whole``)."""

    def __init__(self, head: str, row: int, tail: str, place: str = ""):
        self.head, self.row, self.tail, self.place = head, int(row), tail, place
        super().__init__(f"{head}{self.row}{place}{tail}")

    def __reduce__(self):  # pickles with its parts, so a worker's error reaches the client whole
        return type(self), (self.head, self.row, self.tail, self.place)

    def in_whole(self, offset: int, partition: int) -> "RowError":
        """The same error at row ``offset + row`` of the whole data set (partition ``partition``)."""
        return RowError(self.head, offset + self.row, self.tail, f" (partition {partition}, its row {self.row})")


def _first_bad_row(mask) -> int:
    xp = get_xp(mask)
    rows = xp.nonzero(mask.reshape(mask.shape[0], -1).any(axis=1))[0]
    return int(rows[0])


def _check_finite(values, name):
    xp = get_xp(values)
    bad = ~xp.isfinite(values)
    if bool(bad.any()):
        row = _first_bad_row(bad)
        raise RowError(f"{name} has a non-finite value ({values[row].tolist()}) at row ", row,
                       f": {name} must be finite (no NaN or inf, nothing beyond float32's range, 3.4e38); drop or "
                       "fix those rows")


def _check_weights(weight, name, some_positive: bool = True):
    negative = weight < 0
    if bool(negative.any()):
        row = _first_bad_row(negative)
        raise RowError(f"{name} is negative ({float(weight[row])}) at row ", row, ": weights must be >= 0")
    if some_positive and not bool((weight > 0).any()):
        raise ValueError(ALL_ZERO_WEIGHTS.format(name=name))


#: The error for weights that are zero on every row (also raised by a Dask job over all shards).
ALL_ZERO_WEIGHTS = "{name} is zero for every row: at least one row must weigh more than 0"


def _check_no_inf(X, name, feature_names):
    """Reject infinities (one pass of kernels.first_infinite: no full-size mask)."""
    index = first_infinite(X)
    if index < 0:
        return
    row, column = divmod(index, X.shape[1])
    label = f"column {column}" + (f" ({feature_names[column]!r})" if feature_names else "")
    raise RowError(f"{name} has an infinite value at row ", row, f", {label} (or one beyond float32's range, "
                   "3.4e38): replace it with NaN (missing) or a finite number")


def refuse_dask(value, name: str) -> None:
    """A dask collection given to one process's training or prediction: a TypeError naming
    dgboost.dask's (a dask frame has a pandas frame's attributes, not its data)."""
    if type(value).__module__.split(".")[0] in ("dask", "dask_expr", "dask_cudf"):
        raise TypeError(f"{name} is a dask {type(value).__name__}: dgboost.train and Booster.predict take data in "
                        "memory. Train on dask collections with dgboost.dask.train(client, params, X, y) and predict "
                        f"with dgboost.dask.predict(client, booster, X), or compute it first ({name}.compute())")


def refuse_category_columns(frame, name: str) -> None:
    """A DataFrame given where the model (or its training rows) took no category column: each
    category column is an error naming it and the fix."""
    for column, dtype in zip(frame.columns, frame.dtypes):
        if is_category_dtype(dtype):
            raise TypeError(f"{name} column {str(column)!r} is categorical (dtype {dtype}) but the model's training "
                            f"X held no category column: give it as in training (its numbers, or its codes "
                            f"X[{str(column)!r}].cat.codes where the model took codes, feature_types 'c')")


def is_dataframe(obj) -> bool:
    """A pandas or cudf DataFrame (by its type's name and attributes: importing neither)."""
    return type(obj).__name__ == "DataFrame" and hasattr(obj, "columns") and hasattr(obj, "dtypes")


def _is_cudf(obj) -> bool:
    return type(obj).__module__.startswith("cudf")


def check_columns(columns, dtypes, name: str, enable_categorical: bool = False) -> tuple[str, ...]:
    """The feature names of a frame's ``columns``: unique, each of a numeric ``dtype`` or, with
    ``enable_categorical``, ``category`` (categories.frame_categories checks those).

    Used on a pandas or cudf frame, and on a dask DataFrame's metadata before anything is computed.
    """
    names = tuple(str(column) for column in columns)
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"{name} has duplicate column names {twice}: rename them so each is unique")
    for column, dtype in zip(names, dtypes):
        if is_category_dtype(dtype):
            frame_categories([column], [dtype], name, enable_categorical)
        elif not is_numeric_dtype(dtype):
            raise TypeError(f"{name} column {column!r} has dtype {dtype}, which is not numeric; "
                            "convert it to numbers or drop it")
    return names


def is_numeric_dtype(dtype) -> bool:
    """Numbers or booleans, for a pandas (or numpy) dtype."""
    import pandas as pd

    if pd.api.types.is_complex_dtype(dtype):  # numeric to pandas, but its imaginary part would be dropped
        return False
    return pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)


def check_sparse_chunks(meta, name: str) -> None:
    """A dask array's chunks, told by its ``meta``: dense, or sparse in CSR (rows are what
    a worker slices and stacks), before any work."""
    if sparse.is_sparse(meta) and not sparse.is_csr(meta):
        raise TypeError(f"{name} are sparse {meta.format.upper()} matrices ({type(meta).__name__}); "
                        f"dgboost takes CSR chunks: map them to CSR first, e.g. "
                        f"X.map_blocks(lambda block: block.tocsr())")


def _dataframe_to_numpy(frame, name, enable_categorical: bool = False, categories: tuple | None = None):
    """A pandas (or cudf) DataFrame as (float32 numpy (or cupy) array, feature names, its
    columns' categories or None): category columns as codes (see ``features``)."""
    model_categories = categories is not None and any(c is not None for c in categories)
    names = check_columns(frame.columns, frame.dtypes, name, enable_categorical or model_categories)
    if model_categories:
        if len(categories) != len(names):  # the caller reports the count
            categories = None
        else:
            return frame_codes(frame, categories, name), names, categories
    found = frame_categories(frame.columns, frame.dtypes, name, enable_categorical)
    if found is not None:
        if _is_cudf(frame):
            raise TypeError(f"{name} is a cudf DataFrame with category columns: dgboost codes categories of "
                            "pandas frames; convert it with .to_pandas()")
        return frame_codes(frame, found, name), names, found
    if _is_cudf(frame):  # stays on the GPU
        return frame.to_cupy(dtype=FEATURE_DTYPE, na_value=np.nan), names, None
    return frame.to_numpy(dtype=FEATURE_DTYPE, na_value=np.nan), names, None


def check_feature_names(expected: Sequence[str] | None, got: Sequence[str] | None, where: str):
    """Columns of a later DataFrame must be the training columns, in order."""
    if expected is None or got is None or tuple(expected) == tuple(got):
        return
    missing_names = [n for n in expected if n not in got]
    extra = [n for n in got if n not in expected]
    detail = (f"missing {missing_names}, unexpected {extra}" if missing_names or extra
              else "same names in another order")
    raise ValueError(f"{where} columns do not match the training features ({detail}): select "
                     f"them in training order, {list(expected)}")
