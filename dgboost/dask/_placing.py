"""Where a job's rows go, the client's side (steps 2 and 3 of a Dask job, docs/architecture.md):
one future per partition (its bundle, computed once a job), what the client learns of each, and
each attempt's shares over the workers there are then, with the pieces cut where they lie.
``_shards`` holds the pure plans and the functions the workers run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging

import dask
import distributed
import numpy as np

from . import _shards, _streamed

logger = logging.getLogger("dgboost")


_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)  # the same class from Python 3.11


#: What distributed.wait raises for a future cancelled meanwhile (its input lost for good, say).
_CANCELLED = (concurrent.futures.CancelledError, asyncio.CancelledError)


@dataclasses.dataclass(frozen=True)
class _Rows:
    """A collection's row partitions, computed once a job (a lost one is recomputed from its
    graph by Dask): one future each, its bundle (X, y, weight, margin, qid), and what the
    client learnt of each."""

    bundles: list
    summaries: list
    by_query: bool
    stream: "_streamed.Stream | None" = None  # a streamed job's (no bundle held): how its pieces are packed


def _rows(client, futures, params, X, y, weight, base_margin, what: str, categories=None, qid=None,
          label_name: str = "y") -> _Rows:
    bundles = futures.track(_bundles(client, params, X, y, weight, base_margin, what, categories, qid, label_name))
    return _Rows(bundles, _summaries(client, futures, bundles), qid is not None)


def _share_rows(client, futures, rows: _Rows, timeout: float, packing=None):
    """(the job's workers, each one's pieces, each one's sends, each one's global row runs, rows
    moved), over the workers of the cluster now. A piece is a future, or ``_shards.Incoming``
    where another job worker holds its partition: that worker's rank sends it (one of its
    sends: bundle future, start, stop, receiving rank), GPU to GPU over NCCL. A streamed job's
    pieces are packed on their workers (with ``packing``, the attempt's
    ``_streamed.Packing``); no row is held, so none moves, but a restart keeps the pieces the
    last attempt packed on the workers left (``_streamed.plan_again``; not for ranking, whose
    shares are cut at query boundaries): the rows moved are the others."""
    lengths = [summary.n_rows for summary in rows.summaries]
    workers = sorted(_workers(client))
    if not workers:
        raise RuntimeError("the Dask cluster has no workers: start some (dask worker, dask cuda worker) "
                           "or use dgboost.dask.local_cluster()")
    if rows.stream is not None:
        # A ranking job's pieces are not kept (None), so it has none from a last attempt: its
        # shares are cut at query boundaries.
        kept, moved = (None if rows.by_query else {}), 0
        if packing.previous is not None:
            plan, kept, moved = _streamed.plan_again(lengths, packing.previous, workers)
        else:
            plan = _plan(rows.summaries, [None] * len(lengths), workers, rows.by_query)
        job_workers = [w for w in workers if plan[w]]
        packing.take(client, futures, rows.stream, job_workers)
        shards = _streamed.pack_futures(client, futures, rows.stream, {w: plan[w] for w in job_workers}, packing,
                                        kept)
        if packing.previous is not None:  # those not taken again go at once: their pages take memory
            packing.previous.drop(client, packing.taken)
        logger.info("dgboost.dask: rows per worker, packed where read: %s%s",
                    _shards.describe({w: sum(p.n_rows for p in plan[w]) for w in workers}),
                    f" ({sum(packing.taken.values())} rows' pages kept from the last attempt, {moved} rows moved)"
                    if packing.previous is not None else "")
        return (job_workers, shards, {w: [] for w in job_workers},
                {w: _shards.global_runs(plan[w], lengths) for w in job_workers}, moved)
    holders = _holders(client, rows.bundles, workers, timeout)
    plan = _plan(rows.summaries, holders, workers, rows.by_query)
    moved = _log_balance(lengths, holders, plan, workers)
    job_workers = [w for w in workers if plan[w]]  # workers beyond the rows sit the job out
    rank_of = {w: rank for rank, w in enumerate(job_workers)}
    shards: dict[str, list] = {w: [] for w in job_workers}
    sends: dict[str, list] = {w: [] for w in job_workers}
    for w in job_workers:  # each holder's sends to w in w's order (move_pieces pairs them so)
        for p in plan[w]:
            holder = holders[p.part]
            if holder != w and holder in rank_of:
                shards[w].append(_shards.Incoming(rank_of[holder], p.n_rows))
                sends[holder].append((rows.bundles[p.part], p.start, p.stop, rank_of[w]))
            else:
                shards[w].append(_piece(client, futures, rows.bundles[p.part], p, lengths[p.part], holder))
    runs = {w: _shards.global_runs(plan[w], lengths) for w in job_workers}
    return job_workers, shards, sends, runs, moved


def _plan(summaries, holders, workers, by_query: bool) -> dict:
    """Each worker's pieces: near-equal shares (``plan_shards``), or for ranking shares cut at
    query boundaries (``plan_query_shards``: the log says how uneven they are; the client
    checked the ids' order once the rows were read)."""
    lengths = [summary.n_rows for summary in summaries]
    if not by_query:
        return _shards.plan_shards(lengths, holders, workers)
    starts, last = [], None
    for summary in summaries:  # a partition's first row starts a query unless it goes on the last one
        inner = np.zeros(0, np.int64) if summary.query_starts is None else summary.query_starts
        new = summary.n_rows and (last is None or summary.qid_first != last)
        starts.append(np.concatenate([[0], inner]) if new else inner)
        last = summary.qid_last if summary.n_rows else last
    plan = _shards.plan_query_shards(lengths, starts, holders, workers)
    shares = [sum(p.n_rows for p in pieces) for pieces in plan.values()]
    logger.info("dgboost.dask: shares cut at query boundaries: the largest %.3f of an equal share",
                max(shares) / (sum(shares) / len(shares)))
    return plan


def _share_evals(client, futures, evals: list, job_workers, timeout: float, packing=None) -> dict[str, list[list]]:
    """Each job worker's bundles of each eval set (none for the training set, None in ``evals``,
    which it has); a ranking eval set's shares are cut at query boundaries too, so each query
    is scored whole. A streamed eval set's partitions are packed where they go (with
    ``packing``, the attempt's, as its rows were)."""
    evals_of: dict[str, list[list]] = {w: [] for w in job_workers}
    for index, rows in enumerate(evals):
        if rows is None:
            for w in job_workers:
                evals_of[w].append([])
            continue
        if rows.stream is not None:
            lengths = [s.n_rows for s in rows.summaries]
            if rows.by_query:
                plan = _plan(rows.summaries, [None] * len(lengths), job_workers, True)
            else:
                placed = _shards.plan_evals(lengths, [None] * len(lengths), job_workers)
                plan = {w: [_shards.Piece(i, 0, lengths[i]) for i in placed[w] if lengths[i]] for w in job_workers}
            packed = _streamed.pack_futures(client, futures, rows.stream, plan,
                                            packing.take(client, futures, rows.stream, job_workers))
            for w in job_workers:
                evals_of[w].append(packed[w])
            continue
        holders = _holders(client, rows.bundles, job_workers, timeout, f"evals[{index}] X")
        lengths = [s.n_rows for s in rows.summaries]
        if not rows.by_query:
            plan = _shards.plan_evals(lengths, holders, job_workers)
            for w in job_workers:
                evals_of[w].append([rows.bundles[i] for i in plan[w]])
            continue
        plan = _plan(rows.summaries, holders, job_workers, True)
        for w in job_workers:
            evals_of[w].append([_piece(client, futures, rows.bundles[p.part], p, lengths[p.part], holders[p.part])
                                for p in plan[w]])
    return evals_of


def _workers(client) -> set[str]:
    """Addresses of every worker of the cluster now."""
    return set(worker_info(client))


def _alive(client, addresses) -> set[str]:
    """Which of ``addresses`` the scheduler lists now (asked of it: one small answer, the
    watch's every look)."""
    return set(client.nthreads(workers=list(addresses)))


def worker_info(client) -> dict:
    """Every worker of the cluster now, address to what the scheduler knows of it, asked of
    the scheduler. (Not ``client.scheduler_info()``: the client's periodic refresh, which
    lists no workers, may replace what that call fetched before it returns it.)"""
    try:
        info = client.sync(client.scheduler.identity, n_workers=-1)  # newer distributed lists 5 unless asked
    except TypeError:  # older: no such argument, every worker listed
        info = client.sync(client.scheduler.identity)
    return dict(info["workers"])


class _Futures:
    """The futures a job makes, released when it ends however it ends. Once ``cancelled`` (a job
    cancelled before it runs: TrainingJob._cancel_here), futures tracked later are cancelled at
    once, so that a wait on them ends."""

    def __init__(self, client):
        self.client = client
        self.held = []
        self.cancelled = False
        self.pinned: dict[str, list] = {}  # each worker slices are cut on (``_piece``): those slices

    def track(self, futures: list) -> list:
        self.held.extend(futures)
        if self.cancelled:  # set before the canceller read ``held``, or it saw these
            self.client.cancel(futures)
        return futures

    def track_one(self, future):
        return self.track([future])[0]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.client.cancel(self.held)
        self.held.clear()


def _bundles(client, params, X, y, weight, base_margin, what: str, categories=None, qid=None,
             label_name: str = "y") -> list:
    """One future per row partition: its X, y, weight, base_margin and qid, validated where the
    partition is (a Dataset, or the partition's bad input: see ``_summaries``).

    Keys are the job's own (not pure), so that a job's clean-up never cancels another's.
    """
    parts = [_shards.partitions(v) for v in (X, y, weight, base_margin, qid)]
    n = len(parts[0])
    parts = [p if p is not None else [None] * n for p in parts]
    params, categories = _shards.shared(params, categories)
    bundles = [dask.delayed(_shards.make_bundle, pure=False)(x, yy, w, m, q, i, what, params, categories,
                                                             label_name)
               for i, (x, yy, w, m, q) in enumerate(zip(*parts))]
    return client.compute(bundles)


def _summaries(client, futures, bundles) -> list:
    """What the client learns of each partition (its rows; its queries). Bad input in any
    partition is raised here, once, naming its row in the whole data set, before any rank
    starts and without a traceback in a worker's log."""
    summaries = client.gather(futures.track(client.map(_shards.summarise, bundles, pure=True)))
    _shards.check_summaries(summaries)
    return summaries


def _holders(client, futures, workers, timeout: float, what: str = "X") -> list:
    """The worker (of ``workers``) holding each future's result, or None. A partition lost
    with a worker is recomputed by Dask meanwhile; one it cannot recompute is named."""
    settle(futures, timeout)
    missing = [i for i, f in enumerate(futures) if f.status != "finished"]
    erred = next((f for f in futures if f.status == "error"), None)
    if erred is not None:  # recomputed, and failed: its inputs are gone, say
        raise RuntimeError(f"partitions {missing} of {what} were lost with a worker, and recomputing them "
                           f"failed: {erred.exception()!r}")
    if missing:
        states = sorted({futures[i].status for i in missing})
        raise RuntimeError(f"partitions {missing} of {what} were lost with a worker and could not be "
                           f"recomputed (their futures are {', '.join(states)}): Dask recomputes a partition from "
                           "its graph, but not data given with client.scatter or computed from it. Load or "
                           "persist the data again and train again (init_model= a checkpoint keeps the rounds done)")
    who = client.who_has(futures)
    allowed = set(workers)
    return [next((w for w in who.get(f.key, ()) if w in allowed), None) for f in futures]


def _piece(client, futures, bundle, piece, length: int, holder):
    """The future of one piece: the bundle itself when whole, else a slice cut where it lies
    (held by ``futures``, an attempt's: the bundles outlive it)."""
    if piece.start == 0 and piece.stop == length:
        return bundle
    placed = {"workers": [holder], "allow_other_workers": False} if holder else {}
    cut = futures.track_one(client.submit(_shards.slice_bundle, bundle, piece.start, piece.stop, pure=False, **placed))
    if holder:  # its loss before the slice is cut leaves it waiting for ever: watched (_attempts._gone)
        futures.pinned.setdefault(holder, []).append(cut)
    return cut


def _log_balance(lengths, holders, plan, workers) -> int:
    before = dict.fromkeys(workers, 0)
    for length, holder in zip(lengths, holders):
        if holder in before:
            before[holder] += length
    after = {w: sum(p.n_rows for p in plan[w]) for w in workers}
    moved = sum(p.n_rows for w in workers for p in plan[w] if holders[p.part] != w)
    logger.info("dgboost.dask: rows per worker before: %s", _shards.describe(before))
    logger.info("dgboost.dask: rows per worker after:  %s (%d rows moved)", _shards.describe(after), moved)
    return moved


def settle(futures, seconds: float, first: bool = False) -> None:
    """Wait up to ``seconds`` for ``futures`` to be done, however they end (the caller looks at
    each one's status: finished, erred, cancelled or still pending); ``first``: for the first of
    those not done yet to end."""
    if first:
        futures = [f for f in futures if not f.done()]
        if not futures:
            return
    with contextlib.suppress(*_TIMEOUTS, *_CANCELLED):
        distributed.wait(futures, timeout=seconds, return_when="FIRST_COMPLETED" if first else "ALL_COMPLETED")
