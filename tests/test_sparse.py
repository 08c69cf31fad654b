"""Sparse input: scipy.sparse matrices end to end, the sparse ELLPACK, and one model whatever
the representation (a dense array with NaN and a CSR matrix of its present values)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dgboost
from dgboost.data import sparse
from dgboost.data.ellpack import EllpackLayout, build_ellpack
from dgboost.data.inputs import RowError, make_dataset
from dgboost.data.sketch import Sample, compute_cuts
from dgboost.kernels import cpu

sp = pytest.importorskip("scipy.sparse")


def _csr_of(X):
    """The CSR matrix of the present (non-NaN) values of a dense X, stored zeros kept."""
    rows, columns = np.nonzero(~np.isnan(X))
    return sp.csr_matrix((X[rows, columns], (rows, columns)), shape=X.shape)


def _missing_heavy(rng, n_rows=1500, n_features=30, missing=0.8):
    X = np.round(rng.standard_normal((n_rows, n_features)), 2).astype(np.float32)
    X[rng.random(X.shape) < missing] = np.nan
    X[:20, 1] = 0.0  # stored zeros are values
    X[20:30, 2] = -0.0
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + 0.1 * np.isnan(X[:, 3])
         + 0.3 * rng.standard_normal(n_rows) > 0).astype(np.float32)
    return X, y


# ---- input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["csr", "csc", "coo", "csr_array", "lil"])
def test_every_scipy_format_becomes_the_same_csr_and_the_users_matrix_is_kept(rng, form):
    X, _ = _missing_heavy(rng, 200, 12)
    given_matrix = _csr_of(X).asformat(form if form != "csr_array" else "csr")
    if form == "csr_array":
        given_matrix = sp.csr_array(given_matrix)
    before = given_matrix.copy()
    got = make_dataset(given_matrix).X
    assert sparse.is_csr(got) and got.dtype == np.float32 and got.has_sorted_indices
    np.testing.assert_array_equal(sparse.to_dense(got), X)
    assert (given_matrix != before).nnz == 0 and type(given_matrix) is type(before)


def test_duplicates_are_summed_and_stored_nan_or_missing_values_dropped():
    coo = sp.coo_matrix((np.array([1.0, 2.0, np.nan, 5.0, 0.0]), (np.array([0, 0, 1, 1, 2]), np.array([1, 1, 0, 2, 0]))),
                        shape=(3, 3))
    got = make_dataset(coo).X
    np.testing.assert_array_equal(sparse.to_dense(got), [[np.nan, 3.0, np.nan], [np.nan, np.nan, 5.0],
                                                         [0.0, np.nan, np.nan]])
    dropped = make_dataset(coo, missing=5.0).X  # a stored value equal to `missing` is missing
    assert dropped.nnz == 2 and np.isnan(sparse.to_dense(dropped)[1, 2])


def test_an_infinite_stored_value_is_named_by_row_and_column():
    X = sp.csr_matrix((np.array([1.0, np.inf]), np.array([3, 1]), np.array([0, 1, 1, 2])), shape=(3, 5))
    with pytest.raises(RowError, match=r"infinite value at row 2, column 1"):
        make_dataset(X)
    with pytest.raises(TypeError, match="not numeric"):
        make_dataset(sp.csr_matrix(np.array([[1 + 2j]])))


def test_an_infinite_missing_value_is_missing_as_in_a_dense_X(tmp_path):
    """missing=inf: a stored inf is missing, not refused, and the model is the dense X's; its
    file keeps missing=inf (JSON has no infinity: written "inf", read back as the number)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)).astype(np.float32)
    X[0, 0], X[5, 2] = np.inf, np.inf
    y = rng.normal(size=40).astype(np.float32)
    params = {"missing": np.inf, "max_depth": 3}
    dense = dgboost.train(params, X, y, num_boost_round=3)
    csr = dgboost.train(params, sp.csr_matrix(X), y, num_boost_round=3)
    assert csr.save_raw() == dense.save_raw()
    np.testing.assert_array_equal(csr.predict(sp.csr_matrix(X)), dense.predict(X))
    csr.save_model(tmp_path / "model.json")
    loaded = dgboost.Booster.load_model(tmp_path / "model.json")
    assert loaded.params.missing == np.inf and loaded.save_raw() == csr.save_raw()
    np.testing.assert_array_equal(loaded.predict(X), dense.predict(X))


def test_indices_out_of_range_are_named_before_any_work():
    """scipy builds a CSR matrix from its arrays without checking them."""
    X = sp.csr_matrix((np.ones(3, np.float32), np.array([0, 7, 1]), np.array([0, 1, 2, 3])), shape=(3, 4))
    with pytest.raises(RowError, match=r"column index out of range \(7\) at row 1: X has 4 columns"):
        dgboost.train({}, X, np.zeros(3))
    broken = sp.csr_matrix((np.ones(3, np.float32), np.array([0, 1, 1]), np.array([0, 2, 1, 3])), shape=(3, 4))
    with pytest.raises(ValueError, match="indptr does not run from 0 up to its 3 entries"):
        dgboost.train({}, broken, np.zeros(3))


# ---- cuts and the matrix --------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 120), st.integers(1, 8), st.floats(0.0, 1.0), st.integers(2, 20), st.integers(0, 2**32))
def test_a_sparse_sample_cuts_as_its_dense_twin(n_rows, n_features, missing, max_bin, seed):
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n_rows, n_features)), 1).astype(np.float32)
    X[rng.random(X.shape) < 0.2] *= -0.0  # signed zeros: one value
    X[rng.random(X.shape) < missing] = np.nan
    weights = rng.gamma(1.0, 1.0, n_rows).astype(np.float32)
    dense = compute_cuts(Sample(np.arange(n_rows), X, weights), max_bin)
    csr = compute_cuts(Sample(np.arange(n_rows), sparse.from_dense(X), weights), max_bin)
    np.testing.assert_array_equal(csr.offsets, dense.offsets)
    assert csr.values.tobytes() == dense.values.tobytes()


def test_sparse_cuts_do_not_depend_on_how_many_cells_are_sorted_at_once(rng, monkeypatch):
    from dgboost.data import sketch

    X, _ = _missing_heavy(rng, 900, 9, missing=0.5)
    sample = Sample(np.arange(900), sparse.from_dense(X), rng.gamma(1.0, 1.0, 900).astype(np.float32))
    whole = compute_cuts(sample, max_bin=8)
    monkeypatch.setattr(sketch, "_SORT_CELLS", 300)  # about one feature a chunk
    chunked = compute_cuts(sample, max_bin=8)
    np.testing.assert_array_equal(chunked.offsets, whole.offsets)
    np.testing.assert_array_equal(chunked.values, whole.values)


def test_the_smaller_layout_is_chosen_and_both_hold_the_same_bins(rng):
    X, _ = _missing_heavy(rng, 400, 61, missing=0.9)  # 61: the last word of dense rows is part-filled
    cuts = compute_cuts(Sample(np.arange(400), X, np.ones(400, np.float32)), max_bin=64)
    dense_rows = build_ellpack(np.where(np.isnan(X), 0.0, X).astype(np.float32), cuts)
    assert not dense_rows.layout.is_sparse  # no value missing: one cell a feature
    from_array, from_csr = build_ellpack(X, cuts), build_ellpack(_csr_of(X).astype(np.float64), cuts)
    assert from_array.layout == from_csr.layout and from_array.layout.is_sparse
    assert from_array.layout.row_stride == int((~np.isnan(X)).sum(axis=1).max())
    assert "sparse" in from_csr.describe()
    np.testing.assert_array_equal(from_array.packed, from_csr.packed)
    reference = cpu.quantise_and_pack(X, cuts.values, cuts.offsets.tolist(), *_dense_words(cuts))
    expected = cpu.unpack(reference, EllpackLayout.for_cuts(cuts).bits, EllpackLayout.for_cuts(cuts).cells_per_word,
                          61)
    np.testing.assert_array_equal(_bins_by_feature(from_csr), expected)
    # A full row far down makes dense rows the smaller: the whole of X is counted, not its head.
    X[300] = 1.0
    assert not build_ellpack(X, cuts).layout.is_sparse
    # A CSR matrix with a full row gets dense rows, quantised from its entries.
    X[0] = 1.0
    full = build_ellpack(_csr_of(X), cuts)
    assert not full.layout.is_sparse
    np.testing.assert_array_equal(full.packed, build_ellpack(X, cuts).packed)


@pytest.mark.parametrize("n_features, n_bins", [(1, 5), (28, 256), (61, 64), (968, 256), (100_000, 1), (3, 2)])
def test_the_layout_is_the_one_of_fewer_bytes_a_row(n_features, n_bins):
    from dgboost.data.sketch import Cuts

    offsets = np.arange(n_features + 1, dtype=np.int64) * (n_bins - 1)
    cuts = Cuts(np.zeros(int(offsets[-1]), np.float32), offsets)
    dense = EllpackLayout.for_cuts(cuts)
    for stride in sorted({0, 1, 2, 7, 45, n_features // 2, n_features - 1, n_features} - {-1}):
        if stride > n_features:
            continue
        sparse_rows = EllpackLayout.sparse_for_cuts(cuts, stride)
        smaller = sparse_rows if stride < n_features and sparse_rows.bytes_per_row < dense.bytes_per_row else dense
        assert EllpackLayout.smaller(cuts, stride) == smaller, stride


def _bins_by_feature(matrix):
    """Local bin ids of a sparse-rows matrix by feature, (n_rows, n_features), missing the dense
    layout's missing symbol: what dense rows of the same data hold."""
    cells, offsets = matrix.unpack(), matrix.host_bin_offsets
    dense = np.full((cells.shape[0], matrix.layout.n_features), int(np.diff(offsets).max()), dtype=cells.dtype)
    row, cell = np.nonzero(cells != matrix.layout.missing_symbol)
    global_bin = cells[row, cell]
    feature = np.searchsorted(offsets, global_bin, side="right") - 1
    dense[row, feature] = global_bin - offsets[feature]
    return dense


def _dense_words(cuts):
    layout = EllpackLayout.for_cuts(cuts)
    return layout.bits, layout.cells_per_word, layout.n_words, layout.missing_symbol


def test_sparse_kernels_are_the_dense_kernels_on_the_same_rows(rng):
    """Histograms, one level's partition and routing of sparse rows equal those of dense rows."""
    from test_kernels import grouped

    X, _ = _missing_heavy(rng, 700, 25)
    cuts = compute_cuts(Sample(np.arange(700), X, np.ones(700, np.float32)), max_bin=32)
    sparse_rows = build_ellpack(X, cuts)
    layout = EllpackLayout.for_cuts(cuts)
    dense_rows = cpu.quantise_and_pack(X, cuts.values, cuts.offsets.tolist(), *_dense_words(cuts))
    assert sparse_rows.layout.is_sparse
    gpair = rng.standard_normal((700, 2)).astype(np.float32)
    scales = np.array([2.0**40, 2.0**40])
    positions = rng.integers(0, 4, 700).astype(np.int32)
    ridx, seg_begin, seg_end = grouped(positions, 4)
    dense_hist = cpu.build_histograms(dense_rows, layout.bits, layout.cells_per_word, 25, layout.missing_symbol,
                                      cuts.bin_offsets, gpair, scales, ridx, seg_begin, seg_end)
    sparse_layout = sparse_rows.layout
    sparse_hist = cpu.build_sparse_histograms(sparse_rows.packed, sparse_layout.bits, sparse_layout.cells_per_word,
                                              sparse_layout.row_stride, sparse_rows.n_bins_total, gpair, scales, ridx,
                                              seg_begin, seg_end)
    np.testing.assert_array_equal(sparse_hist, dense_hist)
    split = dict(split_feature=rng.integers(0, 25, 4).astype(np.int32), split_bin=rng.integers(0, 6, 4).astype(np.int32),
                 default_left=rng.random(4) < 0.5, left_child=np.array([4, -1, 6, 8], np.int32))
    moved = []
    for packed, bits, per_word, symbol, feature_bins in (
            (dense_rows, layout.bits, layout.cells_per_word, layout.missing_symbol, None),
            (sparse_rows.packed, sparse_layout.bits, sparse_layout.cells_per_word, sparse_layout.missing_symbol,
             cuts.bin_offsets)):
        new_ridx, n_left = cpu.partition_rows(packed, bits, per_word, symbol, ridx, seg_begin, seg_end,
                                              feature_bins=feature_bins, **split)
        leaves = cpu.route_rows(packed, bits, per_word, symbol, split["split_feature"], split["split_bin"],
                                split["default_left"], np.array([1, -1, -1, -1], np.int32), 1, feature_bins)
        moved.append((new_ridx, n_left, leaves))
    for sparse_result, dense_result in zip(moved[1], moved[0]):
        np.testing.assert_array_equal(sparse_result, dense_result)
    assert len(np.unique(moved[0][2])) == 2 and 0 < moved[0][1].sum()  # the root split sent rows both ways


# ---- training and prediction ------------------------------------------------------------------------

@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.8, "colsample_bynode": 0.7},
    {"objective": "binary:logistic", "grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
    {"objective": "reg:squarederror", "grow_policy": "symmetric", "max_depth": 3},
    {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "sampling_method": "gradient_based",
     "subsample": 0.5},
], ids=["depthwise", "lossguide", "symmetric", "multiclass"])
def test_a_csr_matrix_trains_the_model_of_its_dense_twin(rng, params):
    X, y = _missing_heavy(rng)
    if params["objective"] == "multi:softprob":
        y = (y + (np.nan_to_num(X[:, 4]) > 0)).astype(np.float32)
    csr = _csr_of(X)
    expected = dgboost.train(params, X, y, num_boost_round=5, evals=[(X, y, "train"), (X[:300], y[:300], "head")])
    got = dgboost.train(params, csr, y, num_boost_round=5, evals=[(csr, y, "train"), (csr[:300], y[:300], "head")])
    assert got.save_raw() == expected.save_raw()
    assert got.evals_result() == expected.evals_result()
    np.testing.assert_array_equal(got.predict(csr), expected.predict(X))
    np.testing.assert_array_equal(got.predict(csr, pred_leaf=True), expected.predict(X, pred_leaf=True))
    np.testing.assert_array_equal(got.predict(csr[:50], pred_contribs=True), expected.predict(X[:50], pred_contribs=True))


def test_absent_entries_and_stored_zeros_differ(rng):
    """An absent entry is missing, a stored zero is 0: two models, as XGBoost has it."""
    X = rng.standard_normal((500, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.5] = 0.0
    y = (X[:, 0] == 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 2}
    stored = dgboost.train(params, sp.csr_matrix(X) + sp.csr_matrix(np.where(X == 0, 0.0, 0.0)), y, num_boost_round=2)
    with_zeros = _csr_of(X)  # zeros stored
    assert with_zeros.nnz == X.size
    assert dgboost.train(params, with_zeros, y, num_boost_round=2).save_raw() == \
        dgboost.train(params, X, y, num_boost_round=2).save_raw()
    absent = dgboost.train(params, sp.csr_matrix(X), y, num_boost_round=2)  # scipy drops zeros: missing
    assert absent.save_raw() == stored.save_raw()
    assert absent.save_raw() == dgboost.train(params, np.where(X == 0, np.nan, X), y, num_boost_round=2).save_raw()


def test_prediction_takes_a_csr_matrix_with_fewer_columns_but_not_more(rng):
    X, y = _missing_heavy(rng, 300, 8)
    X[:, 7] = np.nan  # the last column has no entry
    booster = dgboost.train({"objective": "binary:logistic", "max_depth": 3}, X, y, num_boost_round=3)
    narrow = sp.csr_matrix(_csr_of(X)[:, :7])
    np.testing.assert_array_equal(booster.predict(narrow), booster.predict(X))
    wide = sp.hstack([_csr_of(X), sp.csr_matrix(np.ones((300, 1)))]).tocsr()
    with pytest.raises(ValueError, match="9 features but the model was trained on 8"):
        booster.predict(wide)


def test_scikit_learn_estimators_take_sparse_matrices(rng):
    pytest.importorskip("sklearn")
    X, y = _missing_heavy(rng, 600, 10)
    dense = dgboost.DGBClassifier(n_estimators=4, max_depth=3).fit(X, y)
    csc = dgboost.DGBClassifier(n_estimators=4, max_depth=3).fit(_csr_of(X).tocsc(), y)
    assert csc.get_booster().save_raw() == dense.get_booster().save_raw()
    np.testing.assert_array_equal(csc.predict_proba(sp.coo_matrix(_csr_of(X))), dense.predict_proba(X))
