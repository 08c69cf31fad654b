"""Rows streamed into pages where they are read: a Dask job that never holds its float input at
once (issue 21; docs/architecture.md, "Out of core").

A job whose workers' shares may not fit their device budgets (``dgboost.stream-partitions``) does
not keep one future per partition, which would hold every partition's values in the cluster's
memory until the ranks end. It reads its partitions in passes instead, each releasing a
partition's values once it has taken what it needs:

1. **Survey** (``survey``): each partition checked as ``make_bundle`` checks it, its rows, bad
   input, queries and the most present values of a row (``ellpack.row_stride``: the layout's);
   where X's row chunks are known beforehand, also its rows of the cut sample (drawn by global
   row number, so the same rows as a rank of the in-core job draws). Otherwise a second pass
   draws the sample (``sample_part``) once the rows are known.
2. **Cuts** (``cuts_of``): one task on a worker merges the samples and computes the cuts, which
   every rank would agree on in core: the same rows give the same cuts, and the model file is
   the same bytes.
3. **Packed** (``pack_piece``): each attempt's pieces (the shares of ``plan_shards``, no
   partition held anywhere) are read again on the worker whose rank takes them, checked and
   packed there with the cuts into pages of at most half the device budget (pinned host
   memory on a GPU while there is room, else files in the spill directory; files on a CPU),
   with init_model's margins where training continues one. Dask runs a worker's pieces a few
   at a time and drops each partition's values once packed, so a worker holds its packed pages,
   its labels and weights, and the partitions in flight.

The rank then trains on its pieces' pages (``data.pages.PackedRows``) as on a matrix it built.
A streamed job's eval sets are streamed too: surveyed (no sample: they take the training
rows' cuts, with a layout of their own), their partitions placed as a held job's are
(``plan_evals``, or at query boundaries) and packed on their workers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
import time

import dask
import dask.sizeof
import numpy as np

from .. import _settings
from .._dtypes import FEATURE_DTYPE, MARGIN_DTYPE, ROW_INDEX_DTYPE
from ..backend import asarray, get_xp, to_numpy
from ..data import sparse
from ..data.ellpack import EllpackLayout, row_stride
from ..data.pages import PackedRows, device_budget, pack_rows, rows_per_page, stays_on_host
from ..data.sketch import Sample, compute_cuts, draw_sample
from ..training import device_module
from ..tree.predict import bin_forest, predict_bins
from . import _shards

logger = logging.getLogger("dgboost")


@dataclasses.dataclass(frozen=True)
class Stream:
    """How a streamed job reads its partitions again (each attempt packs its pieces anew)."""

    parts: list  # per partition: its (X, y, weight, base_margin, qid) Delayeds, None where not given
    lengths: tuple  # per partition: the rows the survey found (a read finding others fails)
    what: str
    params: object
    categories: object
    label_name: str
    cuts: object  # data.sketch.Cuts
    layout: EllpackLayout


@dask.sizeof.sizeof.register(PackedRows)
def _sizeof_packed(rows: PackedRows) -> int:
    """What a packed piece holds in memory (its pages in files count for nothing), so Dask's
    memory accounting sees the pages in pinned host memory."""
    return sum(page.nbytes for page in rows.pages if isinstance(page, np.ndarray))


# ---- the client's side --------------------------------------------------------------------------

def stream_setting(categorical: bool) -> bool | str:
    """``dgboost.stream-partitions`` as a job takes it when it is submitted (True, False or
    "auto"): never streamed with categorical features, whose codes and statistics are made
    from a rank's joined X (refused where the setting says True)."""
    setting = _settings.stream_partitions()
    if categorical:
        if setting is True:
            raise ValueError("dask config dgboost.stream-partitions=True: categorical features are not streamed "
                             "(their codes and target statistics are made from a rank's joined rows); set it to "
                             "'auto' or False")
        return False
    return setting


def streams(client, X, params, setting: bool | str, futures=None) -> bool:
    """Whether this job's rows are streamed, by its ``stream_setting``: as it says where True
    or False; by "auto" where the workers have a device budget and an equal share of X's rows
    might not fit it beside its matrix (``pages.stays_on_host``, the rule a rank keeps its X on
    the host by), X's rows counted as ``_rows_and_columns`` does (``futures``: the job's
    _placing._Futures, which hold and cancel what it computes)."""
    if setting != "auto":
        return setting
    budget = _smallest_budget(client, params)
    if not budget:
        return False
    n_rows, n_features = _rows_and_columns(client, X, futures)
    if not n_rows or not n_features:
        return False
    workers = max(1, len(client.nthreads()))
    share = -(-n_rows // workers)
    value_bytes = 0 if sparse.is_sparse(X._meta) else share * n_features * np.dtype(FEATURE_DTYPE).itemsize
    return stays_on_host(share, n_features, value_bytes, budget, params.max_bin)


def _rows_and_columns(client, X, futures=None) -> tuple[int, int]:
    """X's rows and columns: a dask array's where its chunks say them; else (a DataFrame, an
    array of unknown chunks) estimated as a partition's rows times the partitions, from the
    first partition with rows of the first three (0 where none has any: not streamed). Each
    partition looked at is computed once more, and its graph with it: cheap for data read from
    files or persisted, a whole shuffle's work for a partition a shuffle made. The model is the
    same whichever way the job goes; only where its float rows wait differs."""
    array = _shards.is_dask_array(X)
    if array and not any(math.isnan(n) for n in X.shape):
        return int(X.shape[0]), int(X.shape[1])
    n_parts = X.numblocks[0] if array else X.npartitions
    n_columns = 0
    for index in range(min(3, n_parts)):
        part = X.blocks[index] if array else X.partitions[index]
        future = client.compute(dask.delayed(_shape_of)(part))
        n_rows, n_columns = (future if futures is None else futures.track_one(future)).result()
        if n_rows:
            return n_rows * n_parts, n_columns
    logger.info("dgboost.dask: X's first partitions have no rows: its rows are not estimated, nor streamed "
                "by dgboost.stream-partitions='auto' (True streams them)")
    return 0, n_columns


def _shape_of(part) -> tuple[int, int]:
    """A partition's rows and columns (a 1-D part: one column)."""
    shape = tuple(int(n) for n in part.shape)
    return shape[0], shape[1] if len(shape) > 1 else 1


def _smallest_budget(client, params) -> int:
    """The least device budget of the cluster's workers (``_budgets``)."""
    return min(_budgets(client, params, None).values(), default=0)


def _budgets(client, params, workers) -> dict:
    """Each worker's device budget (of ``workers``, None: every worker): max_device_matrix_bytes,
    else on GPUs its automatic budget (asked of it; 0 for a worker that could not answer: gone,
    say, which the attempt then finds), else none (0)."""
    if params.max_device_matrix_bytes or not params.device.startswith("cuda"):
        workers = list(client.nthreads()) if workers is None else workers
        return dict.fromkeys(workers, int(params.max_device_matrix_bytes))
    answers = client.run(_budget_here, params, workers=workers, on_error="return")
    return {worker: answer if isinstance(answer, int) else 0 for worker, answer in answers.items()}


def _budget_here(params) -> int:
    return device_budget(params, device_module("cuda"))


def streamed_rows(client, futures, params, X, y, weight, base_margin, what: str, categories=None, qid=None,
                  label_name: str = "y", cuts=None):
    """The job's rows surveyed and their cuts agreed (steps 1 and 2 above): ``_placing._Rows``
    with no bundle held, its ``stream`` telling each attempt how to pack its pieces. ``cuts``:
    an eval set's, the training rows' (its rows draw no sample)."""
    from ._placing import _Rows

    parts = [_shards.partitions(v) for v in (X, y, weight, base_margin, qid)]
    n_parts = len(parts[0])
    parts = list(zip(*[p if p is not None else [None] * n_parts for p in parts]))
    lengths = _known_lengths(X) if cuts is None else None
    offsets = None if lengths is None else np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_total = None if lengths is None else int(offsets[-1])
    params_key, categories_key = _shards.shared(params, categories)
    surveyed = futures.track(client.compute([
        dask.delayed(survey, pure=False)(*part, i, what, params_key, categories_key, label_name,
                                         None if offsets is None else int(offsets[i]), n_total)
        for i, part in enumerate(parts)]))
    summaries = client.gather(futures.track(client.map(_summary_of, surveyed, pure=False)))
    _shards.check_summaries(summaries)
    rows = [s.n_rows for s in summaries]
    widest = max((s.row_stride for s in summaries if s.row_stride is not None), default=1)
    n_features = _shards.check_widths(summaries, what)
    if lengths is not None and rows != lengths:
        raise ValueError(f"{what}X's partitions hold {_shards._short(rows)} rows where its chunks say "
                         f"{_shards._short(lengths)}: give chunks that match the data (X.compute_chunk_sizes())")
    if cuts is not None:  # an eval set: packed by the training rows' cuts
        client.cancel(surveyed)
        _shards.check_widths(summaries, what, cuts.n_features)
        return _Rows([], summaries, qid is not None, Stream(parts, tuple(rows), what, params, categories, label_name,
                                                            cuts, EllpackLayout.smaller(cuts, widest)))
    if sum(rows) == 0:
        return _Rows([], summaries, qid is not None)
    if offsets is None:  # the rows are known now: the sample is drawn in a pass of its own
        offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        samples = futures.track(client.compute([
            dask.delayed(sample_part, pure=False)(*part, i, what, params_key, categories_key, label_name,
                                                  int(offsets[i]), int(offsets[-1]))
            for i, part in enumerate(parts)]))
    else:
        samples = futures.track(client.map(_sample_of, surveyed, pure=False))
    cuts = futures.track_one(client.submit(cuts_of, n_features, params.max_bin, *samples, pure=False)).result()
    client.cancel(surveyed + samples)  # the samples are spent
    layout = EllpackLayout.smaller(cuts, widest)
    logger.info("dgboost.dask: rows streamed into pages where they are read (%d partitions, %d rows); "
                "compressed rows of %d bytes", n_parts, sum(rows), layout.bytes_per_row)
    return _Rows([], summaries, qid is not None, Stream(parts, tuple(rows), what, params, categories, label_name, cuts,
                                                        layout))


def _known_lengths(X) -> list[int] | None:
    """X's partitions' rows where known without computing them (a dask array's row chunks)."""
    if not _shards.is_dask_array(X) or any(math.isnan(n) for n in X.chunks[0]):
        return None
    return [int(n) for n in X.chunks[0]]


@dataclasses.dataclass(frozen=True)
class Packed:
    """A piece of the training rows an attempt packed: its rows, the budget its pages were cut
    for (``pack_piece``'s page_budget), and its name in its worker's keep once kept there (its
    task's key)."""

    piece: _shards.Piece
    page_budget: int
    token: str


@dataclasses.dataclass(frozen=True)
class Kept:
    """The training rows' pieces an interrupted attempt packed, kept on the workers left for
    the next attempt (``keep``; ``plan_again``): a worker takes its pieces again with their
    pages as they are, and continues their margins (``continue_piece``) from ``trees``, the
    trees they hold (the attempt's init_model's; 0 without one)."""

    pieces: dict  # worker: [Packed, ...] in global row order
    trees: int
    tokens: list  # every piece ``keep`` asked the workers to keep, kept in time or not

    def drop(self, client, taken=frozenset()) -> None:
        """Free those no attempt took again, but the ``taken`` tokens (best effort: a worker gone
        took its own)."""
        with contextlib.suppress(Exception):
            client.run(_drop_kept, [t for t in self.tokens if t not in taken], on_error="ignore")


class Packing:
    """What an attempt's pieces are packed with, taken or sent once for its rows and its eval
    sets alike: each worker's budget (so that every matrix of a rank is cut for one budget, and
    its page buffers fit them all), the cuts and init_model, scattered to the workers;
    ``previous``: the last attempt's ``Kept`` pieces, if any; ``packed``: this attempt's
    training pieces, each worker's (Packed, future) pairs, which ``keep`` keeps."""

    def __init__(self, init_model, previous: Kept | None = None):
        self.init_model = init_model
        self.previous = previous
        self.packed: dict = {}
        self.taken: dict = {}  # the tokens of the pieces taken again from ``previous``: their rows
        self.budgets: dict | None = None
        self.cuts = self.model = None

    def take(self, client, futures, stream: Stream, workers) -> "Packing":
        if self.budgets is None:
            self.budgets = _budgets(client, stream.params, list(workers))
            scatter = lambda value: futures.track_one(client.scatter(value, broadcast=True, hash=False))  # noqa: E731
            self.cuts = scatter(stream.cuts)
            self.model = None if self.init_model is None else scatter(self.init_model)
        return self


#: Seconds at most ``keep`` waits for the workers to keep their pieces (a worker whose thread is
#: still taken, by a rank slow to stop, keeps none).
_KEEP_WAIT_SECONDS = 10.0

#: Seconds at least a worker keeps a piece for the next attempt (twice the job's timeout where
#: longer), which takes it at once unless the workers' threads are taken; a client gone meanwhile
#: would never take it. An attempt later than that packs it again (KeptPieceGone).
_KEPT_SECONDS = 600.0


def keep(client, packing: Packing, workers, timeout: float) -> Kept:
    """The training pieces an interrupted attempt packed on ``workers`` (those left), kept
    there apart from Dask (``_keep_here``) for the next attempt (``timeout``: the job's, which
    bounds the wait and the keeping, above). Apart:
    a Dask future would keep its graph, whose partitions' keys hold the workers the attempt
    restricted them to, the lost one among them, and Dask keeps a known key's restrictions
    when a new graph names it again (the next attempt's reads of those partitions would wait
    for ever). The attempt's futures are cancelled after."""
    from ._placing import settle

    placed = {w: [(p, f) for p, f in pairs if f.status == "finished"] for w, pairs in packing.packed.items()
              if w in workers}
    seconds = max(_KEPT_SECONDS, 2 * timeout)
    tasks = {w: [client.submit(_keep_here, f, p.token, seconds, workers=[w], allow_other_workers=False, pure=False)
                 for p, f in pairs] for w, pairs in placed.items()}
    settle([t for ts in tasks.values() for t in ts], min(timeout, _KEEP_WAIT_SECONDS))
    pieces = {w: [p for (p, _), t in zip(placed[w], tasks[w]) if t.status == "finished"] for w in placed}
    client.cancel([t for ts in tasks.values() for t in ts])
    return Kept({w: kept for w, kept in pieces.items() if kept},
                0 if packing.init_model is None else len(packing.init_model.trees),
                [p.token for pairs in placed.values() for p, _ in pairs])  # dropped by the next attempt


def plan_again(lengths, previous: Kept, workers) -> tuple[dict, dict, int]:
    """A restart's shares over ``workers`` that keep the pieces the last attempt packed on a
    worker still there: ``_shards.plan_shards`` over the kept pieces and the rows between them
    as its partitions, each kept piece held by its worker. Returns (each worker's pieces in
    global row order, each worker's kept ones by their index in its pieces, the rows that go to
    a worker that did not pack them). The model does not depend on which rank trains which rows."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    spans = sorted((int(offsets[p.piece.part]) + p.piece.start, p, worker)
                   for worker, pieces in previous.pieces.items() for p in pieces if worker in workers)
    parts, at = [], 0  # (Piece, the kept Packed or None, its worker or None), covering every row in order
    for start, packed, worker in spans + [(int(offsets[-1]), None, None)]:
        while at < start:  # the rows before it, no one's, cut at partitions' ends
            part = int(np.searchsorted(offsets, at, side="right")) - 1
            stop = min(start, int(offsets[part + 1]))
            parts.append((_shards.Piece(part, at - int(offsets[part]), stop - int(offsets[part])), None, None))
            at = stop
        if packed is not None:
            parts.append((packed.piece, packed, worker))
            at = start + packed.piece.n_rows
    shares = _shards.plan_shards([p.n_rows for p, _, _ in parts], [w for _, _, w in parts], workers)
    plan, kept, moved = {}, {}, 0
    for worker in workers:
        plan[worker], kept[worker] = [], {}
        for share in shares[worker]:
            piece, packed, holder = parts[share.part]
            if holder == worker and share.n_rows == piece.n_rows:
                kept[worker][len(plan[worker])] = packed
            elif holder != worker:
                moved += share.n_rows
            plan[worker].append(_shards.Piece(piece.part, piece.start + share.start, piece.start + share.stop))
    return plan, kept, moved


def pack_futures(client, futures, stream: Stream, plan: dict, packing: Packing, kept: dict | None = None) -> dict:
    """Each worker's pieces packed on it (step 3 above): {worker: [future, ...]}, the pieces
    in plan order. Each partition is computed where its piece is packed (the tasks' graphs
    are restricted to that worker), unless Dask holds it already. A worker's budget (of
    ``packing``, the attempt's) travels with its pages (``PackedRows.budget``), so its pieces
    and its rank page alike. ``kept``: the training rows' (``plan_again``'s), the pieces
    taken again from the last attempt where their pages fit this one's budget; the training
    rows' pieces (``kept`` given, if only empty) are noted in ``packing.packed``."""
    shards = {}
    params = stream.params
    automatic = not params.max_device_matrix_bytes
    for worker, pieces in plan.items():
        rank_rows, budget = sum(p.n_rows for p in pieces), packing.budgets[worker]
        paged = bool(budget) and rank_rows * stream.layout.bytes_per_row > budget  # else joined in core
        page_rows = rows_per_page(stream.layout, budget, f"{stream.what}X", automatic) if paged else 0  # raises
        # where too small for two pages, before any task. The shared values' keys are this
        # worker's own: restricted to it, a key another worker's tasks read could not be made
        # again were it lost.
        params_key, categories_key, layout_key = _shards.shared(params, stream.categories, stream.layout)
        tasks, cut_for = [], []
        for index, p in enumerate(pieces):
            again = (kept or {}).get(worker, {}).get(index)
            if again is not None and _pages_fit(again, page_rows, stream.layout, automatic):
                tasks.append(dask.delayed(continue_piece, pure=False)(again.token, params_key, budget, packing.model,
                                                                      packing.previous.trees))
                cut_for.append(again.page_budget)
                packing.taken[again.token] = p.n_rows
                continue
            tasks.append(dask.delayed(pack_piece, pure=False)(*stream.parts[p.part], p.part, stream.lengths[p.part],
                                                              p.start, p.stop, budget if paged else 0, budget,
                                                              stream.what, params_key, categories_key,
                                                              stream.label_name, packing.cuts, layout_key,
                                                              packing.model))
            cut_for.append(budget if paged else 0)
        shards[worker] = futures.track(client.compute(tasks, workers=[worker], allow_other_workers=False)) \
            if tasks else []
        if kept is not None:
            packing.packed[worker] = [(Packed(p, b, str(f.key)), f) for p, f, b in zip(pieces, shards[worker], cut_for)]
    return shards


def _pages_fit(packed: Packed, page_rows: int, layout: EllpackLayout, automatic: bool) -> bool:
    """Whether a kept piece's pages fit a rank paged by pages of ``page_rows`` (0: not paged,
    its rows joined in core, where any page fits)."""
    if not page_rows:
        return True
    largest = packed.piece.n_rows  # one page, unless cut into pages for a budget
    if packed.page_budget:
        largest = min(largest, rows_per_page(layout, packed.page_budget, "X", automatic))
    return largest <= page_rows


# ---- tasks (run on the workers) ------------------------------------------------------------------

def survey(X, y, weight, base_margin, qid, part: int, what: str, params, categories, label_name: str,
           offset: int | None, n_total: int | None):
    """(Partition ``part``'s Summary with its row stride, its rows of the cut sample as bytes
    or None): its values are not kept."""
    bundle = _shards.make_bundle(X, y, weight, base_margin, qid, part, what, params, categories, label_name)
    summary = _shards.summarise(bundle)
    if isinstance(bundle, _shards.Rejected):
        return summary, None
    X = bundle[0]
    summary = dataclasses.replace(summary, row_stride=row_stride(X))
    return summary, (None if offset is None else _sample_bytes(X, bundle[2], offset, n_total, params.seed))


def _summary_of(surveyed):
    return surveyed[0]


def _sample_of(surveyed):
    return surveyed[1]


def sample_part(X, y, weight, base_margin, qid, part: int, what: str, params, categories, label_name: str,
                offset: int, n_total: int):
    """Partition ``part``'s rows of the cut sample, as bytes (its rows start at ``offset``)."""
    bundle = _read_again(X, y, weight, base_margin, qid, part, what, params, categories, label_name)
    return _sample_bytes(bundle[0], bundle[2], offset, n_total, params.seed)


def _read_again(X, y, weight, base_margin, qid, part: int, what: str, params, categories, label_name: str):
    """Partition ``part``'s bundle, read after the survey passed it: bad input now means its
    input changed since (data read from files rewritten meanwhile, say), which is said."""
    bundle = _shards.make_bundle(X, y, weight, base_margin, qid, part, what, params, categories, label_name)
    if isinstance(bundle, _shards.Rejected):
        kind = TypeError if isinstance(bundle.error, TypeError) else ValueError
        raise kind(f"partition {part} changed since it was first read: {bundle.error}") from bundle.error
    return bundle


def _sample_bytes(X, weight, offset: int, n_total: int, seed: int) -> np.ndarray:
    xp = sparse.array_module(X)
    global_index = xp.arange(offset, offset + int(X.shape[0]), dtype=ROW_INDEX_DTYPE)
    return to_numpy(draw_sample(X, weight, global_index, n_total, seed).to_bytes())


def cuts_of(n_features: int, max_bin: int, *samples):
    """The cuts of every partition's sample rows (as ``training.agree_cuts`` computes them from
    every rank's)."""
    return compute_cuts(Sample.merge([Sample.from_bytes(s, n_features) for s in samples]), max_bin)


def pack_piece(X, y, weight, base_margin, qid, part: int, n_rows: int, start: int, stop: int, page_budget: int,
               budget: int, what: str, params, categories, label_name: str, cuts, layout: EllpackLayout, init_model):
    """Rows [start, stop) of partition ``part`` (of ``n_rows`` when surveyed) as a bundle whose
    X is packed (PackedRows), on this worker's device: into pages of at most half
    ``page_budget`` (0: one page, where the rank's rows fit its ``budget``, which the pages
    carry to it); its base_margin, where init_model is given, the margins training starts from
    (init_model's, from the float values, which only this task sees)."""
    from ._job import _worker_device

    bundle = _read_again(X, y, weight, base_margin, qid, part, what, params, categories, label_name)
    if int(bundle[0].shape[0]) != n_rows:
        raise ValueError(f"partition {part} changed since it was first read: {bundle[0].shape[0]} rows where it had "
                         f"{n_rows}")
    if (start, stop) != (0, n_rows):
        bundle = _shards.slice_bundle(bundle, start, stop)
    X, label, weight, base_margin, qid, names, frame_categories = bundle
    xp = device_module(_worker_device(params.device))
    packed = pack_rows(X, cuts, xp, layout, page_budget, name=f"{what}X",
                       automatic=not params.max_device_matrix_bytes)
    packed = dataclasses.replace(packed, budget=budget)
    if init_model is not None:  # beside the labels (a cupy partition's on the device), as concat_bundles joins them
        base_margin = asarray(get_xp(label), _model_margins(init_model, X, base_margin, xp))
        packed = dataclasses.replace(packed, with_model=True)
    return packed, label, weight, base_margin, qid, names, frame_categories


class KeptPieceGone(RuntimeError):
    """A piece kept for a restart is not on its worker (the worker was replaced since, at the
    same address, or the piece waited past its time): the attempt is interrupted and the next
    one packs those rows again."""

    def __init__(self, token: str):
        super().__init__(f"its worker no longer holds the packed piece {token} it kept for the job's restart "
                         "(restarted since, or the piece waited past its time)")
        self.token = token

    def __reduce__(self):
        return type(self), (self.token,)


#: This worker's pieces kept from an interrupted attempt (``keep``): token -> (pack_piece's
#: result, the monotonic time it goes at), and the thread that drops those whose time came.
_KEPT: dict = {}
_KEPT_LOCK = threading.Lock()
_SWEEPER: list = [None]


def _keep_here(piece, token: str, seconds: float) -> None:
    """Keep ``piece`` for the next attempt, at most ``seconds``: a client gone meanwhile would
    never take it nor drop it (``_sweep``)."""
    with _KEPT_LOCK:
        _KEPT[token] = (piece, time.monotonic() + seconds)
        if _SWEEPER[0] is None:
            _SWEEPER[0] = threading.Thread(target=_sweep, name="dgboost-kept-pieces", daemon=True)
            _SWEEPER[0].start()


def _sweep() -> None:
    """Drop each kept piece at its time; end when none is left (the next keep starts another)."""
    while True:
        with _KEPT_LOCK:
            now = time.monotonic()
            for token in [t for t, (_, at) in _KEPT.items() if at <= now]:
                del _KEPT[token]
            if not _KEPT:
                _SWEEPER[0] = None
                return
            wait = min(at for _, at in _KEPT.values()) - now
        time.sleep(min(wait, 1.0))


def _drop_kept(tokens) -> None:
    with _KEPT_LOCK:
        for token in tokens:
            _KEPT.pop(token, None)


def continue_piece(token: str, params, budget: int, init_model, trees: int):
    """A piece the last attempt packed (``pack_piece``'s result, kept on this worker under
    ``token``, and taken) for an attempt that continues ``init_model``: its pages as they are,
    now for ``budget`` (they fit it: ``_pages_fit``), its margins continued by the model's trees
    after the first ``trees`` (those its margins hold: none where it was packed without
    init_model), walked on its bins (``predict.bin_forest``, ``predict_bins``: those trees were
    grown with the cuts it was packed by). No partition is read again."""
    from ._job import _worker_device

    with _KEPT_LOCK:
        piece, _ = _KEPT.pop(token, (None, None))
    if piece is None:
        raise KeptPieceGone(token)
    packed, label, weight, base_margin, qid, names, frame_categories = piece
    packed = dataclasses.replace(packed, budget=budget)
    if init_model is None:  # no round was finished: the pieces are as the last attempt packed them
        return packed, label, weight, base_margin, qid, names, frame_categories
    xp = device_module(_worker_device(params.device))
    # From init_model's margins, or the rows' own base_margin (packed without init_model), or the model's.
    margins = xp.array(init_model.start_margins(packed.shape[0], xp, base_margin), dtype=MARGIN_DTYPE, order="C",
                       copy=True)
    forest = bin_forest(init_model.trees[trees:], init_model.tree_outputs[trees:], xp)
    for first, page in packed.matrices(xp):
        margins[first:first + page.n_rows] = predict_bins(forest, page, margins[first:first + page.n_rows])
    return (dataclasses.replace(packed, with_model=True), label, weight, asarray(get_xp(label), margins), qid, names,
            frame_categories)


#: Values of X predicted at a time for init_model's margins.
_PREDICT_VALUES = 1 << 25


def _model_margins(init_model, X, base_margin, xp) -> np.ndarray:
    """init_model's margins of X's rows (from its base_margin where given), on the host,
    predicted on ``xp``'s device a block of rows at a time (``training._start_margins``'s
    numbers: a row's margin does not depend on its block)."""
    step = max(1, _PREDICT_VALUES // max(int(X.shape[1]), 1))
    blocks = []
    for begin in range(0, int(X.shape[0]), step):
        rows = X[begin:begin + step]
        rows = sparse.to_device(rows, xp) if sparse.is_sparse(rows) else asarray(xp, rows)
        base = None if base_margin is None else asarray(xp, base_margin[begin:begin + step])
        margins = init_model.predict(rows, output_margin=True, base_margin=base)
        blocks.append(to_numpy(margins).reshape(int(rows.shape[0]), -1))
    return np.ascontiguousarray(np.concatenate(blocks) if blocks else
                                np.zeros((0, init_model.n_outputs), MARGIN_DTYPE), dtype=MARGIN_DTYPE)
