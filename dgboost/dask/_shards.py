"""Which rows each worker trains on: partitions found, checked, and shared out evenly.

Plain functions of partition lengths and holders (``plan_shards``,
``plan_evals``) decide; the rest checks dask collections' metadata, turns them
into one future per partition (a *bundle*: the partition's X, y, weight and
base_margin, validated as a ``data.Dataset`` where the partition is) and the
plan into the futures each worker's task receives. A piece whose partition another
rank of the job holds is sent by that rank once the ranks have started
(``Incoming``, ``move_pieces``): GPU to GPU over NCCL, not through the hosts and
Dask's comms.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import pickle

import dask
import numpy as np

from ..backend import get_xp, join, to_numpy
from ..data import sparse
from ..data.categories import check_codes, frame_categories
from ..data.categories import resolve as resolve_categories
from ..data.inputs import (ALL_ZERO_WEIGHTS, Dataset, RowBlocks, RowError, check_columns, check_sparse_chunks, is_numeric_dtype,
                           query_groups)
from ..data.pages import PackedRows
from ..objectives import make_objective
from ..training import checked_dataset

logger = logging.getLogger("dgboost")


@dataclasses.dataclass(frozen=True)
class Piece:
    """Rows ``[start, stop)`` of partition ``part``."""

    part: int
    start: int
    stop: int

    @property
    def n_rows(self) -> int:
        return self.stop - self.start


def plan_shards(lengths, holders, workers) -> dict[str, list[Piece]]:
    """Near-equal shares of all rows for ``workers``, moving as few rows as it can.

    Parameters
    ----------
    lengths : sequence of int
        Rows of each partition, in the collection's order.
    holders : sequence of str or None
        The worker holding each partition (None: not held by any of ``workers``).
    workers : sequence of str
        The workers to share among; the first ``n % len(workers)`` get one row more.

    Returns
    -------
    {worker: [Piece, ...]}: each worker's pieces in global row order; a worker
    whose share is empty (fewer rows than workers) gets [].

    Each worker first keeps the rows it holds, in global order, up to its share;
    the rest go, in global order, to the workers still short, cut where needed.
    """
    lengths = [int(n) for n in lengths]
    total = sum(lengths)
    quota = {w: total // len(workers) + (i < total % len(workers)) for i, w in enumerate(workers)}
    taken = dict.fromkeys(workers, 0)
    shares: dict[str, list[Piece]] = {w: [] for w in workers}
    spare = []
    for part, (length, holder) in enumerate(zip(lengths, holders)):
        keep = min(length, quota[holder] - taken[holder]) if holder in quota else 0
        if keep:
            shares[holder].append(Piece(part, 0, keep))
            taken[holder] += keep
        if keep < length:
            spare.append(Piece(part, keep, length))
    spare.reverse()  # pop() from the end takes them in global order
    for worker in workers:
        while taken[worker] < quota[worker]:
            piece = spare.pop()
            take = min(piece.n_rows, quota[worker] - taken[worker])
            shares[worker].append(Piece(piece.part, piece.start, piece.start + take))
            taken[worker] += take
            if take < piece.n_rows:
                spare.append(Piece(piece.part, piece.start + take, piece.stop))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return {w: sorted(pieces, key=lambda p: offsets[p.part] + p.start) for w, pieces in shares.items()}


def plan_query_shards(lengths, query_starts, holders, workers) -> dict[str, list[Piece]]:
    """Shares of all rows for ``workers`` cut only where a query starts, so that no query is
    split (ranking): contiguous ranges of the rows, each as near an equal share as the query
    boundaries allow, each given to the worker holding most of its rows.

    Parameters
    ----------
    lengths, holders, workers : as ``plan_shards``
    query_starts : sequence of int arrays: the rows of each partition where a query starts
        (its first row, where a new query begins there, among them)

    Returns
    -------
    {worker: [Piece, ...]}, as ``plan_shards`` (a worker may get none).
    """
    lengths = [int(n) for n in lengths]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    total = int(offsets[-1])
    cuts = np.unique(np.concatenate([np.asarray(starts, np.int64) + offsets[part]
                                     for part, starts in enumerate(query_starts)] + [np.array([0, total], np.int64)]))
    bounds = [0]
    for i in range(1, len(workers)):  # the query start nearest each equal share's end, in order
        target = total * i // len(workers)
        at = int(np.searchsorted(cuts, target))
        nearest = [int(c) for c in cuts[max(at - 1, 0):at + 1]]
        best = min(nearest, key=lambda c: (abs(c - target), c))
        bounds.append(max(best, bounds[-1]))
    bounds.append(total)
    ranges = [(bounds[i], bounds[i + 1]) for i in range(len(workers))]
    held = np.zeros((len(ranges), len(workers)), np.int64)  # rows of each range each worker holds
    index = {w: k for k, w in enumerate(workers)}
    for part, holder in enumerate(holders):
        if holder in index:
            for r, (a, b) in enumerate(ranges):
                held[r, index[holder]] += max(0, min(b, offsets[part + 1]) - max(a, offsets[part]))
    owner: dict[int, str] = {}
    free = list(workers)
    for r in sorted(range(len(ranges)), key=lambda r: (-held[r].max(), r)):
        worker = max(free, key=lambda w: (held[r, index[w]], -index[w]))
        owner[r] = worker
        free.remove(worker)
    shares: dict[str, list[Piece]] = {w: [] for w in workers}
    for r, (a, b) in enumerate(ranges):
        for part in range(len(lengths)):
            start, stop = max(a, offsets[part]), min(b, offsets[part + 1])
            if start < stop:
                shares[owner[r]].append(Piece(part, int(start - offsets[part]), int(stop - offsets[part])))
    return shares


def check_query_order(summaries, what: str = "qid") -> None:
    """Each partition's queries follow the previous partition's (``what``, the query ids,
    ascending over the whole data set, so each query's rows are contiguous), and a query going
    on from one partition to the next weighs the same in both (each partition checked its own):
    else a clear error before any rank starts."""
    last = None  # the last non-empty partition before: (its index, its summary)
    for part, summary in enumerate(summaries):
        if summary.n_rows == 0:
            continue
        if last is not None and summary.qid_first < last[1].qid_last:
            raise ValueError(f"{what} is not sorted across partitions: partition {last[0]} ends with query "
                             f"{last[1].qid_last!r} but partition {part} starts with {summary.qid_first!r}; each "
                             "query's rows must be contiguous and the ids ascending over the whole collection: sort "
                             "by the query id first (e.g. frame.sort_values('qid'), or set_index('qid'))")
        if last is not None and summary.qid_first == last[1].qid_last and summary.weight_ends is not None \
                and summary.weight_ends[0] != last[1].weight_ends[1]:
            raise ValueError(f"sample_weight differs within query {summary.qid_first!r}, which goes on from partition "
                             f"{last[0]} ({last[1].weight_ends[1]!r}) to partition {part} ({summary.weight_ends[0]!r}): "
                             "ranking weighs each query as a whole; give each of its rows the query's weight")
        last = (part, summary)


def global_runs(pieces, lengths) -> tuple[tuple[int, int], ...]:
    """The global row runs ``(start, length)`` of ``pieces`` (in order), adjacent ones joined."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    runs: list[list[int]] = []
    for piece in pieces:
        start = int(offsets[piece.part]) + piece.start
        if runs and runs[-1][0] + runs[-1][1] == start:
            runs[-1][1] += piece.n_rows
        else:
            runs.append([start, piece.n_rows])
    return tuple((start, length) for start, length in runs)


def plan_evals(lengths, holders, workers) -> dict[str, list[int]]:
    """Eval partitions for the job's workers: each stays where it is held if that
    worker trains, else goes to the worker with the fewest eval rows so far."""
    plan: dict[str, list[int]] = {w: [] for w in workers}
    rows = dict.fromkeys(workers, 0)
    for part, holder in enumerate(holders):
        if holder not in plan:
            holder = min(workers, key=lambda w: (rows[w], workers.index(w)))
        plan[holder].append(part)
        rows[holder] += int(lengths[part])
    return plan


def describe(rows_by_worker: dict[str, int]) -> str:
    """``'tcp://a:1 100, tcp://b:2 0'``: a line of the log."""
    return ", ".join(f"{worker} {rows}" for worker, rows in rows_by_worker.items())


# ---- dask collections -------------------------------------------------------------------

def is_dask_array(value) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


def is_collection(value) -> bool:
    """A dask array, DataFrame or Series: what dgboost.dask takes for rows."""
    return is_dask_array(value) or is_dask_frame(value)


def is_dask_frame(value) -> bool:
    """A dask DataFrame or Series (without importing dask.dataframe, which needs pandas)."""
    from dask import is_dask_collection

    return is_dask_collection(value) and hasattr(value, "npartitions") and hasattr(value, "map_partitions") \
        and not is_dask_array(value)


def check_collection(value, name: str, *, features: bool, like=None, numeric: bool = True,
                     enable_categorical: bool = False) -> None:
    """Metadata checks of a dask collection, before anything is computed.

    ``features``: a 2-D X (array or DataFrame); else a per-row vector or margins.
    ``like``: the X whose partitions ``value`` must match.
    ``numeric``: the values must be numbers (not so for class labels the caller encodes).
    """
    if is_dask_array(value):
        if features and value.ndim != 2:
            raise ValueError(f"{name} must be a 2-D dask array (rows, features), got {value.ndim} dimensions")
        if not features and value.ndim not in (1, 2):
            raise ValueError(f"{name} must be a 1-D or 2-D dask array, got {value.ndim} dimensions")
        if value.ndim == 2 and value.numblocks[1] != 1:
            raise ValueError(f"{name} is chunked along its columns (chunks {value.chunks[1]}): dgboost "
                             f"shards by rows only; use {name}.rechunk({{1: -1}})")
        if features and any(not math.isnan(n) and n == 0 for n in value.shape):
            raise ValueError(f"{name} is empty (shape {value.shape}): give at least one row and one feature")
        if numeric and not np.issubdtype(value.dtype, np.number) and value.dtype != np.bool_:
            raise TypeError(f"{name} has dtype {value.dtype}; dgboost needs numbers")
        check_sparse_chunks(value._meta, f"{name}'s chunks")
    elif is_dask_frame(value):
        if features and not _is_frame(value):
            raise TypeError(f"{name} must be a dask DataFrame (or a 2-D dask array), got a dask Series")
        if _is_frame(value):
            check_columns(value.columns, value.dtypes, name, enable_categorical)
        elif numeric:
            _check_numeric_series(value, name)
    else:
        kind = "a 2-D dask array or dask DataFrame" if features else "a dask array or dask Series"
        raise TypeError(f"{name} must be {kind} (dgboost.dask trains on dask collections; use "
                        f"dgboost.train for in-memory data), got {type(value).__name__}")
    if like is not None:
        _check_same_partitions(value, name, like)


def _is_frame(value) -> bool:
    """A dask DataFrame (not a Series, nor an array), told by its metadata."""
    return is_dask_frame(value) and hasattr(value._meta, "columns")


def _check_numeric_series(series, name: str) -> None:
    if not is_numeric_dtype(series.dtype):
        raise TypeError(f"{name} has dtype {series.dtype}, which is not numeric: convert it to numbers "
                        f"(for class labels of any type, use dgboost.dask.DaskDGBClassifier)")


def _check_same_partitions(value, name: str, like) -> None:
    n, n_like = _n_partitions(value), _n_partitions(like)
    if n != n_like:
        raise ValueError(f"{name} has {n} partitions but X has {n_like}: give {name} X's row "
                         f"partitioning (for arrays: {name}.rechunk({{0: X.chunks[0]}}))")
    if is_dask_array(value) and is_dask_array(like):
        rows, rows_like = value.chunks[0], like.chunks[0]
        known = not any(math.isnan(r) for r in rows + rows_like)
        if known and rows != rows_like:
            raise ValueError(f"{name}'s row chunks {_short(rows)} differ from X's {_short(rows_like)}: "
                             f"use {name}.rechunk({{0: X.chunks[0]}})")


def side_by_side(first, second, names: tuple[str, str]):
    """Two per-row collections of X's partitioning (survival:aft's bounds) as one of two
    columns, partition by partition (their rows need not be known yet): 1-D dask arrays, or
    dask Series."""
    if is_dask_array(first) and is_dask_array(second):
        for name, value in zip(names, (first, second)):
            if value.ndim != 1:
                raise ValueError(f"{name} must be a 1-D dask array (one bound a row), got {value.ndim} dimensions")
        import dask.array as da

        return da.blockwise(_as_columns, "ij", first, "i", second, "i", new_axes={"j": 2}, align_arrays=False,
                            dtype=np.result_type(first.dtype, second.dtype), names=names,
                            meta=get_xp(first._meta).empty((0, 2), np.result_type(first.dtype, second.dtype)))
    if is_dask_frame(first) and is_dask_frame(second) and not (_is_frame(first) or _is_frame(second)):
        import dask.dataframe as dd

        return dd.map_partitions(_as_columns, first, second, names, align_dataframes=False,
                                 meta=_as_columns(first._meta, second._meta, names))
    raise TypeError(f"{names[0]} and {names[1]} must both be 1-D dask arrays or both dask Series, got "
                    f"{type(first).__name__} and {type(second).__name__}")


def _as_columns(first, second, names):
    """One partition's two bounds side by side: an array of two columns, or a frame."""
    if len(first) != len(second):
        raise ValueError(f"{names[0]} has {len(first)} rows in a partition where {names[1]} has {len(second)}: "
                         "give both X's row partitioning")
    if hasattr(first, "to_frame"):  # a Series (pandas or cudf)
        return first.to_frame(name=names[0]).assign(**{names[1]: second.values})
    return get_xp(first).stack([first, second], axis=1)


def _short(chunks) -> str:
    text = str(tuple(int(c) for c in chunks))
    return text if len(text) < 60 else text[:56] + "...)"


def _n_partitions(value) -> int:
    return value.numblocks[0] if is_dask_array(value) else value.npartitions


def partitions(value) -> list:
    """One Delayed per row partition of a dask array, DataFrame or Series."""
    if value is None:
        return None
    if is_dask_array(value):
        blocks = value.to_delayed()
        return list(blocks.reshape(-1)) if value.ndim == 1 else list(blocks[:, 0])
    return list(value.to_delayed())


def shared(*values) -> list:
    """``values`` that every partition's task takes, each made one key of the graph. Given as
    they are, dask would walk each in every call for collections (a dataclass field by field:
    TrainParams' walk 32 times was a third of a job's submission) and pickle it into every task;
    a key is walked once and reaches each worker once."""
    return [None if value is None else dask.delayed(value, pure=False) for value in values]


def column_categories(value, enable_categorical: bool) -> tuple | None:
    """A dask DataFrame's columns' categories, from its metadata (data/categories.py
    frame_categories); None for an array or a frame without category columns."""
    if not _is_frame(value):
        return None
    return frame_categories(value.columns, value.dtypes, "X", enable_categorical)


def column_names(value) -> tuple[str, ...] | None:
    """A dask DataFrame's column names (the feature names dgboost gives them); None for an array."""
    return tuple(str(c) for c in value.columns) if _is_frame(value) else None


def n_columns(value) -> int | None:
    """Features of X when known without computing."""
    if is_dask_array(value):
        return None if math.isnan(value.shape[1]) else int(value.shape[1])
    return len(value.columns)


# ---- tasks (run on the workers) -------------------------------------------------------------
#
# A bundle is one partition's rows checked and converted as ``dgboost.train`` checks its
# input, made where the partition is. It travels as a tuple (X, label, weight, base_margin, qid,
# feature_names, frame_categories), not as the Dataset it stands for: distributed serialises each array of a
# tuple with its own serialiser (cupy's through device memory), a dataclass only by pickle.
# Bad input is not raised on the worker (which would log a traceback) but returned as
# ``Rejected``; the client raises it once, before any rank starts, with the row's place in
# the whole data set.

@dataclasses.dataclass(frozen=True)
class Rejected:
    """A partition whose input is bad, with the error the client raises."""

    error: Exception
    n_rows: int


def make_bundle(X, y, weight, base_margin, qid, part: int, what: str, params, categories=None,
                label_name: str = "y"):
    """Partition ``part``'s rows, checked (``training.checked_dataset``): a bundle, or Rejected.
    ``categories``: the categories of the frame's category columns, by column, from its
    metadata: every partition codes its categories by them, by value. ``qid``: ranking's query
    ids of the rows, kept in the bundle (host, int64 or float64) for the query-aware shares.
    ``label_name``: what errors call ``y``."""
    n_rows = int(X.shape[0]) if hasattr(X, "shape") else len(X) if hasattr(X, "__len__") else 0
    try:
        for name, value in ((label_name, y), ("sample_weight", weight), ("base_margin", base_margin), ("qid", qid)):
            if value is not None and len(value) != n_rows:
                raise ValueError(f"{what}{name} has {len(value)} rows where {what}X has {n_rows}: give "
                                 f"{what}{name} X's row partitioning")
        data = checked_dataset(X, y, params, make_objective(params), weight=weight, base_margin=base_margin,
                               where=what, allow_empty=True, shard=True, categories=categories, qid=qid,
                               label_name=label_name)
        _check_category_codes(data, params, what)
    except RowError as error:  # the client names the row in the whole data set
        return Rejected(error, n_rows)
    except (ValueError, TypeError) as error:
        return Rejected(type(error)(f"{error} (partition {part})") if type(error) in (ValueError, TypeError)
                        else error, n_rows)
    qid = None if qid is None else _query_ids(qid)
    return (data.X, data.label, data.weight, data.base_margin, qid, data.feature_names, data.frame_categories)


def _check_category_codes(data: Dataset, params, what: str) -> None:
    """The codes of the features typed "c" (not a frame's category columns, coded by their
    categories): integers in [0, MAX_CATEGORIES) or NaN. Every rank checks them again, but
    found here a bad one's row is named in the whole data set by the client, before any rank."""
    if params.feature_types is not None and len(params.feature_types) != data.n_features:
        return  # the client's check of X's features says it (check_widths, then the parameters')
    categorical = resolve_categories(params, data.n_features, data.frame_categories, f"{what}X", data.feature_names)
    if categorical is None:
        return
    if sparse.is_sparse(data.X):
        raise TypeError(f"{what}X is sparse: categorical features take dense rows (an array or a DataFrame)")
    codes = np.array([c and v is None for c, v in zip(categorical.categorical, categorical.values)], dtype=bool)
    check_codes(data.X, codes, f"{what}X", data.feature_names)


def _query_ids(qid) -> np.ndarray:
    values = np.asarray(qid.to_numpy() if hasattr(qid, "to_numpy") else to_numpy(qid)).reshape(-1)
    return values.astype(np.int64 if values.dtype.kind in "biu" else np.float64)


@dataclasses.dataclass(frozen=True)
class Summary:
    """What the client learns of a bundle: its rows, its bad input, whether a row weighs anything."""

    n_rows: int
    error: Exception | None = None
    some_weight: bool = True
    qid_first: object = None  # ranking: the partition's first and last query ids, and the rows
    qid_last: object = None   # where a query starts after its first (its query boundaries)
    query_starts: object = None
    weight_ends: tuple | None = None  # ranking: the weights of its first and last rows (a query's must agree)
    n_features: int | None = None  # X's columns (None where the partition was rejected)
    row_stride: int | None = None  # a streamed job's survey (_streamed.survey): a row's most present values


def summarise(bundle) -> Summary:
    if isinstance(bundle, Rejected):
        return Summary(bundle.n_rows, bundle.error)
    X, _, weight, _, qid, *_ = bundle
    n_rows, n_features = (int(n) for n in X.shape)
    some_weight = weight is None or bool((weight > 0).any())
    if qid is None or not qid.shape[0]:
        return Summary(n_rows, some_weight=some_weight, n_features=n_features)
    ends = None if weight is None else (float(weight[0]), float(weight[-1]))
    return Summary(n_rows, some_weight=some_weight, qid_first=qid[0].item(), qid_last=qid[-1].item(),
                   query_starts=np.flatnonzero(qid[1:] != qid[:-1]) + 1, weight_ends=ends, n_features=n_features)


def check_summaries(summaries: list[Summary]) -> None:
    """Raise the error of the first rejected partition, a row named by its place in the
    whole data set; or the error of weights that are zero on every row of every partition."""
    offset = 0
    for part, summary in enumerate(summaries):
        if isinstance(summary.error, RowError):
            raise summary.error.in_whole(offset, part)
        if summary.error is not None:
            raise summary.error
        offset += summary.n_rows
    if offset and not any(summary.some_weight for summary in summaries):  # no rows: the caller says so
        raise ValueError(ALL_ZERO_WEIGHTS.format(name="sample_weight"))


def check_widths(summaries: list[Summary], what: str, training: int | None = None) -> int | None:
    """X's features as its partitions hold them, known to the client before any rank starts
    even where X's chunks do not say them (a dask array of unknown shape): raises where the
    partitions differ (a partition of no rows too: a streamed job's cut sample would join its
    columns), or differ from the training X's ``training`` features (an eval set's, ``what``
    naming it: "evals[0] "). None where no partition was read."""
    first: dict[int, int] = {}  # each width: the first partition of it
    for part, summary in enumerate(summaries):
        if summary.n_features is not None:
            first.setdefault(summary.n_features, part)
    if len(first) > 1:
        (width, part), (other, other_part) = list(first.items())[:2]  # in the partitions' order
        raise ValueError(f"{what}X's partitions have {sorted(first)} columns (partition {part} has {width}, "
                         f"partition {other_part} {other}; empty ones count too): every partition needs the same "
                         "features")
    width = next(iter(first), None)
    if training is not None and width is not None and width != training:
        raise ValueError(f"{what}X has {width} features but the training X has {training}")
    return width


def slice_bundle(bundle, start: int, stop: int):
    """Rows [start, stop) of a bundle (copies: the slice travels alone)."""
    *arrays, feature_names, categories = bundle
    return (*(None if a is None else a[start:stop].copy() for a in arrays), feature_names, categories)


def concat_bundles(bundles, join_X: bool = True) -> Dataset:
    """One Dataset of a worker's bundles, in order; with query ids, its query groups (the shares
    were cut at query boundaries, and the client checked the ids ascend over the partitions).
    ``join_X`` False: a dense X on the host in several bundles is left in them (RowBlocks), for
    its pages. Bundles packed where they were read (``_streamed.pack_piece``) join their pages."""
    packed = isinstance(bundles[0][0], PackedRows)  # packed where they were read (_streamed.pack_piece)
    xp = get_xp(bundles[0][1] if packed else bundles[0][0])

    def joined(k):
        parts = [bundle[k] for bundle in bundles]
        if parts[0] is None or len(parts) == 1:
            return parts[0]
        if k == 4:  # query ids, on the host
            return np.concatenate(parts)
        # join: on a GPU a device copy a piece, where cupy's concatenate of many pieces compiles a
        # kernel the first time (0.18 s, a cold cache: a restart's survivor joining more pieces)
        return sparse.stack(parts) if sparse.is_sparse(parts[0]) else join(parts)

    blocks = not join_X and len(bundles) > 1 and not sparse.is_sparse(bundles[0][0]) and xp is np
    if packed:
        X = PackedRows.join([bundle[0] for bundle in bundles])
    else:
        X = RowBlocks([bundle[0] for bundle in bundles]) if blocks else joined(0)
    label, weight, base_margin, qid = (joined(k) for k in range(1, 5))
    group = None if qid is None else query_groups(qid, None, int(qid.shape[0]))
    return Dataset(X, label, weight, base_margin, feature_names=bundles[0][5], frame_categories=bundles[0][6],
                   group=group)


@dataclasses.dataclass(frozen=True)
class Incoming:
    """A piece of a rank's shard that the rank holding its partition sends once both have
    started (``move_pieces``), in its place in the shard's order."""

    source: int  # the sending rank
    n_rows: int


def move_pieces(host, comm, shard: list, sends: list) -> list:
    """``shard`` with each ``Incoming`` piece replaced by the bundle its source rank sends, while
    this rank sends its ``sends``, each (bundle, start, stop, receiving rank). What each piece
    holds (its arrays' shapes, dtypes and devices, its feature names and categories) goes
    over the host communicator, one message a pair (and one of its length before it); then
    every piece's arrays in one ``comm.exchange``: NCCL's between GPUs, so that rows moved
    from one GPU to another cross NVLink, not the hosts and Dask's comms. Between two ranks
    the pieces go in the receiver's shard order (``_placing._share_rows`` lists them so)."""
    outgoing = [(dest, *_piece_arrays(bundle, start, stop)) for bundle, start, stop, dest in sends]
    incoming = [(index, piece) for index, piece in enumerate(shard) if isinstance(piece, Incoming)]
    headers: dict[int, list] = {}
    for dest, header, _ in outgoing:
        headers.setdefault(dest, []).append(header)
    blobs = {dest: np.frombuffer(pickle.dumps(listed), dtype=np.uint8) for dest, listed in headers.items()}
    sources = sorted({piece.source for _, piece in incoming})
    lengths = host.exchange([(dest, np.array([blob.size], dtype=np.int64)) for dest, blob in blobs.items()],
                            [(source, (1,), np.int64, np) for source in sources])
    got = host.exchange(list(blobs.items()),
                        [(source, (int(length[0]),), np.uint8, np) for source, length in zip(sources, lengths)])
    header_of = {source: collections.deque(pickle.loads(blob.tobytes())) for source, blob in zip(sources, got)}
    receives, rebuilt = [], []
    for index, piece in incoming:
        header = header_of[piece.source].popleft()
        asked = [(piece.source, shape, dtype, _module(on_device)) for field in header[0] if field is not None
                 for shape, dtype, on_device in field[2]]
        receives.extend(asked)
        rebuilt.append((index, piece, header, len(asked)))
    arrays = iter(comm.exchange([(dest, array) for dest, _, listed in outgoing for array in listed], receives))
    shard = list(shard)
    for index, piece, header, n_arrays in rebuilt:
        bundle = _bundle_of(header, [next(arrays) for _ in range(n_arrays)])
        if bundle[0].shape[0] != piece.n_rows:
            raise RuntimeError(f"rank {piece.source} sent {bundle[0].shape[0]} rows where {piece.n_rows} were "
                               "planned")
        shard[index] = bundle
    return shard


def _piece_arrays(bundle, start: int, stop: int):
    """Rows [start, stop) of ``bundle``: (its header, its arrays in order). The header lists each
    field (X, y, weight, base_margin, qid) as None, or (kind, columns, [(shape, dtype, on a
    GPU) of each array]): a dense array is one, a CSR matrix its data, indices and indptr."""
    *values, feature_names, categories = bundle
    fields, arrays = [], []
    for value in values:
        if value is None:
            fields.append(None)
            continue
        rows = value[start:stop]  # a view of a dense array's rows; CSR's slice rebases indptr
        parts = [rows.data, rows.indices, rows.indptr] if sparse.is_sparse(rows) else [rows]
        fields.append(("csr" if sparse.is_sparse(rows) else "dense", rows.shape[1] if rows.ndim > 1 else None,
                       [(a.shape, a.dtype.str, get_xp(a) is not np) for a in parts]))
        arrays.extend(parts)
    return (fields, feature_names, categories), arrays


def _bundle_of(header, arrays: list):
    fields, feature_names, categories = header
    values, arrays = [], iter(arrays)
    for field in fields:
        if field is None:
            values.append(None)
        elif field[0] == "csr":
            data, indices, indptr = next(arrays), next(arrays), next(arrays)
            values.append(sparse.from_arrays(data, indices, indptr, field[1]))
        else:
            values.append(next(arrays))
    return (*values, feature_names, categories)


def _module(on_device: bool):
    if not on_device:
        return np
    import cupy

    return cupy
