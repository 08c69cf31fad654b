"""The CPU kernels' loops, compiled by numba, and the threads that run them.

Each function here is plain Python over NumPy arrays: the body of one kernel of
``cpu.py``, which checks its arguments and calls it. ``@compiled`` defers
numba's import (0.3 s) and each loop's compilation to the loop's first call, and
``cache=True`` keeps the machine code on disk, so a new process loads it rather
than compiling again.

Loops are compiled with ``nogil`` and spread over threads by ``on_threads``, a pool
of Python threads, rather than by numba's own parallel loops: numba's default
threading layer aborts the process when two threads start parallel loops at once,
which a Dask worker running two tasks would do. A parallel loop takes its thread's
number and the thread count and works on its own share; integer results are
summed per thread and then in thread order, so they are exact whatever the
count. No loop uses ``fastmath``: float arithmetic rounds as NumPy's does,
operation by operation.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import threading
import types

import numpy as np


def compiled(function):
    """The decorated loop, compiled by ``numba.njit`` on its first call. Other compiled
    loops it calls are compiled with it (numba calls their machine code, not these wrappers)."""
    @functools.lru_cache(maxsize=None)
    def machine_code():
        import numba

        names = dict(function.__globals__)
        for name in function.__code__.co_names:
            if hasattr(names.get(name), "machine_code"):
                names[name] = names[name].machine_code()
        body = types.FunctionType(function.__code__, names, function.__name__, function.__defaults__,
                                  function.__closure__)
        body.__qualname__ = function.__qualname__
        return numba.njit(cache=True, nogil=True)(body)

    @functools.wraps(function)
    def call(*args):
        return machine_code()(*args)

    call.machine_code = machine_code
    return call


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


_pool_lock = threading.Lock()
_pool: concurrent.futures.ThreadPoolExecutor | None = None


def on_threads(work, n_threads: int) -> list:
    """``[work(0), ..., work(n_threads - 1)]``, each call on a thread of its own (the caller's
    for the first), for loops that release the GIL."""
    global _pool
    if n_threads == 1:
        return [work(0)]
    with _pool_lock:
        if _pool is None or _pool._max_workers < n_threads - 1:  # grows to the most threads asked for
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=n_threads - 1,
                                                          thread_name_prefix="dgboost-loop")
        pool = _pool
    others = [pool.submit(work, thread) for thread in range(1, n_threads)]
    return [work(0)] + [future.result() for future in others]


@compiled
def _share(seg_begin, seg_end, thread, n_threads):
    """The run of the slots' rows laid end to end that ``thread`` of ``n_threads`` takes:
    (each slot's first position, the run's first and stop positions, the run's first slot)."""
    n_slots = seg_begin.shape[0]
    starts = np.zeros(n_slots + 1, np.int64)
    for slot in range(n_slots):
        starts[slot + 1] = starts[slot] + (seg_end[slot] - seg_begin[slot])
    total = starts[n_slots]
    first, stop = total * thread // n_threads, total * (thread + 1) // n_threads
    slot = 0
    while slot < n_slots and starts[slot + 1] <= first:
        slot += 1
    return starts, first, stop, slot


@compiled
def histograms(cells, packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets, gpair, scales,
               ridx, seg_begin, seg_end, thread, n_threads, hist):
    """Add thread ``thread``'s share of the slots' rows into ``hist`` (see cpu.build_histograms).

    The slots' rows are laid end to end and cut into ``n_threads`` equal runs; this
    call sums run ``thread`` into ``hist``, a histogram of its own. ``cells``: the
    packed words viewed as one uint8 or uint16 a cell where cells are whole bytes
    (bits 8 or 16: read directly), else None (cells shifted out of ``packed``).
    """
    starts, first, stop, slot = _share(seg_begin, seg_end, thread, n_threads)
    mask = np.uint32((1 << bits) - 1)
    for item in range(first, stop):
        while starts[slot + 1] <= item:
            slot += 1
        row = ridx[seg_begin[slot] + item - starts[slot]]
        gradient = np.int64(np.rint(np.float64(gpair[row, 0]) * scales[0]))
        hessian = np.int64(np.rint(np.float64(gpair[row, 1]) * scales[1]))
        for feature in range(n_features):
            if cells is not None:
                bin_id = np.int64(cells[row, feature])
            else:
                word = packed[row, feature // cells_per_word]
                bin_id = np.int64((word >> np.uint32((feature % cells_per_word) * bits)) & mask)
            if bin_id != missing_symbol:
                column = bin_offsets[feature] + bin_id
                hist[slot, column, 0] += gradient
                hist[slot, column, 1] += hessian


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


@compiled
def quantise(X, cut_values, cut_offsets, bits, cells_per_word, missing_symbol, thread, n_threads, packed):
    """Bin and pack thread ``thread``'s share of the rows of ``X`` into ``packed`` (see
    cpu.quantise_and_pack): a cell's bin is the number of its feature's cuts <= the value
    (a binary search), NaN the missing symbol."""
    n_rows, n_features = X.shape
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
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


@compiled
def predict(X, left, right, feature, threshold, default_left, value, roots, outputs, thread, n_threads, margins):
    """Add every tree's leaf value to thread ``thread``'s share of the rows of ``margins``,
    tree by tree in model order: each row's float32 additions are the NumPy twin's, in
    its order (see cpu.predict_margins)."""
    n_rows = X.shape[0]
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
        for tree in range(roots.shape[0]):
            node = roots[tree]
            while left[node] >= 0:
                x = X[row, feature[node]]
                go_left = default_left[node] if np.isnan(x) else x < threshold[node]
                node = left[node] if go_left else right[node]
            margins[row, outputs[tree]] += value[node]


@compiled
def partition(cells, packed, bits, cells_per_word, missing_symbol, ridx, positions, seg_begin, seg_end,
              split_feature, split_bin, default_left, left_child, new_ridx, n_left):
    """Split the range of each splitting slot of ``ridx`` into ``new_ridx`` (see cpu.partition_rows).

    One pass over a slot's rows that does not branch on the side a row goes to
    (a branch taken at random mispredicts half the time: 1.7 ms against 1.0 ms for
    200k rows in one slot). Each row is written at both the next free place from the range's
    start (``lefts``) and the next from its end (``rights``) and the count of its
    side moves on, so the place it keeps is its own and the other is written over::

        begin                          end
        [l0 l1 l2 .. .. .. .. r2 r1 r0]   after 6 of 10 rows ('..': free, or a stray copy)
        [l0 l1 l2 l3 r5 r4 r3 r2 r1 r0]   after all 10: the rights written backwards
        [l0 l1 l2 l3 r0 r1 r2 r3 r4 r5]   the right part reversed

    so both sides keep their order. ``new_ridx`` holds a copy of ``ridx`` on entry
    (the other slots' rows and rows of no slot stay); ``cells`` as for ``histograms``.
    """
    mask = np.uint32((1 << bits) - 1)
    for slot in range(seg_begin.shape[0]):
        child = left_child[slot]
        if child < 0:
            continue
        begin, end = seg_begin[slot], seg_end[slot]
        feature, threshold, missing_left = split_feature[slot], split_bin[slot], default_left[slot]
        word, shift = feature // cells_per_word, np.uint32((feature % cells_per_word) * bits)
        lefts, rights = 0, 0
        for item in range(begin, end):
            row = ridx[item]
            if cells is not None:
                bin_id = np.int64(cells[row, feature])
            else:
                bin_id = np.int64((packed[row, word] >> shift) & mask)
            left = np.int64(missing_left if bin_id == missing_symbol else bin_id <= threshold)
            new_ridx[begin + lefts] = row
            new_ridx[end - 1 - rights] = row
            positions[row] = child + 1 - left
            lefts += left
            rights += 1 - left
        low, high = begin + lefts, end - 1
        while low < high:
            new_ridx[low], new_ridx[high] = new_ridx[high], new_ridx[low]
            low += 1
            high -= 1
        n_left[slot] = lefts


@compiled
def route(cells, packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left, left_child,
          depth, thread, n_threads, leaf):
    """Walk thread ``thread``'s share of the rows (the ``n_threads`` equal runs of them, in
    order) from the root to their leaves (see cpu.route_rows); ``cells`` as for ``histograms``."""
    n_rows = leaf.shape[0]
    mask = np.uint32((1 << bits) - 1)
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
        node = 0
        for _ in range(depth):
            child = left_child[node]
            if child < 0:
                break
            feature = split_feature[node]
            if cells is not None:
                bin_id = np.int64(cells[row, feature])
            else:
                bin_id = np.int64((packed[row, feature // cells_per_word]
                                   >> np.uint32((feature % cells_per_word) * bits)) & mask)
            left = default_left[node] if bin_id == missing_symbol else bin_id <= split_bin[node]
            node = child if left else child + 1
        leaf[row] = node
