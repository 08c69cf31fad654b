"""The CPU implementation of every kernel: the twins against which CUDA kernels are tested.

The hot kernels run compiled loops (``loops.py``, numba) over NumPy arrays, on
every core; they take NumPy arrays only, since cupy arrays go to their CUDA
twins. The others are still array programs written against the array module
of their inputs (the issue of the fast CPU path moves them to compiled loops
one by one), so until a kernel has a CUDA version the same code runs on cupy
arrays too. Integer results (bins, histograms, positions) are exact; float
results follow one fixed order of IEEE operations, each a separate operation,
so cupy (which fuses nothing here) and the compiled loops (no fastmath) compute
the same bits as NumPy wherever no transcendental function is involved.
"""

from __future__ import annotations

import math
import sys
import threading
from typing import NamedTuple

import numpy as np

from .._dtypes import (BIN_DTYPE, BIN_OFFSET_DTYPE, CELL_VIEW_DTYPES, COLUMN_INDEX_DTYPE, CUT_DTYPE, GAIN_DTYPE,
                       GRADIENT_DTYPE, HIST_DTYPE, INDEX_DTYPE, LEAF_DTYPE, MONOTONE_DTYPE, PACKED_WORD_DTYPE,
                       POSITION_DTYPE, ROW_INDEX_DTYPE, ROW_POINTER_DTYPE)
from ..backend import get_xp
from . import loops, rank_loops, split_loops

#: The fewest rows a thread of a loop over rows takes (_threads_for).
_ROWS_PER_THREAD = 1 << 10

#: The fewest columns (bins of the runs' partial histograms) a thread of loops.add_partials adds.
_PARTIAL_COLUMNS_PER_THREAD = 1 << 13

#: The fewest split candidates (nodes x bins) a thread of evaluate_splits scores.
_CANDIDATES_PER_THREAD = 1 << 10


#: The largest temporary (bytes) a thread keeps from call to call (_kept).
_KEPT_BYTES = 1 << 26

_kept_buffers = threading.local()


def _kept(name: str, shape, dtype):
    """An uninitialised array for the kernels' temporary ``name``, kept by the calling thread
    from call to call (up to _KEPT_BYTES), so that its pages stay mapped: fresh megabytes
    each level (the histograms' partials) cost 16 threads more in page faults than in
    work. Never returned: the caller uses it within one kernel call."""
    dtype = np.dtype(dtype)
    size = math.prod(shape)  # not np.prod: a level of small nodes calls this twice, np.prod costs 5 us
    if size * dtype.itemsize > _KEPT_BYTES:
        return np.empty(shape, dtype=dtype)
    buffers = _kept_buffers.__dict__
    buffer = buffers.get(name)
    if buffer is None or buffer.dtype != dtype or buffer.size < size:
        buffer = buffers[name] = np.empty(size, dtype=dtype)
    return buffer[:size].reshape(shape)


def _threads_for(n_rows: int) -> int:
    """Threads for a loop over ``n_rows`` rows: the set count (loops.threads), fewer where
    rows are few, so that each thread's share outweighs waking it (some microseconds)."""
    return max(1, min(loops.threads(), n_rows // _ROWS_PER_THREAD))


#: Splits that gain no more than this are not made (XGBoost's kRtEps).
MIN_SPLIT_GAIN = 1e-6

#: The columns of a split table (evaluate_splits), one int64 row per node: the
#: whole table crosses a collective as one array.
SPLIT_TABLE_COLUMNS = ("valid", "feature", "bin", "default_left", "gain_bits",
                       "left_gradient", "left_hessian", "right_gradient", "right_hessian")


class CategorySplits(NamedTuple):
    """What split evaluation needs of the categorical features (data/categories.py): their
    indices (int32, ascending), XGBoost's ``max_cat_to_onehot`` and ``max_cat_threshold``, and
    the int64 words of category bits a split table row carries after SPLIT_TABLE_COLUMNS (bit
    ``c % 64`` of word ``c // 64``: category ``c`` goes right)."""

    features: np.ndarray
    max_onehot: int
    max_threshold: int
    n_words: int


#: Columns of a finished tree's per-node record (tree_record), float64, read by the
#: host once per tree (tree.Tree.from_record).
RECORD_COLUMNS = ("active", "valid", "feature", "bin", "default_left", "left_child",
                  "gain", "cover", "value")


class Regularisation(NamedTuple):
    """The parameters of the regularised gain and leaf weight."""

    reg_lambda: float
    alpha: float
    min_child_weight: float
    max_delta_step: float
    gamma: float


def quantise_and_pack(X, cut_values, cut_offsets, bits, cells_per_word, n_words, missing_symbol):
    """Bin ids of ``X``'s cells, bit-packed.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32; NaN is missing
    cut_values : array of shape (n_cuts_total,), float32, on X's device
    cut_offsets : sequence of n_features + 1 ints, on the host
    bits, cells_per_word, n_words, missing_symbol : int

    Returns
    -------
    packed : array of shape (n_rows, n_words), uint32, on X's device
    """
    X = np.ascontiguousarray(X, dtype=CUT_DTYPE)
    packed = np.empty((X.shape[0], n_words), dtype=PACKED_WORD_DTYPE)
    arguments = (X, np.ascontiguousarray(cut_values, dtype=CUT_DTYPE), np.asarray(cut_offsets, dtype=BIN_OFFSET_DTYPE),
                 bits, cells_per_word, missing_symbol)
    loops.quantise(_threads_for(X.shape[0]), *arguments, packed)
    return packed


def quantise_sparse(data, indices, indptr, cut_values, cut_offsets, bin_offsets, bits, cells_per_word, n_words,
                    symbol, global_bins):
    """Bin ids of a CSR matrix's entries, bit-packed in dense or sparse rows.

    Dense rows (``global_bins`` False): cell ``f`` of a row holds feature ``f``'s bin
    (as quantise_and_pack's), ``symbol`` (missing) where the row has no entry of it.
    Sparse rows (``global_bins`` True): cell ``k`` holds the row's ``k``-th entry's
    global bin, ``bin_offsets[f] + bin``, ascending as the entries' features are,
    then ``symbol`` (null, the total of bins) to the row's last cell.

    Parameters
    ----------
    data : array of shape (nnz,), float32: no NaN                        # IN
    indices : array of shape (nnz,), int: each entry's feature, ascending within a row   # IN
    indptr : array of shape (n_rows + 1,), int                             # IN
    cut_values : array of shape (n_cuts_total,), float32, on data's device   # IN
    cut_offsets, bin_offsets : sequences of n_features + 1 ints, on the host   # IN
    bits, cells_per_word, n_words, symbol : int
    global_bins : bool

    Returns
    -------
    packed : array of shape (n_rows, n_words), uint32, on data's device
    """
    n_rows = int(indptr.shape[0]) - 1
    packed = np.empty((n_rows, n_words), dtype=PACKED_WORD_DTYPE)
    if n_rows:
        loops.quantise_rows(_threads_for(n_rows), np.ascontiguousarray(data, dtype=CUT_DTYPE),
                            np.ascontiguousarray(indices, dtype=COLUMN_INDEX_DTYPE),
                            np.ascontiguousarray(indptr, dtype=ROW_POINTER_DTYPE),
                            np.ascontiguousarray(cut_values, dtype=CUT_DTYPE),
                            np.asarray(cut_offsets, dtype=BIN_OFFSET_DTYPE), np.asarray(bin_offsets, dtype=BIN_OFFSET_DTYPE),
                            bits, cells_per_word, symbol, bool(global_bins), packed)
    return packed


def most_present(X):
    """The most present (not NaN) values of any row of the dense ``X`` (n_rows, n_features), float32: int."""
    n_rows = int(X.shape[0])
    if not n_rows:
        return 0
    n_runs = _threads_for(n_rows)
    most = np.zeros(n_runs, dtype=INDEX_DTYPE)
    loops.most_present(n_runs, np.ascontiguousarray(X, dtype=CUT_DTYPE), most)
    return int(most.max())


#: Cells first_infinite looks at a time: bounds its temporary mask.
_INFINITE_CHUNK_CELLS = 1 << 24


def first_infinite(X):
    """Where the first infinite value of ``X`` is, in row-major order.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32, C-contiguous     # IN

    Returns
    -------
    int: the flat index ``row * n_features + column`` of the first +inf or -inf, or -1.

    The cells in chunks of _INFINITE_CHUNK_CELLS (bounding the temporary mask), the chunks
    shared by the host's threads (NumPy's passes release the GIL): the least index found.
    """
    xp = get_xp(X)
    flat = X.reshape(-1)

    def first_in(chunk: int) -> int:
        begin = chunk * _INFINITE_CHUNK_CELLS
        infinite = xp.isinf(flat[begin:begin + _INFINITE_CHUNK_CELLS])
        return begin + int(xp.argmax(infinite)) if bool(infinite.any()) else -1

    n_chunks = -(-int(flat.shape[0]) // _INFINITE_CHUNK_CELLS)
    found = [index for index in loops.on_host_threads(first_in, n_chunks, loops.threads()) if index >= 0]
    return min(found, default=-1)


def unpack(packed, bits, cells_per_word, n_features):
    """Bin ids from packed words: (n_rows, n_features) int32."""
    xp = get_xp(packed)
    if bits in (8, 16) and sys.byteorder == "little":
        # Byte-aligned cells of little-endian words sit in memory in cell order.
        cells = xp.ascontiguousarray(packed).view(CELL_VIEW_DTYPES[bits])
        return cells[:, :n_features].astype(BIN_DTYPE)
    shifts = xp.arange(cells_per_word, dtype=PACKED_WORD_DTYPE) * PACKED_WORD_DTYPE(bits)
    mask = PACKED_WORD_DTYPE((1 << bits) - 1)
    cells = (packed[:, :, None] >> shifts) & mask
    return cells.reshape(packed.shape[0], -1)[:, :n_features].astype(BIN_DTYPE)


def build_histograms(packed, bits, cells_per_word, n_features, missing_symbol, bin_offsets,
                     gpair, scales, ridx, seg_begin, seg_end):
    """Fixed-point gradient histograms of the rows of each slot, from dense rows.

    Slot ``s`` holds the rows ``ridx[seg_begin[s]:seg_end[s]]``:
    ``hist[s, bin_offsets[f] + bin(r, f)] += to_fixed(gpair[r], scales)`` for each of
    them and every feature ``f`` whose cell is not missing. Compiled (loops.histograms),
    on every thread of ``loops.threads()``; the sums are exact integers, so the thread
    count does not change them.

    Parameters
    ----------
    packed : array of shape (n_rows, n_words), uint32                 # IN
    bin_offsets : numpy array of shape (n_features + 1,), int64, on the host   # IN
    gpair : array of shape (n_rows, 2), float32 (gradient, hessian)      # IN
    scales : array of shape (2,), float64: fixed_point scales of the two columns   # IN
    ridx : array of shape (n_rows,), int32: rows grouped by node          # IN
    seg_begin, seg_end : arrays of shape (n_slots,), int32: each slot's range of ridx   # IN

    Returns
    -------
    hist : array of shape (n_slots, bin_offsets[-1], 2), int64        # OUT
    """
    n_slots, n_bins_total = int(seg_begin.shape[0]), int(bin_offsets[-1])
    if not (n_slots and n_bins_total and packed.shape[0]):
        return np.zeros((n_slots, n_bins_total, 2), dtype=HIST_DTYPE)
    hist = np.empty((n_slots, n_bins_total, 2), dtype=HIST_DTYPE)
    seg_begin = np.ascontiguousarray(seg_begin, dtype=POSITION_DTYPE)
    seg_end = np.ascontiguousarray(seg_end, dtype=POSITION_DTYPE)
    n_runs = _threads_for(int((seg_end - seg_begin).sum()))
    plan = run_plan(seg_begin, seg_end, n_runs)
    partials = _kept("partials", (2 * n_runs, n_bins_total, 2), HIST_DTYPE)  # of the slots runs share
    loops.histograms(n_runs, _cells(packed, bits), packed, bits, cells_per_word, n_features, missing_symbol,
                     np.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE),
                     np.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE), np.ascontiguousarray(scales, dtype=GAIN_DTYPE),
                     np.ascontiguousarray(ridx, dtype=POSITION_DTYPE), seg_begin, *plan, hist.reshape(n_slots, -1),
                     partials.reshape(partials.shape[0], -1))
    n_shares = max(1, min(loops.threads(), n_runs * n_bins_total // _PARTIAL_COLUMNS_PER_THREAD))
    loops.add_partials(n_shares, partials.reshape(partials.shape[0], -1), *plan, hist.reshape(n_slots, -1))
    return hist


def build_sparse_histograms(packed, bits, cells_per_word, row_stride, n_bins_total, gpair, scales, ridx, seg_begin,
                            seg_end):
    """build_histograms of sparse rows: each cell of a row holds a global bin (the null
    symbol, ``n_bins_total``, past its entries), so
    ``hist[s, cell] += to_fixed(gpair[r], scales)`` for every cell of each of slot ``s``'s
    rows that is not null. The same loops as dense rows', every cell's bins starting at 0.

    Parameters
    ----------
    packed : array of shape (n_rows, n_words), uint32                 # IN
    row_stride : int: cells a row                                      # IN
    n_bins_total : int: bins of all features (the null symbol)        # IN
    gpair, scales, ridx, seg_begin, seg_end : as build_histograms      # IN

    Returns
    -------
    hist : array of shape (n_slots, n_bins_total, 2), int64        # OUT
    """
    cell_offsets = np.zeros(row_stride + 1, dtype=BIN_OFFSET_DTYPE)
    cell_offsets[-1] = n_bins_total
    return build_histograms(packed, bits, cells_per_word, row_stride, n_bins_total, cell_offsets, gpair, scales, ridx,
                            seg_begin, seg_end)


def run_plan(seg_begin, seg_end, n_runs):
    """The slots' rows (``seg_begin`` to ``seg_end``, int32 arrays of shape (n_slots,)) cut into
    ``n_runs`` equal runs: ``(starts, touches, first_slot, n_run_slots, partial)``, int64
    arrays of shapes (n_slots + 1,), (n_slots,), (n_runs,), (n_runs,) and (n_runs, 2)
    (see loops.run_plan)."""
    n_slots = seg_begin.shape[0]
    plan = (np.empty(n_slots + 1, dtype=INDEX_DTYPE), np.empty(n_slots, dtype=INDEX_DTYPE),
            np.empty(n_runs, dtype=INDEX_DTYPE), np.empty(n_runs, dtype=INDEX_DTYPE),
            np.empty((n_runs, 2), dtype=INDEX_DTYPE))
    loops.run_plan(seg_begin, seg_end, *plan)
    return plan


def _cells(packed, bits):
    """The packed words viewed as one uint8 or uint16 a cell where cells are whole bytes, else None:
    whole-byte cells of little-endian words sit in memory in cell order."""
    return packed.view(CELL_VIEW_DTYPES[bits]) if bits in CELL_VIEW_DTYPES and sys.byteorder == "little" else None


def node_weights(sum_gradient, sum_hessian, rules: Regularisation):
    """Optimal leaf weights ``-T(G) / (H + lambda)``, clipped to max_delta_step.

    ``T`` is soft thresholding by alpha. Nodes below min_child_weight (or with no
    hessian) weigh 0. Inputs and output: float64 arrays of one shape.
    split_loops._node_gain's clipped weight is the same float operations: change both together.
    """
    xp = get_xp(sum_gradient)
    weight = -_soft_threshold(sum_gradient, rules.alpha) / _denominator(sum_hessian, rules)
    if rules.max_delta_step > 0:
        weight = xp.clip(weight, -rules.max_delta_step, rules.max_delta_step)
    return xp.where(_too_light(sum_hessian, rules), 0.0, weight)


def node_gains(sum_gradient, sum_hessian, rules: Regularisation):
    """Twice the loss reduction of a node at its optimal weight (XGBoost's "gain").

    Without max_delta_step: ``T(G)**2 / (H + lambda)``. With it, the weight may be
    clipped, so the gain is evaluated at that weight:
    ``-(2 G w + (H + lambda) w**2 + 2 alpha |w|)``; both agree when no clipping occurs.
    split_loops._node_gain is the same float operations for one node (split evaluation):
    change both together.
    """
    xp = get_xp(sum_gradient)
    if rules.max_delta_step > 0:
        weight = node_weights(sum_gradient, sum_hessian, rules)
        gain = -(2.0 * sum_gradient * weight + (sum_hessian + rules.reg_lambda) * (weight * weight)
                 + 2.0 * rules.alpha * xp.abs(weight))
    else:
        thresholded = _soft_threshold(sum_gradient, rules.alpha)
        gain = (thresholded * thresholded) / _denominator(sum_hessian, rules)
    return xp.where(_too_light(sum_hessian, rules), 0.0, gain)


def _too_light(sum_hessian, rules):
    return (sum_hessian < rules.min_child_weight) | (sum_hessian <= 0)


def _denominator(sum_hessian, rules):
    """``H + lambda``, with 1 where it is 0 (such nodes are masked by _too_light)."""
    xp = get_xp(sum_hessian)
    denominator = sum_hessian + rules.reg_lambda
    return xp.where(denominator > 0, denominator, 1.0)


def _soft_threshold(g, alpha):
    if alpha == 0:
        return g
    xp = get_xp(g)
    return xp.sign(g) * xp.maximum(xp.abs(g) - alpha, 0.0)


def evaluate_splits(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules: Regularisation,
                    allowed=None, monotone=None, bounds=None, categories: CategorySplits | None = None):
    """The best split of every node of a level, as a split table.

    For each node, feature and bin ``b`` two candidates are scored: missing values
    sent left (``default_left``) or right, with bins ``<= b`` left. The best is the
    largest gain; ties go to the lowest feature, then the lowest bin, then missing
    right (XGBoost's choice where a node has no missing values). A split is made
    only if its gain exceeds MIN_SPLIT_GAIN and gamma, and both children have
    hessian > 0 and >= min_child_weight. Compiled (split_loops.splits), the nodes, and
    groups of each node's features where nodes are fewer than threads, spread over
    the threads of ``loops.threads()``; the groups' best are taken in feature order,
    so the thread count does not change a node's row. The gains are the float
    operations of node_gains, one by one, in float64 (as the CUDA twin's).

    ``allowed`` limits each node to some features (column sampling, interaction
    constraints). ``monotone`` constrains features to increasing (1) or decreasing (-1)
    splits, XGBoost's way: with it, every candidate is scored at its children's
    weights clipped to the node's ``bounds``, and one whose weights go against its
    feature's direction is not allowed.

    Parameters
    ----------
    hist : array of shape (n_nodes, n_bins_total, 2), int64     # IN, n_bins_total > 0
    node_sums : array of shape (n_nodes, 2), int64                # IN, each node's totals
    active : array of shape (n_nodes,), bool                      # IN, padding slots are False
    feature_of_bin : array of shape (n_bins_total,), int32        # IN
    bin_offsets : array of shape (n_features + 1,), int64         # IN
    scales : array of shape (2,), float64                         # IN, fixed-point scales (g, h)
    allowed : array of shape (n_nodes, n_features), bool, or None (every feature)   # IN
    monotone : array of shape (n_features,), int8 in {-1, 0, 1}, or None   # IN
    bounds : array of shape (n_nodes, 2), float64: each node's (lower, upper) weight bound,
        or None (unbounded); read only with ``monotone``             # IN
    categories : CategorySplits, or None: the categorical features, whose bins are their
        categories. Each is scored by the sets of categories it may send right
        (split_loops._category_best: one category against the rest below ``max_onehot``
        categories, else prefixes of the categories ordered by weight, XGBoost's partition
        scan), with missing values right, then left; a node takes the first largest gain of
        its numeric and categorical features in feature order. A category-set split has bin
        -1 and its set in the words after SPLIT_TABLE_COLUMNS (monotone constraints do not
        apply to these features).     # IN

    Returns
    -------
    array of shape (n_nodes, len(SPLIT_TABLE_COLUMNS) + n_words), int64, n_words that of
    ``categories`` (0 without)     # OUT
        One row per node, columns as SPLIT_TABLE_COLUMNS names them: ``valid``
        and ``default_left`` are 0/1, ``gain`` is a float64's bits, the sums are
        the children's fixed-point totals. A node whose candidates all score -inf
        gets its first one (the first allowed feature with bins, its first bin,
        missing right) with gain -inf; a node with no allowed feature with bins gets
        feature 0, bin 0, missing right, gain -inf and every row right; an inactive
        node its best candidate with gain -inf.
    """
    n_nodes, n_bins_total, _ = hist.shape
    assert n_bins_total > 0, "a level's histograms have bins"
    n_words = 0 if categories is None else categories.n_words
    table = np.zeros((n_nodes, len(SPLIT_TABLE_COLUMNS) + n_words), dtype=HIST_DTYPE)
    gains = np.empty(n_nodes, dtype=GAIN_DTYPE)
    numeric_allowed = allowed
    if categories is not None:  # the numeric scan leaves the categorical features out
        numeric_allowed = np.ones((n_nodes, len(bin_offsets) - 1), dtype=bool) if allowed is None \
            else np.array(allowed, dtype=bool)
        numeric_allowed[:, categories.features] = False
    n_threads = max(1, min(loops.threads(), n_nodes * n_bins_total // _CANDIDATES_PER_THREAD))
    n_features = len(bin_offsets) - 1
    n_groups = max(1, min(n_features, -(-n_threads // max(n_nodes, 1))))  # feature groups a node: a thread each
    if n_nodes:
        node_sums = np.ascontiguousarray(node_sums, dtype=HIST_DTYPE)
        bin_offsets = np.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE)
        split_rules = np.array([rules.reg_lambda, rules.alpha, rules.min_child_weight, rules.max_delta_step,
                                rules.gamma, MIN_SPLIT_GAIN], dtype=GAIN_DTYPE)
        found_gain = np.empty((n_nodes * n_groups, 2), dtype=GAIN_DTYPE)  # each (node, group)'s best
        found = np.empty((n_nodes * n_groups, 5), dtype=HIST_DTYPE)
        split_loops.splits(n_threads, np.ascontiguousarray(hist, dtype=HIST_DTYPE), node_sums, bin_offsets,
                     np.ascontiguousarray(scales, dtype=GAIN_DTYPE), split_rules,
                     None if numeric_allowed is None else np.ascontiguousarray(numeric_allowed, dtype=bool),
                     None if monotone is None else np.ascontiguousarray(monotone, dtype=MONOTONE_DTYPE),
                     None if bounds is None else np.ascontiguousarray(bounds, dtype=GAIN_DTYPE), n_groups,
                     found_gain, found)
        split_loops.node_best(node_sums, np.ascontiguousarray(active, dtype=bool),
                        np.ascontiguousarray(feature_of_bin, dtype=POSITION_DTYPE), bin_offsets, split_rules, n_groups,
                        found_gain, found, table, gains)
        if categories is not None and len(categories.features):
            _category_splits(hist, node_sums, active, bin_offsets, scales, split_rules, allowed, categories, table,
                             gains)
    table[:, 4] = gains.view(HIST_DTYPE)
    return table


def _category_splits(hist, node_sums, active, bin_offsets, scales, split_rules, allowed, categories: CategorySplits,
                     table, gains):
    """The categorical features' best splits into a level's ``table`` and ``gains`` where they
    beat the numeric ones (split_loops.category_splits, then merge_category_splits)."""
    n_nodes = hist.shape[0]
    features = np.ascontiguousarray(categories.features, dtype=POSITION_DTYPE)
    n_items = n_nodes * len(features)
    found_gain = np.empty(n_items, dtype=GAIN_DTYPE)
    found = np.empty((n_items, 5), dtype=HIST_DTYPE)
    found_bits = np.empty((n_items, categories.n_words), dtype=HIST_DTYPE)
    n_threads = max(1, min(loops.threads(), n_items))
    split_loops.category_splits(n_threads, np.ascontiguousarray(hist, dtype=HIST_DTYPE), node_sums, bin_offsets,
                                features, np.ascontiguousarray(scales, dtype=GAIN_DTYPE), split_rules,
                                None if allowed is None else np.ascontiguousarray(allowed, dtype=bool),
                                int(categories.max_onehot), int(categories.max_threshold), found_gain, found,
                                found_bits)
    split_loops.merge_category_splits(features, found_gain, found, found_bits, node_sums,
                                      np.ascontiguousarray(active, dtype=bool), split_rules, table, gains)


def evaluate_level_split(hist, node_sums, active, feature_of_bin, bin_offsets, scales, rules: Regularisation,
                         allowed=None):
    """One split for every node of a level (symmetric, or oblivious, trees), as a split table.

    Each candidate (feature, bin, missing right or left) is scored by the sum, over the
    level's active nodes in node order, of the node's score there: its children's gains
    less its own, each gain that of node_gains (a child too light, or empty, gains 0, so
    every candidate may split every node, as CatBoost's symmetric trees do). The largest
    total wins (ties to the lowest feature, then bin, then missing right), and every active
    node splits by it where the total exceeds MIN_SPLIT_GAIN and gamma. Compiled
    (split_loops.level_candidates over runs of the features, then split_loops.level_table);
    the float operations are the CUDA twin's, in its order.

    Parameters
    ----------
    hist, node_sums, active, feature_of_bin, scales : as evaluate_splits   # IN
    bin_offsets : numpy array of shape (n_features + 1,), int64, on the host   # IN
    allowed : array of shape (n_features,), bool, or None (every feature)   # IN

    Returns
    -------
    array of shape (n_nodes, len(SPLIT_TABLE_COLUMNS)), int64               # OUT
        As evaluate_splits', every row the same split; ``gain`` is each node's own score
        (-inf for an inactive node). With no candidate above -inf, no node splits: feature
        0, bin 0, missing right, every row right, gain -inf.
    """
    n_nodes, n_bins_total, _ = hist.shape
    n_features = len(bin_offsets) - 1
    table = np.empty((n_nodes, len(SPLIT_TABLE_COLUMNS)), dtype=HIST_DTYPE)
    gains = np.empty(n_nodes, dtype=GAIN_DTYPE)
    if n_nodes:
        hist = np.ascontiguousarray(hist, dtype=HIST_DTYPE)
        node_sums = np.ascontiguousarray(node_sums, dtype=HIST_DTYPE)
        active = np.ascontiguousarray(active, dtype=bool)
        bin_offsets = np.ascontiguousarray(bin_offsets, dtype=BIN_OFFSET_DTYPE)
        scales = np.ascontiguousarray(scales, dtype=GAIN_DTYPE)
        split_rules = np.array([rules.reg_lambda, rules.alpha, rules.min_child_weight, rules.max_delta_step,
                                rules.gamma, MIN_SPLIT_GAIN], dtype=GAIN_DTYPE)
        totals = np.empty((n_bins_total, 2), dtype=GAIN_DTYPE)
        n_runs = max(1, min(loops.threads(), n_features, n_nodes * n_bins_total // _CANDIDATES_PER_THREAD))
        split_loops.level_candidates(n_runs, hist, node_sums, active, bin_offsets, scales, split_rules,
                                     None if allowed is None else np.ascontiguousarray(allowed, dtype=bool), totals)
        split_loops.level_table(hist, node_sums, active, np.ascontiguousarray(feature_of_bin, dtype=POSITION_DTYPE),
                                bin_offsets, scales, split_rules, totals, table, gains)
    table[:, 4] = gains.view(HIST_DTYPE)
    return table


def gradient_bounds(gpair):
    """The largest |gradient| and |hessian| of a tree's pairs.

    Compiled (host_column_bounds): a pass over 8 bytes a row. A column of
    zeros gives +0.0 (as the CUDA twin; numpy's ``max(max x, -min x)`` gave -0.0, which
    fixes the same scale).

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32                         # IN

    Returns
    -------
    array of shape (2,), float64: 0 without rows; NaN where a column holds one   # OUT
    """
    return host_column_bounds(np.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE))


def host_column_bounds(columns):
    """Each column's largest ``|x|``, float64 (0 without rows, NaN where the column holds one),
    of a host array of shape (n_rows, k): compiled (loops.column_bounds), the rows in runs
    on threads; the result does not depend on them."""
    columns = np.ascontiguousarray(columns)
    n_runs = _threads_for(columns.shape[0])
    bounds = np.zeros((n_runs, columns.shape[1]), dtype=GAIN_DTYPE)
    loops.column_bounds(n_runs, columns, bounds)
    return bounds.max(axis=0)  # the runs' bounds: the largest, NaN where one is


def host_fixed_sums(columns, scale):
    """Each column's exact sum of ``rint(x * scale[c])``, int64, of a host array of shape
    (n_rows, k) (fixed_point.to_fixed's rounding): compiled (loops.fixed_sums), the rows in
    runs on threads; integer sums, so the same whatever the runs."""
    columns = np.ascontiguousarray(columns)
    n_runs = _threads_for(columns.shape[0])
    sums = np.zeros((n_runs, columns.shape[1]), dtype=HIST_DTYPE)
    loops.fixed_sums(n_runs, columns, np.ascontiguousarray(scale, dtype=GAIN_DTYPE), sums)
    return sums.sum(axis=0)


def gradient_sums(gpair, scales):
    """The fixed-point sums of a tree's pairs: ``sum(to_fixed(gpair[:, c], scales[c]))``.

    Compiled (host_fixed_sums); integer sums, so exact in any order.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32                         # IN
    scales : array of shape (2,), float64                               # IN

    Returns
    -------
    array of shape (2,), int64 (exact: integer sums)                    # OUT
    """
    return host_fixed_sums(np.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE), scales)


def pair_gradients(kind, margin, label, weight, parameter, least_hessian):
    """An objective's gradient pairs on the host (objectives.Objective.training_gradients):
    compiled (loops.pair_gradients), the rows in runs on threads.

    Parameters
    ----------
    kind : int: 0 squared error, 1 pseudo-Huber, 2 logistic          # IN
    margin : array of shape (n_rows,), float32: the margins, exp(-margin) for logistic   # IN
    label : array of shape (n_rows,), float32                       # IN
    weight : array of shape (n_rows,), float32, or None              # IN
    parameter : float: pseudo-Huber's slope                          # IN
    least_hessian : float: logistic's smallest hessian                 # IN

    Returns
    -------
    array of shape (n_rows, 2), float32: weighted (gradient, hessian)   # OUT
    """
    margin = np.ascontiguousarray(margin, dtype=GRADIENT_DTYPE)
    gpair = np.empty((margin.shape[0], 2), dtype=GRADIENT_DTYPE)
    loops.pair_gradients(_threads_for(margin.shape[0]), int(kind), margin,
                         np.ascontiguousarray(label, dtype=GRADIENT_DTYPE),
                         None if weight is None else np.ascontiguousarray(weight, dtype=GRADIENT_DTYPE),
                         GRADIENT_DTYPE(parameter), GRADIENT_DTYPE(least_hessian), gpair)
    return gpair


def softmax_gradients(margins, label, weight, least_hessian):
    """Softmax's gradient pairs on the host (objectives.Softmax.training_gradients), the bits
    of its array program: each row less its largest (loops.softmax_shifts), NumPy's exp and row
    sums (numba's exp rounds differently; NumPy sums a row pairwise), then the rest compiled
    (loops.softmax_pairs), the rows in runs on threads.

    Parameters
    ----------
    margins : array of shape (n_rows, n_classes), float32                  # IN
    label : array of shape (n_rows,), float32: class ids                  # IN
    weight : array of shape (n_rows,), float32, or None                    # IN
    least_hessian : float: the smallest hessian                           # IN

    Returns
    -------
    array of shape (n_rows, n_classes, 2), float32: weighted (gradient, hessian)   # OUT
    """
    margins = np.ascontiguousarray(margins, dtype=GRADIENT_DTYPE)
    n_runs = _threads_for(margins.shape[0])
    shifted = np.empty_like(margins)
    loops.softmax_shifts(n_runs, margins, shifted)
    exps = np.exp(shifted, out=shifted)
    gpair = np.empty((*margins.shape, 2), dtype=GRADIENT_DTYPE)
    loops.softmax_pairs(n_runs, exps, exps.sum(axis=1), np.ascontiguousarray(label, dtype=GRADIENT_DTYPE),
                        None if weight is None else np.ascontiguousarray(weight, dtype=GRADIENT_DTYPE),
                        GRADIENT_DTYPE(least_hessian), gpair)
    return gpair


def tree_record(node_sums, active, table, left_child, scales, rules: Regularisation, eta, bounds=None):
    """A finished tree's per-node record (RECORD_COLUMNS) and its nodes' values.

    Parameters
    ----------
    node_sums : array of shape (n_ids, 2), int64: fixed-point (gradient, hessian) sums   # IN
    active : array of shape (n_ids,), bool: False for padding slots     # IN
    table : array of shape (n_ids, len(SPLIT_TABLE_COLUMNS)), int64     # IN
    left_child : array of shape (n_ids,), int32                         # IN
    scales : array of shape (2,), float64: the sums' fixed-point scales   # IN
    eta : float: the learning rate the values are scaled by              # IN
    bounds : array of shape (n_ids, 2), float64, or None: each node's weight bounds
        (monotone constraints), its weight clipped to them             # IN

    Returns
    -------
    record : array of shape (n_ids, len(RECORD_COLUMNS) + n_words), float64, ``n_words`` the
        table's words of category bits, carried bit for bit after the columns   # OUT
    leaf_value : array of shape (n_ids,), float32: eta * each node's weight   # OUT
    """
    xp = get_xp(node_sums)
    gradient = node_sums[:, 0].astype(GAIN_DTYPE) / scales[0]
    hessian = node_sums[:, 1].astype(GAIN_DTYPE) / scales[1]
    weight = node_weights(gradient, hessian, rules)
    if bounds is not None:  # by comparisons: a -0.0 weight at a 0.0 bound stays -0.0, as on the GPU
        weight = xp.where(weight < bounds[:, 0], bounds[:, 0], xp.where(weight > bounds[:, 1], bounds[:, 1], weight))
    leaf_value = (eta * weight).astype(LEAF_DTYPE)
    n_words = table.shape[1] - len(SPLIT_TABLE_COLUMNS)  # category bits, carried as they are
    record = xp.empty((len(left_child), len(RECORD_COLUMNS) + n_words), dtype=GAIN_DTYPE)
    record[:, 0] = active
    record[:, 1:5] = table[:, 0:4]  # valid, feature, bin, default_left (flags are 0/1)
    record[:, 5] = left_child
    record[:, 6] = table[:, 4].copy().view(GAIN_DTYPE)
    record[:, 7] = hessian
    record[:, 8] = leaf_value
    if n_words:
        record[:, len(RECORD_COLUMNS):] = table[:, len(SPLIT_TABLE_COLUMNS):].copy().view(GAIN_DTYPE)
    return record, leaf_value


def child_bounds(table, slot_of_rank, n_split, bounds, monotone, scales, rules: Regularisation):
    """The weight bounds of the next level's nodes under monotone constraints (XGBoost's).

    Each splitting parent's children inherit its bounds; where its split feature is
    constrained, the mean ``m`` of the children's weights (clipped to the parent's
    bounds, as split evaluation scored them) becomes the left child's upper bound and
    the right's lower (feature increasing), or the other way round (decreasing).

    Parameters
    ----------
    table : array of shape (n_slots, len(SPLIT_TABLE_COLUMNS)), int64: the level's splits   # IN
    slot_of_rank, n_split : as number_children returns them            # IN
    bounds : array of shape (n_slots, 2), float64: the level's (lower, upper)   # IN
    monotone : array of shape (n_features,), int8                      # IN
    scales : array of shape (2,), float64                              # IN

    Returns
    -------
    array of shape (2 len(slot_of_rank), 2), float64: (-inf, inf) for padding pairs   # OUT
    """
    child = np.empty((2 * len(slot_of_rank), 2), dtype=GAIN_DTYPE)
    split_loops.child_bounds(np.ascontiguousarray(table, dtype=HIST_DTYPE),
                       np.ascontiguousarray(slot_of_rank, dtype=POSITION_DTYPE), int(np.asarray(n_split).reshape(-1)[0]),
                       np.ascontiguousarray(bounds, dtype=GAIN_DTYPE), np.ascontiguousarray(monotone, dtype=MONOTONE_DTYPE),
                       np.ascontiguousarray(scales, dtype=GAIN_DTYPE),
                       np.array([rules.reg_lambda, rules.alpha, rules.min_child_weight, rules.max_delta_step],
                                dtype=GAIN_DTYPE), child)
    return child


#: Row sampling's methods, as sample_rows and sample_keys number them, and the hessian's weight
#: in gradient-based sampling's magnitude (``sqrt(g^2 + 0.1 h^2)``, XGBoost's kLambda; GOSS's
#: is ``|g h|``, exact: a product of two float32): loops.sample_magnitude's.
MVS, GOSS, UNIFORM, MVS_LAMBDA = loops.MVS, loops.GOSS, loops.UNIFORM, loops.MVS_LAMBDA


def _pairs(gpair) -> np.ndarray:
    """Gradient pairs as the sampling loops read them: (n_rows, 2) float32, C order."""
    return np.ascontiguousarray(gpair, dtype=GRADIENT_DTYPE).reshape(-1, 2)


def sample_magnitude_max(gpair, kind):
    """The largest of the rows' sampling magnitudes (see sample_keys), 0 without rows; NaN
    where a row's is. Compiled (loops.magnitude_max), the rows in runs on threads.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32                          # IN
    kind : MVS or GOSS

    Returns
    -------
    array of shape (1,), float64                                         # OUT
    """
    n_rows = gpair.shape[0]
    if not n_rows:
        return np.zeros(1, dtype=GAIN_DTYPE)
    n_runs = _threads_for(n_rows)
    largest = np.empty(n_runs, dtype=GAIN_DTYPE)
    loops.magnitude_max(n_runs, _pairs(gpair), kind, largest)
    return np.max(largest, keepdims=True)


def sample_keys(gpair, kind, largest):
    """The rows' sampling magnitudes as int64 keys below 2**31: ``rint(magnitude * scale)``,
    ``scale`` the power of two that puts ``largest`` (every rank's largest magnitude,
    sample_magnitude_max all-reduced) below 2**31 (exact: the keys are integers). Compiled
    (loops.magnitude_keys), the rows in runs on threads.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32                          # IN
    kind : MVS or GOSS
    largest : array of shape (1,), float64                               # IN

    Returns
    -------
    array of shape (n_rows,), int64                                      # OUT
    """
    _, exponent = np.frexp(np.asarray(largest, dtype=GAIN_DTYPE))  # largest * scale < 2**31
    scale = np.ldexp(1.0, (31 - exponent).astype(np.int32))
    keys = np.empty(gpair.shape[0], dtype=INDEX_DTYPE)
    loops.magnitude_keys(_threads_for(keys.shape[0]), _pairs(gpair), kind, float(scale[0]), keys)
    return keys


def sample_rows(gpair, global_index, key, kind, keys, threshold, largest, rate, weight, tree_at=None):
    """A tree's row sample: each row's draw ``u`` (``_hashing.uniform`` of its global index
    under ``key``) decides, and the pairs of the rows drawn are scaled.

    - UNIFORM: drawn where ``u < rate``; pairs as they are.
    - MVS: drawn where ``u < p``, ``p = min(1, key / max(threshold, 1))`` (1 for every row
      where ``largest`` is 0: nothing to draw by); pairs divided by ``p``.
    - GOSS: the rows of ``key >= threshold`` (the top), and the others where ``u < rate``;
      the others' pairs multiplied by ``weight``.

    Compiled (loops.sample_rows), the rows in runs on threads; each row's steps in float64,
    rounded to float32 once.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32, or None: the draws alone  # IN
    global_index : array of shape (n_rows,), int64                       # IN
    key : int: the tree's stream key (_hashing.stream_key); with ``tree_at``, the stream's base
        (_hashing.stream_base), which the tree index it holds keys (_hashing.tree_key)
    kind : MVS, GOSS or UNIFORM
    keys : array of shape (n_rows,), int64 (sample_keys), or None for UNIFORM   # IN
    threshold, largest : arrays of shape (1,), int64 and float64, or None for UNIFORM   # IN
    rate, weight : float
    tree_at : array of shape (1,), int64, the tree's index, or None      # IN

    Returns
    -------
    (pairs, drawn): (n_rows, 2) float32, zero where not drawn (None without ``gpair``);
    (n_rows,) bool                                                       # OUT
    """
    from .._hashing import tree_key

    key = key if tree_at is None else tree_key(key, int(tree_at[0]))
    global_index = np.ascontiguousarray(global_index, dtype=ROW_INDEX_DTYPE)
    n_rows = global_index.shape[0]
    drawn = np.empty(n_rows, dtype=bool)
    with_pairs = gpair is not None
    gpair = _pairs(gpair) if with_pairs else np.empty((0, 2), GRADIENT_DTYPE)
    pairs = np.empty_like(gpair)
    uniform = kind == UNIFORM
    loops.sample_rows(_threads_for(n_rows), global_index, np.uint64(key), kind,
                      np.empty(0, INDEX_DTYPE) if uniform else np.ascontiguousarray(keys, dtype=INDEX_DTYPE),
                      0 if uniform else int(threshold[0]), 0.0 if uniform else float(largest[0]), float(rate),
                      float(weight), gpair, pairs, drawn)
    return (pairs if with_pairs else None), drawn


def bucket_counts(keys, shift, bits, state):
    """One step of a radix select over non-negative int64 ``keys`` (row sampling's thresholds).

    Of the keys whose bits above ``shift + bits`` equal the prefix found so far
    (``state[0]``, see choose_bucket), bucketed by their bits ``[shift, shift + bits)``:
    how many fall in each bucket and their exact sum.

    Parameters
    ----------
    keys : array of shape (n,), int64, each below 2**31                 # IN
    shift, bits : int: the step's bits (bits at most 12)                # IN
    state : array of shape (3,), int64: the search's state               # IN

    Returns
    -------
    counts, sums : arrays of shape (2**bits,), int64                    # OUT
    """
    counts = np.zeros(1 << bits, dtype=INDEX_DTYPE)
    sums = np.zeros(1 << bits, dtype=INDEX_DTYPE)
    loops.bucket_counts(np.ascontiguousarray(keys, dtype=INDEX_DTYPE), int(shift), int(bits), int(state[0]), counts,
                        sums)
    return counts, sums


#: A radix search's state (bucket_counts, choose_bucket): the bits of the answer found so far,
#: how many keys lie above the range still searched, and the sum of the keys below it.
SEARCH_STATE = ("prefix", "above", "below")


def choose_bucket(totals, state, shift, bits, rule):
    """One step of the radix search for the largest integer ``t >= least`` that holds a rule
    (row sampling's thresholds), after bucket_counts and the all-reduce of its counts and
    sums: the bucket of bits ``[shift, shift + bits)`` where ``t`` lies, appended to
    ``state``'s prefix, and ``state``'s counts narrowed to it (in place). After the last
    step (``shift`` 0) the prefix is ``t``, or ``least - 1`` where no value holds.

    The rule holds for ``t`` up to some value and not after. ``above``: how many keys are
    ``>= t``; ``below``: the sum of those ``< t``. Kind 0 (gradient-based sampling's):
    ``(above * t + below) * denominator >= numerator * t`` (its expected sample at ``t``
    reaches ``numerator / denominator``), in exact integers (128-bit on the GPU: exact for
    fewer than 2**32 rows, ``numerator < 2**92``, ``denominator <= 2**60``). Kind 1: ``above
    >= numerator`` (GOSS's count).

    Parameters
    ----------
    totals : array of shape (2 * 2**bits,), int64: every rank's bucket counts, then sums   # IN
    state : array of shape (3,), int64 (SEARCH_STATE), zero before the first step          # IN/OUT
    shift, bits : int
    rule : (kind, least, numerator >> 62, numerator & (2**62 - 1), denominator): ints
    """
    kind, least, high, low, denominator = (int(v) for v in rule)
    numerator = (high << 62) + low
    n_buckets = 1 << bits
    counts, sums = np.asarray(totals[:n_buckets]).tolist(), np.asarray(totals[n_buckets:]).tolist()
    prefix, above_range, below_range = (int(v) for v in state)
    above = above_range + np.concatenate([np.cumsum(counts[::-1], dtype=object)[::-1], [0]])  # >= bucket start
    below = below_range + np.concatenate([[0], np.cumsum(sums, dtype=object)])  # < bucket start

    def holds(t, a, b):
        return (a * t + b) * denominator >= numerator * t if kind == 0 else a >= numerator

    start = prefix << (shift + bits)
    first = 1 if start < least else 0  # bucket 0 of a range starting at 0 starts below least: its values next
    bucket = _largest_holding(lambda b: holds(start + (b << shift), int(above[b]), int(below[b])), first, n_buckets)
    if bucket < first:  # every candidate fails: the answer is in bucket 0, or below least
        if shift == 0:
            state[:] = [least - 1, 0, 0]
            return state
        bucket = 0
    state[:] = [(prefix << bits) | bucket, int(above[bucket + 1]), int(below[bucket])]
    return state


def _largest_holding(predicate, first: int, stop: int) -> int:
    """The largest i in [first, stop) with predicate(i), for a predicate true up to some i and
    false after; first - 1 if none."""
    low, high = first - 1, stop  # predicate(low) holds (or low = first - 1), predicate(high) fails
    while high - low > 1:
        middle = (low + high) // 2
        if predicate(middle):
            low = middle
        else:
            high = middle
    return low


def number_children(table, start, n_parents):
    """Ids of the children of a level's splitting slots, and the slot of each split.

    The r-th slot (in slot order) whose node splits gets children
    ``start + n_slots + 2r`` and ``+ 1``.

    Parameters
    ----------
    table : array of shape (n_slots, len(SPLIT_TABLE_COLUMNS)), int64: the level's splits   # IN
    start : int: id of slot 0                                           # IN
    n_parents : int: slots of the next level's parents, at least the number of splits   # IN

    Returns
    -------
    left_child : array of shape (n_slots,), int32: -1 where the node does not split   # OUT
    slot_of_rank : array of shape (n_parents,), int32: the r-th split's slot; 0 past the last   # OUT
    n_split : array of shape (1,), int32: how many nodes split          # OUT
    """
    n_slots = int(table.shape[0])
    left_child = np.empty(n_slots, dtype=POSITION_DTYPE)
    slot_of_rank = np.empty(n_parents, dtype=POSITION_DTYPE)
    n_split = np.empty(1, dtype=POSITION_DTYPE)
    loops.number_children(np.ascontiguousarray(table, dtype=HIST_DTYPE), int(start), left_child, slot_of_rank, n_split)
    return left_child, slot_of_rank, n_split


def next_frontier(table, slot_of_rank, n_split, seg_begin, seg_end, n_left, n_rows):
    """The next level's slots, a sibling pair per parent rank (padding past ``n_split``).

    Parameters
    ----------
    table : array of shape (n_slots, len(SPLIT_TABLE_COLUMNS)), int64    # IN
    slot_of_rank, n_split : from number_children                        # IN
    seg_begin, seg_end : arrays of shape (n_slots,), int32: each slot's range of ridx   # IN
    n_left : array of shape (n_slots,), int32: rows of each slot sent left   # IN
    n_rows : int: where padding slots' empty ranges sit                  # IN

    Returns
    -------
    node_sums : array of shape (2 n_parents, 2), int64: (left, right) sums of each pair   # OUT
    active : array of shape (2 n_parents,), bool                        # OUT
    seg_begin, seg_end : arrays of shape (2 n_parents,), int32          # OUT
    build_left : array of shape (n_parents,), bool: the lighter child of each pair is built   # OUT
    build_begin, build_end : arrays of shape (n_parents,), int32: the built child's range   # OUT
    """
    n_parents = int(slot_of_rank.shape[0])
    node_sums = np.empty((2 * n_parents, 2), dtype=HIST_DTYPE)
    active = np.empty(2 * n_parents, dtype=bool)
    begin, end = np.empty(2 * n_parents, dtype=POSITION_DTYPE), np.empty(2 * n_parents, dtype=POSITION_DTYPE)
    build_left = np.empty(n_parents, dtype=bool)
    build_begin, build_end = np.empty(n_parents, dtype=POSITION_DTYPE), np.empty(n_parents, dtype=POSITION_DTYPE)
    index = lambda array: np.ascontiguousarray(array, dtype=POSITION_DTYPE)  # noqa: E731
    loops.next_frontier(np.ascontiguousarray(table, dtype=HIST_DTYPE), index(slot_of_rank), int(n_split[0]),
                        index(seg_begin), index(seg_end), index(n_left), int(n_rows), node_sums, active, begin, end,
                        build_left, build_begin, build_end)
    return node_sums, active, begin, end, build_left, build_begin, build_end


def sibling_histograms(hist, slot_of_rank, built, build_left):
    """Full histograms of the children of ``n`` parents, in sibling pairs.

    Pair ``p``'s parent is ``hist[slot_of_rank[p]]``; of its children, the built one
    is ``built[p]`` and its sibling the parent minus it. Compiled (loops.siblings), the
    pairs spread over threads.

    Parameters
    ----------
    hist : array of shape (n_slots, n_bins_total, 2), int64: the parents' level      # IN
    slot_of_rank : array of shape (n,), int32: each pair's parent slot              # IN
    built : array of shape (n, n_bins_total, 2), int64: the built child of each parent   # IN
    build_left : array of shape (n,), bool: whether the built child is the left one   # IN

    Returns
    -------
    array of shape (2 n, n_bins_total, 2), int64: left and right child of each parent   # OUT
    """
    n_pairs = int(built.shape[0])
    children = np.empty((2 * n_pairs, *built.shape[1:]), dtype=HIST_DTYPE)
    if children.size:
        flat = lambda array: np.ascontiguousarray(array, dtype=HIST_DTYPE).reshape(array.shape[0], -1)  # noqa: E731
        arguments = (flat(hist), np.ascontiguousarray(slot_of_rank, dtype=POSITION_DTYPE), flat(built),
                     np.ascontiguousarray(build_left, dtype=bool))
        loops.siblings(min(n_pairs, _threads_for(int(children.size) // 16)), *arguments, flat(children))
    return children


def gather_page_rows(rows, pages, starts, out, base=0):
    """A paged matrix's rows ``rows`` gathered into one: ``out[i]`` = row ``rows[i] - base`` of
    the matrix whose page ``p`` holds rows ``starts[p]`` to ``starts[p + 1]`` (data/pages.py: a
    tree's sample, out of core; ``base``: where one page of a larger matrix starts, its rows
    given as the larger's). Compiled (loops.gather_rows), each page's rows in runs on threads;
    the CUDA twin reads the pages where they lie, in pinned host memory.

    Parameters
    ----------
    rows : array of shape (n,), int: ascending, each less ``base`` in ``[0, starts[-1])``  # IN
    pages : iterable of arrays of shape (rows of the page, n_words), host memory  # IN, read once, in order
            (on a GPU pinned, read through the bus, or device arrays)
    starts : sequence of int, the first row of each page, then the matrix's rows  # IN
    out : array of shape (n, n_words), the pages' dtype                           # OUT
    base : int
    """
    rows = np.ascontiguousarray(rows, np.int64)
    if base:
        rows = rows - base
    bounds = np.searchsorted(rows, np.asarray(starts, np.int64)).tolist()
    for page, first, begin, end in zip(pages, starts, bounds, bounds[1:]):
        if end > begin:
            loops.gather_rows(_threads_for(end - begin), np.asarray(page), rows[begin:end], int(first), out,
                              int(begin))
    return out


def ahead_room(guessed):
    """Room for the rows a guess of ``guessed`` rows will miss (data/pages.py RowsAhead): a 64th
    of them and 64 more (an int, or an array of ints). Misses beyond it grow the tree again
    from the whole sample (tree/grower.py PagedGrower); sample_sizes's twins count with it."""
    return guessed // 64 + 64


def sample_sizes(drawn, gathered, likely, page_ends, limits):
    """What a paged grower reads of a tree's sample before growing it (tree/grower.py
    ``PagedGrower.grow``), in one array: how many rows were drawn, how many of them the
    guess the last pass gathered misses, where the next guess's rows fall among the pages,
    and how far each of the grower's limits is passed. The CUDA twin counts in one pass
    over the rows and reads nothing back.

    Parameters
    ----------
    drawn : array of shape (n,), bool: the tree's rows drawn                   # IN
    gathered : array of shape (n,), bool, or None: the rows gathered ahead     # IN
    likely : array of shape (n,), bool, or None: the next tree's guess         # IN
    page_ends : array of shape (n_pages,), int64: each page's end row, ascending, the last n  # IN
    limits : (room, per_row, budget, capacity), ints: the rows kept for the misses, a
             row's bytes, the device budget, the sample page's rows

    Returns
    -------
    sizes : array of shape (7 + n_pages,), int64: the rows drawn, the drawn rows
            ``gathered`` misses, 0 and ``likely``'s rows through each page's end (none
            without it), then how far each limit is passed (positive where it is): the
            misses beyond the room, the drawn rows' bytes beyond the budget, and the next
            guess's rows with their room (``ahead_room``) in bytes beyond the budget and in
            rows beyond the capacity
    missed : array of shape (n,), bool: the drawn rows ``gathered`` misses; None without it
    """
    n_drawn = int(np.count_nonzero(drawn))
    missed = None if gathered is None else drawn & ~gathered
    n_missed = 0 if missed is None else int(np.count_nonzero(missed))
    through = np.zeros(len(page_ends), np.int64)
    if likely is not None:  # a leading 0: an empty page's end reads its first row's count
        through = np.concatenate([[0], np.cumsum(likely, dtype=np.int64)])[np.asarray(page_ends, np.int64)]
    room, per_row, budget, capacity = (int(v) for v in limits)
    guessed = int(through[-1]) if len(through) else 0
    needed = guessed + ahead_room(guessed)
    passed = [n_missed - room, n_drawn * per_row - budget, needed * per_row - budget, needed - capacity]
    return np.array([n_drawn, n_missed, 0, *through.tolist(), *passed], np.int64), missed


def fill_sample_page(gpair, drawn, guessed, missed, n_missed, pairs, page_drawn):
    """A sample page's pairs and drawn flags, out of core (data/pages.py ``RowsAhead.sample``):
    its first places the rows the guess took (``guessed``: their pairs, drawn or not), then
    the room's, ``missed``, whose first ``n_missed`` are the drawn rows the guess missed
    (their pairs, drawn) and the others nothing, as is every place after (a zero pair, not
    drawn). The CUDA twin writes every place in one launch, the count read on the device.

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32: the tree's pairs   # IN
    drawn : array of shape (n_rows,), bool: the tree's rows drawn   # IN
    guessed : array of shape (n,), int: rows                          # IN
    missed : array of shape (room,), int: rows (past n_missed, any)   # IN
    n_missed : array of shape (1,), int                               # IN
    pairs : array of shape (capacity, 2), float32, capacity >= n + room   # OUT
    page_drawn : array of shape (capacity,), bool                         # OUT
    """
    n, end = guessed.shape[0], guessed.shape[0] + missed.shape[0]
    found = np.arange(missed.shape[0]) < int(n_missed[0])
    pairs[:n] = gpair[guessed]
    pairs[n:end] = np.where(found[:, None], gpair[missed], gpair.dtype.type(0))
    pairs[end:] = 0
    page_drawn[:n] = drawn[guessed]
    page_drawn[n:end] = found
    page_drawn[end:] = False
    return pairs, page_drawn


def mask_indices(mask, count, fill=None):
    """The indices of ``mask``'s true entries, ascending, given how many there are (a count
    read before, with others, in one read of the device: the CUDA twin reads nothing back,
    where ``flatnonzero`` would read the count itself). With ``fill``, ``count`` entries
    whatever the mask holds: its first ``count`` true entries' indices, then ``fill``.

    Parameters
    ----------
    mask : array of shape (n,), bool                                       # IN
    count : int: mask's true entries, or the entries wanted where ``fill`` is given
    fill : int or None

    Returns
    -------
    array of shape (count,), int64                                       # OUT
    """
    indices = np.flatnonzero(mask)
    if fill is not None:
        return np.concatenate([indices[:count], np.full(max(count - indices.shape[0], 0), fill, np.int64)])
    if indices.shape[0] != count:
        raise ValueError(f"mask_indices: the mask has {indices.shape[0]} true entries, not {count}")
    return indices


def rows_drawn_first(drawn):
    """A sampled tree's starting ``ridx``: the rows ``drawn`` first, ascending (the root's
    range), then the others, ascending (in no node's range); and how many were drawn, the
    root's end. The CUDA twin reads nothing back (the count stays on the device).

    Parameters
    ----------
    drawn : array of shape (n_rows,), bool                                 # IN

    Returns
    -------
    (ridx, root_end): array of shape (n_rows,), int32; array of shape (1,), int32   # OUT
    """
    first = np.flatnonzero(drawn)
    ridx = np.empty(drawn.shape[0], dtype=POSITION_DTYPE)
    ridx[:first.shape[0]] = first
    ridx[first.shape[0]:] = np.flatnonzero(~drawn)
    return ridx, np.array([first.shape[0]], dtype=POSITION_DTYPE)


def place_rows(ridx, begin, end, node, positions):
    """Put rows at their leaves: ``positions[ridx[i]] = node[k]`` for every place ``i`` of each
    range ``k``, ``[begin[k], end[k])``: once a tree is grown, the rows of each node that
    stopped (partition_rows leaves a node's range in place once it stops splitting, and
    writes no node ids). Ranges may be empty; they do not overlap. Compiled (loops.place_rows),
    every range shared by the threads. Host arrays on both devices (a lossguide
    tree's leaves, the grower's own bookkeeping: the CUDA twin copies them over in one
    transfer), or, on a GPU, device arrays (a depthwise tree's levels' ranges).

    Parameters
    ----------
    ridx : array of shape (n_places,), int32: rows grouped by node           # IN
    begin, end, node : arrays of shape (n_ranges,), int32                     # IN
    positions : array of shape (n_rows,), int32: each row's node id           # IN/OUT, updated in place

    Returns
    -------
    positions
    """
    if positions.dtype != POSITION_DTYPE or not positions.flags.c_contiguous:
        raise TypeError(f"positions must be a C-contiguous {np.dtype(POSITION_DTYPE).name} array, updated in "
                        f"place; got {positions.dtype}, C-contiguous {positions.flags.c_contiguous}")
    loops.place_rows(_threads_for(int(ridx.shape[0])), np.ascontiguousarray(ridx, dtype=POSITION_DTYPE),
                     *(np.ascontiguousarray(a, dtype=POSITION_DTYPE) for a in (begin, end, node)), positions)
    return positions


def add_leaf_values(margins, output, leaf_value, positions):
    """Add each row's leaf value to its margin of one output: ``margins[r, output] +=
    leaf_value[positions[r]]``, one float32 addition a row. Compiled (loops.add_leaf_values),
    the rows in runs on threads: a pass over 12 bytes a row.

    Parameters
    ----------
    margins : array of shape (n_rows, n_outputs), float32, C-contiguous   # IN/OUT, updated in place
    output : int: the column                                             # IN
    leaf_value : array of shape (n_ids,), float32                        # IN
    positions : array of shape (n_rows,), int32: each row's node id       # IN

    Returns
    -------
    margins
    """
    loops.add_leaf_values(_threads_for(int(margins.shape[0])), margins, int(output),
                          np.ascontiguousarray(leaf_value, dtype=LEAF_DTYPE),
                          np.ascontiguousarray(positions, dtype=POSITION_DTYPE))
    return margins


def partition_rows(packed, bits, cells_per_word, missing_symbol, ridx, seg_begin, seg_end, split_feature, split_bin,
                   default_left, left_child, feature_bins=None, categories=None):
    """Send the rows of a level's split nodes to their children, keeping ridx grouped by node.

    The rows of slot ``s`` are ``ridx[seg_begin[s]:seg_end[s]]``; the ranges come in slot
    order (``seg_begin`` does not decrease; an empty range before a range starting where it
    does: a depthwise level's padding at ``n_rows``, a lossguide batch's in place). Rows
    outside every slot's range stay where they are. Where ``left_child[s] >= 0`` a row goes
    left if its bin of ``split_feature[s]`` is ``<= split_bin[s]`` (or is missing and
    ``default_left[s]``), else right; the node's range is reordered stably: its left rows
    first, then its right rows. Other rows stay: those of slots that do not split, and those
    outside every slot's range (rows of nodes of other levels). No row's node id is written:
    a row's leaf is set once, when its node stops (place_rows). Compiled, in two passes
    over the slots' rows laid end to end and cut into one run a thread, as the CUDA twin's
    flags and scan, then scatter: each place's side and each run's left count by slot
    (loops.partition_sides), then each row to its place, counting the lefts of earlier runs
    (loops.partition_scatter). The result does not depend on the thread count.

    Parameters
    ----------
    packed : array of shape (n_rows, n_words), uint32                 # IN
    feature_bins : None for dense rows; for sparse rows (cells of global bins, ascending,
        then the null symbol ``missing_symbol``), each feature's first global bin and the
        total last: array of shape (n_features + 1,), int64, on packed's device   # IN
    ridx : array of shape (n_places,), int32: the rows grouped by node, all of them or a
        sample                                                         # IN
    seg_begin, seg_end : arrays of shape (n_level_nodes,), int32      # IN
    split_feature, split_bin, left_child : arrays of shape (n_level_nodes,), int32   # IN
    default_left : array of shape (n_level_nodes,), bool              # IN
    categories : array of shape (n_level_nodes, n_category_words), uint32, or None: at a
        category-set split (``split_bin`` -1) a row goes right where the bit of its bin
        (category) is set: bit ``c % 32`` of word ``c // 32``  # IN

    Returns
    -------
    (ridx, n_left): the new ridx (n_places,) int32, and each slot's number of rows
    sent left (n_level_nodes,) int32.                                  # OUT
    """
    ridx = np.ascontiguousarray(ridx, dtype=POSITION_DTYPE)
    n_slots = int(left_child.shape[0])
    if not (packed.shape[0] and n_slots):
        return ridx.copy(), np.zeros(n_slots, dtype=POSITION_DTYPE)
    new_ridx = np.empty_like(ridx)  # partition_sides copies ridx in: the rows that stay
    n_threads = _threads_for(int(ridx.shape[0]))  # by the places, which each run also copies its share of
    lefts = np.zeros((n_threads, n_slots), dtype=INDEX_DTYPE)  # each thread's rows sent left, by slot
    seg_begin = np.ascontiguousarray(seg_begin, dtype=POSITION_DTYPE)
    plan = run_plan(seg_begin, np.ascontiguousarray(seg_end, dtype=POSITION_DTYPE), n_threads)
    left_child = np.ascontiguousarray(left_child, dtype=POSITION_DTYPE)
    goes_left = _kept("goes_left", ridx.shape, np.uint8)  # written and read at splitting slots' places only
    loops.partition_sides(n_threads, _cells(packed, bits), packed, bits, cells_per_word, missing_symbol,
                          _feature_bins(feature_bins), np.ascontiguousarray(split_feature, dtype=POSITION_DTYPE),
                          np.ascontiguousarray(split_bin, dtype=POSITION_DTYPE),
                          np.ascontiguousarray(default_left, dtype=bool),
                          None if categories is None else np.ascontiguousarray(categories, dtype=np.uint32),
                          ridx, seg_begin, *plan, left_child, goes_left, lefts, new_ridx)
    loops.partition_scatter(n_threads, ridx, seg_begin, *plan, left_child, goes_left, lefts, new_ridx)
    return new_ridx, lefts.sum(axis=0).astype(POSITION_DTYPE)


def route_rows(packed, bits, cells_per_word, missing_symbol, split_feature, split_bin, default_left,
               left_child, depth, feature_bins=None, categories=None, out=None):
    """The leaf each row of a packed matrix reaches in one tree.

    Each row walks from node 0 down at most ``depth`` levels, stopping at a node
    that does not split: left where its bin of the node's feature is ``<= split_bin``
    (or is missing and ``default_left``), else right. Compiled (loops.route), the
    rows spread over ``loops.threads()`` threads; each row's walk is its own, so the
    thread count changes nothing.

    Parameters
    ----------
    packed : array of shape (n_rows, n_words), uint32                 # IN
    split_feature, split_bin, left_child : arrays of shape (n_nodes,), int32, by node id   # IN
        ``left_child`` is -1 where a node does not split; its right child is ``left_child + 1``.
    default_left : array of shape (n_nodes,), bool                    # IN
    depth : int, the tree's depth
    feature_bins : None, or sparse rows' feature bins, as partition_rows    # IN
    categories : None, or each node's category words, as partition_rows    # IN
    out : None, or an array of shape (n_rows,), int32, to write into (a page's part of a
          paged matrix's leaves)                                      # OUT

    Returns
    -------
    array of shape (n_rows,), int32: leaf node ids (``out``, where given)   # OUT
    """
    n_rows = int(packed.shape[0])
    leaf = np.empty(n_rows, dtype=POSITION_DTYPE) if out is None else out
    n_threads = _threads_for(n_rows)
    if n_rows:
        arguments = (_cells(packed, bits), packed, bits, cells_per_word, missing_symbol, _feature_bins(feature_bins),
                     np.ascontiguousarray(split_feature, dtype=POSITION_DTYPE),
                     np.ascontiguousarray(split_bin, dtype=POSITION_DTYPE),
                     np.ascontiguousarray(default_left, dtype=bool),
                     np.ascontiguousarray(left_child, dtype=POSITION_DTYPE),
                     None if categories is None else np.ascontiguousarray(categories, dtype=np.uint32), depth)
        loops.route(n_threads, *arguments, leaf)
    return leaf


def _feature_bins(feature_bins):
    return None if feature_bins is None else np.ascontiguousarray(feature_bins, dtype=BIN_OFFSET_DTYPE)


def feature_rows(X):
    """The arguments a compiled loop takes for rows of raw values (loops._value): the dense
    ``X`` and three Nones, or None and a CSR matrix's data, indices and indptr."""
    if hasattr(X, "indptr"):
        return (None, np.ascontiguousarray(X.data, dtype=CUT_DTYPE),
                np.ascontiguousarray(X.indices, dtype=COLUMN_INDEX_DTYPE),
                np.ascontiguousarray(X.indptr, dtype=ROW_POINTER_DTYPE))
    return np.ascontiguousarray(X, dtype=CUT_DTYPE), None, None, None


def predict_oblivious(X, level_feature, level_threshold, level_default_left, leaf_value, outputs, depth, margins):
    """Add every oblivious tree's leaf value to ``margins``, in model order (one float32 add
    each, as predict_margins): a tree is ``depth`` levels of one split each, and a row's
    leaf is the bits of its sides (1 right), the first level's the highest.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32; NaN is missing; or a CSR matrix   # IN
    level_feature : array of shape (n_trees, depth), int32               # IN
    level_threshold : array of shape (n_trees, depth), float32: left where x < threshold   # IN
    level_default_left : array of shape (n_trees, depth), bool           # IN
    leaf_value : array of shape (n_trees, 2**depth), float32             # IN
    outputs : array of shape (n_trees,), int32: each tree's margin column   # IN
    margins : array of shape (n_rows, n_outputs), float32                 # IN/OUT, updated in place

    Returns
    -------
    margins
    """
    if level_feature.shape[0] == 0 or X.shape[0] == 0:
        return margins
    loops.predict_oblivious(_threads_for(X.shape[0]), *feature_rows(X),
                            np.ascontiguousarray(level_feature, dtype=POSITION_DTYPE),
                            np.ascontiguousarray(level_threshold, dtype=CUT_DTYPE),
                            np.ascontiguousarray(level_default_left, dtype=bool),
                            np.ascontiguousarray(leaf_value, dtype=LEAF_DTYPE),
                            np.ascontiguousarray(outputs, dtype=POSITION_DTYPE), int(depth), margins)
    return margins


def predict_leaves(X, left, right, feature, threshold, default_left, roots, depth, category_row=None,
                   category_words=None):
    """The leaf each row reaches in each tree, from raw feature values.

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32; NaN is missing     # IN
    left, right, feature : arrays of shape (n_nodes_total,), int32        # IN
        Children (-1 at leaves) and split features (0 at leaves) of all trees,
        concatenated; child ids are global.
    threshold : array of shape (n_nodes_total,), float32                  # IN
    default_left : array of shape (n_nodes_total,), bool                  # IN
    roots : array of shape (n_trees,), int32                              # IN
    depth : int, the deepest tree's depth
    category_row : array of shape (n_nodes_total,), int32, or None: each category-set split's
        row of ``category_words`` (-1 at other nodes)                       # IN
    category_words : array of shape (n_category_splits, n_words), uint32, or None: the
        categories each sends right (bit ``c % 32`` of word ``c // 32``; a code beyond them is
        in no set, and goes left)                                          # IN

    Returns
    -------
    array of shape (n_rows, n_trees), int32: global leaf ids               # OUT
    """
    xp = get_xp(X)
    node = xp.broadcast_to(roots[None, :], (X.shape[0], roots.shape[0])).copy()
    for _ in range(depth):
        value = xp.take_along_axis(X, feature[node], axis=1)
        go_left = xp.where(xp.isnan(value), default_left[node], value < threshold[node])
        if category_row is not None:
            rows = category_row[node]
            n_codes = category_words.shape[1] * 32
            known = (rows >= 0) & (value >= 0) & (value < n_codes)
            code = xp.where(known, value, 0).astype(np.int64)
            word = category_words[xp.maximum(rows, 0), code >> 5]
            in_set = ((word >> (code & 31).astype(np.uint32)) & 1) != 0
            go_left = xp.where(rows < 0, go_left, ~(known & in_set))  # a code past the words: in no set
            go_left = xp.where(xp.isnan(value), default_left[node], go_left)
        child = xp.where(go_left, left[node], right[node])
        node = xp.where(child >= 0, child, node)
    return node


def predict_margins(X, left, right, feature, threshold, default_left, value, roots, outputs, depth,
                    margins, category_row=None, category_words=None, walk=None):
    """Add every tree's leaf value to ``margins``, in model order (one float32 add each).

    Parameters
    ----------
    X : array of shape (n_rows, n_features), float32; NaN is missing; or a CSR matrix   # IN
    left, right, feature, threshold, default_left, roots, depth : as predict_leaves   # IN
    category_row, category_words : as predict_leaves                      # IN
    value : array of shape (n_nodes_total,), float32: node values         # IN
    outputs : array of shape (n_trees,), int32: each tree's margin column # IN
    margins : array of shape (n_rows, n_outputs), float32                 # IN/OUT, updated in place
    walk : walk_table's of these nodes, or None (made here): a forest's, made once   # IN

    Returns
    -------
    margins
    """
    if roots.shape[0] == 0 or X.shape[0] == 0:
        return margins
    node = lambda a: np.ascontiguousarray(a, dtype=POSITION_DTYPE)  # noqa: E731
    steps, walked_threshold = walk if walk is not None else walk_table(left, feature, default_left, threshold)
    arguments = (*feature_rows(X), steps, walked_threshold, None if category_row is None else node(category_row),
                 None if category_words is None else np.ascontiguousarray(category_words, dtype=np.uint32),
                 np.ascontiguousarray(value, dtype=LEAF_DTYPE), node(roots), node(outputs), int(depth))
    loops.predict(_threads_for(X.shape[0]), *arguments, margins)
    return margins


def walk_table(left, feature, default_left, threshold):
    """The nodes as loops.predict walks them, one int64 a node and a threshold.

    A step's low 32 bits are the node's left child (a leaf's: the leaf itself), its high 32
    the split feature (0 at a leaf) with the sign bit set where missing values go left (set at
    a leaf). A leaf's threshold is NaN: no value compares at or above it, and a missing one
    goes left, to the leaf, so a row that reached it stays for the rest of the levels.

    Returns
    -------
    (array of shape (n_nodes_total,), int64; array of shape (n_nodes_total,), float32)
    """
    left = np.asarray(left, dtype=np.int64)
    leaf = left < 0
    child = np.where(leaf, np.arange(left.shape[0], dtype=np.int64), left)
    missing_left = leaf | np.asarray(default_left, dtype=bool)
    rule = np.where(leaf, 0, np.asarray(feature, dtype=np.int64)) | np.where(missing_left, np.int64(1) << 31, 0)
    steps = np.ascontiguousarray(child | (rule << 32), dtype=np.int64)
    return steps, np.ascontiguousarray(np.where(leaf, np.nan, threshold), dtype=CUT_DTYPE)


# ---- learning to rank ----------------------------------------------------------------------

#: The fewest groups a thread of the ranking loops takes.
_GROUPS_PER_THREAD = 64


def group_order(key, group_of_row):
    """Each group's rows by ``key`` descending, ties in row order (a stable sort), groups in
    order: the model's ranking of each query (``key`` its scores) or the ideal one (its labels).

    Parameters
    ----------
    key : array of shape (n_rows,), float32, finite                         # IN
    group_of_row : array of shape (n_rows,), int64, ascending               # IN

    Returns
    -------
    array of shape (n_rows,), int64: row indices                            # OUT
    """
    xp = get_xp(key)
    descending = key.dtype.type(0) - key  # 0 - x, not -x: no -0.0 to order apart from 0.0
    if xp is np:
        return np.lexsort((descending, group_of_row)).astype(INDEX_DTYPE)
    by_key = xp.argsort(descending)  # cupy's sorts are stable
    return by_key[xp.argsort(group_of_row[by_key])].astype(INDEX_DTYPE)


class Partners(NamedTuple):
    """'mean''s pairs: each row's partners (the rows it drew and those that drew it, a partner
    drawn twice listed twice), in the order of their places in the model's ranking."""

    place: object  # (n_rows,) int64: each row's place in its group's order
    ptr: object  # (n_rows + 1,) int64: row r's partners are rows[ptr[r]:ptr[r + 1]]
    rows: object  # int64
    n_draws: int  # partners each row drew


def lambda_gradients(group_ptr, order, score, label, kind, top_k, exp_gain, score_normalization,
                     normalization, inv_ideal, discount, partners, group_scale, t_plus=None, t_minus=None):
    """LambdaMART's gradient pairs (XGBoost's rank:ndcg, rank:pairwise, rank:map).

    Parameters
    ----------
    group_ptr : array of shape (n_groups + 1,), int64: each group's first row, then n_rows   # IN
    order : array of shape (n_rows,), int64: group_order of the scores                  # IN
    score, label : arrays of shape (n_rows,), float32                                    # IN
    kind : rank_loops.NDCG, PAIRWISE or MAP: the metric change that weighs a pair
    top_k : int: 'topk' pairs each of the first top_k places with every place below it
    exp_gain, score_normalization, normalization : bool: XGBoost's ndcg_exp_gain,
        lambdarank_score_normalization and lambdarank_normalization
    inv_ideal : array of shape (n_groups,), float64: 1 / the group's ideal DCG (0 for none)  # IN
    discount : array of shape (>= largest group,), float64: 1 / log2(place + 2)            # IN
    partners : Partners ('mean'), or None ('topk')                                          # IN
    group_scale : array of shape (n_groups,), float64: the group's weight, normalised       # IN
    t_plus, t_minus : arrays of shape (k,), float64, or None: unbiased LambdaMART's position
        biases of the first k places of the input order (None: no position bias)           # IN

    Returns
    -------
    array of shape (n_rows, 2), float32: (gradient, hessian)                              # OUT
    with the position bias, also array of shape (n_rows, 2), float64: each row's costs as
        the higher of its tracked pairs (over t_minus) and as the lower (over t_plus)     # OUT
    """
    n_rows, n_groups = score.shape[0], group_ptr.shape[0] - 1
    gpair = np.zeros((n_rows, 2), dtype=GRADIENT_DTYPE)
    scratch = np.empty((3, n_rows), dtype=np.float64)
    unbiased = t_plus is not None
    no_bias = np.zeros(0, dtype=np.float64)
    costs = np.zeros((n_rows if unbiased else 0, 2), dtype=np.float64)
    none = np.zeros(0, dtype=INDEX_DTYPE)
    place, ptr, rows, n_draws = (none, none, none, 0) if partners is None else partners
    threads = max(1, min(loops.threads(), n_groups // _GROUPS_PER_THREAD))
    rank_loops.lambda_gradients(threads, group_ptr, order, score, label, int(kind), int(top_k), bool(exp_gain),
                                bool(score_normalization), bool(normalization), inv_ideal, discount, place, ptr, rows,
                                int(n_draws), group_scale, t_plus if unbiased else no_bias,
                                t_minus if unbiased else no_bias, scratch[0], scratch[1], scratch[2], gpair, costs)
    return (gpair, costs) if unbiased else gpair


def rank_scores(group_ptr, metric, order, ideal, label, top_k, exp_gain, minus, discount):
    """Each group's ranking metric (XGBoost's ndcg@k, map@k, pre@k).

    Parameters
    ----------
    group_ptr : array of shape (n_groups + 1,), int64                          # IN
    metric : rank_loops.SCORE_NDCG, SCORE_MAP or SCORE_PRECISION
    order, ideal : arrays of shape (n_rows,), int64: group_order of the predictions and
        of the labels                                                          # IN
    label : array of shape (n_rows,), float32                                  # IN
    top_k : int: the cut-off (the whole group where it is larger)
    exp_gain, minus : bool: NDCG's gain 2**r - 1; a group with nothing relevant scores 0, not 1
    discount : array of shape (>= largest group,), float64                     # IN

    Returns
    -------
    array of shape (n_groups,), float64                                        # OUT
    """
    n_groups = group_ptr.shape[0] - 1
    scores = np.empty(n_groups, dtype=np.float64)
    threads = max(1, min(loops.threads(), n_groups // _GROUPS_PER_THREAD))
    rank_loops.rank_scores(threads, int(metric), group_ptr, order, ideal, label, int(top_k), bool(exp_gain),
                           bool(minus), discount, scores)
    return scores
