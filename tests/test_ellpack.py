"""The compressed matrix: bit widths, packing round trips, one byte a cell at max_bin 256."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dgboost.data.ellpack import EllpackLayout, build_ellpack
from dgboost.kernels import quantise_and_pack, unpack
from dgboost.data.sketch import Sample, compute_cuts


def _cuts(X, max_bin):
    return compute_cuts(Sample(np.arange(len(X)), X, np.ones(len(X), np.float32)), max_bin)


@pytest.mark.parametrize("max_bin, bits, cells_per_word", [(256, 8, 4), (2, 1, 32), (17, 5, 6), (4096, 12, 2)])
def test_bits_per_cell(max_bin, bits, cells_per_word):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20000, 3)).astype(np.float32)
    layout = EllpackLayout.for_cuts(_cuts(X, max_bin))
    assert layout.missing_symbol == max_bin - 1
    assert (layout.bits, layout.cells_per_word) == (bits, cells_per_word)


def test_dense_matrix_costs_one_byte_per_cell_at_default_max_bin():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5000, 28)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan  # missing values need no extra width
    matrix = build_ellpack(X, _cuts(X, 256))
    assert matrix.layout.bytes_per_row == 28
    assert matrix.nbytes == 28 * 5000


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.integers(1, 40), st.integers(1, 50), st.randoms(use_true_random=False))
def test_pack_unpack_round_trip(bits, n_features, n_rows, random):
    symbols = 1 << bits
    rng = np.random.default_rng(random.randint(0, 2**32 - 1))
    bins = rng.integers(0, symbols - 1, size=(n_rows, n_features))
    missing = rng.random(bins.shape) < 0.1
    # Quantise values that land exactly on the wanted bins: cut c_k = k + 0.5.
    cut_values = np.tile(np.arange(symbols - 2, dtype=np.float32) + 0.5, n_features)
    offsets = np.arange(n_features + 1) * (symbols - 2)
    X = np.where(missing, np.nan, bins).astype(np.float32)
    cells_per_word = 32 // bits
    n_words = -(-n_features // cells_per_word)
    packed = quantise_and_pack(X, cut_values, offsets.tolist(), bits, cells_per_word, n_words, symbols - 1)
    assert packed.shape == (n_rows, n_words) and packed.dtype == np.uint32
    expected = np.where(missing, symbols - 1, bins)
    np.testing.assert_array_equal(unpack(packed, bits, cells_per_word, n_features), expected)


def test_hand_packed_word():
    # Four 8-bit cells in one word, cell 0 in the low byte.
    packed = np.array([[0x04030201]], dtype=np.uint32)
    np.testing.assert_array_equal(unpack(packed, 8, 4, 4), [[1, 2, 3, 4]])
    np.testing.assert_array_equal(unpack(packed, 8, 4, 3), [[1, 2, 3]])


def test_feature_count_must_match_cuts():
    X = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match="X has 2 features but the cuts were made for 3"):
        build_ellpack(X, _cuts(np.zeros((3, 3), np.float32), 256))
