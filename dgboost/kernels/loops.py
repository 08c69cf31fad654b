"""The CPU kernels' loops, compiled by numba, and the threads that run them.

Each function here is plain Python over NumPy arrays: the body of one kernel of
``cpu.py``, which checks its arguments and calls it, or a scalar helper such a body
calls (inlined into it). ``@compiled`` defers numba's import (0.3 s) and each loop's
compilation to the loop's first call, and ``cache=True`` keeps the machine code on
disk, so a new process loads it rather than compiling again.

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
    functions it calls are compiled with it and inlined (``inline="always"``: numba's own
    calls between compiled functions stay calls, which in split evaluation's innermost
    loop took half its time)."""
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
        return numba.njit(cache=True, nogil=True, inline="always")(body)

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
def _bin(cells, packed, row, feature, bits, cells_per_word):
    """The bin of ``feature`` in ``row``: read directly where cells are whole bytes
    (``cells``, a uint8 or uint16 view of the words), else shifted out of its word."""
    if cells is not None:
        return np.int64(cells[row, feature])
    mask = np.uint32((1 << bits) - 1)
    return np.int64((packed[row, feature // cells_per_word] >> np.uint32((feature % cells_per_word) * bits)) & mask)


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
def _places(seg_begin, starts, first, stop, slot):
    """The places in ``ridx`` of slot ``slot``'s rows within the run ``[first, stop)`` (see
    _share): ``(begin, end)``, an empty range where the slot lies outside the run."""
    offset = seg_begin[slot] - starts[slot]
    begin = max(first, starts[slot]) + offset
    return begin, max(begin, min(stop, starts[slot + 1]) + offset)


@compiled
def histograms(cells, packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets, gpair, scales,
               ridx, seg_begin, seg_end, thread, n_threads, hist):
    """Add thread ``thread``'s share of the slots' rows into ``hist`` (see cpu.build_histograms).

    The slots' rows are laid end to end and cut into ``n_threads`` equal runs; this
    call sums run ``thread`` into ``hist``, a histogram of its own, which it zeroes first. ``cells``: the
    packed words viewed as one uint8 or uint16 a cell where cells are whole bytes
    (bits 8 or 16: read directly), else None (cells shifted out of ``packed``).
    """
    hist[:] = 0  # here, not by the caller: each thread writes its pages first
    starts, first, stop, first_slot = _share(seg_begin, seg_end, thread, n_threads)
    for slot in range(first_slot, seg_begin.shape[0]):
        begin, end = _places(seg_begin, starts, first, stop, slot)
        slot_hist = hist[slot]
        for place in range(begin, end):
            row = ridx[place]
            gradient = np.int64(np.rint(np.float64(gpair[row, 0]) * scales[0]))
            hessian = np.int64(np.rint(np.float64(gpair[row, 1]) * scales[1]))
            for feature in range(n_features):
                bin_id = _bin(cells, packed, row, feature, bits, cells_per_word)
                if bin_id != missing_symbol:
                    column = bin_offsets[feature] + bin_id
                    slot_hist[column, 0] += gradient
                    slot_hist[column, 1] += hessian


@compiled
def add_parts(parts, thread, n_threads):
    """Add ``parts[1:]`` into ``parts[0]``, in part order, over thread ``thread``'s run of the
    columns: ``parts`` (n_parts, size) int64, the threads' histograms flattened."""
    size = parts.shape[1]
    for column in range(size * thread // n_threads, size * (thread + 1) // n_threads):
        total = parts[0, column]
        for part in range(1, parts.shape[0]):
            total += parts[part, column]
        parts[0, column] = total


@compiled
def siblings(hist, slot_of_rank, built, build_left, thread, n_threads, children):
    """Thread ``thread``'s run of the sibling pairs of cpu.sibling_histograms: pair ``p``'s
    built child as summed, its sibling as parent ``hist[slot_of_rank[p]]`` minus it. All
    arrays flattened to one row a histogram."""
    n_pairs = built.shape[0]
    for pair in range(n_pairs * thread // n_threads, n_pairs * (thread + 1) // n_threads):
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


#: Rows predicted together, tree by tree: the tree's nodes stay in cache across the block,
#: and the rows' walks, independent, overlap their memory reads.
_PREDICT_BLOCK = 64


@compiled
def predict(X, left, right, feature, threshold, default_left, value, roots, outputs, depth, thread, n_threads,
            margins):
    """Add every tree's leaf value to thread ``thread``'s share of the rows of ``margins``,
    each row's trees in model order: its float32 additions are the NumPy twin's, in its
    order (see cpu.predict_margins).

    Rows go in blocks of _PREDICT_BLOCK, tree by tree, a level of the whole block at a
    time (``depth`` levels: a row at a leaf stays there). A step chooses without a branch:
    right is ``left + 1``, as every tree numbers its nodes.
    """
    n_rows = X.shape[0]
    first, stop = n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads
    nodes = np.empty(_PREDICT_BLOCK, np.int32)
    for block in range(first, stop, _PREDICT_BLOCK):
        size = min(_PREDICT_BLOCK, stop - block)
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


@compiled
def partition_sides(cells, packed, bits, cells_per_word, missing_symbol, ridx, positions, seg_begin, seg_end,
                    split_feature, split_bin, default_left, left_child, thread, n_threads, goes_left, lefts):
    """Partition's first pass over thread ``thread``'s run of the slots' rows laid end to end
    (see cpu.partition_rows): each row of a splitting slot gets its side (``goes_left``, by
    its place in ``ridx``) and its child (``positions``), and ``lefts[slot]`` counts the
    run's rows sent left. ``cells`` as for ``histograms``."""
    starts, first, stop, first_slot = _share(seg_begin, seg_end, thread, n_threads)
    for slot in range(first_slot, seg_begin.shape[0]):
        child = left_child[slot]
        if child < 0:
            continue
        feature = split_feature[slot]
        threshold = split_bin[slot]
        missing_left = np.int64(default_left[slot])
        begin, end = _places(seg_begin, starts, first, stop, slot)
        sent_left = np.int64(0)  # a local count, not lefts[slot]: threads' counts share cache lines
        for place in range(begin, end):
            row = ridx[place]
            bin_id = _bin(cells, packed, row, feature, bits, cells_per_word)
            left = missing_left if bin_id == missing_symbol else np.int64(bin_id <= threshold)
            goes_left[place] = left
            positions[row] = child + 1 - left
            sent_left += left
        lefts[slot] += sent_left


@compiled
def partition_scatter(ridx, seg_begin, seg_end, left_child, goes_left, lefts_before, n_left, thread, n_threads,
                      new_ridx):
    """Partition's second pass over the same run: each row of a splitting slot to its place,
    the slot's left rows first, then its right rows, each side in order. ``lefts_before[slot]``
    counts the slot's left rows in the runs of earlier threads; ``n_left[slot]`` all of them."""
    starts, first, stop, first_slot = _share(seg_begin, seg_end, thread, n_threads)
    for slot in range(first_slot, seg_begin.shape[0]):
        if left_child[slot] < 0:
            continue
        begin, end = _places(seg_begin, starts, first, stop, slot)
        seen_left = lefts_before[slot]
        right_place = seg_begin[slot] + n_left[slot] + (begin - seg_begin[slot]) - seen_left
        left_place = seg_begin[slot] + seen_left
        for place in range(begin, end):
            left = goes_left[place]
            new_ridx[left_place if left else right_place] = ridx[place]
            left_place += left
            right_place += 1 - left


@compiled
def route(cells, packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left, left_child,
          depth, thread, n_threads, leaf):
    """Walk thread ``thread``'s share of the rows (the ``n_threads`` equal runs of them, in
    order) from the root to their leaves (see cpu.route_rows); ``cells`` as for ``histograms``."""
    n_rows = leaf.shape[0]
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
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


@compiled
def _node_gain(gradient, hessian, reg_lambda, alpha, min_child_weight, max_delta_step):
    """cpu.node_gains of one node (node_weights inside it), in the same float operations,
    for a node's finite sums. cpu.node_gains and cpu.node_weights stay the array programs
    of tree_record and the tests: change them together."""
    if hessian < min_child_weight or hessian <= 0:  # too light: the array program's mask
        return 0.0
    thresholded = gradient
    if alpha != 0:
        sign = 1.0 if gradient > 0 else (-1.0 if gradient < 0 else 0.0)
        shrunk = abs(gradient) - alpha
        thresholded = sign * (shrunk if shrunk > 0.0 else 0.0)
    denominator = hessian + reg_lambda
    if not denominator > 0:
        denominator = 1.0
    if max_delta_step > 0:
        weight = -thresholded / denominator
        if weight < -max_delta_step:
            weight = -max_delta_step
        elif weight > max_delta_step:
            weight = max_delta_step
        return -(2.0 * gradient * weight + (hessian + reg_lambda) * (weight * weight) + 2.0 * alpha * abs(weight))
    return (thresholded * thresholded) / denominator


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


@compiled
def splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, reg_lambda, alpha, min_child_weight,
           max_delta_step, gamma, min_split_gain, thread, n_threads, table, gains):
    """The split table rows of thread ``thread``'s share of the nodes (see cpu.evaluate_splits).

    Nodes are cut into ``n_threads`` runs; each node's row depends on that node
    alone. Per node and feature: the feature's total, so its missing sums; then a
    prefix scan of its bins in int64 (per-feature sums stay under 2**52, see
    fixed_point.py, so they and their float64 images are exact), each prefix scored
    with missing values right, then left (left only where the feature has missing
    values: without them both score the same and right wins the tie). The best is
    the first largest gain in (feature, bin, direction) order. A NaN gain (lambda or
    alpha infinite, with max_delta_step) makes the node's gain NaN and its candidate
    the last bin, missing left, as the array program this loop replaced chose (numpy's
    max, then the first candidate equal to it: none). ``gains[node]`` gets the gain;
    ``table[node, 4]``, its bits, is left to the caller.
    """
    n_nodes = hist.shape[0]
    n_bins_total = hist.shape[1]
    n_features = bin_offsets.shape[0] - 1
    inverse_gradient = 1.0 / scales[0]
    inverse_hessian = 1.0 / scales[1]
    # Hessians are multiples of 1 / scale, so "h > 0 and h >= min_child_weight" is one test.
    least_hessian = inverse_hessian if inverse_hessian >= min_child_weight else min_child_weight
    for node in range(n_nodes * thread // n_threads, n_nodes * (thread + 1) // n_threads):
        node_gradient = node_sums[node, 0]
        node_hessian = node_sums[node, 1]
        total_gradient = np.float64(node_gradient) * inverse_gradient
        total_hessian = np.float64(node_hessian) * inverse_hessian
        parent_gain = _node_gain(total_gradient, total_hessian, reg_lambda, alpha, min_child_weight,
                                 max_delta_step)
        # No candidate allowed: the first one (bin 0, missing right) with gain -inf.
        best_gain = -np.inf
        best_bin = 0
        best_direction = 0
        left_gradient = hist[node, 0, 0]
        left_hessian = hist[node, 0, 1]
        seen_nan = False
        nan_gain = 0.0  # the first NaN gain
        for feature in range(n_features):
            begin = bin_offsets[feature]
            end = bin_offsets[feature + 1]
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
                    gain = _split_gain(sum_gradient, sum_hessian, inverse_gradient, inverse_hessian, total_gradient,
                                       total_hessian, parent_gain, least_hessian, reg_lambda, alpha, min_child_weight,
                                       max_delta_step)
                    if gain > best_gain:
                        best_gain = gain
                        best_bin = bin_idx
                        best_direction = direction
                        left_gradient = sum_gradient
                        left_hessian = sum_hessian
                    elif np.isnan(gain) and not seen_nan:
                        seen_nan = True
                        nan_gain = gain
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
def pair_bounds(gpair, thread, n_threads, bounds):
    """The largest |gradient| and |hessian| of thread ``thread``'s run of the rows, into
    ``bounds`` (2,) float32, which starts at 0 (see cpu.gradient_bounds). A NaN wins and
    stays, as in numpy's max."""
    n_rows = gpair.shape[0]
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
        for column in range(2):
            value = abs(gpair[row, column])
            if value > bounds[column] or np.isnan(value):
                bounds[column] = value


@compiled
def pair_sums(gpair, scales, thread, n_threads, sums):
    """Add ``to_fixed(gpair[r, c], scales[c])`` over thread ``thread``'s run of the rows into
    ``sums`` (2,) int64 (see cpu.gradient_sums): the product in float64, as fixed_point.to_fixed."""
    n_rows = gpair.shape[0]
    for row in range(n_rows * thread // n_threads, n_rows * (thread + 1) // n_threads):
        sums[0] += np.int64(np.rint(np.float64(gpair[row, 0]) * scales[0]))
        sums[1] += np.int64(np.rint(np.float64(gpair[row, 1]) * scales[1]))
