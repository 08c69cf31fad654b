"""The same engine on a CUDA GPU through cupy: kernels equal their NumPy twins exactly,
models equal the CPU's. Skipped where no GPU is found (marker ``gpu``)."""

import numpy as np
import pytest

import dgboost
from dgboost import backend, kernels
from dgboost.data import sketch
from dgboost.callback import TrainingCallback
from dgboost.kernels import cpu, cuda
from dgboost.tree.predict import Forest
from test_kernels import grouped  # rows of each slot as ridx ranges
from dgboost.datasets import make_higgs_like
from dgboost.data.ellpack import build_ellpack
from dgboost.data.sketch import Sample, compute_cuts

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")


def _matrix_inputs(n_rows, n_features, max_bin, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 0] = np.nan  # an all-missing column
    if n_features > 1:
        X[:, 1] = 3.0  # a single-bin column
    cuts = compute_cuts(Sample(np.arange(n_rows), X, np.ones(n_rows, np.float32)), max_bin)
    return X, cuts, rng


# Awkward sizes: one row, rows not a multiple of a block, 28 and 500 features, 2 to 256 bins,
# and a row count past one histogram block.
CASES = [(1, 28, 256), (1000, 28, 256), (777, 500, 64), (3000, 5, 2), (4099, 28, 256), (70_001, 28, 256),
         (5_000, 500, 256)]
RULES = [
    kernels.Regularisation(1.0, 0.0, 1.0, 0.0, 0.0),
    kernels.Regularisation(0.5, 2.0, 0.0, 0.0, 0.1),  # alpha
    kernels.Regularisation(1.0, 0.0, 3.0, 0.7, 0.0),  # max_delta_step
    kernels.Regularisation(0.0, 1.5, 0.5, 0.7, 0.0),  # both
]


@pytest.mark.parametrize("n_rows, n_features, max_bin", CASES)
def test_kernels_equal_their_numpy_twins(n_rows, n_features, max_bin):
    X, cuts, rng = _matrix_inputs(n_rows, n_features, max_bin, n_rows)
    host = build_ellpack(X, cuts)
    device = build_ellpack(cp.asarray(X), cuts)
    np.testing.assert_array_equal(device.packed.get(), host.packed)
    np.testing.assert_array_equal(device.unpack().get(), host.unpack())
    layout = host.layout
    on = lambda arrays: tuple(cp.asarray(a) for a in arrays)  # noqa: E731

    # Histograms of 4 nodes (one empty), rows of a fifth node left out; exact integers
    # from float32 pairs made fixed point in the kernel.
    gpair = rng.standard_normal((n_rows, 2)).astype(np.float32) * np.float32(1e3)
    gpair[:, 1] = np.abs(gpair[:, 1])
    pair_scales = np.array([2.0**30, 2.0**27])
    slot = rng.choice([-1, 0, 1, 3], size=n_rows).astype(np.int32)
    slot_rows = grouped(slot, 4)
    args = (layout.bits, layout.cells_per_word, layout.n_features, layout.missing_symbol, host.host_bin_offsets)
    hist = cpu.build_histograms(host.packed, *args, gpair, pair_scales, *slot_rows)
    hist_gpu = cuda.build_histograms(device.packed, *args, *on((gpair, pair_scales)), *on(slot_rows))
    np.testing.assert_array_equal(hist_gpu.get(), hist)

    # Split tables: equal bits, under every kind of regularisation.
    n_bins = np.diff(host.host_bin_offsets)
    feature_of_bin = np.repeat(np.arange(n_features), n_bins).astype(np.int32)
    node_sums = hist.sum(axis=1) // n_features + rng.integers(0, 2**30, size=(4, 2))  # some missing mass
    active = np.array([True, True, False, True])
    scales = np.array([2.0**20, 2.0**21])
    for rules in RULES:
        table = cpu.evaluate_splits(hist, node_sums, active, feature_of_bin, host.host_bin_offsets, scales, rules)
        table_gpu = cuda.evaluate_splits(*on((hist, node_sums, active, feature_of_bin)), device.bin_offsets,
                                         cp.asarray(scales), rules)
        np.testing.assert_array_equal(table_gpu.get(), table, err_msg=str(rules))

    # Partitioning (stable) and routing.
    ridx, seg_begin, seg_end = grouped(np.maximum(slot, 0), 4)
    split = (rng.integers(0, n_features, 4).astype(np.int32), rng.integers(0, max_bin, 4).astype(np.int32),
             rng.random(4) < 0.5, np.array([5, -1, 7, 9], np.int32))
    new_ridx, n_left = cpu.partition_rows(host.packed, layout.bits, layout.cells_per_word,
                                          layout.missing_symbol, ridx, seg_begin, seg_end, *split)
    new_ridx_gpu, n_left_gpu = cuda.partition_rows(device.packed, layout.bits, layout.cells_per_word,
                                                   layout.missing_symbol, *on((ridx, seg_begin, seg_end) + split))
    np.testing.assert_array_equal(new_ridx_gpu.get(), new_ridx)
    np.testing.assert_array_equal(n_left_gpu.get(), n_left)
    n_nodes = 15
    tree = (rng.integers(0, n_features, n_nodes).astype(np.int32), rng.integers(0, max_bin, n_nodes).astype(np.int32),
            rng.random(n_nodes) < 0.5, np.where(np.arange(n_nodes) < 7, 2 * np.arange(n_nodes) + 1, -1).astype(np.int32))
    leaf = cpu.route_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, *tree, depth=3)
    leaf_gpu = cuda.route_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                               *on(tree), depth=3)
    np.testing.assert_array_equal(leaf_gpu.get(), leaf)


def test_histograms_and_partition_of_many_slots_equal_their_twins():
    """3001 slots, some empty: the slot offsets' single-block scan gives each thread
    several slots, and the per-slot left counts cover every slot."""
    n_rows, n_slots = 20_000, 3001
    X, cuts, rng = _matrix_inputs(n_rows, 28, 256, 3)
    host, device = build_ellpack(X, cuts), build_ellpack(cp.asarray(X), cuts)
    layout = host.layout
    on = lambda arrays: tuple(cp.asarray(a) for a in arrays)  # noqa: E731
    slot = rng.integers(-1, n_slots, size=n_rows).astype(np.int32)
    gpair = (rng.standard_normal((n_rows, 2)) * 100).astype(np.float32)
    args = (layout.bits, layout.cells_per_word, layout.n_features, layout.missing_symbol, host.host_bin_offsets)
    scales = np.array([2.0**30, 2.0**29])
    hist = cpu.build_histograms(host.packed, *args, gpair, scales, *grouped(slot, n_slots))
    np.testing.assert_array_equal(
        cuda.build_histograms(device.packed, *args, *on((gpair, scales)), *on(grouped(slot, n_slots))).get(), hist)
    ridx, seg_begin, seg_end = grouped(np.maximum(slot, 0), n_slots)
    left_child = np.where(rng.random(n_slots) < 0.7, 5000 + 2 * np.arange(n_slots), -1).astype(np.int32)
    split = (rng.integers(0, 28, n_slots).astype(np.int32), rng.integers(0, 256, n_slots).astype(np.int32),
             rng.random(n_slots) < 0.5, left_child)
    expected = cpu.partition_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                                  seg_begin, seg_end, *split)
    got = cuda.partition_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                              *on((ridx, seg_begin, seg_end) + split))
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.get(), e)


@pytest.mark.parametrize("n_places", [0, 256, 4096, 4097])
def test_partition_at_block_edges_equals_its_twin(n_places):
    """Places a multiple of the partition's 256-thread blocks or one past it, a range ending at a
    block's edge, padding slots (empty ranges at n_places) and a level of no slots: the CPU
    twin's moves and counts."""
    n_rows = 5000
    X, cuts, rng = _matrix_inputs(n_rows, 28, 256, 5)
    host, device = build_ellpack(X, cuts), build_ellpack(cp.asarray(X), cuts)
    layout = host.layout
    ridx = rng.permutation(n_rows)[:n_places].astype(np.int32)  # a sample of the rows
    cuts_at = np.unique(np.concatenate([[0, n_places], [256, 512, 1000] if n_places > 1000 else []]).astype(np.int32))
    seg_begin = np.concatenate([cuts_at[:-1], [n_places] * 3]).astype(np.int32)  # three padding slots
    seg_end = np.concatenate([cuts_at[1:], [n_places] * 3]).astype(np.int32)
    n_level = len(seg_begin)
    for n in (n_level, 0):
        split = (rng.integers(0, 28, n).astype(np.int32), rng.integers(0, 256, n).astype(np.int32),
                 rng.random(n) < 0.5, (100 + 2 * np.arange(n)).astype(np.int32))
        expected = cpu.partition_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                                      seg_begin[:n], seg_end[:n], *split)
        got = cuda.partition_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                                  *(cp.asarray(a) for a in (ridx, seg_begin[:n], seg_end[:n]) + split))
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_array_equal(g.get(), e)
        if n and n_places:
            assert 0 < expected[1].sum() < n_places and (expected[1][-3:] == 0).all()


def test_partition_of_a_lossguide_batch_equals_its_twin():
    """A batch of leaves in the order of their ranges, other leaves' rows between them, and a
    rank's empty leaf where the next leaf's range starts (lossguide sorts it first): the CPU
    twin's moves."""
    n_rows = 5000
    X, cuts, rng = _matrix_inputs(n_rows, 28, 256, 4)
    host, device = build_ellpack(X, cuts), build_ellpack(cp.asarray(X), cuts)
    layout = host.layout
    ridx = rng.permutation(n_rows).astype(np.int32)
    # Leaves of 900, 1300 and 1000 rows split; leaves of 1100 and 700 rows lie between them; one
    # is empty here, at 3300.
    seg_begin, seg_end = np.array([0, 2000, 3300, 4000], np.int32), np.array([900, 3300, 3300, 5000], np.int32)
    split = (rng.integers(0, 28, 4).astype(np.int32), rng.integers(0, 256, 4).astype(np.int32),
             rng.random(4) < 0.5, np.array([41, 43, 45, 47], np.int32))
    expected = cpu.partition_rows(host.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                                  seg_begin, seg_end, *split)
    got = cuda.partition_rows(device.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                              *(cp.asarray(a) for a in (ridx, seg_begin, seg_end) + split))
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g.get(), e)
    np.testing.assert_array_equal(expected[0][900:2000], ridx[900:2000])
    assert 0 < expected[1][0] < 900 and expected[1][2] == 0


def test_rows_put_at_their_leaves_equal_the_twin():
    """place_rows: ranges long and short, an empty one, rows of other nodes between them
    untouched; host ranges, and device ranges (a depthwise tree's), more than a grid's rows."""
    rng = np.random.default_rng(12)
    n_rows = 300_000  # a range longer than one launch's blocks cover: the grid strides
    ridx = rng.permutation(n_rows).astype(np.int32)
    positions = rng.integers(0, 50, n_rows).astype(np.int32)
    begin, end, node = (np.array(a, np.int32) for a in ([0, 1000, 5000, 2000], [700, 1000, 290_000, 2001],
                                                          [60, 61, 62, 63]))  # [5000, 290000): 285,000 places
    expected = cpu.place_rows(ridx, begin, end, node, positions.copy())
    got = cuda.place_rows(cp.asarray(ridx), begin, end, node, cp.asarray(positions))
    np.testing.assert_array_equal(got.get(), expected)
    assert (expected[ridx[5000:290_000]] == 62).all() and (expected[ridx[700:1000]] == positions[ridx[700:1000]]).all()
    got = cuda.place_rows(cp.asarray(ridx), *(cp.asarray(a) for a in (begin, end, node)), cp.asarray(positions))
    np.testing.assert_array_equal(got.get(), expected)

    n_ranges = 70_000  # above a grid's 65,535 block rows: they stride over the ranges
    cuts = np.sort(rng.choice(np.arange(1, n_rows), n_ranges, replace=False)).astype(np.int32)
    begin, end = cuts, np.append(cuts[1:], n_rows).astype(np.int32)
    end[::3] = begin[::3]  # every third range empty (a node that split)
    node = rng.permutation(n_ranges).astype(np.int32)
    expected = cpu.place_rows(ridx, begin, end, node, positions.copy())
    got = cuda.place_rows(cp.asarray(ridx), *(cp.asarray(a) for a in (begin, end, node)), cp.asarray(positions))
    np.testing.assert_array_equal(got.get(), expected)
    assert (expected[ridx[begin[1]:end[1]]] == node[1]).all() and begin[0] == end[0]
    assert (expected[ridx[:begin[1]]] == positions[ridx[:begin[1]]]).all()  # before it: no range, or an empty one


def test_histograms_of_matrices_taking_different_shared_memory_in_turn():
    """Each matrix's launch plan is cached: matrices whose blocks take different amounts of
    shared memory (all above the 48 KB default) still build right when they alternate."""
    rng = np.random.default_rng(11)
    cases = []
    for n_features in (28, 20, 28):  # 112 KB, 80 KB, then the first matrix's cached plan again
        X, cuts, _ = _matrix_inputs(3000, n_features, 256, n_features)
        cases.append((build_ellpack(X, cuts), build_ellpack(cp.asarray(X), cuts)))
    cases[2] = cases[0]
    for host, device in cases:
        layout = host.layout
        n_rows = host.packed.shape[0]
        gpair = (rng.standard_normal((n_rows, 2)) * 10).astype(np.float32)
        slot_rows = grouped(rng.integers(0, 3, n_rows).astype(np.int32), 3)
        args = (layout.bits, layout.cells_per_word, layout.n_features, layout.missing_symbol, host.host_bin_offsets)
        scales = np.array([2.0**30, 2.0**29])
        expected = cpu.build_histograms(host.packed, *args, gpair, scales, *slot_rows)
        got = cuda.build_histograms(device.packed, *args, cp.asarray(gpair), cp.asarray(scales),
                                    *(cp.asarray(a) for a in slot_rows))
        np.testing.assert_array_equal(got.get(), expected)


@pytest.mark.parametrize("n_rows", [0, 1, 1000, 3_000_001])
def test_gradient_reductions_equal_their_twins(n_rows):
    """A tree's max |gradient| and fixed-point sums, over a grid-stride loop; a NaN wins the max."""
    rng = np.random.default_rng(n_rows)
    gpair = (rng.standard_normal((n_rows, 2)) * 1e3).astype(np.float32)
    gpair[:, 1] = np.abs(gpair[:, 1])
    scales = np.array([2.0**25, 2.0**28])
    for expected, got in [(cpu.gradient_bounds(gpair), cuda.gradient_bounds(cp.asarray(gpair))),
                          (cpu.gradient_sums(gpair, scales), cuda.gradient_sums(cp.asarray(gpair), cp.asarray(scales)))]:
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.get(), expected)
    if n_rows:
        gpair[n_rows // 2, 0] = np.nan
        assert np.isnan(cuda.gradient_bounds(cp.asarray(gpair)).get()[0])
        assert np.isnan(cpu.gradient_bounds(gpair)[0])


def test_fused_glue_equals_the_array_programs():
    """The GPU's one-launch glue gives the bits of the array programs it replaced: logistic's
    gradient pairs (saturated margins, weights, scale_pos_weight), the fixed-point scale (zero,
    infinite and NaN bounds, a count on the device), leaf values added to margins, a split
    table's columns, and joining a tree's levels."""
    from dgboost.fixed_point import power_of_two_scale
    from dgboost.objectives import make_objective
    from dgboost.objectives.base import Objective
    from dgboost.params import TrainParams
    from dgboost.tree.split import SplitTable

    rng = np.random.default_rng(5)
    n = 100_003
    margins = cp.asarray((4 * rng.standard_normal((n, 1))).astype(np.float32))
    margins[:20] = cp.float32(100) * cp.asarray(rng.choice([-1, 1], (20, 1)).astype(np.float32))
    label = cp.asarray(rng.integers(0, 2, n).astype(np.float32))
    weight = cp.asarray(rng.random(n).astype(np.float32))
    for extra in ({}, {"scale_pos_weight": 2.5}):
        objective = make_objective(TrainParams.from_dict({"objective": "binary:logistic", **extra}))
        for w in (None, weight):
            got = objective.gradients(margins, label, w)
            expected = Objective.gradients(objective, margins, label, objective._positive_weighted(label, w))
            assert got.dtype == expected.dtype and got.shape == expected.shape
            np.testing.assert_array_equal(got.get().view(np.uint32), expected.get().view(np.uint32))
            trained = objective.training_gradients(margins, label, w)  # training's path: weighted once
            np.testing.assert_array_equal(trained.get().view(np.uint32), got.get().view(np.uint32))

    bounds = np.array([0.0, 1e-30, 3.7, 2.0**60, np.inf, np.nan])
    for n_total in (1, 12_345, 2**40):
        expected = power_of_two_scale(bounds, n_total, 52)
        np.testing.assert_array_equal(power_of_two_scale(cp.asarray(bounds), n_total, 52).get(), expected)
        np.testing.assert_array_equal(power_of_two_scale(cp.asarray(bounds), cp.asarray([n_total]), 52).get(),
                                      expected)

    positions = rng.integers(0, 31, n).astype(np.int32)
    leaf_value = rng.standard_normal(31).astype(np.float32)
    host = rng.standard_normal((n, 3)).astype(np.float32)
    device = cp.asarray(host)
    cpu.add_leaf_values(host, 1, leaf_value, positions)
    cuda.add_leaf_values(device, 1, cp.asarray(leaf_value), cp.asarray(positions))
    np.testing.assert_array_equal(device.get(), host)

    table = rng.integers(-1, 30, (9, len(kernels.SPLIT_TABLE_COLUMNS))).astype(np.int64)
    on_host, on_device = SplitTable(table), SplitTable(cp.asarray(table))
    for column in ("feature", "bin", "default_left"):
        got, expected = getattr(on_device, column), getattr(on_host, column)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.get(), expected)

    pieces = [rng.integers(0, 9, (k, 2)) for k in (1, 0, 2, 4)]
    for cast in (np.int64, np.int32, bool):
        arrays = [p.astype(cast) for p in pieces]
        joined = backend.join([cp.asarray(a) for a in arrays])
        assert joined.dtype == np.dtype(cast)
        np.testing.assert_array_equal(joined.get(), np.concatenate(arrays))
    mixed = backend.join([cp.zeros(2, np.int32), cp.ones(3, np.int64)])  # dtypes differ: cupy's concatenate
    np.testing.assert_array_equal(mixed.get(), [0, 0, 1, 1, 1])
    wide = cp.arange(12).reshape(4, 3)
    strided = backend.join([wide[:, :2], wide[:2, 1:]])  # pieces not C-contiguous: cupy's concatenate
    np.testing.assert_array_equal(strided.get(), np.concatenate([wide.get()[:, :2], wide.get()[:2, 1:]]))
    alone = cp.arange(5)
    assert backend.join([alone]) is alone  # one piece: itself, no copy


@pytest.mark.parametrize("rules", RULES)
def test_tree_record_equals_its_twin(rules):
    rng = np.random.default_rng(0)
    n_ids = 511
    node_sums = np.stack([rng.integers(-2**45, 2**45, n_ids), rng.integers(0, 2**45, n_ids)], axis=1)
    node_sums[:5, 1] = 0  # no hessian: weight 0
    active = rng.random(n_ids) < 0.9
    table = rng.integers(0, 28, size=(n_ids, len(kernels.SPLIT_TABLE_COLUMNS)))
    table[:, 0], table[:, 3] = rng.random(n_ids) < 0.5, rng.random(n_ids) < 0.5
    table[:, 4] = rng.standard_normal(n_ids).view(np.int64)
    left_child = np.where(table[:, 0] != 0, 2 * np.arange(n_ids) + 1, -1).astype(np.int32)
    scales = np.array([2.0**30, 2.0**31])
    record, leaf = cpu.tree_record(node_sums, active, table, left_child, scales, rules, 0.3)
    record_gpu, leaf_gpu = cuda.tree_record(*(cp.asarray(a) for a in (node_sums, active, table, left_child,
                                                                        scales)), rules, 0.3)
    np.testing.assert_array_equal(record_gpu.get(), record)
    np.testing.assert_array_equal(leaf_gpu.get(), leaf)


@pytest.mark.parametrize("n_parents, n_bins", [(1, 3), (5, 7_140), (64, 127)])
def test_sibling_histograms_equal_their_twin(n_parents, n_bins):
    rng = np.random.default_rng(n_bins)
    parent = rng.integers(-2**50, 2**50, size=(n_parents, n_bins, 2))
    built = rng.integers(-2**50, 2**50, size=(n_parents, n_bins, 2))
    build_left = rng.random(n_parents) < 0.5
    slot_of_rank = rng.permutation(n_parents + 3)[:n_parents].astype(np.int32)  # parents in a wider level
    level = rng.integers(-2**50, 2**50, size=(n_parents + 3, n_bins, 2))
    level[slot_of_rank] = parent
    expected = cpu.sibling_histograms(level, slot_of_rank, built, build_left)
    got = cuda.sibling_histograms(cp.asarray(level), cp.asarray(slot_of_rank), cp.asarray(built),
                                  cp.asarray(build_left))
    np.testing.assert_array_equal(got.get(), expected)


@pytest.mark.parametrize("n_slots, bound", [(1, True), (6, False), (6, True), (3001, True)])
def test_level_bookkeeping_kernels_equal_their_twins(n_slots, bound):
    """3001 slots: number_children's threads each take several; the bound leaves padding."""
    rng = np.random.default_rng(n_slots)
    table = rng.integers(-2**40, 2**40, size=(n_slots, len(kernels.SPLIT_TABLE_COLUMNS)))
    table[:, 0] = rng.random(n_slots) < 0.6
    n_parents = n_slots if bound else int(table[:, 0].sum())
    lengths = rng.integers(0, 50, n_slots)
    seg_end = np.cumsum(lengths).astype(np.int32)
    seg_begin = (seg_end - lengths).astype(np.int32)
    n_left = rng.integers(0, lengths + 1).astype(np.int32)
    n_rows = int(seg_end[-1]) + 7
    on = lambda arrays: tuple(cp.asarray(a) for a in arrays)  # noqa: E731
    numbered = cpu.number_children(table, 17, n_parents)
    numbered_gpu = cuda.number_children(cp.asarray(table), 17, n_parents)
    for got, expected in zip(numbered_gpu, numbered):
        np.testing.assert_array_equal(got.get(), expected)
    inputs = (seg_begin, seg_end, n_left)
    following = cpu.next_frontier(table, *numbered[1:], *inputs, n_rows)
    following_gpu = cuda.next_frontier(cp.asarray(table), *numbered_gpu[1:], *on(inputs), n_rows)
    for got, expected in zip(following_gpu, following):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got.get(), expected)


@pytest.mark.parametrize("n_rows, n_features, max_bin", [(1, 3, 256), (3000, 28, 256), (2049, 500, 64),
                                                         (5000, 4, 2)])
def test_cuts_on_the_device_equal_the_hosts(monkeypatch, n_rows, n_features, max_bin):
    """Weighted, with ties (rounded values), missing values and an all-missing column;
    a small sort budget makes the 500-feature case run in chunks of features."""
    monkeypatch.setattr(sketch, "_SORT_CELLS", 1 << 18)
    rng = np.random.default_rng(n_features)
    X = np.round(rng.standard_normal((n_rows, n_features)), 2).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:, 0] = np.nan
    weights = rng.gamma(1.0, 1.0, n_rows).astype(np.float32)
    host = compute_cuts(Sample(np.arange(n_rows), X, weights), max_bin)
    device = compute_cuts(Sample(cp.arange(n_rows), cp.asarray(X), cp.asarray(weights)), max_bin)
    np.testing.assert_array_equal(device.offsets, host.offsets)
    np.testing.assert_array_equal(device.values, host.values)


@pytest.mark.parametrize("extra_features, n_outputs", [(0, 4), (0, 1), (172, 4)])
def test_prediction_kernel_equals_its_twin(extra_features, n_outputs):
    """28 features are staged in shared memory, 200 are read from global memory."""
    X, y = make_higgs_like(3_001, seed=3, missing_fraction=0.1, task="multiclass")
    X = np.hstack([X, np.random.default_rng(1).standard_normal((len(X), extra_features), dtype=np.float32)])
    params = ({"objective": "multi:softprob", "num_class": 4} if n_outputs > 1
              else {"objective": "reg:squarederror"})
    booster = dgboost.train({**params, "max_depth": 4}, X, y, num_boost_round=7)
    host = Forest.from_trees(booster.trees, booster.tree_outputs, np)
    device = Forest.from_trees(booster.trees, booster.tree_outputs, cp)
    start = np.random.default_rng(0).standard_normal((len(X), n_outputs)).astype(np.float32)
    fields = ("left", "right", "feature", "threshold", "default_left", "value", "roots", "outputs_device")
    expected = cpu.predict_margins(X, *(getattr(host, f) for f in fields[:-1]), host.outputs_device,
                                   host.depth, start.copy())
    got = cuda.predict_margins(cp.asarray(X), *(getattr(device, f) for f in fields), device.depth,
                               cp.asarray(start))
    np.testing.assert_array_equal(got.get(), expected)


@pytest.mark.parametrize("sampling", [{"subsample": 0.9}, {"subsample": 0.3, "sampling_method": "gradient_based"},
                                      {"sampling_method": "goss", "eta": 0.5}], ids=["uniform", "mvs", "goss"])
def test_a_round_reads_the_device_once(monkeypatch, sampling):
    """Inside a round nothing synchronises but the one read of its trees and metrics
    (backend.start_read): cupyx.allow_synchronize(False) turns any other
    synchronisation into an error. Sampling's thresholds are found on the device."""
    import cupyx

    monkeypatch.setattr(backend, "read_guard", lambda: cupyx.allow_synchronize(True))

    class Watch(TrainingCallback):
        def __init__(self):
            self.reads = []

        def before_iteration(self, model, epoch, evals_log):
            self.guard = cupyx.allow_synchronize(False)
            self.guard.__enter__()
            self.start = backend.host_reads()
            return False

        def after_iteration(self, model, epoch, evals_log):
            self.reads.append(backend.host_reads() - self.start)
            self.guard.__exit__(None, None, None)
            return False

    X, y = make_higgs_like(50_000, seed=0, missing_fraction=0.05)
    X_valid, y_valid = make_higgs_like(10_000, seed=1)
    for evals in [(), [(cp.asarray(X_valid), cp.asarray(y_valid), "valid")]]:
        watch = Watch()
        dgboost.train({"objective": "binary:logistic", "max_depth": 8, "device": "cuda", **sampling,
                       "eval_metric": ["logloss", "auc", "error"]},
                      cp.asarray(X), cp.asarray(y), num_boost_round=5, evals=evals, callbacks=[watch])
        assert watch.reads == [1] * 5, watch.reads


def test_squarederror_model_file_is_identical_to_the_cpus(tmp_path):
    X, y = make_higgs_like(20_000, seed=0, task="regression")
    X_valid, y_valid = make_higgs_like(5_000, seed=1, task="regression")
    params = {"max_depth": 6, "eta": 0.1, "subsample": 0.8, "eval_metric": ["rmse", "mae"]}
    cpu = dgboost.train(params, X, y, num_boost_round=30, evals=[(X_valid, y_valid, "valid")],
                        early_stopping_rounds=5)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=30,
                        evals=[(cp.asarray(X_valid), cp.asarray(y_valid), "valid")], early_stopping_rounds=5)
    cpu.save_model(tmp_path / "cpu.json")
    gpu.save_model(tmp_path / "gpu.json")
    assert (tmp_path / "cpu.json").read_bytes() == (tmp_path / "gpu.json").read_bytes()
    assert gpu.evals_result() == cpu.evals_result()
    # numpy data with device="cuda" is copied to the GPU and trains the same model.
    moved = dgboost.train({**params, "device": "cuda"}, X, y, num_boost_round=30,
                          evals=[(X_valid, y_valid, "valid")], early_stopping_rounds=5)
    moved.save_model(tmp_path / "moved.json")
    assert (tmp_path / "moved.json").read_bytes() == (tmp_path / "cpu.json").read_bytes()


def test_logistic_predictions_within_1e6_of_the_cpus():
    X, y = make_higgs_like(20_000, seed=0)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1}
    cpu = dgboost.train(params, X, y, num_boost_round=30)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=30)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), atol=1e-6, rtol=0)


def test_predictions_come_back_in_the_inputs_family():
    X, y = make_higgs_like(2_000, seed=0)
    booster = dgboost.train({"objective": "binary:logistic", "device": "cuda"}, X, y, num_boost_round=5)
    on_gpu = booster.predict(cp.asarray(X))
    on_cpu = booster.predict(X)
    assert isinstance(on_gpu, cp.ndarray) and isinstance(on_cpu, np.ndarray)
    # Margins are the same float32 sums; the sigmoid's exp may differ by an ulp.
    np.testing.assert_array_equal(booster.predict(cp.asarray(X), output_margin=True).get(),
                                  booster.predict(X, output_margin=True))
    np.testing.assert_allclose(on_gpu.get(), on_cpu, atol=1e-6, rtol=0)


@pytest.mark.parametrize("objective, extra", [
    ("multi:softprob", {"num_class": 4}), ("count:poisson", {}), ("reg:pseudohubererror", {}),
])
def test_other_objectives_agree_with_the_cpu(objective, extra):
    X, y = make_higgs_like(10_000, seed=0, task="multiclass")
    if objective == "count:poisson":
        y = np.floor(y * 1.5)
    params = {"objective": objective, "max_depth": 5, **extra}
    cpu = dgboost.train(params, X, y, num_boost_round=10)
    gpu = dgboost.train({**params, "device": "cuda"}, cp.asarray(X), cp.asarray(y), num_boost_round=10)
    np.testing.assert_allclose(gpu.predict(X), cpu.predict(X), atol=1e-5, rtol=1e-5)


def test_host_arrays_reach_the_device_without_a_pinned_copy_of_their_size(monkeypatch):
    """A first call on data of a new size must not page-lock a buffer as large as the data
    (0.27 s for 400 MB on an H100 host): host arrays are copied straight from their pages."""
    pool = cp.get_default_pinned_memory_pool()
    asked = []

    def noted(size):
        asked.append(size)
        return pool.malloc(size)

    cp.cuda.set_pinned_memory_allocator(noted)
    try:
        X = np.random.default_rng(0).standard_normal((50_000, 40)).astype(np.float32)
        strided = np.asfortranarray(X)
        for host in (X, strided, X[:, 3]):
            moved = backend.asarray(cp, host)
            np.testing.assert_array_equal(moved.get(), host)
        np.testing.assert_array_equal(backend.asarray(cp, X, np.float64).get(), X.astype(np.float64))
        assert backend.asarray(cp, np.zeros((0, 3), np.float32)).shape == (0, 3)
        y = (X[:, 0] > 0).astype(np.float32)
        dgboost.train({"device": "cuda", "max_depth": 3}, X, y, num_boost_round=2)
    finally:
        cp.cuda.set_pinned_memory_allocator(pool.malloc)
    assert max(asked, default=0) < X.nbytes // 4, f"pinned buffers of {asked} bytes"


def test_the_forest_is_built_without_per_tree_work_and_walks_as_before():
    """Forest.from_trees joins the trees with array operations over every node (the depth
    included); predictions through it equal the CPU's bit for bit for a forest of uneven trees."""
    X, y = make_higgs_like(5000, seed=3)
    booster = dgboost.train({"objective": "reg:squarederror", "max_depth": 6, "min_child_weight": 50.0},
                            X, y, num_boost_round=40)
    forest = Forest.from_trees(booster.trees, booster.tree_outputs, cp)
    assert forest.depth == max(tree.depth for tree in booster.trees)
    np.testing.assert_array_equal(booster.predict(cp.asarray(X[:700]), output_margin=True).get(),
                                  booster.predict(X[:700], output_margin=True))


@pytest.mark.parametrize("shape, infinities", [((0, 4), []), ((1, 1), []), ((1000, 28), []), ((1000, 28), [(999, 27)]),
                                               ((70_001, 9), [(5, 3), (40_000, 0), (5, 8)]),
                                               ((3, 5), [(0, 0)])])
def test_first_infinite_equals_its_twin(shape, infinities):
    X = np.random.default_rng(len(infinities)).standard_normal(shape).astype(np.float32)
    X[X > 2.5] = np.nan
    for number, (row, column) in enumerate(infinities):
        X[row, column] = np.inf if number % 2 else -np.inf
    expected = cpu.first_infinite(X)
    assert cuda.first_infinite(cp.asarray(X)) == expected
    assert expected == (min(r * shape[1] + c for r, c in infinities) if infinities else -1)
