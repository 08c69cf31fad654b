"""The CUDA kernels, with the same Python signatures as their twins in ``cpu.py``.

Sources are the ``*.cu`` files beside this module, compiled by NVRTC through
``cupy.RawModule`` once per device (cupy also caches the binaries on disk).
They are compiled with ``--fmad=false``: a fused multiply-add rounds once
where the NumPy twin rounds twice, and the split gains must be the same bits.
The sources with no multiply to fuse (``_NOTHING_TO_FUSE``) take CuPy's own
options instead, so a process that only predicts makes no compiler set-up of
dgboost's own (CuPy checks NVRTC once per option set in a process: 19 ms).

cupy is imported inside the functions: importing this module needs no GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

import numpy as np

from .._dtypes import (BIN_OFFSET_DTYPE, COLUMN_INDEX_DTYPE, CUT_DTYPE, GAIN_DTYPE, GRADIENT_DTYPE, HIST_DTYPE,
                       INDEX_DTYPE, LEAF_DTYPE, MARGIN_DTYPE, MONOTONE_DTYPE, PACKED_WORD_DTYPE, POSITION_DTYPE,
                       ROW_POINTER_DTYPE)
from .cpu import MIN_SPLIT_GAIN, RECORD_COLUMNS, SPLIT_TABLE_COLUMNS, Regularisation

_RECORD_WIDTH = len(RECORD_COLUMNS)

_SOURCES = pathlib.Path(__file__).resolve().parent
_HEADER = "common.cuh"
#: Sources whose floating-point arithmetic is comparisons and single additions (nothing a
#: fused multiply-add could round differently from the twin).
_NOTHING_TO_FUSE = frozenset({"predict.cu", "quantise.cu"})

#: Threads per block of the row-parallel kernels.
_BLOCK = 256
#: Threads per block of partition.cu's flags and scatter (PARTITION_BLOCK there).
_PARTITION_BLOCK = 256
#: Threads per block of the histogram kernel.
_HISTOGRAM_BLOCK = 512
#: The fewest cells of one feature group a histogram block sums: enough work to
#: amortise zeroing and flushing its shared-memory histogram.
_MIN_CELLS_PER_HISTOGRAM_BLOCK = 1 << 16
#: Rows per block of predict.cu's staged kernels, and the most shared memory they stage
#: them in (the default limit; wider rows are read from global memory).
_PREDICT_BLOCK = 128
_PREDICT_STAGED_BYTES = 48 * 1024
#: Threads of number_children's single block (NUMBER_THREADS in frontier.cu).
_NUMBER_THREADS = 1024
#: Threads of segment_offsets' single block (OFFSET_THREADS in histogram.cu).
_OFFSET_THREADS = 256
#: Blocks of the grid-stride reductions of gradients.cu: enough to fill the GPU.
_REDUCE_BLOCKS = 1024
#: Threads per block of split.cu's kernels (BLOCK there).
_SPLIT_BLOCK = 256
#: The most bins a feature has on average where split evaluation takes a warp a feature
#: rather than a block (a sparse matrix's one-hot columns have one or two).
_WARP_BINS = 32


@functools.lru_cache(maxsize=None)
def _function(source: str, name: str, device: int):
    """A compiled kernel of ``source`` for ``device`` (the current device when called)."""
    import cupy

    options = () if source in _NOTHING_TO_FUSE else ("--fmad=false",)
    return cupy.RawModule(code=_code(source), options=options).get_function(name)


def _code(source: str) -> str:
    """``source`` with the shared header written in place of its #include: no -I option, so
    the options stay CuPy's own where no others are needed (CuPy adds --std=c++17 itself)."""
    header = "\n".join(line for line in (_SOURCES / _HEADER).read_text().splitlines()
                       if line.strip() != "#pragma once")
    lines = [header if line.strip() == f'#include "{_HEADER}"' else line
             for line in (_SOURCES / source).read_text().splitlines()]
    assert header in lines, f"{source} must include {_HEADER}"
    return "\n".join(lines) + "\n"


def _kernel(source: str, name: str):
    import cupy

    return _function(source, name, cupy.cuda.Device().id)


def _blocks(n: int, block: int = _BLOCK) -> int:
    return max(1, -(-int(n) // block))


#: Category-set splits sort a (node, feature)'s categories in shared memory where they fit (else
#: they are ranked in global memory); tests turn it off to check the other way.
CATEGORY_SORT_IN_SHARED = True


@functools.lru_cache(maxsize=None)
def _shared_optin(device: int) -> int:
    """The most shared memory one block may take on ``device`` (its opt-in limit)."""
    import cupy

    return int(cupy.cuda.Device(device).attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024))


@functools.lru_cache(maxsize=None)
def _shared_budget(device: int) -> int:
    """Shared memory a histogram block may take: half of an SM's opt-in limit, so
    that two blocks share a multiprocessor (less a little for the runtime)."""
    import cupy

    attributes = cupy.cuda.Device(device).attributes
    optin = attributes.get("MaxSharedMemoryPerBlockOptin", 48 * 1024)
    per_sm = attributes.get("MaxSharedMemoryPerMultiprocessor", optin)
    return min(optin, per_sm // 2 - 1024)


def quantise_and_pack(X, cut_values, cut_offsets, bits, cells_per_word, n_words, missing_symbol):
    import cupy

    X = cupy.ascontiguousarray(X, dtype=CUT_DTYPE)
    n_rows, n_features = X.shape
    packed = cupy.empty((n_rows, n_words), dtype=PACKED_WORD_DTYPE)
    if packed.size:
        offsets = cupy.asarray(np.asarray(cut_offsets, dtype=BIN_OFFSET_DTYPE))
        _kernel("quantise.cu", "quantise_and_pack")(
            (_blocks(packed.size),), (_BLOCK,),
            (X, np.int64(n_rows), np.int32(n_features), cupy.ascontiguousarray(cut_values, dtype=CUT_DTYPE),
             offsets, np.int32(bits), np.int32(cells_per_word), np.int32(n_words), np.int32(missing_symbol),
             packed))
    return packed


def quantise_sparse(data, indices, indptr, cut_values, cut_offsets, bin_offsets, bits, cells_per_word, n_words,
                    symbol, global_bins):
    import cupy

    n_rows = int(indptr.shape[0]) - 1
    packed = cupy.empty((n_rows, n_words), dtype=PACKED_WORD_DTYPE)
    if n_rows and n_words:
        host_offsets = lambda a: cupy.asarray(np.asarray(a, dtype=BIN_OFFSET_DTYPE))  # noqa: E731
        _kernel("quantise.cu", "quantise_sparse")(
            (_blocks(n_rows),), (_BLOCK,),
            (cupy.ascontiguousarray(data, dtype=CUT_DTYPE), cupy.ascontiguousarray(indices, dtype=COLUMN_INDEX_DTYPE),
             cupy.ascontiguousarray(indptr, dtype=ROW_POINTER_DTYPE), np.int64(n_rows), np.int32(len(cut_offsets) - 1),
             cupy.ascontiguousarray(cut_values, dtype=CUT_DTYPE), host_offsets(cut_offsets), host_offsets(bin_offsets),
             np.int32(bits), np.int32(cells_per_word), np.int32(n_words), np.int32(symbol), np.int32(bool(global_bins)),
             packed))
    return packed


def most_present(X):
    import cupy

    from ..backend import to_numpy

    X = cupy.ascontiguousarray(X, dtype=CUT_DTYPE)
    n_rows, n_features = (int(n) for n in X.shape)
    most = cupy.zeros(1, dtype=np.int32)
    if n_rows:
        _kernel("quantise.cu", "most_present")((_blocks(n_rows),), (_BLOCK,),
                                               (X, np.int64(n_rows), np.int32(n_features), most))
    return int(to_numpy(most)[0])


def first_infinite(X):
    """As cpu.first_infinite: one grid-stride pass, the least index by atomicMin, one read."""
    import cupy

    from ..backend import asarray, to_numpy

    X = cupy.ascontiguousarray(X, dtype=CUT_DTYPE)
    n_cells = int(X.size)
    first = asarray(cupy, np.array([n_cells], dtype=np.uint64))  # "none" until a cell says otherwise
    if n_cells:
        _kernel("quantise.cu", "first_infinite")((min(_REDUCE_BLOCKS, _blocks(n_cells)),), (_BLOCK,),
                                                 (X, np.int64(n_cells), first))
    index = int(to_numpy(first)[0])
    return -1 if index == n_cells else index


@dataclasses.dataclass(frozen=True)
class _HistogramPlan:
    """How build_histograms covers a matrix: its feature groups and its grid."""

    group_words: object  # (n_groups + 1,) int32 on the device: each group's first word
    group_blocks: object  # (n_groups + 1,) int32 on the device: each group's first block
    n_blocks: int
    shared: int  # bytes of shared memory a block takes; 0: the cells go to global memory


@functools.lru_cache(maxsize=64)
def _histogram_plan(bin_offsets_bytes: bytes, cells_per_word: int, n_words: int, n_rows: int,
                    device: int) -> _HistogramPlan:
    """Feature groups as even as the fewest groups that fit shared memory allow, and one
    wave of blocks shared among them by their cells (a group of more cells sums more)."""
    import cupy

    bin_offsets = np.frombuffer(bin_offsets_bytes, dtype=BIN_OFFSET_DTYPE)
    n_features = len(bin_offsets) - 1
    pair_bytes = 2 * np.dtype(HIST_DTYPE).itemsize
    word_bytes = [int(bin_offsets[min((w + 1) * cells_per_word, n_features)] - bin_offsets[w * cells_per_word])
                  * pair_bytes for w in range(n_words)]
    budget = _shared_budget(device)
    fits = max(word_bytes) <= budget
    starts = _even_groups(word_bytes, _fewest_groups(word_bytes, budget) if fits else n_words)
    cells = [min(hi * cells_per_word, n_features) - lo * cells_per_word for lo, hi in zip(starts, starts[1:])]
    shared = max(sum(word_bytes[lo:hi]) for lo, hi in zip(starts, starts[1:])) if fits else 0
    kernel = _kernel("histogram.cu", "build_histograms")
    if shared > 48 * 1024:  # the budget, not this plan's bytes: every plan of the device launches under it
        kernel.max_dynamic_shared_size_bytes = budget
    wave = _resident_blocks(kernel, _HISTOGRAM_BLOCK, shared, device)
    blocks = [max(1, min(wave * c // sum(cells), -(-n_rows * c // _MIN_CELLS_PER_HISTOGRAM_BLOCK))) for c in cells]
    group_blocks = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int32)
    return _HistogramPlan(cupy.asarray(np.asarray(starts, dtype=np.int32)), cupy.asarray(group_blocks),
                          int(group_blocks[-1]), shared)


def _fewest_groups(sizes: list[int], budget: int) -> int:
    """The fewest runs of consecutive ``sizes`` each summing to at most ``budget`` (each size fits)."""
    groups, run = 1, 0
    for size in sizes:
        if run + size > budget:
            groups, run = groups + 1, 0
        run += size
    return groups


def _even_groups(sizes: list[int], n_groups: int) -> list[int]:
    """Starts (and the end) of ``n_groups`` runs of consecutive ``sizes`` whose largest sum
    is least: the smallest bound that packs into ``n_groups``, found by bisection."""
    lo, hi = max(sizes), sum(sizes)
    while lo < hi:
        mid = (lo + hi) // 2
        if _fewest_groups(sizes, mid) <= n_groups:
            hi = mid
        else:
            lo = mid + 1
    starts, run = [0], 0
    for index, size in enumerate(sizes):
        if run + size > lo:
            starts.append(index)
            run = 0
        run += size
    return starts + [len(sizes)]


def _resident_blocks(kernel, threads: int, shared: int, device: int) -> int:
    """Blocks of ``kernel`` the whole device runs at once."""
    import cupy

    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, shared)
    return max(1, per_sm) * cupy.cuda.Device(device).attributes["MultiProcessorCount"]


def build_histograms(packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets,
                     gpair, scales, ridx, seg_begin, seg_end):
    import cupy

    device = cupy.cuda.Device().id
    bin_offsets = np.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE)
    n_bins_total = int(bin_offsets[-1])
    n_slots = int(seg_begin.shape[0])
    n_rows, n_words = packed.shape
    hist = cupy.zeros((n_slots, n_bins_total, 2), dtype=HIST_DTYPE)
    if n_rows == 0 or n_slots == 0 or n_bins_total == 0:
        return hist
    plan = _histogram_plan(bin_offsets.tobytes(), cells_per_word, n_words, n_rows, device)
    seg_cum = cupy.empty(n_slots + 1, dtype=INDEX_DTYPE)
    _kernel("histogram.cu", "segment_offsets")((1,), (_OFFSET_THREADS,),
                                               (_int32(seg_begin), _int32(seg_end), np.int32(n_slots), seg_cum))
    _kernel("histogram.cu", "build_histograms")(
        (plan.n_blocks,), (_HISTOGRAM_BLOCK,),
        (packed, np.int32(n_words), np.int32(bits), np.int32(cells_per_word), np.int32(n_features),
         np.int32(missing_symbol), _device_offsets(bin_offsets.tobytes(), device), plan.group_words,
         plan.group_blocks, cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE),
         cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE), _int32(ridx), _int32(seg_begin), seg_cum,
         np.int32(n_slots), np.int32(plan.shared > 0), hist, np.int64(n_bins_total)),
        shared_mem=plan.shared)
    return hist


def build_sparse_histograms(packed, bits, cells_per_word, row_stride, n_bins_total, gpair, scales, ridx, seg_begin,
                            seg_end):
    import cupy

    device = cupy.cuda.Device().id
    n_slots = int(seg_begin.shape[0])
    n_rows, n_words = packed.shape
    hist = cupy.zeros((n_slots, n_bins_total, 2), dtype=HIST_DTYPE)
    if n_rows == 0 or n_slots == 0 or n_bins_total == 0:
        return hist
    kernel = _kernel("histogram.cu", "build_sparse_histograms")
    budget = _shared_budget(device)
    shared = 2 * n_bins_total * np.dtype(HIST_DTYPE).itemsize
    shared = shared if shared <= budget else 0  # else every block adds into global memory
    if shared > 48 * 1024:
        kernel.max_dynamic_shared_size_bytes = budget
    wave = _resident_blocks(kernel, _HISTOGRAM_BLOCK, shared, device)
    n_blocks = max(1, min(wave, -(-n_rows * row_stride // _MIN_CELLS_PER_HISTOGRAM_BLOCK)))
    seg_cum = cupy.empty(n_slots + 1, dtype=INDEX_DTYPE)
    _kernel("histogram.cu", "segment_offsets")((1,), (_OFFSET_THREADS,),
                                               (_int32(seg_begin), _int32(seg_end), np.int32(n_slots), seg_cum))
    kernel((n_blocks,), (_HISTOGRAM_BLOCK,),
           (packed, np.int32(n_words), np.int32(bits), np.int32(cells_per_word),
            cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE), cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE),
            _int32(ridx), _int32(seg_begin), seg_cum, np.int32(n_slots), np.int32(shared > 0), hist,
            np.int64(n_bins_total)),
           shared_mem=shared)
    return hist


def _device_offsets(bin_offsets_bytes: bytes, device: int):
    return _device_constant(bin_offsets_bytes, np.dtype(BIN_OFFSET_DTYPE).str, device)


@functools.lru_cache(maxsize=64)
def _device_constant(data: bytes, dtype: str, device: int):
    """A small host array (its bytes and dtype) on ``device``, copied once: a copy from pageable
    host memory each launch would wait for the stream, so a level would wait for the host."""
    import cupy

    return cupy.asarray(np.frombuffer(data, dtype=dtype))


def evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules: Regularisation,
                    allowed=None, monotone=None, bounds=None, categories=None):
    import cupy

    n_nodes, n_bins_total, _ = hist.shape
    n_features = int(bin_offsets.shape[0]) - 1
    if categories is not None:  # the numeric scan leaves the categorical features out
        numeric = np.ones(n_features, dtype=bool)  # True for the features not categorical
        numeric[categories.features] = False
        numeric = _device_constant(numeric.tobytes(), numeric.dtype.str, cupy.cuda.Device().id)
        numeric_allowed = cupy.broadcast_to(numeric, (n_nodes, n_features)) if allowed is None \
            else cupy.asarray(allowed, dtype=bool) & numeric
        table = evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules, numeric_allowed,
                                monotone, bounds)
        return _category_splits(hist, node_sums, active, bin_offsets, scales, rules, allowed, categories, table)
    table = cupy.empty((n_nodes, len(SPLIT_TABLE_COLUMNS)), dtype=HIST_DTYPE)
    if n_nodes == 0:
        return table
    gain = cupy.empty((n_nodes, n_features), dtype=GAIN_DTYPE)
    candidate = cupy.empty((n_nodes, n_features), dtype=POSITION_DTYPE)
    left = cupy.empty((n_nodes, n_features, 2), dtype=HIST_DTYPE)
    offsets = cupy.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE)
    node_sums = cupy.ascontiguousarray(node_sums, dtype=HIST_DTYPE)
    allowed = _optional(allowed, bool)
    if n_features:
        rest = (cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE), np.float64(rules.reg_lambda),
                np.float64(rules.alpha), np.float64(rules.min_child_weight), np.float64(rules.max_delta_step),
                allowed, _optional(monotone, MONOTONE_DTYPE),
                _optional(None if monotone is None else bounds, GAIN_DTYPE), gain, candidate, left)
        if n_bins_total <= _WARP_BINS * n_features:  # few bins a feature: a warp each
            _kernel("split.cu", "evaluate_feature_splits_by_warp")(
                (_blocks(n_features, _SPLIT_BLOCK // 32), n_nodes), (_SPLIT_BLOCK,),
                (cupy.ascontiguousarray(hist), node_sums, offsets, np.int64(n_bins_total), np.int32(n_features),
                 *rest))
        else:
            _kernel("split.cu", "evaluate_feature_splits")(
                (n_features, n_nodes), (_SPLIT_BLOCK,),
                (cupy.ascontiguousarray(hist), node_sums, offsets, np.int64(n_bins_total), *rest))
    _kernel("split.cu", "choose_node_splits")(
        (n_nodes,), (_SPLIT_BLOCK,),
        (gain, candidate, left, node_sums, cupy.ascontiguousarray(active, dtype=bool), allowed, offsets,
         np.int32(n_features), np.int32(n_nodes), np.float64(rules.gamma), np.float64(MIN_SPLIT_GAIN), table))
    return table


def _category_splits(hist, node_sums, active, bin_offsets, scales, rules: Regularisation, allowed, categories,
                     numeric):
    """The split table of the numeric table ``numeric`` and the categorical features' best splits
    (split.cu's category_splits, a block a (node, categorical feature), then
    merge_category_splits), its category words after SPLIT_TABLE_COLUMNS."""
    import cupy

    n_nodes, n_bins_total, _ = hist.shape
    n_features = int(bin_offsets.shape[0]) - 1
    indices = np.ascontiguousarray(categories.features, dtype=POSITION_DTYPE)
    features = _device_constant(indices.tobytes(), indices.dtype.str, cupy.cuda.Device().id)
    n_categorical = int(features.shape[0])
    width = len(SPLIT_TABLE_COLUMNS) + categories.n_words
    table = cupy.empty((n_nodes, width), dtype=HIST_DTYPE)
    if n_nodes == 0:
        return table
    most = 64 * categories.n_words  # a feature's categories at most (no read of the offsets)
    n_items = n_nodes * n_categorical
    device = cupy.cuda.Device().id
    n_sort = 1 << max(most - 1, 1).bit_length()  # a power of two, >= most
    shared = n_sort * (np.dtype(GAIN_DTYPE).itemsize + np.dtype(POSITION_DTYPE).itemsize)
    kernel = _kernel("split.cu", "category_splits")
    if CATEGORY_SORT_IN_SHARED and shared + 64 <= _shared_optin(device):  # sorted in shared memory: no scratch
        if shared > 48 * 1024:
            kernel.max_dynamic_shared_size_bytes = shared
        scratch = 1
    else:
        n_sort, shared, scratch = 0, 0, most
    keys = cupy.empty((max(n_items, 1), scratch), dtype=GAIN_DTYPE)
    order = cupy.empty((max(n_items, 1), scratch), dtype=POSITION_DTYPE)
    found_gain = cupy.empty(max(n_items, 1), dtype=GAIN_DTYPE)
    found = cupy.empty((max(n_items, 1), 5), dtype=HIST_DTYPE)
    bits = cupy.empty((max(n_items, 1), categories.n_words), dtype=HIST_DTYPE)
    node_sums = cupy.ascontiguousarray(node_sums, dtype=HIST_DTYPE)
    if n_items:
        kernel(
            (n_items,), (_SPLIT_BLOCK,),
            (cupy.ascontiguousarray(hist, dtype=HIST_DTYPE), node_sums, cupy.ascontiguousarray(bin_offsets,
                                                                                           dtype=BIN_OFFSET_DTYPE),
             np.int64(n_bins_total), features, np.int32(n_categorical), cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE),
             np.float64(rules.reg_lambda), np.float64(rules.alpha), np.float64(rules.min_child_weight),
             np.float64(rules.max_delta_step), _optional(allowed, bool), np.int32(n_features),
             np.int32(categories.max_onehot), np.int32(categories.max_threshold), np.int32(scratch),
             np.int32(categories.n_words), keys, order, np.int32(n_sort), found_gain, found, bits),
            shared_mem=shared)
    _kernel("split.cu", "merge_category_splits")(
        (_blocks(n_nodes),), (_BLOCK,),
        (cupy.ascontiguousarray(numeric, dtype=HIST_DTYPE), features, np.int32(n_categorical), found_gain, found, bits,
         node_sums, cupy.ascontiguousarray(active, dtype=bool), np.int32(n_nodes), np.int32(categories.n_words),
         np.float64(rules.gamma), np.float64(MIN_SPLIT_GAIN), table))
    return table


def _table_columns(table):
    """A split table's SPLIT_TABLE_COLUMNS alone, contiguous: what kernels that read no category
    words take (their row stride is the columns')."""
    import cupy

    return cupy.ascontiguousarray(table[:, :len(SPLIT_TABLE_COLUMNS)], dtype=HIST_DTYPE)


def evaluate_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules: Regularisation,
                         allowed=None):
    import cupy

    # bin_offsets on the host, as the grower's matrix keeps them: the grid's shape needs them.
    host_offsets = np.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE)
    n_nodes, n_bins_total, _ = hist.shape
    n_features = len(host_offsets) - 1
    table = cupy.empty((n_nodes, len(SPLIT_TABLE_COLUMNS)), dtype=HIST_DTYPE)
    if n_nodes == 0:
        return table
    totals = cupy.full((n_bins_total, 2), -np.inf, dtype=GAIN_DTYPE)
    offsets = _device_offsets(host_offsets.tobytes(), cupy.cuda.Device().id)
    hist = cupy.ascontiguousarray(hist, dtype=HIST_DTYPE)
    node_sums = cupy.ascontiguousarray(node_sums, dtype=HIST_DTYPE)
    active = cupy.ascontiguousarray(active, dtype=bool)
    scales = cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE)
    regularisation = (np.float64(rules.reg_lambda), np.float64(rules.alpha), np.float64(rules.min_child_weight),
                      np.float64(rules.max_delta_step))
    widest = int(np.diff(host_offsets).max()) if n_features else 0
    by_warp = bool(n_features) and n_bins_total <= _WARP_BINS * n_features  # few bins a feature: a warp each
    if by_warp:
        _kernel("split.cu", "level_candidates_by_warp")(
            (_blocks(n_features, _SPLIT_BLOCK // 32),), (_SPLIT_BLOCK,),
            (hist, node_sums, active, offsets, np.int64(n_bins_total), np.int32(n_nodes), np.int32(n_features),
             scales, *regularisation, _optional(allowed, bool), totals))
    if n_features and widest > (32 if by_warp else 0):
        _kernel("split.cu", "level_candidates")(
            (n_features, _blocks(widest)), (_BLOCK,),
            (hist, node_sums, active, offsets, np.int64(n_bins_total), np.int32(n_nodes), scales, *regularisation,
             _optional(allowed, bool), np.int64(33 if by_warp else 0), totals))
    _kernel("split.cu", "level_table")(
        (1,), (_BLOCK,),
        (hist, node_sums, active, _int32(feature_of_bin), offsets, np.int64(n_bins_total), np.int32(n_nodes), scales,
         *regularisation, np.float64(rules.gamma), np.float64(MIN_SPLIT_GAIN), totals, table))
    return table


def _optional(array, dtype):
    """A kernel's optional array argument: contiguous of ``dtype`` on the device, or a null
    pointer for None."""
    import cupy

    return np.uintp(0) if array is None else cupy.ascontiguousarray(cupy.asarray(array), dtype=dtype)


def _pair_reduction(name: str, gpair, out, *extra):
    """Launch one of gradients.cu's grid-stride reductions of (n_rows, 2) float32 pairs into ``out``."""
    import cupy

    gpair = cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE)
    n_rows = int(gpair.shape[0])
    if n_rows:
        _kernel("gradients.cu", name)((min(_REDUCE_BLOCKS, _blocks(n_rows)),), (_BLOCK,),
                                      (gpair, np.int64(n_rows), *extra, out))
    return out


def gradient_bounds(gpair):
    import cupy

    bits = _pair_reduction("gradient_bounds", gpair, cupy.zeros(2, dtype=np.uint32))
    return bits.view(GRADIENT_DTYPE).astype(GAIN_DTYPE)


def gradient_sums(gpair, scales):
    import cupy

    return _pair_reduction("gradient_sums", gpair, cupy.zeros(2, dtype=HIST_DTYPE),
                           cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE))


def tree_record(node_sums, active, table, left_child, scales, rules: Regularisation, eta, bounds=None):
    import cupy

    n_ids = int(left_child.shape[0])
    record = cupy.empty((n_ids, _RECORD_WIDTH), dtype=GAIN_DTYPE)
    leaf_value = cupy.empty(n_ids, dtype=LEAF_DTYPE)
    if n_ids:
        _kernel("split.cu", "tree_record")(
            (_blocks(n_ids),), (_BLOCK,),
            (cupy.ascontiguousarray(node_sums, dtype=HIST_DTYPE), cupy.ascontiguousarray(active, dtype=bool),
             _table_columns(table), _int32(left_child),
             cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE), np.int32(n_ids), np.float64(rules.reg_lambda),
             np.float64(rules.alpha), np.float64(rules.min_child_weight), np.float64(rules.max_delta_step),
             np.float64(eta), _optional(bounds, GAIN_DTYPE), record, leaf_value))
    if table.shape[1] > len(SPLIT_TABLE_COLUMNS):  # category words, bit for bit after the columns
        words = cupy.ascontiguousarray(table[:, len(SPLIT_TABLE_COLUMNS):], dtype=HIST_DTYPE).view(GAIN_DTYPE)
        record = cupy.concatenate([record, words], axis=1)
    return record, leaf_value


def child_bounds(table, slot_of_rank, n_split, bounds, monotone, scales, rules: Regularisation):
    import cupy

    n_ranks = int(slot_of_rank.shape[0])
    child = cupy.empty((2 * n_ranks, 2), dtype=GAIN_DTYPE)
    if n_ranks:
        _kernel("split.cu", "child_bounds")(
            (_blocks(n_ranks),), (_BLOCK,),
            (_table_columns(table), _int32(slot_of_rank), _int32(cupy.asarray(n_split)),
             cupy.ascontiguousarray(bounds, dtype=GAIN_DTYPE), _optional(monotone, MONOTONE_DTYPE),
             cupy.ascontiguousarray(scales, dtype=GAIN_DTYPE), np.int32(n_ranks), np.float64(rules.reg_lambda),
             np.float64(rules.alpha), np.float64(rules.min_child_weight), np.float64(rules.max_delta_step), child))
    return child


def sample_magnitude_max(gpair, kind):
    import cupy

    gpair = cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE)
    n = int(gpair.shape[0])
    largest = cupy.zeros(1, dtype=GAIN_DTYPE)
    if n:
        _kernel("sampling.cu", "sample_magnitude_max")((min(_REDUCE_BLOCKS, _blocks(n)),), (_BLOCK,),
                                                       (gpair, np.int64(n), np.int32(kind), largest))
    return largest


def sample_keys(gpair, kind, largest):
    import cupy

    gpair = cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE)
    n = int(gpair.shape[0])
    keys = cupy.empty(n, dtype=INDEX_DTYPE)
    if n:
        _kernel("sampling.cu", "sample_keys")((_blocks(n),), (_BLOCK,),
                                              (gpair, np.int64(n), np.int32(kind),
                                               cupy.ascontiguousarray(largest, dtype=GAIN_DTYPE), keys))
    return keys


def sample_rows(gpair, global_index, key, kind, keys, threshold, largest, rate, weight, tree_at=None):
    import cupy

    n = int(global_index.shape[0])
    out = None if gpair is None else cupy.empty((n, 2), dtype=GRADIENT_DTYPE)
    drawn = cupy.empty(n, dtype=bool)
    if n:
        _kernel("sampling.cu", "sample_rows")(
            (_blocks(n),), (_BLOCK,),
            (_optional(gpair, GRADIENT_DTYPE), cupy.ascontiguousarray(global_index, dtype=INDEX_DTYPE), np.int64(n),
             np.uint64(key),
             np.int32(kind), _optional(keys, INDEX_DTYPE), _optional(threshold, INDEX_DTYPE),
             _optional(largest, GAIN_DTYPE), np.float64(rate), np.float64(weight),
             np.uintp(0) if out is None else out, drawn, _optional(tree_at, INDEX_DTYPE)))
    return out, drawn


def bucket_counts(keys, shift, bits, state):
    import cupy

    keys = cupy.ascontiguousarray(keys, dtype=INDEX_DTYPE)
    n = int(keys.shape[0])
    totals = cupy.zeros(2 << bits, dtype=INDEX_DTYPE)  # counts, then sums
    if n:
        _kernel("sampling.cu", "bucket_counts")(
            (min(_REDUCE_BLOCKS, _blocks(n)),), (_BLOCK,),
            (keys, np.int64(n), np.int32(shift), np.int32(bits), state, totals[:1 << bits], totals[1 << bits:]),
            shared_mem=(2 << bits) * 8)
    return totals[:1 << bits], totals[1 << bits:]


def choose_bucket(totals, state, shift, bits, rule):
    import cupy

    kind, least, high, low, denominator = (int(v) for v in rule)
    _kernel("sampling.cu", "choose_bucket")(
        (1,), (32,), (cupy.ascontiguousarray(totals, dtype=INDEX_DTYPE), state, np.int32(shift), np.int32(bits),
                      np.int32(kind), np.int64(least), np.int64(high), np.int64(low), np.int64(denominator)))
    return state


def number_children(table, start, n_parents):
    import cupy

    n_slots = int(table.shape[0])
    left_child = cupy.empty(n_slots, dtype=POSITION_DTYPE)
    slot_of_rank = cupy.empty(n_parents, dtype=POSITION_DTYPE)
    n_split = cupy.empty(1, dtype=POSITION_DTYPE)
    _kernel("frontier.cu", "number_children")(
        (1,), (_NUMBER_THREADS,),
        (_table_columns(table), np.int32(n_slots), np.int32(start), np.int32(n_parents),
         left_child, slot_of_rank, n_split))
    return left_child, slot_of_rank, n_split


def next_frontier(table, slot_of_rank, n_split, seg_begin, seg_end, n_left, n_rows):
    import cupy

    n_parents = int(slot_of_rank.shape[0])
    node_sums = cupy.empty((2 * n_parents, 2), dtype=HIST_DTYPE)
    active = cupy.empty(2 * n_parents, dtype=bool)
    begin, end = cupy.empty(2 * n_parents, dtype=POSITION_DTYPE), cupy.empty(2 * n_parents, dtype=POSITION_DTYPE)
    build_left = cupy.empty(n_parents, dtype=bool)
    build_begin = cupy.empty(n_parents, dtype=POSITION_DTYPE)
    build_end = cupy.empty(n_parents, dtype=POSITION_DTYPE)
    if n_parents:
        _kernel("frontier.cu", "next_frontier")(
            (_blocks(n_parents),), (_BLOCK,),
            (_table_columns(table), _int32(slot_of_rank), _int32(n_split),
             _int32(seg_begin), _int32(seg_end), _int32(n_left), np.int32(n_parents), np.int32(n_rows),
             node_sums, active, begin, end, build_left, build_begin, build_end))
    return node_sums, active, begin, end, build_left, build_begin, build_end


def sibling_histograms(hist, slot_of_rank, built, build_left):
    import cupy

    n_parents = int(built.shape[0])
    pair_size = int(np.prod(built.shape[1:]))
    children = cupy.empty((2 * n_parents, *built.shape[1:]), dtype=HIST_DTYPE)
    if children.size:
        _kernel("histogram.cu", "sibling_histograms")(
            (_blocks(n_parents * pair_size),), (_BLOCK,),
            (cupy.ascontiguousarray(hist, dtype=HIST_DTYPE), _int32(slot_of_rank),
             cupy.ascontiguousarray(built, dtype=HIST_DTYPE), cupy.ascontiguousarray(build_left, dtype=bool),
             np.int64(n_parents), np.int64(pair_size), children))
    return children


def gather_page_rows(rows, pages, starts, out, base=0):
    import cupy

    pages = tuple(pages)
    addresses, first = _page_table(tuple(int(page.data.ptr if isinstance(page, cupy.ndarray) else page.ctypes.data)
                                         for page in pages), tuple(int(s) for s in starts), cupy.cuda.Device().id)
    rows = cupy.ascontiguousarray(rows, dtype=cupy.int64)
    n, n_words = int(rows.shape[0]), int(out.shape[1])
    if n:
        _kernel("pages.cu", "gather_page_rows")((min(_blocks(n * n_words), 65535),), (_BLOCK,),
                                                 (addresses, first, np.int32(len(pages)), rows, np.int64(n),
                                                  np.int64(base), np.int32(n_words), out))
    return out


#: The most pages whose counts sample_counts keeps in a block's shared memory (32 KiB).
_MOST_SHARED_PAGES = 4094


def sample_sizes(drawn, gathered, likely, page_ends, limits):
    import cupy

    n, n_pages = int(drawn.shape[0]), int(page_ends.shape[0])
    totals = cupy.zeros(2 + n_pages, dtype=np.uint64)
    missed = None if gathered is None else cupy.empty(n, dtype=bool)
    shared = n_pages <= _MOST_SHARED_PAGES
    if n:
        _kernel("pages.cu", "sample_counts")(
            (min(_REDUCE_BLOCKS, _blocks(n)),), (_BLOCK,),
            (cupy.ascontiguousarray(drawn, dtype=bool), _optional(gathered, bool), _optional(likely, bool),
             np.int64(n), cupy.ascontiguousarray(page_ends, dtype=INDEX_DTYPE), np.int32(n_pages), np.int32(shared),
             np.uintp(0) if missed is None else missed, totals),
            shared_mem=(2 + n_pages if shared else 2) * 8)
    sizes = cupy.empty(7 + n_pages, dtype=INDEX_DTYPE)
    _kernel("pages.cu", "sample_sizes")((1,), (1,), (totals, np.int32(n_pages), *(np.int64(v) for v in limits), sizes))
    return sizes, missed


def fill_sample_page(gpair, drawn, guessed, missed, n_missed, pairs, page_drawn):
    import cupy

    capacity = int(page_drawn.shape[0])
    if capacity:
        _kernel("pages.cu", "fill_sample_page")(
            (_blocks(capacity),), (_BLOCK,),
            (cupy.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE), cupy.ascontiguousarray(drawn, dtype=bool),
             cupy.ascontiguousarray(guessed, dtype=INDEX_DTYPE), np.int64(guessed.shape[0]),
             cupy.ascontiguousarray(missed, dtype=INDEX_DTYPE), np.int64(missed.shape[0]),
             cupy.ascontiguousarray(n_missed, dtype=INDEX_DTYPE), np.int64(capacity), pairs, page_drawn))
    return pairs, page_drawn


@functools.lru_cache(maxsize=16)
def _page_table(addresses: tuple, starts: tuple, device: int):
    """The pages' addresses and first rows on the device, made once per paged matrix and pages
    left in its buffers (a few: which two a pass leaves there alternates), not for each
    sample (a copy now would wait for the device's queued work)."""
    import cupy

    return cupy.asarray(np.array(addresses, dtype=np.uint64)), cupy.asarray(np.array(starts[:-1], dtype=np.int64))


def add_leaf_values(margins, output, leaf_value, positions):
    import cupy

    _add_leaf_values()(_int32(positions), cupy.ascontiguousarray(leaf_value, dtype=LEAF_DTYPE), margins[:, output])
    return margins


@functools.lru_cache(maxsize=1)
def _add_leaf_values():
    """One float32 addition a row, as ``margins[:, output] += leaf_value[positions]`` makes it,
    in one launch with no row-sized temporary."""
    import cupy

    return cupy.ElementwiseKernel("int32 position, raw float32 leaf_value", "float32 margin",
                                  "margin += leaf_value[position]", "dgboost_add_leaf_values")


def partition_rows(packed, bits, cells_per_word, missing_symbol, ridx, seg_begin, seg_end, split_feature, split_bin,
                   default_left, left_child, feature_bins=None, categories=None):
    import cupy

    n_words = int(packed.shape[1])
    n_places = int(ridx.shape[0])  # every row, or a sample of them
    n_level = int(left_child.shape[0])
    ridx = _int32(ridx)
    new_ridx = cupy.empty_like(ridx)
    if not n_places:
        return new_ridx, cupy.zeros(n_level, dtype=POSITION_DTYPE)
    n_blocks = _blocks(n_places, _PARTITION_BLOCK)
    flags = cupy.empty(n_places, dtype=cupy.uint8)
    block_lefts = cupy.empty(n_blocks, dtype=POSITION_DTYPE)
    lefts_before = cupy.empty(n_blocks + 1, dtype=POSITION_DTYPE)  # partition_flags writes [0], the scan the rest
    seg_begin, seg_end, left_child = _int32(seg_begin), _int32(seg_end), _int32(left_child)
    _kernel("partition.cu", "partition_flags")(
        (n_blocks,), (_PARTITION_BLOCK,),
        (packed, np.int32(n_words), np.int32(bits), np.int32(cells_per_word), np.int32(missing_symbol),
         _optional(feature_bins, BIN_OFFSET_DTYPE), ridx, np.int32(n_places), np.int32(n_level), seg_begin,
         seg_end, _int32(split_feature), _int32(split_bin), cupy.ascontiguousarray(default_left, dtype=bool),
         left_child, *_category_words(categories), flags, block_lefts, lefts_before))
    cupy.cumsum(block_lefts, out=lefts_before[1:])
    base = cupy.empty(n_level, dtype=POSITION_DTYPE)
    n_left = cupy.empty(n_level, dtype=POSITION_DTYPE)
    if n_level:
        _kernel("partition.cu", "segment_lefts")((_blocks(n_level),), (_BLOCK,),
                                                 (flags, lefts_before, seg_begin, seg_end, np.int32(n_level), base,
                                                  n_left))
    _kernel("partition.cu", "partition_scatter")(
        (n_blocks,), (_PARTITION_BLOCK,),
        (ridx, flags, lefts_before, np.int32(n_places), np.int32(n_level), seg_begin, seg_end, left_child,
         base, n_left, new_ridx))
    return new_ridx, n_left


def mask_indices(mask, count, fill=None):
    import cupy

    # the true entries up to each, itself included (in int32 where they fit: half the bytes)
    before = cupy.cumsum(mask, dtype=cupy.int32 if mask.shape[0] < 2**31 else cupy.int64)
    out = cupy.empty(int(count), dtype=cupy.int64) if fill is None else cupy.full(int(count), fill, dtype=cupy.int64)
    if count:
        _mask_indices()(mask, before, np.int64(count), out)
    return out


@functools.lru_cache(maxsize=1)
def _mask_indices():
    import cupy

    return cupy.ElementwiseKernel("bool keep, T before, int64 count", "raw int64 out",
                                  "if (keep && before <= count) out[before - 1] = i", "dgboost_mask_indices")


def rows_drawn_first(drawn):
    import cupy

    n_rows = drawn.shape[0]
    drawn = drawn.astype(POSITION_DTYPE)
    before = cupy.cumsum(drawn, dtype=POSITION_DTYPE) - drawn  # rows drawn before each row
    root_end = (before[-1:] + drawn[-1:]) if n_rows else cupy.zeros(1, dtype=POSITION_DTYPE)
    rows = cupy.arange(n_rows, dtype=POSITION_DTYPE)
    ridx = cupy.empty(n_rows, dtype=POSITION_DTYPE)
    ridx[cupy.where(drawn != 0, before, root_end + rows - before)] = rows  # the others after, in order
    return ridx, root_end


def place_rows(ridx, begin, end, node, positions):
    import cupy

    n_ranges = int(node.shape[0])
    if isinstance(begin, np.ndarray):  # host ranges: one copy over
        longest = int((end - begin).max()) if n_ranges else 0
        if longest <= 0:
            return positions
        from ..backend import asarray

        begin, end, node = asarray(cupy, np.stack([begin, end, node]), POSITION_DTYPE)
    else:  # the device's (no read): an even share of the places a range, longer ones strided over
        longest = -(-int(ridx.shape[0]) // max(n_ranges, 1))
    if n_ranges and longest > 0:
        _kernel("partition.cu", "place_rows")((min(_blocks(longest), 1024), min(n_ranges, 65535)), (_BLOCK,),
                                              (_int32(ridx), _int32(begin), _int32(end), _int32(node),
                                               np.int32(n_ranges), positions))
    return positions


def route_rows(packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left,
               left_child, depth, feature_bins=None, categories=None, out=None):
    import cupy

    n_rows, n_words = packed.shape
    leaf = cupy.empty(n_rows, dtype=POSITION_DTYPE) if out is None else out
    if n_rows:
        _kernel("partition.cu", "route_rows")(
            (_blocks(n_rows),), (_BLOCK,),
            (packed, np.int32(n_rows), np.int32(n_words), np.int32(bits), np.int32(cells_per_word),
             np.int32(missing_symbol), _optional(feature_bins, BIN_OFFSET_DTYPE), _int32(split_feature),
             _int32(split_bin), cupy.ascontiguousarray(default_left, dtype=bool), _int32(left_child),
             *_category_words(categories), np.int32(depth), leaf))
    return leaf


def _category_words(categories):
    """A kernel's category-set arguments: the (n, n_words) uint32 words and n_words, or a null
    pointer and 0."""
    import cupy

    if categories is None:
        return np.uintp(0), np.int32(0)
    return cupy.ascontiguousarray(categories, dtype=np.uint32), np.int32(categories.shape[1])


def predict_margins(X, left, right, feature, threshold, default_left, value, roots, outputs, depth,
                    margins, category_row=None, category_words=None, walk=None):
    """cpu.predict_margins on the device (``walk``, the host's walk table, is not read: the
    records below are the device's)."""
    import cupy

    n_rows = int(X.shape[0])
    n_trees = int(roots.shape[0])
    if n_rows == 0 or n_trees == 0:
        return margins
    if not (margins.flags.c_contiguous and margins.dtype == MARGIN_DTYPE):
        raise ValueError("margins must be a C-contiguous float32 array (it is updated in place)")
    # One 16-byte record a node (see predict.cu); the right child is always left + 1.
    split = _int32(feature) | (cupy.asarray(default_left, dtype=POSITION_DTYPE) << 31)
    condition = cupy.ascontiguousarray(threshold, dtype=CUT_DTYPE).view(POSITION_DTYPE)
    if category_row is not None:  # a category-set split: bit 30, and its set's row for a threshold
        by_set = _int32(category_row) >= 0
        split = cupy.where(by_set, split | (1 << 30), split)
        condition = cupy.where(by_set, _int32(category_row), condition)
    nodes = cupy.stack([_int32(left), split, condition,
                        cupy.ascontiguousarray(value, dtype=MARGIN_DTYPE).view(POSITION_DTYPE)], axis=1)
    _predict_rows("predict_margins", X, (nodes, _int32(roots), _int32(outputs), np.int32(n_trees),
                                         np.int32(margins.shape[1]), margins, *_category_words(category_words)))
    return margins


def predict_oblivious(X, level_feature, level_threshold, level_default_left, leaf_value, outputs, depth, margins):
    import cupy

    n_rows = int(X.shape[0])
    n_trees = int(level_feature.shape[0])
    if n_rows == 0 or n_trees == 0:
        return margins
    if not (margins.flags.c_contiguous and margins.dtype == MARGIN_DTYPE):
        raise ValueError("margins must be a C-contiguous float32 array (it is updated in place)")
    # One 8-byte record a level (see predict.cu): feature | default_left << 31, threshold bits.
    levels = cupy.stack([_int32(level_feature) | (cupy.asarray(level_default_left, dtype=POSITION_DTYPE) << 31),
                         cupy.ascontiguousarray(level_threshold, dtype=CUT_DTYPE).view(POSITION_DTYPE)], axis=-1)
    _predict_rows("predict_oblivious", X, (levels, cupy.ascontiguousarray(leaf_value, dtype=LEAF_DTYPE),
                                           _int32(outputs), np.int32(n_trees), np.int32(depth),
                                           np.int32(margins.shape[1]), margins))
    return margins


def _predict_rows(kernel, X, forest):
    """Launch predict.cu's ``kernel`` over the rows of X: its ``_staged`` form, which copies a
    block's rows into shared memory first, where they fit there, else the plain one; its
    ``_csr`` form for a cupyx CSR matrix."""
    import cupy

    if hasattr(X, "indptr"):
        n_rows = int(X.shape[0])
        _kernel("predict.cu", f"{kernel}_csr")(
            (_blocks(n_rows),), (_BLOCK,),
            (cupy.ascontiguousarray(X.data, dtype=CUT_DTYPE), cupy.ascontiguousarray(X.indices, dtype=COLUMN_INDEX_DTYPE),
             cupy.ascontiguousarray(X.indptr, dtype=ROW_POINTER_DTYPE), np.int64(n_rows), *forest))
        return
    X = cupy.ascontiguousarray(X, dtype=CUT_DTYPE)
    n_rows, n_features = (int(n) for n in X.shape)
    stride = n_features | 1  # odd: a warp's rows start in distinct shared-memory banks
    shared = _PREDICT_BLOCK * stride * np.dtype(CUT_DTYPE).itemsize
    if shared <= _PREDICT_STAGED_BYTES:
        _kernel("predict.cu", f"{kernel}_staged")(
            (_blocks(n_rows, _PREDICT_BLOCK),), (_PREDICT_BLOCK,),
            (X, np.int64(n_rows), np.int32(n_features), np.int32(stride), *forest), shared_mem=shared)
    else:
        _kernel("predict.cu", kernel)((_blocks(n_rows),), (_BLOCK,), (X, np.int64(n_rows), np.int32(n_features),
                                                                      *forest))


def _int32(array):
    import cupy

    return cupy.ascontiguousarray(array, dtype=POSITION_DTYPE)


# ---- learning to rank (ranking.cu) ---------------------------------------------------------

#: Threads per block of lambda_gradients (a block a query group).
_RANK_BLOCK = 128


def group_order(key, group_of_row):
    from .cpu import group_order as order_on_any_device  # an array program: cupy's stable sorts

    return order_on_any_device(key, group_of_row)


def lambda_gradients(group_ptr, order, score, label, kind, top_k, exp_gain, score_normalization, normalization,
                     inv_ideal, discount, partners, group_scale, t_plus=None, t_minus=None):
    import cupy

    n_rows, n_groups = int(score.shape[0]), int(group_ptr.shape[0]) - 1
    gpair = cupy.zeros((n_rows, 2), dtype=GRADIENT_DTYPE)
    unbiased = t_plus is not None
    costs = cupy.zeros((n_rows if unbiased else 0, 2), dtype=GAIN_DTYPE)
    if n_groups == 0:
        return (gpair, costs) if unbiased else gpair
    scratch = cupy.empty((3, n_rows), dtype=GAIN_DTYPE)
    none = cupy.zeros(1, dtype=INDEX_DTYPE)
    place, ptr, rows, n_draws = (none, none, none, 0) if partners is None else \
        (*(cupy.ascontiguousarray(a, dtype=INDEX_DTYPE) for a in partners[:3]), partners[3])
    no_bias = cupy.zeros(1, dtype=GAIN_DTYPE)
    t_plus = no_bias if t_plus is None else cupy.ascontiguousarray(t_plus, dtype=GAIN_DTYPE)
    t_minus = no_bias if t_minus is None else cupy.ascontiguousarray(t_minus, dtype=GAIN_DTYPE)
    _kernel("ranking.cu", "lambda_gradients")(
        (n_groups,), (_RANK_BLOCK,),
        (cupy.ascontiguousarray(group_ptr, dtype=INDEX_DTYPE), cupy.ascontiguousarray(order, dtype=INDEX_DTYPE),
         cupy.ascontiguousarray(score, dtype=GRADIENT_DTYPE), cupy.ascontiguousarray(label, dtype=GRADIENT_DTYPE),
         np.int32(kind), np.int64(top_k), np.bool_(exp_gain), np.bool_(score_normalization), np.bool_(normalization),
         cupy.ascontiguousarray(inv_ideal, dtype=GAIN_DTYPE), cupy.ascontiguousarray(discount, dtype=GAIN_DTYPE),
         place, ptr, rows, np.bool_(partners is None), np.int32(n_draws),
         cupy.ascontiguousarray(group_scale, dtype=GAIN_DTYPE),
         t_plus, t_minus, np.int64(t_plus.shape[0] if unbiased else 0), scratch[0], scratch[1], scratch[2], gpair,
         costs))
    return (gpair, costs) if unbiased else gpair


def rank_scores(group_ptr, metric, order, ideal, label, top_k, exp_gain, minus, discount):
    import cupy

    n_groups = int(group_ptr.shape[0]) - 1
    scores = cupy.empty(n_groups, dtype=GAIN_DTYPE)
    if n_groups:
        _kernel("ranking.cu", "rank_scores")(
            (_blocks(n_groups),), (_BLOCK,),
            (np.int32(metric), cupy.ascontiguousarray(group_ptr, dtype=INDEX_DTYPE), np.int64(n_groups),
             cupy.ascontiguousarray(order, dtype=INDEX_DTYPE), cupy.ascontiguousarray(ideal, dtype=INDEX_DTYPE),
             cupy.ascontiguousarray(label, dtype=GRADIENT_DTYPE), np.int64(top_k), np.bool_(exp_gain),
             np.bool_(minus), cupy.ascontiguousarray(discount, dtype=GAIN_DTYPE), scores))
    return scores
