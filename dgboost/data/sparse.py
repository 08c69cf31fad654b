"""Sparse rows: scipy.sparse and cupyx.scipy.sparse matrices, held as CSR.

A sparse X is kept as a CSR matrix of dgboost's own, made once by ``canonical``
(the user's matrix is never changed): float32 values, int32 column indices
ascending within each row, no duplicate entries (a COO matrix's are summed, as
scipy sums them), and no stored missing value. An entry absent from the matrix
is missing, as in XGBoost; so is a stored NaN, or a stored value equal to
``missing``, which is dropped; a stored zero is the value 0. The layers below
read its three arrays, ``data``, ``indices`` and ``indptr``, on the matrix's
device: scipy's on the host, cupyx's on a GPU.
"""

from __future__ import annotations

import math

import numpy as np

from .._dtypes import COLUMN_INDEX_DTYPE, FEATURE_DTYPE, ROW_POINTER_DTYPE
from ..backend import get_xp, is_cupy_array


def is_sparse(value) -> bool:
    """A scipy.sparse or cupyx.scipy.sparse matrix or array, told without importing either."""
    return type(value).__module__.startswith(("scipy.sparse", "cupyx.scipy.sparse"))


def is_csr(value) -> bool:
    return is_sparse(value) and getattr(value, "format", None) == "csr"


def module_of(X):
    """``scipy.sparse`` or ``cupyx.scipy.sparse``: the family of the sparse matrix ``X``."""
    if is_cupy_array(X):
        import cupyx.scipy.sparse

        return cupyx.scipy.sparse
    import scipy.sparse

    return scipy.sparse


def canonical(X, missing: float, name: str):
    """dgboost's CSR copy of the sparse matrix ``X`` (see the module's docstring), on X's device.

    Raises TypeError for values that are not numbers and RowError (from
    ``inputs``) naming the row and column of a stored infinity.
    """
    from .inputs import RowError

    if X.dtype.kind not in "biuf":
        raise TypeError(f"{name} has dtype {X.dtype}, which is not numeric: convert it to numbers "
                        f"(float32 is what dgboost uses)")
    if len(X.shape) != 2:
        raise ValueError(f"{name} must be 2-D (n_rows, n_features), got shape {X.shape}")
    X = module_of(X).csr_matrix(X, dtype=FEATURE_DTYPE, copy=True)  # sums a COO's duplicates
    _check_indices(X, name)
    X.sum_duplicates()  # sorts each row's indices too (in our copy)
    xp = get_xp(X.data)
    data, indices, indptr = X.data, X.indices, X.indptr
    keep = ~xp.isnan(data)
    if not math.isnan(missing):
        keep &= data != FEATURE_DTYPE(missing)
    infinite = xp.isinf(data) & keep  # an infinite ``missing`` is missing, as in a dense X
    if bool(infinite.any()):
        entry = int(xp.argmax(infinite))
        row = int(xp.searchsorted(indptr, entry, side="right")) - 1
        raise RowError(f"{name} has an infinite value at row ", row, f", column {int(indices[entry])} (or one "
                       "beyond float32's range, 3.4e38): replace it with NaN (missing), leave the entry out, or give "
                       "a finite number")
    if not bool(keep.all()):
        counts = xp.diff(xp.concatenate([xp.zeros(1, dtype=ROW_POINTER_DTYPE),
                                         xp.cumsum(keep, dtype=ROW_POINTER_DTYPE)])[indptr])
        indptr = xp.concatenate([xp.zeros(1, dtype=ROW_POINTER_DTYPE), xp.cumsum(counts)])
        data, indices = data[keep], indices[keep]
    return from_arrays(data, indices, indptr, X.shape[1])


def _check_indices(X, name: str) -> None:
    """A CSR matrix's index arrays, which scipy takes unchecked from (data, indices, indptr):
    row pointers ascending from 0 to the entries' count, column indices within its columns."""
    from .inputs import RowError

    xp = get_xp(X.data)
    indptr, indices = X.indptr, X.indices
    if int(indptr[0]) != 0 or int(indptr[-1]) != X.data.shape[0] or bool((xp.diff(indptr) < 0).any()):
        raise ValueError(f"{name} is a CSR matrix whose indptr does not run from 0 up to its {X.data.shape[0]} "
                         f"entries: build it again, or check it with {name}.check_format(full_check=True)")
    bad = (indices < 0) | (indices >= X.shape[1])
    if bool(bad.any()):
        entry = int(xp.argmax(bad))
        row = int(xp.searchsorted(indptr, entry, side="right")) - 1
        raise RowError(f"{name} has a column index out of range ({int(indices[entry])}) at row ", row,
                       f": {name} has {X.shape[1]} columns, so indices run from 0 to {X.shape[1] - 1}; fix the "
                       "indices or give the matrix more columns (its shape)")


def from_arrays(data, indices, indptr, n_features: int):
    """A CSR matrix of ``n_features`` columns from its three arrays (on their device): float32
    values; the index arrays as the matrix's library keeps them (scipy narrows them to
    int32 where they fit), which kernels take as COLUMN_INDEX_DTYPE and ROW_POINTER_DTYPE."""
    xp = get_xp(data)
    module = module_of(data) if xp is not np else _scipy_sparse()
    parts = (xp.asarray(data, dtype=FEATURE_DTYPE), xp.asarray(indices, dtype=COLUMN_INDEX_DTYPE),
             xp.asarray(indptr, dtype=ROW_POINTER_DTYPE))
    matrix = module.csr_matrix(parts, shape=(int(indptr.shape[0]) - 1, int(n_features)), copy=False)
    matrix.has_sorted_indices = True
    return matrix


def _scipy_sparse():
    import scipy.sparse

    return scipy.sparse


def from_dense(X):
    """The CSR matrix of the present (non-NaN) values of the dense float32 ``X``, on its device."""
    xp = get_xp(X)
    present = ~xp.isnan(X)
    rows, columns = xp.nonzero(present)  # row-major: each row's columns ascending
    indptr = xp.concatenate([xp.zeros(1, dtype=ROW_POINTER_DTYPE),
                             xp.cumsum(present.sum(axis=1, dtype=ROW_POINTER_DTYPE))])
    return from_arrays(X[rows, columns], columns, indptr, X.shape[1])


def to_dense(X):
    """The CSR matrix ``X`` as a dense float32 array, NaN where an entry is absent (tests, and
    small matrices only: this is the densifying that sparse input exists to avoid)."""
    xp = get_xp(X.data)
    dense = xp.full(X.shape, xp.nan, dtype=FEATURE_DTYPE)
    dense[_row_of_entry(X.indptr), X.indices] = X.data
    return dense


def nbytes(X) -> int:
    """The bytes of X's values: a dense array's, or a CSR matrix's three arrays'."""
    if is_sparse(X):
        return int(X.data.nbytes) + int(X.indices.nbytes) + int(X.indptr.nbytes)
    return int(X.nbytes)


def row_stride(X) -> int:
    """The most entries of any row of the CSR matrix ``X`` (0 without rows)."""
    if X.shape[0] == 0:
        return 0
    xp = get_xp(X.data)
    return int(xp.diff(X.indptr).max())


def take_rows(X, rows):
    """Rows ``rows`` (an integer array on X's device) of the CSR matrix ``X``, as CSR."""
    xp = get_xp(X.data)
    if xp is np:  # scipy's own gather, compiled
        picked = X[np.asarray(rows)]
        return from_arrays(picked.data, picked.indices, picked.indptr, X.shape[1])
    indptr = X.indptr.astype(ROW_POINTER_DTYPE, copy=False)
    lengths = indptr[rows + 1] - indptr[rows]
    new_indptr = xp.concatenate([xp.zeros(1, dtype=ROW_POINTER_DTYPE), xp.cumsum(lengths)])
    # Each new entry's place in X: its row's first entry plus its rank within the row.
    entry = xp.arange(int(new_indptr[-1]), dtype=ROW_POINTER_DTYPE)
    row_of_entry = _row_of_entry(new_indptr)
    source = indptr[rows][row_of_entry] + (entry - new_indptr[:-1][row_of_entry])
    return from_arrays(X.data[source], X.indices[source], new_indptr, X.shape[1])


def _row_of_entry(indptr):
    """Each entry's row, from a CSR ``indptr`` (a search: cupy repeats by a scalar only)."""
    xp = get_xp(indptr)
    entries = xp.arange(int(indptr[-1]), dtype=ROW_POINTER_DTYPE)
    return xp.searchsorted(indptr, entries, side="right") - 1


def stack(parts):
    """The CSR matrices ``parts`` (same columns, one device) one under another, as CSR."""
    if len(parts) == 1:
        return parts[0]
    xp = get_xp(parts[0].data)
    lengths = xp.concatenate([xp.diff(p.indptr.astype(ROW_POINTER_DTYPE)) for p in parts])
    indptr = xp.concatenate([xp.zeros(1, dtype=ROW_POINTER_DTYPE), xp.cumsum(lengths)])
    return from_arrays(xp.concatenate([p.data for p in parts]), xp.concatenate([p.indices for p in parts]),
                       indptr, parts[0].shape[1])


def array_module(X):
    """The array module (numpy or cupy) a dense array or a CSR matrix's arrays live in."""
    return get_xp(X.data if is_sparse(X) else X)


def to_device(X, xp):
    """The CSR matrix ``X`` on ``xp``'s device (itself if it is there already)."""
    if get_xp(X.data) is xp:
        return X
    if xp is np:
        return X.get()
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse.csr_matrix(X)
