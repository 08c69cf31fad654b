"""The CPU kernels' loops, compiled by numba, and the threads that run them.

Each function here is plain Python over NumPy arrays: the body of one kernel of
``cpu.py``, which checks its arguments and calls it, or a scalar helper such a body
calls (inlined into it). ``@compiled`` defers numba's import (0.3 s) and each loop's
compilation to the loop's first call, and ``cache=True`` keeps the machine code on
disk, so a new process loads it rather than compiling again.

A kernel over runs (``@over_runs``) is written as the work of one run: ``body(run,
n_runs, ...)`` does a share of the rows, nodes or columns fixed by ``run`` and
``n_runs`` alone, and is called as ``kernel(n_runs, ...)``. With threads, a driver
compiled for it runs ``for run in prange(n_runs)`` on numba's threading layer: one
call, no Python per thread. On one thread the body is called run by run, so a
one-thread process (a Dask worker of one thread, ``nthread=1``) compiles no
parallel loop and starts no threading layer. Integer results are summed per run
and then in run order, so they are exact whatever the count, and no result depends
on which thread ran which run. Numba picks its layer (tbb, then OpenMP, then its own
workqueue; ``NUMBA_THREADING_LAYER`` chooses); the workqueue cannot run two parallel
calls at once (it aborts the process), so while it is the layer, calls from several
threads (a Dask worker's tasks) take turns. No loop uses ``fastmath``: float
arithmetic rounds as NumPy's does, operation by operation.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import sys
import threading
import types

import numpy as np

#: ``range`` where this module runs as plain Python; numba.prange once compiled.
prange = range


def compiled(function=None, *, inline: bool = True):
    """The decorated loop, compiled by ``numba.njit`` on its first call. Other compiled
    functions it calls are compiled with it and, unless ``inline`` is False, inlined
    (``inline="always"``: numba's own calls between compiled functions stay calls, which
    in split evaluation's innermost loop took half its time).
    """
    if function is None:
        return functools.partial(compiled, inline=inline)

    @functools.lru_cache(maxsize=None)
    def machine_code():
        import numba

        return numba.njit(cache=True, nogil=True, inline="always" if inline else "never")(_bound(function))

    @functools.wraps(function)
    def call(*args):
        return machine_code()(*args)

    call.machine_code = machine_code
    return call


def over_runs(body):
    """A kernel whose work is cut into runs: ``body(run, n_runs, *arguments)`` does run ``run``
    of ``n_runs``, and the kernel is called as ``kernel(n_runs, *arguments)``.

    With threads (``threads()`` above 1), a driver runs the runs over ``prange``, one call
    on numba's threads; it is compiled apart from the body, which it calls (numba's
    parallel passes over a whole loop nest took seconds to compile). On one thread the
    body runs run by run, called from here: no parallel loop is compiled, no threading
    layer started.
    """
    one_run = compiled(body, inline=False)

    @functools.lru_cache(maxsize=None)
    def driver():
        import numba

        drive = _bound(_drive, body=one_run.machine_code())
        drive.__qualname__ = f"{body.__qualname__}_on_threads"  # numba's disk cache keys on the name
        return numba.njit(cache=True, nogil=True, parallel=_PRANGE_ONLY)(drive)

    @functools.wraps(body)
    def kernel(n_runs, *arguments):
        if n_runs > 1 and threads() > 1 and not _forked_from_openmp:
            return _launch(driver(), (n_runs, *arguments))
        run_one = one_run.machine_code()
        for run in range(n_runs):
            run_one(run, n_runs, *arguments)
        return None

    return kernel


#: numba's parallel passes that a driver needs: its prange alone (no array expression to
#: turn into parallel loops).
_PRANGE_ONLY = {"prange": True, "comprehension": False, "reduction": False, "inplace_binop": False,
                "setitem": False, "numpy": False, "stencil": False, "fusion": False}


def _drive(n_runs, *arguments):
    """A kernel's runs on numba's threads; ``body`` is the kernel's, bound by over_runs."""
    for run in prange(n_runs):
        body(np.int64(run), n_runs, *arguments)  # noqa: F821  (np.int64: numba types a prange index uint64)


def _bound(function, **names):
    """A copy of ``function`` whose globals that are compiled loops are their machine code (numba
    compiles the calls to them), ``prange`` numba's, and ``names`` bound too."""
    import numba

    scope = dict(function.__globals__, prange=numba.prange)
    for name in function.__code__.co_names:
        if hasattr(scope.get(name), "machine_code"):
            scope[name] = scope[name].machine_code()
    scope.update(names)
    return types.FunctionType(function.__code__, scope, function.__name__, function.__defaults__,
                              function.__closure__)


_setting = threading.local()


def threads() -> int:
    """The threads a parallel loop runs on: ``using_threads``'s count in this thread, else
    the cores this process may use."""
    return getattr(_setting, "threads", None) or cores()


def cores() -> int:
    """The cores this process may use (its affinity, where the system tells it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def using_threads(n_threads: int | None):
    """Parallel loops started from this thread use ``n_threads`` threads; None, 0 or -1 keep
    the count already set (at first ``cores()``)."""
    before = getattr(_setting, "threads", None)
    _setting.threads = n_threads if n_threads and n_threads > 0 else before
    try:
        yield
    finally:
        _setting.threads = before


_launch_lock = threading.Lock()
_layer_is_threadsafe = False

#: This process was forked from one whose parallel loops ran on GNU OpenMP, which cannot
#: start threads in a forked child (numba ends the process): its loops run on one thread.
_forked_from_openmp = False


def _after_fork_in_child() -> None:
    """A forked child's threading state: its own locks and host thread pool (the parent's
    threads are not in it: work sent to them would wait for ever), and whether its
    parallel loops must run on one thread."""
    global _forked_from_openmp, _launch_lock, _host_pool, _host_pool_lock
    _launch_lock, _host_pool_lock, _host_pool = threading.Lock(), threading.Lock(), None
    numba = sys.modules.get("numba")
    if numba is not None and not _forked_from_openmp:
        with contextlib.suppress(ValueError):  # ValueError: no parallel loop ran before the fork
            _forked_from_openmp = numba.threading_layer() == "omp"


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_host_pool_lock = threading.Lock()
_host_pool: concurrent.futures.ThreadPoolExecutor | None = None


def on_host_threads(work, n_items: int, n_threads: int) -> list:
    """``[work(0), ..., work(n_items - 1)]``, on ``n_threads`` threads (the caller's the first),
    thread ``t`` taking items ``t``, ``t + n_threads``, ...: for NumPy work, which releases
    the GIL, that compiled loops do not do (the cut sketch's sorts). One
    thread: all of it on the caller's thread (where a CUDA device is current)."""
    global _host_pool
    n_threads = max(1, min(n_threads, n_items))
    results = [None] * n_items

    def share(thread):
        for item in range(thread, n_items, n_threads):
            results[item] = work(item)

    if n_threads > 1:
        with _host_pool_lock:
            if _host_pool is None or _host_pool._max_workers < n_threads - 1:  # grows to the most asked for
                _host_pool = concurrent.futures.ThreadPoolExecutor(max_workers=n_threads - 1,
                                                                   thread_name_prefix="dgboost-host")
            pool = _host_pool
        others = [pool.submit(share, thread) for thread in range(1, n_threads)]
        share(0)
        for other in others:
            other.result()
    else:
        share(0)
    return results


def _launch(machine_code, args):
    """Run a parallel kernel on a team of ``threads()`` of numba's threads (at most its pool's
    size), one call at a time unless the layer is threadsafe. The team is the thread
    setting's, not the kernel's run count: runs beyond the team share its threads, and
    threads beyond the runs have none. A team of a new size costs GNU OpenMP about 0.5 ms
    (16 threads after 4), which a kernel of fewer runs than threads would pay twice."""
    global _layer_is_threadsafe
    import numba

    def run():
        numba.set_num_threads(max(1, min(threads(), numba.config.NUMBA_NUM_THREADS)))  # this thread's
        return machine_code(*args)

    if _layer_is_threadsafe:
        return run()
    with _launch_lock:
        result = run()
        _layer_is_threadsafe = numba.threading_layer() in ("tbb", "omp")
    return result


@compiled
def _bin(cells, packed, row, feature, bits, cells_per_word):
    """The bin of ``feature`` in ``row``: read directly where cells are whole bytes
    (``cells``, a uint8 or uint16 view of the words), else shifted out of its word."""
    if cells is not None:
        return np.int64(cells[row, feature])
    mask = np.uint32((1 << bits) - 1)
    return np.int64((packed[row, feature // cells_per_word] >> np.uint32((feature % cells_per_word) * bits)) & mask)


@compiled
def run_plan(seg_begin, seg_end, starts, touches, first_slot, n_run_slots, partial):
    """The slots' rows laid end to end, cut into ``n_runs`` equal runs, one a thread: the
    plan the kernels over a level's rows take, as five arguments (cpu.run_plan makes it
    once for a kernel's two passes), written here; ``n_runs`` is ``first_slot``'s length.

    By slot: ``starts``, each slot's first position (n_slots + 1 of them), and
    ``touches``, how many runs take it in (an empty slot within a run's range counts: the
    run zeroes it); by run: ``first_slot``, the slot of its first row, ``n_run_slots``,
    how many slots its rows touch (0 for an empty run), and ``partial`` (n_runs, 2), the
    places, in a buffer of 2 n_runs partial histograms, of its sums of its first and its
    last slot where another run touches the slot too, else -1 (runs are contiguous, so
    only a run's first and last slots can be shared).
    """
    n_slots = seg_begin.shape[0]
    n_runs = first_slot.shape[0]
    starts[0] = 0
    for slot in range(n_slots):
        starts[slot + 1] = starts[slot] + (seg_end[slot] - seg_begin[slot])
    total = starts[n_slots]
    touches[:] = 0
    slot = 0
    for run in range(n_runs):
        first, stop = total * run // n_runs, total * (run + 1) // n_runs
        n_run_slots[run] = 0
        while slot < n_slots and starts[slot + 1] <= first:
            slot += 1
        first_slot[run] = slot
        if stop > first:
            last = slot
            while last + 1 < n_slots and starts[last + 1] < stop:
                last += 1
            n_run_slots[run] = last - slot + 1
            for touched in range(slot, last + 1):
                touches[touched] += 1
    partial[:] = -1
    n_partials = 0
    for run in range(n_runs):
        if n_run_slots[run] == 0:
            continue
        first, last = first_slot[run], first_slot[run] + n_run_slots[run] - 1
        if touches[first] > 1:
            partial[run, 0] = n_partials
            n_partials += 1
        if last == first:
            partial[run, 1] = partial[run, 0]
        elif touches[last] > 1:
            partial[run, 1] = n_partials
            n_partials += 1


@compiled
def _places(seg_begin, starts, first, stop, slot):
    """The places in ``ridx`` of slot ``slot``'s rows within the run ``[first, stop)`` of the
    slots' rows laid end to end (see run_plan): ``(begin, end)``, empty where the slot lies
    outside the run."""
    offset = seg_begin[slot] - starts[slot]
    begin = max(first, starts[slot]) + offset
    return begin, max(begin, min(stop, starts[slot + 1]) + offset)


@over_runs
def histograms(run, n_runs, cells, packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets, gpair,
               scales, ridx, seg_begin, starts, touches, first_slots, n_run_slots, partial, hist, partials):
    """The slots' histograms (see cpu.build_histograms), their rows in the ``n_runs`` runs of
    a plan (``starts`` to ``partial``: run_plan's): run ``run``'s rows.

    A run sums a slot no other run touches straight into ``hist``; a slot it shares
    (its first or last) into its own partial histogram in ``partials`` (room for
    2 n_runs; see run_plan), which add_partials adds up; both flattened to one row a
    histogram, (gradient, hessian) pairs side by side. Each run zeroes what it writes,
    so each thread writes its pages first; slots no run takes in (empty slots outside
    every run's range) are left to add_partials. ``cells``: the packed words viewed as
    one uint8 or uint16 a cell where cells are whole bytes (bits 8 or 16: read
    directly), else None (cells shifted out of ``packed``).
    """
    total = starts[seg_begin.shape[0]]
    first, stop = total * run // n_runs, total * (run + 1) // n_runs
    first_slot, last_slot = first_slots[run], first_slots[run] + n_run_slots[run] - 1
    for slot in range(first_slot, last_slot + 1):
        own = partial[run, 0] if slot == first_slot else (partial[run, 1] if slot == last_slot else -1)
        slot_hist = hist[slot] if own < 0 else partials[own]
        slot_hist[:] = 0
        begin, end = _places(seg_begin, starts, first, stop, slot)
        # Two rows at a time, their updates interleaved: two chains of adds in flight, not one
        # (a sixth faster). An odd last row is paired with itself at zero weight.
        for place in range(begin, end, 2):
            row = ridx[place]
            other = ridx[min(place + 1, end - 1)]
            paired = place + 1 < end
            gradient = np.int64(np.rint(np.float64(gpair[row, 0]) * scales[0]))
            hessian = np.int64(np.rint(np.float64(gpair[row, 1]) * scales[1]))
            other_gradient = np.int64(np.rint(np.float64(gpair[other, 0]) * scales[0])) if paired else np.int64(0)
            other_hessian = np.int64(np.rint(np.float64(gpair[other, 1]) * scales[1])) if paired else np.int64(0)
            for feature in range(n_features):
                offset = bin_offsets[feature]
                bin_id = _bin(cells, packed, row, feature, bits, cells_per_word)
                other_bin = _bin(cells, packed, other, feature, bits, cells_per_word)
                if bin_id != missing_symbol:
                    column = 2 * (offset + bin_id)  # rows flattened: a tenth faster than [bin, 0]
                    slot_hist[column] += gradient
                    slot_hist[column + 1] += hessian
                if other_bin != missing_symbol:
                    column = 2 * (offset + other_bin)
                    slot_hist[column] += other_gradient
                    slot_hist[column + 1] += other_hessian


@over_runs
def add_partials(share, n_shares, partials, starts, touches, first_slot, n_run_slots, partial, hist):
    """Finish ``histograms``'s ``hist``: each slot shared by runs gets the sum of their partial
    histograms, in run order; each slot no run takes in gets zeros. Arrays flattened to one
    row a histogram; every such slot's columns cut into ``n_shares`` equal shares, this
    call's ``share`` of them. ``starts`` to ``partial``: the histograms' plan."""
    n_slots, width = hist.shape
    begin, end = width * share // n_shares, width * (share + 1) // n_shares
    for slot in range(n_slots):
        if touches[slot] == 1:
            continue
        hist[slot, begin:end] = 0
        for run in range(first_slot.shape[0]):
            if first_slot[run] <= slot < first_slot[run] + n_run_slots[run]:
                part = partials[partial[run, 0] if slot == first_slot[run] else partial[run, 1]]
                for column in range(begin, end):
                    hist[slot, column] += part[column]


@over_runs
def siblings(run, n_runs, hist, slot_of_rank, built, build_left, children):
    """The sibling pairs of cpu.sibling_histograms, cut into ``n_runs`` runs: pair ``p``'s
    built child as summed, its sibling as parent ``hist[slot_of_rank[p]]`` minus it. All
    arrays flattened to one row a histogram."""
    n_pairs = built.shape[0]
    for pair in range(n_pairs * run // n_runs, n_pairs * (run + 1) // n_runs):
        parent = hist[slot_of_rank[pair]]
        summed = built[pair]
        built_child = children[2 * pair + (0 if build_left[pair] else 1)]
        other_child = children[2 * pair + (1 if build_left[pair] else 0)]
        for column in range(summed.shape[0]):
            built_child[column] = summed[column]
            other_child[column] = parent[column] - summed[column]


@compiled
def _cuts_at_or_below(cut_values, first, stop, value):
    """How many of ``cut_values[first:stop]`` (ascending) are <= ``value``: a binary search
    whose steps choose without a branch (Khuong and Morin's layout-free form)."""
    n = stop - first
    if n == 0:
        return 0
    base = first
    while n > 1:
        half = n // 2
        base = base + half if cut_values[base + half] <= value else base
        n -= half
    return base - first + (1 if cut_values[base] <= value else 0)


@over_runs
def quantise(run, n_runs, X, cut_values, cut_offsets, bits, cells_per_word, missing_symbol, packed):
    """Bin and pack run ``run`` of ``n_runs`` equal runs of the rows of ``X`` into ``packed``
    (see cpu.quantise_and_pack): a cell's bin is the number of its feature's cuts <= the
    value (a binary search), NaN the missing symbol."""
    n_rows, n_features = X.shape
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        for word_index in range(packed.shape[1]):
            word = np.uint32(0)
            first_feature = word_index * cells_per_word
            for cell in range(min(cells_per_word, n_features - first_feature)):
                feature = first_feature + cell
                value = X[row, feature]
                bin_id = missing_symbol
                if not np.isnan(value):
                    bin_id = _cuts_at_or_below(cut_values, cut_offsets[feature], cut_offsets[feature + 1], value)
                word |= np.uint32(bin_id) << np.uint32(cell * bits)
            packed[row, word_index] = word


#: Rows predicted together, tree by tree: the tree's nodes stay in cache across the block,
#: and the rows' walks, independent, overlap their memory reads.
_PREDICT_BLOCK = 64


@over_runs
def predict(run, n_runs, X, left, right, feature, threshold, default_left, value, roots, outputs, depth, margins):
    """Add every tree's leaf value to each row of ``margins``, the row's trees in model
    order: its float32 additions are the NumPy twin's, in its order (see
    cpu.predict_margins). The blocks of rows cut into ``n_runs`` runs.

    Rows go in blocks of _PREDICT_BLOCK, tree by tree, a level of the whole block at a
    time (``depth`` levels: a row at a leaf stays there). A step chooses without a branch:
    right is ``left + 1``, as every tree numbers its nodes.
    """
    n_rows = X.shape[0]
    n_blocks = (n_rows + _PREDICT_BLOCK - 1) // _PREDICT_BLOCK
    nodes = np.empty(_PREDICT_BLOCK, np.int32)
    for block_index in range(n_blocks * run // n_runs, n_blocks * (run + 1) // n_runs):
        block = block_index * _PREDICT_BLOCK
        size = min(_PREDICT_BLOCK, n_rows - block)
        for tree in range(roots.shape[0]):
            nodes[:size] = roots[tree]
            for _ in range(depth):
                for index in range(size):
                    node = nodes[index]
                    child = left[node]
                    x = X[block + index, feature[node]]
                    go_right = not default_left[node] if np.isnan(x) else not x < threshold[node]
                    nodes[index] = child + np.int32(go_right) if child >= 0 else node
            output = outputs[tree]
            for index in range(size):
                margins[block + index, output] += value[nodes[index]]


@over_runs
def partition_positions(run, n_runs, cells, packed, bits, cells_per_word, missing_symbol, positions, level_start,
                        split_feature, split_bin, default_left, left_child, ridx, new_ridx):
    """Partition's first pass, over the rows in row order, run ``run`` of ``n_runs`` equal runs
    of them: each row of a splitting slot (``positions`` in the level) moves to its child,
    left where its bin of the slot's feature is at most the slot's bin (or is missing and
    the slot's default is left). In row order, so that each thread writes its own run of
    ``positions`` (by places in ``ridx``, threads wrote rows scattered over one another's
    cache lines). Each run also copies its share of ``ridx`` into ``new_ridx``, whose
    places of splitting slots partition_scatter then overwrites (``ridx`` may hold fewer
    rows than ``positions``: a sample of them, the others at position -1). ``cells`` as
    for ``histograms``."""
    n_slots = left_child.shape[0]
    n_rows = positions.shape[0]
    n_places = ridx.shape[0]
    for place in range(n_places * run // n_runs, n_places * (run + 1) // n_runs):
        new_ridx[place] = ridx[place]  # a loop, not a slice copy: numba's shape check compiles for seconds
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        slot = np.int64(positions[row]) - level_start
        if slot < 0 or slot >= n_slots or left_child[slot] < 0:
            continue
        bin_id = _bin(cells, packed, row, split_feature[slot], bits, cells_per_word)
        left = np.int64(default_left[slot]) if bin_id == missing_symbol else np.int64(bin_id <= split_bin[slot])
        positions[row] = left_child[slot] + 1 - left


@over_runs
def partition_sides(run, n_runs, ridx, positions, seg_begin, starts, touches, first_slots, n_run_slots, partial,
                    left_child, goes_left, lefts):
    """Partition's second pass, over the slots' rows in run ``run`` of the ``n_runs`` runs of
    a plan (``starts`` to ``partial``, run_plan's; see cpu.partition_rows), after
    partition_positions: each row of a splitting slot gets its side (``goes_left``, by its
    place in ``ridx``: whether it moved to the slot's left child), and ``lefts[run,
    slot]`` counts the run's rows of the slot sent left."""
    total = starts[seg_begin.shape[0]]
    first, stop = total * run // n_runs, total * (run + 1) // n_runs
    for slot in range(first_slots[run], first_slots[run] + n_run_slots[run]):
        child = left_child[slot]
        if child < 0:
            continue
        begin, end = _places(seg_begin, starts, first, stop, slot)
        sent_left = np.int64(0)  # a local count, not lefts[run, slot]: runs' counts share cache lines
        for place in range(begin, end):
            left = np.int64(positions[ridx[place]] == child)
            goes_left[place] = left
            sent_left += left
        lefts[run, slot] = sent_left


@over_runs
def partition_scatter(run, n_runs, ridx, seg_begin, starts, touches, first_slots, n_run_slots, partial, left_child,
                      goes_left, lefts, new_ridx):
    """Partition's second pass over the same runs: each row of a splitting slot to its place,
    the slot's left rows first, then its right rows, each side in order. ``lefts`` is
    partition_sides's count by run and slot."""
    total = starts[seg_begin.shape[0]]
    first, stop = total * run // n_runs, total * (run + 1) // n_runs
    for slot in range(first_slots[run], first_slots[run] + n_run_slots[run]):
        if left_child[slot] < 0:
            continue
        seen_left = np.int64(0)  # the slot's rows sent left by earlier runs
        n_left = np.int64(0)
        for other in range(n_runs):
            seen_left += lefts[other, slot] if other < run else 0
            n_left += lefts[other, slot]
        begin, end = _places(seg_begin, starts, first, stop, slot)
        left_place = seg_begin[slot] + seen_left
        right_place = seg_begin[slot] + n_left + (begin - seg_begin[slot]) - seen_left
        for place in range(begin, end):
            left = np.int64(goes_left[place])
            new_ridx[left_place if left else right_place] = ridx[place]
            left_place += left
            right_place += 1 - left


@over_runs
def route(run, n_runs, cells, packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left,
          left_child, depth, leaf):
    """Walk every row of run ``run`` of ``n_runs`` equal runs from the root to its leaf (see
    cpu.route_rows); ``cells`` as for ``histograms``."""
    n_rows = leaf.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        node = 0
        for _ in range(depth):
            child = left_child[node]
            if child < 0:
                break
            feature = split_feature[node]
            bin_id = _bin(cells, packed, row, feature, bits, cells_per_word)
            left = default_left[node] if bin_id == missing_symbol else bin_id <= split_bin[node]
            node = child if left else child + 1
        leaf[row] = node


@over_runs
def add_leaf_values(run, n_runs, margins, output, leaf_value, positions):
    """``margins[row, output] += leaf_value[positions[row]]`` for every row of run ``run`` of
    ``n_runs`` equal runs (see cpu.add_leaf_values)."""
    n_rows = margins.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        margins[row, output] += leaf_value[positions[row]]


@over_runs
def pair_gradients(run, n_runs, kind, margin, label, weight, parameter, least_hessian, gpair):
    """Gradient pairs of one output into ``gpair`` (n_rows, 2) float32, for run ``run`` of
    ``n_runs`` equal runs of the rows: the float32 operations of the objective's array
    program (objectives.py), one by one, in its order, so the same bits. ``kind`` 0:
    squared error, ``margin`` the margins; 1: pseudo-Huber, ``parameter`` the slope; 2:
    logistic, ``margin`` holding ``exp(-margin)`` as NumPy computed it (numba's exp rounds
    differently), its hessian at least ``least_hessian``. ``weight``: float32 per row, or
    None."""
    one = np.float32(1)
    n_rows = margin.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        if kind == 0:
            gradient = margin[row] - label[row]
            hessian = one
        elif kind == 1:
            residual = margin[row] - label[row]
            scaled = residual / parameter
            curvature = one + scaled * scaled
            root = np.sqrt(curvature)
            gradient = residual / root
            hessian = one / (curvature * root)
        else:
            probability = one / (one + margin[row])
            gradient = probability - label[row]
            hessian = probability * (one - probability)
            if hessian < least_hessian:  # numpy's maximum: a NaN stays
                hessian = least_hessian
        if weight is not None:
            gradient = gradient * weight[row]
            hessian = hessian * weight[row]
        gpair[row, 0] = gradient
        gpair[row, 1] = hessian


@over_runs
def column_bounds(run, n_runs, columns, bounds):
    """The largest ``|x|`` of each column over run ``run`` of ``n_runs`` equal runs of the rows,
    into ``bounds[run]`` (float64, 0 for no rows); NaN where the run's column holds one, as
    numpy's max (cpu.host_column_bounds takes the runs' largest by the same rule)."""
    n_rows = columns.shape[0]
    for column in range(columns.shape[1]):
        bound = 0.0
        for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
            value = abs(np.float64(columns[row, column]))
            if value > bound or np.isnan(value):  # a NaN, once seen, stays: nothing is > NaN
                bound = value
        bounds[run, column] = bound


@over_runs
def fixed_sums(run, n_runs, columns, scale, sums):
    """Each column's sum of ``rint(x * scale[c])`` as int64 over run ``run`` of ``n_runs`` equal
    runs of the rows, into ``sums[run]``, the product in float64 (as fixed_point.to_fixed):
    exact in any order (cpu.host_fixed_sums adds the runs' sums)."""
    n_rows = columns.shape[0]
    for column in range(columns.shape[1]):
        total = np.int64(0)
        for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
            total += np.int64(np.rint(np.float64(columns[row, column]) * scale[column]))
        sums[run, column] = total


@compiled
def bucket_counts(keys, shift, bits, prefix, counts, sums):
    """Radix buckets of the ``keys`` (non-negative int64) whose bits above ``shift + bits``
    are ``prefix`` (see cpu.bucket_counts): per bucket of bits ``[shift, shift + bits)``,
    how many and their sum, added into ``counts`` and ``sums``."""
    mask = (np.int64(1) << bits) - 1
    for i in range(keys.shape[0]):
        key = keys[i]
        if (key >> (shift + bits)) == prefix:
            bucket = (key >> shift) & mask
            counts[bucket] += 1
            sums[bucket] += key


@compiled
def number_children(table, start, left_child, slot_of_rank, n_split):
    """Number the children of a level's splitting slots (see cpu.number_children): the r-th
    splitting slot's left child is ``start + n_slots + 2 r``; ``slot_of_rank[r]`` its slot,
    0 past the last; ``n_split[0]`` how many split."""
    n_slots = table.shape[0]
    rank = 0
    for slot in range(n_slots):
        if table[slot, 0] != 0:
            left_child[slot] = start + n_slots + 2 * rank
            if rank < slot_of_rank.shape[0]:  # room for every split, as the caller promises
                slot_of_rank[rank] = slot
            rank += 1
        else:
            left_child[slot] = -1
    for padding in range(rank, slot_of_rank.shape[0]):
        slot_of_rank[padding] = 0
    n_split[0] = rank


@compiled
def next_frontier(table, slot_of_rank, n_split, seg_begin, seg_end, n_left, n_rows, node_sums, active, begin, end,
                  build_left, build_begin, build_end):
    """The next level's sibling pairs, one per parent rank (see cpu.next_frontier): the left
    child's rows first in the parent's range; ranks past ``n_split`` are padding, empty
    ranges at ``n_rows`` and zero sums; the child with the smaller hessian sum (the left
    on a tie) is built."""
    for rank in range(slot_of_rank.shape[0]):
        slot = slot_of_rank[rank]
        real = rank < n_split
        first = seg_begin[slot] if real else n_rows
        middle = first + n_left[slot] if real else n_rows
        stop = seg_end[slot] if real else n_rows
        for column in range(2):
            node_sums[2 * rank, column] = table[slot, 5 + column] if real else 0
            node_sums[2 * rank + 1, column] = table[slot, 7 + column] if real else 0
        active[2 * rank] = active[2 * rank + 1] = real
        begin[2 * rank], end[2 * rank], begin[2 * rank + 1], end[2 * rank + 1] = first, middle, middle, stop
        left = node_sums[2 * rank, 1] <= node_sums[2 * rank + 1, 1]
        build_left[rank] = left
        build_begin[rank] = first if left else middle
        build_end[rank] = middle if left else stop


@compiled(inline=False)  # a call: split scoring needs it only with alpha or max_delta_step
def _node_gain(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """cpu.node_gains of one node (node_weights inside it), in the same float operations,
    for a node's finite sums. cpu.node_gains and cpu.node_weights stay the array programs
    of tree_record and the tests: change them together."""
    if hessian < min_child_weight or hessian <= 0:  # too light: the array program's mask
        return 0.0
    if max_delta_step > 0:
        weight = _weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
        return _gain_at(gradient, hessian, weight, reg_lambda, alpha)
    thresholded = _soft_threshold(gradient, alpha)
    return (thresholded * thresholded) / _denominator(hessian, reg_lambda)


@compiled
def _weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """cpu.node_weights of one node, in the same float operations: ``-T(G) / (H + lambda)``
    clipped to max_delta_step, 0 for a node too light."""
    if hessian < min_child_weight or hessian <= 0:
        return 0.0
    weight = -_soft_threshold(gradient, alpha) / _denominator(hessian, reg_lambda)
    if max_delta_step > 0:
        if weight < -max_delta_step:
            weight = -max_delta_step
        elif weight > max_delta_step:
            weight = max_delta_step
    return weight


@compiled
def _soft_threshold(gradient, alpha):
    if alpha == 0:
        return gradient
    sign = 1.0 if gradient > 0 else (-1.0 if gradient < 0 else 0.0)
    shrunk = abs(gradient) - alpha
    return sign * (shrunk if shrunk > 0.0 else 0.0)


@compiled
def _denominator(hessian, reg_lambda):
    denominator = hessian + reg_lambda
    return denominator if denominator > 0 else 1.0


@compiled
def _gain_at(gradient, hessian, weight, reg_lambda, alpha):
    """A node's gain at a given weight: ``-(2 G w + (H + lambda) w**2 + 2 alpha |w|)``."""
    return -(2.0 * gradient * weight + (hessian + reg_lambda) * (weight * weight) + 2.0 * alpha * abs(weight))


@compiled
def _clip(weight, lower, upper):
    """``weight`` within [lower, upper], by comparisons (so a -0.0 weight at a 0.0 bound stays
    -0.0, as on the GPU)."""
    return lower if weight < lower else (upper if weight > upper else weight)


@compiled
def _bounded_gain(gradient, hessian, lower, upper, reg_lambda, alpha, min_child_weight, max_delta_step):
    """A node's gain at its weight clipped to [lower, upper] (monotone constraints), 0 for a
    node too light."""
    if hessian < min_child_weight or hessian <= 0:
        return 0.0
    weight = _clip(_weight(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    return _gain_at(gradient, hessian, weight, reg_lambda, alpha)


@compiled
def _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient, total_hessian,
                parent_gain, least_hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """A candidate's score from its left child's fixed-point sums: the children's gains
    less the parent's, or -inf where a child is too light."""
    g_left = np.float64(sum_gradient) * inverse_gradient
    h_left = np.float64(sum_hessian) * inverse_hessian
    g_right = total_gradient - g_left
    h_right = total_hessian - h_left
    if not (h_left >= least_hessian and h_right >= least_hessian):
        return -np.inf
    if max_delta_step > 0 or alpha > 0:
        return (_node_gain(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step)
                + _node_gain(g_right, h_right, reg_lambda, alpha, min_child_weight, max_delta_step)) - parent_gain
    return (g_left * g_left) / (h_left + reg_lambda) + (g_right * g_right) / (h_right + reg_lambda) - parent_gain


@over_runs
def splits(run, n_runs, hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, n_groups,
           found_gain, found):
    """The split table rows of the nodes (see cpu.evaluate_splits); ``rules``: float64
    (reg_lambda, alpha, min_child_weight, max_delta_step, gamma, min_split_gain);
    ``allowed``, ``monotone`` and ``bounds`` as evaluate_splits takes them, or None.

    Each node's features are cut into ``n_groups`` equal groups, and the (node, group)
    pairs into ``n_runs`` runs, this call's ``run`` of them: a level of few nodes (the
    root) is spread over the threads too. A group's best candidate goes to
    ``found_gain`` and ``found`` (rows ``node * n_groups + group``, see _group_best);
    then node_best, on the calling thread, takes each node's groups in order, a later
    group winning only with a larger gain. Per node and feature: the feature's total,
    so its missing sums; then a prefix scan of its bins in int64 (per-feature sums stay under 2**52, see
    fixed_point.py, so they and their float64 images are exact), each prefix scored
    with missing values right, then left (left only where the feature has missing
    values: without them both score the same and right wins the tie). The best is the
    first largest gain in (feature, bin, direction) order, whatever the groups. A NaN
    gain (lambda or alpha infinite, with max_delta_step) makes the node's gain the
    first NaN and its candidate the last bin, missing left, as the array program this
    loop replaced chose (numpy's max, then the first candidate equal to it: none).
    """
    n_items = hist.shape[0] * n_groups
    for item in range(n_items * run // n_runs, n_items * (run + 1) // n_runs):
        _group_best(hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, item // n_groups,
                    item % n_groups, n_groups, found_gain[item], found[item])


@compiled
def _group_best(hist, node_sums, bin_offsets, scales, rules, allowed, monotone, bounds, node, group, n_groups,
                found_gain, found):
    """The first best candidate of ``node`` among the allowed features of ``group``:
    ``found_gain`` its gain and the first NaN gain (NaN itself where none), ``found`` its
    bin (-1 where the group has no allowed feature with bins), direction, left gradient
    and hessian sums, and whether a NaN gain was seen. Where no candidate has a gain above
    -inf, the first candidate (missing right) is the group's, at -inf.

    With ``monotone`` (int8 by feature, or None) a candidate is scored at its children's
    weights clipped to the node's ``bounds`` (XGBoost's rule), and one whose left weight
    lies above its right where the feature must increase (below where it must decrease)
    scores -inf."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    n_features = bin_offsets.shape[0] - 1
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    # Hessians are multiples of 1 / scale, so "h > 0 and h >= min_child_weight" is one test.
    least_hessian = inverse_hessian if inverse_hessian >= min_child_weight else min_child_weight
    node_gradient = node_sums[node, 0]
    node_hessian = node_sums[node, 1]
    total_gradient = np.float64(node_gradient) * inverse_gradient
    total_hessian = np.float64(node_hessian) * inverse_hessian
    lower, upper = -np.inf, np.inf
    if bounds is not None:
        lower, upper = bounds[node, 0], bounds[node, 1]
    if monotone is None:
        parent_gain = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight, max_delta_step)
    else:
        parent_gain = _bounded_gain(total_gradient, total_hessian, lower, upper, reg_lambda, alpha,
                                    min_child_weight, max_delta_step)
    best_gain = -np.inf
    best_bin = -1
    best_direction = 0
    left_gradient = np.int64(0)
    left_hessian = np.int64(0)
    seen_nan = False
    nan_gain = np.nan  # the first NaN gain
    for feature in range(n_features * group // n_groups, n_features * (group + 1) // n_groups):
        if allowed is not None and not allowed[node, feature]:
            continue
        begin = bin_offsets[feature]
        end = bin_offsets[feature + 1]
        constraint = 0 if monotone is None else monotone[feature]
        present_gradient = np.int64(0)
        present_hessian = np.int64(0)
        for bin_idx in range(begin, end):
            present_gradient += hist[node, bin_idx, 0]
            present_hessian += hist[node, bin_idx, 1]
        missing_gradient = node_gradient - present_gradient
        missing_hessian = node_hessian - present_hessian
        n_directions = 1 if missing_gradient == 0 and missing_hessian == 0 else 2
        prefix_gradient = np.int64(0)
        prefix_hessian = np.int64(0)
        for bin_idx in range(begin, end):
            prefix_gradient += hist[node, bin_idx, 0]
            prefix_hessian += hist[node, bin_idx, 1]
            for direction in range(n_directions):  # missing right, then missing left
                sum_gradient = prefix_gradient + direction * missing_gradient
                sum_hessian = prefix_hessian + direction * missing_hessian
                if monotone is None:
                    gain = _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian,
                                       total_gradient, total_hessian, parent_gain, least_hessian, reg_lambda, alpha,
                                       min_child_weight, max_delta_step)
                else:
                    gain = _monotone_split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian,
                                                total_gradient, total_hessian, parent_gain, least_hessian, lower,
                                                upper, constraint, reg_lambda, alpha, min_child_weight,
                                                max_delta_step)
                if gain > best_gain or best_bin < 0:  # the first candidate is the default
                    best_gain = gain if gain > best_gain else best_gain
                    best_bin = bin_idx
                    best_direction = direction
                    left_gradient = sum_gradient
                    left_hessian = sum_hessian
                if np.isnan(gain) and not seen_nan:
                    seen_nan = True
                    nan_gain = gain
    found_gain[0] = best_gain
    found_gain[1] = nan_gain
    found[0] = best_bin
    found[1] = best_direction
    found[2] = left_gradient
    found[3] = left_hessian
    found[4] = seen_nan


@compiled
def _monotone_split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient,
                         total_hessian, parent_gain, least_hessian, lower, upper, constraint, reg_lambda, alpha,
                         min_child_weight, max_delta_step):
    """_split_gain under monotone constraints: the children's gains at their weights clipped
    to [lower, upper], less the parent's (likewise clipped); -inf where a child is too light
    or the weights go against ``constraint`` (1: left <= right, -1: left >= right)."""
    g_left = np.float64(sum_gradient) * inverse_gradient
    h_left = np.float64(sum_hessian) * inverse_hessian
    g_right = total_gradient - g_left
    h_right = total_hessian - h_left
    if not (h_left >= least_hessian and h_right >= least_hessian):
        return -np.inf
    w_left = _clip(_weight(g_left, h_left, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    w_right = _clip(_weight(g_right, h_right, reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
    if (constraint > 0 and w_left > w_right) or (constraint < 0 and w_left < w_right):
        return -np.inf
    return (_gain_at(g_left, h_left, w_left, reg_lambda, alpha)
            + _gain_at(g_right, h_right, w_right, reg_lambda, alpha)) - parent_gain


@compiled
def node_best(node_sums, active, feature_of_bin, bin_offsets, rules, n_groups, found_gain, found, table, gains):
    """Each node's split table row from its groups' best candidates (see ``splits``), and
    ``gains[node]`` its gain. A node with no allowed feature with bins gets no split:
    feature 0, bin 0, missing right, gain -inf, every row right."""
    gamma, min_split_gain = rules[4], rules[5]
    n_bins_total = feature_of_bin.shape[0]
    for node in range(node_sums.shape[0]):
        node_gradient = node_sums[node, 0]
        node_hessian = node_sums[node, 1]
        best = -1
        seen_nan = False
        nan_gain = np.nan
        for item in range(node * n_groups, (node + 1) * n_groups):
            if found[item, 0] >= 0 and (best < 0 or found_gain[item, 0] > found_gain[best, 0]):
                best = item
            if found[item, 4] != 0 and not seen_nan:
                seen_nan = True
                nan_gain = found_gain[item, 1]
        if best < 0:
            table[node, 0:5] = 0
            table[node, 5] = 0
            table[node, 6] = 0
            table[node, 7] = node_gradient
            table[node, 8] = node_hessian
            gains[node] = -np.inf
            continue
        best_gain = found_gain[best, 0]
        best_bin = found[best, 0]
        best_direction = found[best, 1]
        left_gradient = found[best, 2]
        left_hessian = found[best, 3]
        if seen_nan:  # the last bin's prefix plus its feature's missing sums: the whole node
            best_gain = nan_gain
            best_bin = n_bins_total - 1
            best_direction = 1
            left_gradient = node_gradient
            left_hessian = node_hessian
        if not active[node]:
            best_gain = -np.inf
        best_feature = feature_of_bin[best_bin]
        table[node, 0] = best_gain > min_split_gain and best_gain >= gamma
        table[node, 1] = best_feature
        table[node, 2] = best_bin - bin_offsets[best_feature]
        table[node, 3] = best_direction
        table[node, 5] = left_gradient
        table[node, 6] = left_hessian
        table[node, 7] = node_gradient - left_gradient
        table[node, 8] = node_hessian - left_hessian
        gains[node] = best_gain


@compiled
def child_bounds(table, slot_of_rank, n_split, bounds, monotone, scales, rules, child):
    """The next level's weight bounds (see cpu.child_bounds) into ``child`` (2 n_ranks, 2):
    each splitting parent's children inherit its [lower, upper]; where its feature is
    constrained, the mean of the children's weights (clipped to the parent's bounds, as
    split evaluation scored them) caps the child that must stay below it and floors the
    other. Padding ranks (from ``n_split`` on) get no bounds."""
    reg_lambda, alpha, min_child_weight, max_delta_step = rules[0], rules[1], rules[2], rules[3]
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    for rank in range(slot_of_rank.shape[0]):
        left, right = 2 * rank, 2 * rank + 1
        if rank >= n_split:
            child[left, 0] = child[right, 0] = -np.inf
            child[left, 1] = child[right, 1] = np.inf
            continue
        slot = slot_of_rank[rank]
        lower, upper = bounds[slot, 0], bounds[slot, 1]
        child[left, 0] = child[right, 0] = lower
        child[left, 1] = child[right, 1] = upper
        constraint = monotone[table[slot, 1]]
        if constraint == 0:
            continue
        w_left = _clip(_weight(np.float64(table[slot, 5]) * inverse_gradient, np.float64(table[slot, 6]) * inverse_hessian,
                               reg_lambda, alpha, min_child_weight, max_delta_step), lower, upper)
        w_right = _clip(_weight(np.float64(table[slot, 7]) * inverse_gradient,
                                np.float64(table[slot, 8]) * inverse_hessian, reg_lambda, alpha, min_child_weight,
                                max_delta_step), lower, upper)
        middle = (w_left + w_right) / 2.0
        if constraint > 0:
            child[left, 1] = middle
            child[right, 0] = middle
        else:
            child[left, 0] = middle
            child[right, 1] = middle


@over_runs
def shap(run, n_runs, X, left, right, feature, threshold, default_left, value, cover, depth, phi):
    """Add one tree's exact TreeSHAP contributions of each row of run ``run`` of ``n_runs``
    equal runs of ``X``'s rows into ``phi`` (n_rows, n_features + 1) float64 (see
    explain.py).

    Lundberg et al.'s recursion (Algorithm 2), depth first with a stack: path ``level``
    (its features, zero and one fractions and permutation weights, ``length`` entries) is
    the path of the node being visited at that depth, made from its parent's path at
    ``level - 1``, which stays as it was for the node's sibling. Every node is visited for
    every row (a cold branch with one fraction 0), in the order and with the float
    operations of the array program it replaced."""
    n_rows = X.shape[0]
    levels = depth + 2
    path_feature = np.empty((levels, levels), np.int64)
    path_zero = np.empty((levels, levels), np.float64)
    path_one = np.empty((levels, levels), np.float64)
    path_weight = np.empty((levels, levels), np.float64)
    length = np.zeros(levels, np.int64)
    stack_node = np.empty(2 * levels, np.int64)
    stack_level = np.empty(2 * levels, np.int64)
    stack_zero = np.empty(2 * levels, np.float64)
    stack_one = np.empty(2 * levels, np.float64)
    stack_feature = np.empty(2 * levels, np.int64)
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        top = 0
        stack_node[0], stack_level[0], stack_zero[0], stack_one[0], stack_feature[0] = 0, 0, 1.0, 1.0, -1
        while top >= 0:
            node, level = stack_node[top], stack_level[top]
            zero, one, split_feature = stack_zero[top], stack_one[top], stack_feature[top]
            top -= 1
            n = length[level - 1] if level > 0 else 0
            for i in range(n):
                path_feature[level, i] = path_feature[level - 1, i]
                path_zero[level, i] = path_zero[level - 1, i]
                path_one[level, i] = path_one[level - 1, i]
                path_weight[level, i] = path_weight[level - 1, i]
            length[level] = _shap_extend(path_feature[level], path_zero[level], path_one[level], path_weight[level],
                                         n, zero, one, split_feature)
            if left[node] < 0:
                leaf_value = np.float64(value[node])
                for i in range(1, length[level]):
                    weight = _shap_unwound_sum(path_zero[level], path_one[level], path_weight[level], length[level], i)
                    phi[row, path_feature[level, i]] += weight * (path_one[level, i] - path_zero[level, i]) * leaf_value
                continue
            split = feature[node]
            x = X[row, split]
            goes_left = default_left[node] if np.isnan(x) else x < threshold[node]
            incoming_zero, incoming_one = 1.0, 1.0
            for k in range(1, length[level]):
                if path_feature[level, k] == split:  # split on before along this path: undo its entry
                    incoming_zero, incoming_one = path_zero[level, k], path_one[level, k]
                    length[level] = _shap_unwind(path_feature[level], path_zero[level], path_one[level],
                                                 path_weight[level], length[level], k)
                    break
            parent_cover = cover[node]
            for child, hot in ((right[node], not goes_left), (left[node], goes_left)):  # left on top: first
                top += 1
                stack_node[top], stack_level[top], stack_feature[top] = child, level + 1, split
                stack_zero[top] = incoming_zero * (cover[child] / parent_cover if parent_cover > 0 else 0.0)
                stack_one[top] = incoming_one * (1.0 if hot else 0.0)


@compiled
def _shap_extend(feature, zero, one, weight, length, new_zero, new_one, new_feature):
    """Append an entry to a path of ``length`` entries, in place; returns the new length."""
    depth = length
    feature[depth], zero[depth], one[depth] = new_feature, new_zero, new_one
    weight[depth] = 1.0 if depth == 0 else 0.0
    for i in range(depth - 1, -1, -1):
        weight[i + 1] += new_one * weight[i] * (i + 1) / (depth + 1)
        weight[i] = new_zero * weight[i] * (depth - i) / (depth + 1)
    return length + 1


@compiled
def _shap_unwind(feature, zero, one, weight, length, k):
    """Remove entry ``k`` from a path, in place, undoing its extension; returns the new length."""
    depth = length - 1
    entry_one, entry_zero = one[k], zero[k]
    carry = weight[depth]
    for j in range(depth - 1, -1, -1):
        if entry_one != 0:
            previous = weight[j]
            weight[j] = carry * (depth + 1) / ((j + 1) * entry_one)
            carry = previous - weight[j] * entry_zero * (depth - j) / (depth + 1)
        else:
            weight[j] = weight[j] * (depth + 1) / _shap_nonzero(entry_zero * (depth - j))
    for i in range(k, depth):
        feature[i], zero[i], one[i] = feature[i + 1], zero[i + 1], one[i + 1]
    return depth


@compiled
def _shap_unwound_sum(zero, one, weight, length, k):
    """The total permutation weight of a path with entry ``k`` unwound (the path unchanged)."""
    depth = length - 1
    entry_one, entry_zero = one[k], zero[k]
    total = 0.0
    carry = weight[depth]
    for j in range(depth - 1, -1, -1):
        if entry_one != 0:
            from_one = carry * (depth + 1) / ((j + 1) * entry_one)
            total = total + from_one
            carry = weight[j] - from_one * entry_zero * (depth - j) / (depth + 1)
        else:
            total = total + weight[j] * (depth + 1) / _shap_nonzero(entry_zero * (depth - j))
    return total


@compiled
def _shap_nonzero(value):
    """A divisor that is never 0 (a zero-cover branch contributes nothing either way)."""
    return value if value != 0 else np.inf
