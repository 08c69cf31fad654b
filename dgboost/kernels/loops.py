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
import hashlib
import os
import sys
import threading
import types

import numpy as np

from .. import _hashing
from .drivers import Driver

#: ``range`` where this module runs as plain Python; numba.prange once compiled.
prange = range

#: Every compiled loop by "module:qualname", and the loops and drivers in the order this process
#: first called them from Python (kernels/warming.py's helpers and their table read them).
LOOPS: dict = {}
FIRST_CALLED: list[str] = []
#: Every kernel's driver, by "module:qualname_on_threads": a function making its drivers.Driver
#: once, whose ``cached_name()`` is the name numba caches it under.
DRIVERS: dict = {}


def compiled(function=None, *, inline: bool = True):
    """The decorated loop, compiled by ``numba.njit`` on its first call. Other compiled
    functions it calls are compiled with it and, unless ``inline`` is False, inlined
    (``inline="always"``: numba's own calls between compiled functions stay calls, which
    in split evaluation's innermost loop took half its time).
    """
    if function is None:
        return functools.partial(compiled, inline=inline)

    key = f"{function.__module__}:{function.__qualname__}"
    called = False

    @functools.lru_cache(maxsize=None)
    def machine_code():
        import numba

        return numba.njit(cache=True, nogil=True, error_model="numpy", inline="always" if inline else "never")(_bound(function))

    def ready():
        """The machine code, for a call from Python: the first asks kernels/warming.py whether
        a helper process compiles it (and waits for it then)."""
        nonlocal called
        if not called:
            from . import warming

            called = True
            FIRST_CALLED.append(key)
            warming.before_first_call(key)
        return machine_code()

    @functools.wraps(function)
    def call(*args):
        return ready()(*args)

    call.machine_code = machine_code
    call.ready = ready
    LOOPS[key] = call
    return call


def over_runs(body):
    """A kernel whose work is cut into runs: ``body(run, n_runs, *arguments)`` does run ``run``
    of ``n_runs``, and the kernel is called as ``kernel(n_runs, *arguments)``.

    With threads (``threads()`` above 1), a driver runs the runs over ``prange``, one call
    on numba's threads; it is compiled apart from the body, which it calls (numba's
    parallel passes over a whole loop nest took seconds to compile). On one thread the
    body runs run by run, called from here: no parallel loop is compiled, no threading
    layer started. A driver numba's disk cache does not hold is compiled in the background
    (``drivers.Driver``) and, until it is ready, the runs go on the host's threads (the body
    releases the GIL). Either way the runs, and so the results, are the same.
    """
    one_run = compiled(body, inline=False)
    key = f"{body.__module__}:{body.__qualname__}_on_threads"

    @functools.lru_cache(maxsize=None)
    def driver():
        import numba

        drive = _bound(_drive, body=one_run.machine_code())
        drive.__qualname__ = driver.cached_name()
        return Driver(numba.njit(cache=True, nogil=True, parallel=_PRANGE_ONLY)(drive), one_run.machine_code(), key)

    driver.cached_name = lambda: f"{body.__qualname__}_on_threads_{_loops_digest()}"
    DRIVERS[key] = driver

    @functools.wraps(body)
    def kernel(n_runs, *arguments):
        run_one = one_run.ready()
        if n_runs > 1 and threads() > 1 and not _forked_from_openmp:
            machine_code = driver().ready((n_runs, *arguments))
            if machine_code is not None:
                return _launch(machine_code, (n_runs, *arguments))
            on_host_threads(lambda run: run_one(run, n_runs, *arguments), n_runs, threads())
            return None
        for run in range(n_runs):
            run_one(run, n_runs, *arguments)
        return None

    return kernel


@functools.lru_cache(maxsize=1)
def _loops_digest() -> str:
    """A digest of the loops' source files, in every driver's name. numba's disk cache keys a
    driver on its own code (``_drive``, the same for every kernel), its name and this file's
    stamp, while the body it calls is compiled into it: a body changed in another file must
    not load the driver of the old one."""
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in ("loops.py", "split_loops.py", "rank_loops.py"):
        with open(os.path.join(folder, name), "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:12]


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
    _setting.team = None  # the first launch sets numba's count, whatever else set it meanwhile
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
        team = max(1, min(threads(), numba.config.NUMBA_NUM_THREADS))
        if getattr(_setting, "team", None) != team:  # numba keeps a thread's count: set on a change (using_threads)
            numba.set_num_threads(team)
            _setting.team = team
        return machine_code(*args)

    if _layer_is_threadsafe:
        return run()
    with _launch_lock:
        result = run()
        _layer_is_threadsafe = numba.threading_layer() in ("tbb", "omp")
    return result


#: How far ahead of its read (places of ``ridx``) a loop over a node's rows asks for a row:
#: far enough for the memory to answer, near enough that the line is still cached.
PREFETCH_PLACES = 16


def _lowered(make_intrinsic):
    """A plain-Python helper of the loops whose compiled form is a numba intrinsic:
    ``make_intrinsic()`` builds it once, at the first compile that binds it (``_bound`` binds
    every global with a ``machine_code``), so numba is imported no sooner."""

    def decorate(function):
        function.machine_code = functools.lru_cache(maxsize=1)(make_intrinsic)
        return function

    return decorate


def _prefetch_row_code():
    """_prefetch_row for numba: an intrinsic emitting ``llvm.prefetch`` (read, keep in
    every cache level, data)."""
    from llvmlite import ir
    from numba.core import types as numba_types
    from numba.extending import intrinsic

    @intrinsic
    def prefetch_row(typingctx, array, row):
        if not (isinstance(array, numba_types.Array) and array.ndim == 2 and isinstance(row, numba_types.Integer)):
            return None

        def codegen(context, builder, signature, arguments):
            array_type, row_type = signature.args
            view = context.make_array(array_type)(context, builder, arguments[0])
            word, flag = ir.IntType(64), ir.IntType(32)
            row_value = context.cast(builder, arguments[1], row_type, numba_types.int64)
            first = builder.add(builder.ptrtoint(view.data, word),
                                builder.mul(row_value, builder.extract_value(view.strides, 0)))
            item = context.get_abi_sizeof(context.get_data_type(array_type.dtype))
            span = builder.mul(builder.sub(builder.extract_value(view.shape, 1), ir.Constant(word, 1)),
                               builder.extract_value(view.strides, 1))  # to the row's last item
            last = builder.add(first, builder.add(span, ir.Constant(word, item - 1)))
            pointer = ir.IntType(8).as_pointer()
            prefetch = builder.module.declare_intrinsic(
                "llvm.prefetch", [pointer], ir.FunctionType(ir.VoidType(), [pointer, flag, flag, flag]))
            for address in (first, last):
                builder.call(prefetch, [builder.inttoptr(address, pointer), ir.Constant(flag, 0),
                                        ir.Constant(flag, 3), ir.Constant(flag, 1)])
            return context.get_dummy_value()

        return numba_types.void(array, row), codegen

    return prefetch_row


@_lowered(_prefetch_row_code)
def _prefetch_row(array, row):
    """Ask the CPU to bring row ``row`` of the 2-D ``array`` into its caches
    ahead of its read: the rows of a node below the root are scattered through the matrix,
    and a loop that waits for each in turn is bound by memory's latency (three times slower
    at 200k rows, here). Compiled, LLVM's prefetch of the row's first and last bytes; as
    plain Python, nothing. It reads and writes nothing: no result depends on it."""


def _add_pair_code():
    """_add_pair for numba: an intrinsic adding a <2 x i64> vector in place."""
    from llvmlite import ir
    from numba.core import types as numba_types
    from numba.extending import intrinsic

    @intrinsic
    def add_pair(typingctx, array, column, first, second):
        if not (isinstance(array, numba_types.Array) and array.ndim == 1 and array.dtype == numba_types.int64
                and array.layout == "C" and array.mutable and array.aligned
                and all(isinstance(value, numba_types.Integer) for value in (column, first, second))):
            return None

        def codegen(context, builder, signature, arguments):
            view = context.make_array(signature.args[0])(context, builder, arguments[0])
            word = ir.IntType(64)
            place = context.cast(builder, arguments[1], signature.args[1], numba_types.int64)
            pair = ir.VectorType(word, 2)
            address = builder.bitcast(builder.gep(view.data, [place]), pair.as_pointer())
            lanes = ir.Constant(pair, ir.Undefined)
            for lane, (value, value_type) in enumerate(zip(arguments[2:], signature.args[2:])):
                lanes = builder.insert_element(lanes, context.cast(builder, value, value_type, numba_types.int64),
                                               ir.Constant(ir.IntType(32), lane))
            builder.store(builder.add(builder.load(address, align=8), lanes), address, align=8)
            return context.get_dummy_value()

        return numba_types.void(array, column, first, second), codegen

    return add_pair


@_lowered(_add_pair_code)
def _add_pair(array, column, first, second):
    """``array[column] += first`` and ``array[column + 1] += second`` (int64): compiled, one
    two-lane vector add, one load and one store where the two scalar adds make two of each
    (histograms, 200k rows on 2 threads: 7.9 -> 5.2 ms a round). Integers: the same bits."""
    array[column] += first
    array[column + 1] += second


@compiled
def _cell(cells, packed, row, cell, bits, cells_per_word):
    """Cell ``cell`` of ``row``: read directly where cells are whole bytes (``cells``, a
    uint8 or uint16 view of the words), else shifted out of its word."""
    if cells is not None:
        return np.int64(cells[row, cell])
    mask = np.uint32((1 << bits) - 1)
    return np.int64((packed[row, cell // cells_per_word] >> np.uint32((cell % cells_per_word) * bits)) & mask)


@compiled
def _bin(cells, packed, row, feature, bits, cells_per_word, feature_bins):
    """The bin of ``feature`` in ``row``. A dense row's cell ``feature`` holds it; a sparse
    row (``feature_bins`` given: each feature's first global bin, the total last) holds
    its entries' global bins in ascending order, then null cells (the total): the bin is
    the one cell in ``[feature_bins[feature], feature_bins[feature + 1])``, found by a
    binary search, less the feature's first, or the null symbol where the row has none."""
    if feature_bins is None:
        return _cell(cells, packed, row, feature, bits, cells_per_word)
    first, stop = feature_bins[feature], feature_bins[feature + 1]
    lo, hi = np.int64(0), np.int64(packed.shape[1] * cells_per_word)
    while lo < hi:
        middle = (lo + hi) // 2
        if _cell(cells, packed, row, middle, bits, cells_per_word) < first:
            lo = middle + 1
        else:
            hi = middle
    if lo < packed.shape[1] * cells_per_word:
        found = _cell(cells, packed, row, lo, bits, cells_per_word)
        if found < stop:
            return found - first
    return np.int64(feature_bins[feature_bins.shape[0] - 1])


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
            ahead = min(place + PREFETCH_PLACES, end - 1)
            for coming in (ridx[ahead], ridx[min(ahead + 1, end - 1)]):
                _prefetch_row(packed, coming)
                _prefetch_row(gpair, coming)
            row = ridx[place]
            other = ridx[min(place + 1, end - 1)]
            paired = place + 1 < end
            gradient = np.int64(np.rint(np.float64(gpair[row, 0]) * scales[0]))
            hessian = np.int64(np.rint(np.float64(gpair[row, 1]) * scales[1]))
            other_gradient = np.int64(np.rint(np.float64(gpair[other, 0]) * scales[0])) if paired else np.int64(0)
            other_hessian = np.int64(np.rint(np.float64(gpair[other, 1]) * scales[1])) if paired else np.int64(0)
            for feature in range(n_features):
                offset = bin_offsets[feature]
                bin_id = _cell(cells, packed, row, feature, bits, cells_per_word)
                other_bin = _cell(cells, packed, other, feature, bits, cells_per_word)
                if bin_id != missing_symbol:  # rows flattened: a tenth faster than [bin, 0]
                    _add_pair(slot_hist, 2 * (offset + bin_id), gradient, hessian)
                if other_bin != missing_symbol:
                    _add_pair(slot_hist, 2 * (offset + other_bin), other_gradient, other_hessian)


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


@over_runs
def quantise_rows(run, n_runs, data, indices, indptr, cut_values, cut_offsets, bin_offsets, bits, cells_per_word,
                  symbol, global_bins, packed):
    """Bin and pack run ``run`` of ``n_runs`` equal runs of the rows of a CSR matrix (``data``,
    ``indices`` ascending within a row, ``indptr``) into ``packed`` (see
    cpu.quantise_sparse). Dense rows (``global_bins`` False): cell ``f`` holds feature
    ``f``'s bin, ``symbol`` (missing) where the row has no entry of it. Sparse rows: cell
    ``k`` holds the row's ``k``-th entry's global bin (``bin_offsets[f]`` plus its bin), in
    ascending order as the entries' features are, then ``symbol`` (null) to the row's end.
    Dense rows' cells past the last feature hold 0, as quantise's."""
    n_rows = indptr.shape[0] - 1
    n_features = cut_offsets.shape[0] - 1
    mask = np.uint32((1 << bits) - 1)
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        for word_index in range(packed.shape[1]):
            word = np.uint32(0)
            for cell in range(cells_per_word):
                if global_bins or word_index * cells_per_word + cell < n_features:
                    word |= np.uint32(symbol) << np.uint32(cell * bits)
            packed[row, word_index] = word
        first = indptr[row]
        for entry in range(first, indptr[row + 1]):
            feature = indices[entry]
            bin_id = _cuts_at_or_below(cut_values, cut_offsets[feature], cut_offsets[feature + 1], data[entry])
            cell = entry - first if global_bins else np.int64(feature)
            if global_bins:
                bin_id += bin_offsets[feature]
            word_index, shift = cell // cells_per_word, np.uint32((cell % cells_per_word) * bits)
            packed[row, word_index] = (packed[row, word_index] & ~(mask << shift)) | (np.uint32(bin_id) << shift)


@over_runs
def most_present(run, n_runs, X, most):
    """``most[run]``: the most present (not NaN) values of any row of run ``run`` of ``n_runs``
    equal runs of the rows of the dense ``X``."""
    n_rows, n_features = X.shape
    best = np.int64(0)
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        count = np.int64(0)
        for feature in range(n_features):
            count += np.int64(not np.isnan(X[row, feature]))
        best = max(best, count)
    most[run] = best


@compiled
def _value(X, data, indices, indptr, row, feature):
    """The value of ``feature`` in ``row``, NaN where missing: of the dense ``X``, or, where
    ``data`` is given (``X`` None), of a CSR matrix's row, by a binary search of its
    ascending ``indices``. (numba drops a branch on ``x is not None`` where ``x`` is None,
    which both branches' tests here rely on.)"""
    if X is not None:  # a row index is never negative: unsigned, numba checks for no wraparound
        return X[np.uint64(row), feature]
    if data is not None:
        lo, hi = indptr[row], indptr[row + 1]
        stop = hi
        while lo < hi:
            middle = (lo + hi) // 2
            if indices[middle] < feature:
                lo = middle + 1
            else:
                hi = middle
        if lo < stop and indices[lo] == feature:
            return data[lo]
    return np.float32(np.nan)


#: Rows predicted together, tree by tree: the tree's nodes stay in cache across the block,
#: and the rows' walks, independent, overlap their memory reads.
_PREDICT_BLOCK = 64


@over_runs
def predict(run, n_runs, X, data, indices, indptr, steps, threshold, category_row, category_words, value, roots,
            outputs, depth, margins):
    """Add every tree's leaf value to each row of ``margins``, the row's trees in model
    order: its float32 additions are the NumPy twin's, in its order (see
    cpu.predict_margins). The blocks of rows cut into ``n_runs`` runs.

    Rows go in blocks of _PREDICT_BLOCK, tree by tree, a level of the whole block at a
    time (``depth`` levels). A step reads one int64 of its node and chooses without a branch
    (cpu.walk_table): the next node is the step's child (a leaf's: itself) plus whether the
    value goes right, as every tree numbers right ``left + 1``; a leaf's threshold is NaN and
    it sends missing values left, so a row at a leaf stays there. The rows: the dense ``X``, or
    a CSR matrix's ``data``, ``indices`` and ``indptr`` (see _value). ``category_row`` and
    ``category_words``: see _value_goes_right.
    """
    n_rows = margins.shape[0]
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
                    step = steps[node]
                    rule = np.int32(step >> 32)  # the feature; its sign bit: missing values go left
                    x = _value(X, data, indices, indptr, block + index, rule & 0x7FFFFFFF)
                    go_right = (x >= threshold[node]) | (np.isnan(x) & (rule >= 0))
                    if category_row is not None:  # (numba drops the branch where it is None)
                        if category_row[node] >= 0 and not np.isnan(x):
                            go_right = _in_category_set(x, category_row[node], category_words)
                    nodes[index] = np.int32(step & 0xFFFFFFFF) + np.int32(go_right)
            output = outputs[tree]
            for index in range(size):
                margins[np.uint64(block + index), output] += value[nodes[index]]


@compiled
def _value_goes_right(x, node, threshold, default_left, category_row, category_words):
    """Whether a raw value goes right at ``node``: missing, by its default; at a category-set
    split (``category_row[node]`` >= 0, where ``category_row`` is given), where the bit of its
    code is set in that row of ``category_words`` (uint32; a code beyond them is in no set: left,
    as training sends it); else where ``x >= threshold``."""
    if np.isnan(x):
        return not default_left[node]
    if category_row is not None and category_row[node] >= 0:
        return _in_category_set(x, category_row[node], category_words)
    return not x < threshold[node]


@compiled
def _in_category_set(x, row, category_words):
    """Whether the category ``x`` (a value, not NaN) is in row ``row`` of ``category_words``
    (uint32): a code beyond them, or no code, is in no set (codes past K are missing already)."""
    if not (x >= 0 and x < category_words.shape[1] * 32):
        return False
    code = np.int64(x)
    return (category_words[row, code >> 5] >> (code & 31)) & 1 != 0


@over_runs
def predict_oblivious(run, n_runs, X, data, indices, indptr, level_feature, level_threshold, level_default_left,
                      leaf_value, outputs, depth, margins):
    """Add every oblivious tree's leaf value to each row of ``margins``, in model order (see
    cpu.predict_oblivious): a row's leaf is the bits of its sides, one a level, the first
    level's the highest. The blocks of rows cut into ``n_runs`` runs, tree by tree a block.
    The rows as for ``predict``."""
    n_rows = margins.shape[0]
    n_blocks = (n_rows + _PREDICT_BLOCK - 1) // _PREDICT_BLOCK
    leaves = np.empty(_PREDICT_BLOCK, np.int64)
    for block_index in range(n_blocks * run // n_runs, n_blocks * (run + 1) // n_runs):
        block = block_index * _PREDICT_BLOCK
        size = min(_PREDICT_BLOCK, n_rows - block)
        for tree in range(level_feature.shape[0]):
            leaves[:size] = 0
            for level in range(depth):
                feature = level_feature[tree, level]
                threshold = level_threshold[tree, level]
                missing_right = not level_default_left[tree, level]
                for index in range(size):
                    x = _value(X, data, indices, indptr, block + index, feature)
                    right = missing_right if np.isnan(x) else not x < threshold
                    leaves[index] = 2 * leaves[index] + np.int64(right)
            output = outputs[tree]
            for index in range(size):
                margins[np.uint64(block + index), output] += leaf_value[tree, leaves[index]]


@compiled
def _child_slot(cells, packed, bits, cells_per_word, missing_symbol, feature_bins, row, slot, split_feature, split_bin,
                default_left, categories):
    """0 where ``row`` goes to the left child of its node (level slot ``slot``), 1 right: left
    where its bin is at most the split's, or missing and the default is left. A category-set
    split (bin -1, with ``categories``: uint32 words a slot) sends right the bins (categories)
    whose bits are set."""
    bin_id = _bin(cells, packed, row, split_feature[slot], bits, cells_per_word, feature_bins)
    if bin_id == missing_symbol:
        return 1 - np.int64(default_left[slot])
    return np.int64(_goes_right(bin_id, split_bin[slot], categories, slot))


@compiled
def _goes_right(bin_id, split_bin, categories, slot):
    """Whether a present bin goes right at a split: above ``split_bin``, or, at a category-set
    split (``split_bin`` -1), its bit set in row ``slot`` of ``categories``."""
    if categories is not None and split_bin < 0:
        return bin_id < categories.shape[1] * 32 and (categories[slot, bin_id >> 5] >> (bin_id & 31)) & 1 != 0
    return bin_id > split_bin


@over_runs
def partition_sides(run, n_runs, cells, packed, bits, cells_per_word, missing_symbol, feature_bins, split_feature,
                    split_bin, default_left, categories, ridx, seg_begin, starts, touches, first_slots, n_run_slots,
                    partial, left_child, goes_left, lefts, new_ridx):
    """Partition's first pass, over the slots' rows in run ``run`` of the ``n_runs`` runs of a
    plan (``starts`` to ``partial``, run_plan's; see cpu.partition_rows): each row of a
    splitting slot gets its side (``goes_left``, by its place in ``ridx``), left where its bin
    of the slot's feature is at most the slot's bin (or is missing and the slot's default is
    left), and ``lefts[run, slot]`` counts the run's rows of the slot sent left. Each run also
    copies its equal share of ``ridx``'s places into ``new_ridx``, whose places of splitting
    slots partition_scatter then overwrites. ``cells`` as for ``histograms``;
    ``feature_bins`` as for ``_bin`` (None: dense rows); ``categories`` as for ``_child_slot``."""
    n_places = ridx.shape[0]
    for place in range(n_places * run // n_runs, n_places * (run + 1) // n_runs):
        new_ridx[place] = ridx[place]  # a loop, not a slice copy: numba's shape check compiles for seconds
    total = starts[seg_begin.shape[0]]
    first, stop = total * run // n_runs, total * (run + 1) // n_runs
    for slot in range(first_slots[run], first_slots[run] + n_run_slots[run]):
        if left_child[slot] < 0:
            continue
        begin, end = _places(seg_begin, starts, first, stop, slot)
        sent_left = np.int64(0)  # a local count, not lefts[run, slot]: runs' counts share cache lines
        for place in range(begin, end):
            _prefetch_row(packed, ridx[min(place + PREFETCH_PLACES, end - 1)])
            left = 1 - _child_slot(cells, packed, bits, cells_per_word, missing_symbol, feature_bins, ridx[place], slot,
                                   split_feature, split_bin, default_left, categories)
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
def route(run, n_runs, cells, packed, bits, cells_per_word, missing_symbol, feature_bins, split_feature, split_bin,
          default_left, left_child, categories, depth, leaf):
    """Walk every row of run ``run`` of ``n_runs`` equal runs from the root to its leaf (see
    cpu.route_rows); ``cells`` as for ``histograms``, ``feature_bins`` for ``_bin``,
    ``categories`` (by node id) for ``_goes_right``."""
    n_rows = leaf.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        node = 0
        for _ in range(depth):
            child = left_child[node]
            if child < 0:
                break
            feature = split_feature[node]
            bin_id = _bin(cells, packed, row, feature, bits, cells_per_word, feature_bins)
            if bin_id == missing_symbol:
                node = child if default_left[node] else child + 1
            else:
                node = child + 1 if _goes_right(bin_id, split_bin[node], categories, node) else child
        leaf[row] = node


@over_runs
def add_leaf_values(run, n_runs, margins, output, leaf_value, positions):
    """``margins[row, output] += leaf_value[positions[row]]`` for every row of run ``run`` of
    ``n_runs`` equal runs (see cpu.add_leaf_values)."""
    n_rows = margins.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        margins[row, output] += leaf_value[positions[row]]


@over_runs
def place_rows(run, n_runs, ridx, begin, end, node, positions):
    """``positions[ridx[i]] = node[k]`` for the places ``i`` of run ``run`` of ``n_runs`` equal
    runs of every range ``k``, ``[begin[k], end[k])`` (see cpu.place_rows): each range is
    shared by all the runs, so a level of uneven nodes keeps every thread busy."""
    for k in range(begin.shape[0]):
        first, size = begin[k], end[k] - begin[k]
        if size > 0:
            for i in range(first + size * run // n_runs, first + size * (run + 1) // n_runs):
                positions[ridx[i]] = node[k]


@over_runs
def gather_rows(run, n_runs, source, rows, first, out, at):
    """``out[at + i] = source[rows[i] - first]`` for every ``i`` of run ``run`` of ``n_runs``
    equal runs of ``rows`` (see cpu.gather_page_rows)."""
    n_rows, n_words = rows.shape[0], source.shape[1]
    for i in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        row = rows[i] - first
        for word in range(n_words):
            out[at + i, word] = source[row, word]


@over_runs
def pair_gradients(run, n_runs, kind, margin, label, weight, parameter, least_hessian, gpair):
    """Gradient pairs of one output into ``gpair`` (n_rows, 2) float32, for run ``run`` of
    ``n_runs`` equal runs of the rows: the float32 operations of the objective's array
    program (objectives/), one by one, in its order, so the same bits. ``kind`` 0:
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
def softmax_shifts(run, n_runs, margins, shifted):
    """Each row of ``margins`` less its largest value (NaN where the row holds one, as numpy's
    max) into ``shifted``, for run ``run`` of ``n_runs`` equal runs of the rows: softmax's
    first step (numpy's max along a row of a few classes took 9 ms for 200k rows of 7)."""
    n_rows, n_classes = margins.shape
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        largest = margins[row, 0]
        for k in range(1, n_classes):
            value = margins[row, k]
            if value > largest or np.isnan(value):  # a NaN once met stays: nothing is > NaN
                largest = value
        for k in range(n_classes):
            shifted[row, k] = margins[row, k] - largest


@over_runs
def softmax_pairs(run, n_runs, exps, sums, label, weight, least_hessian, gpair):
    """Softmax's gradient pairs into ``gpair`` (n_rows, n_classes, 2) float32, for run ``run``
    of ``n_runs`` equal runs of the rows: the float32 operations of objectives.Softmax's array
    program that follow its exp and its row sums, one by one, in its order, so the same bits.
    NumPy computes those two (numba's exp rounds differently, and NumPy sums a row pairwise):
    ``exps``, exp of the margins less each row's largest, and ``sums``, their rows' sums.
    The hessian is at least ``least_hessian`` (a NaN stays); ``weight``: float32 per row, or
    None."""
    one, two, zero = np.float32(1), np.float32(2), np.float32(0)
    n_rows, n_classes = exps.shape
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        for k in range(n_classes):
            probability = exps[row, k] / sums[row]
            gradient = probability - (one if label[row] == k else zero)
            hessian = two * probability * (one - probability)
            if hessian < least_hessian:  # numpy's maximum: a NaN stays
                hessian = least_hessian
            if weight is not None:
                gradient = gradient * weight[row]
                hessian = hessian * weight[row]
            gpair[row, k, 0] = gradient
            gpair[row, k, 1] = hessian


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


# ---- row sampling (cpu.sample_rows, cpu.sample_keys, cpu.sample_magnitude_max) ----------------

#: Row sampling's kinds (cpu.MVS, GOSS, UNIFORM) and the hessian's weight in MVS's magnitude.
MVS, GOSS, UNIFORM = 0, 1, 2
MVS_LAMBDA = 0.1

#: _hashing.uniform's splitmix64 constants, as the unsigned words the loops wrap in.
_HASH_GOLDEN, _HASH_MIX1, _HASH_MIX2 = (np.uint64(word) for word in (_hashing._GOLDEN, _hashing._MIX1,
                                                                   _hashing._MIX2))


@compiled
def uniform_draw(index, key):
    """_hashing.uniform of one global row index (int64) under ``key`` (uint64): the same
    splitmix64 words, wrapping, and the top 53 bits scaled by 2**-53."""
    z = np.uint64(index) + key + _HASH_GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _HASH_MIX1
    z = (z ^ (z >> np.uint64(27))) * _HASH_MIX2
    z = z ^ (z >> np.uint64(31))
    return np.float64(z >> np.uint64(11)) * 1.1102230246251565e-16  # 2**-53


@compiled
def sample_magnitude(gradient, hessian, kind):
    """A row's sampling magnitude in float64, operation by operation as NumPy's array
    expression over the rows would round it (tests/test_row_sampling.py holds them equal):
    ``sqrt(g^2 + 0.1 h^2)`` (MVS) or ``|g h|`` (GOSS)."""
    g, h = np.float64(gradient), np.float64(hessian)
    if kind == MVS:
        return np.sqrt(g * g + MVS_LAMBDA * (h * h))
    return np.abs(g * h)


@over_runs
def magnitude_max(run, n_runs, gpair, kind, largest):
    """The largest sampling magnitude of run ``run`` of ``n_runs`` equal runs of the rows, into
    ``largest[run]`` (-inf for no rows; NaN where a row's is, as NumPy's max)."""
    n_rows = gpair.shape[0]
    best, seen_nan = -np.inf, False
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        magnitude = sample_magnitude(gpair[row, 0], gpair[row, 1], kind)
        if np.isnan(magnitude):
            seen_nan = True
        elif magnitude > best:
            best = magnitude
    largest[run] = np.nan if seen_nan else best


@over_runs
def magnitude_keys(run, n_runs, gpair, kind, scale, keys):
    """Each row's key, ``rint(magnitude * scale)`` as int64, over run ``run`` of ``n_runs``."""
    n_rows = gpair.shape[0]
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        keys[row] = np.int64(np.rint(sample_magnitude(gpair[row, 0], gpair[row, 1], kind) * scale))


@over_runs
def sample_rows(run, n_runs, global_index, key, kind, keys, threshold, largest, rate, weight, gpair, pairs, drawn):
    """cpu.sample_rows over run ``run`` of ``n_runs`` equal runs of the rows: each row's draw,
    whether it is drawn (``drawn``) and, where ``pairs`` has rows, its pairs scaled or zero;
    float64 throughout, rounded to float32 once, as the array formula does."""
    n_rows = global_index.shape[0]
    with_pairs = pairs.shape[0] > 0
    cap = np.float64(max(threshold, 1))
    for row in range(n_rows * run // n_runs, n_rows * (run + 1) // n_runs):
        draw = uniform_draw(global_index[row], key)
        factor = 1.0
        if kind == UNIFORM:
            keep = draw < rate
        elif kind == MVS:
            probability = min(1.0, np.float64(keys[row]) / cap) if largest > 0 else 1.0
            keep = draw < probability
            factor = probability
        else:  # GOSS
            top = keys[row] >= threshold
            keep = top or draw < rate
            factor = 1.0 if top else weight
        drawn[row] = keep
        if with_pairs:
            for column in range(2):
                if not keep:
                    pairs[row, column] = 0
                elif kind == UNIFORM:
                    pairs[row, column] = gpair[row, column]
                elif kind == MVS:
                    pairs[row, column] = np.float32(np.float64(gpair[row, column]) / factor)
                else:
                    pairs[row, column] = np.float32(np.float64(gpair[row, column]) * factor)


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


@over_runs
def shap(run, n_runs, X, data, indices, indptr, left, right, feature, threshold, default_left, category_row,
         category_words, value, cover, depth,
         phi):
    """Add one tree's exact TreeSHAP contributions of each row of run ``run`` of ``n_runs``
    equal runs of ``X``'s rows into ``phi`` (n_rows, n_features + 1) float64 (see
    explain.py).

    Lundberg et al.'s recursion (Algorithm 2), depth first with a stack: path ``level``
    (its features, zero and one fractions and permutation weights, ``length`` entries) is
    the path of the node being visited at that depth, made from its parent's path at
    ``level - 1``, which stays as it was for the node's sibling. Every node is visited for
    every row (a cold branch with one fraction 0), in the order and with the float
    operations of the array program it replaced. The rows as for ``predict``."""
    n_rows = phi.shape[0]
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
            x = _value(X, data, indices, indptr, row, split)
            goes_left = not _value_goes_right(x, node, threshold, default_left, category_row, category_words)
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
