"""Every dtype dgboost uses, in one place, each with the reason it was chosen.

No other module writes a dtype literal: they import these names.
"""

import numpy as np

#: Raw feature values. XGBoost stores features as float32; matching it keeps cut
#: points and split thresholds comparable and halves the memory of float64.
FEATURE_DTYPE = np.float32

#: Labels, sample weights and base margins, as XGBoost stores them.
LABEL_DTYPE = np.float32
WEIGHT_DTYPE = np.float32

#: Cut points (bin upper bounds) and split thresholds: the same type as the
#: features they are compared with, so ``x < threshold`` means the same thing
#: when binning and when predicting raw data.
CUT_DTYPE = np.float32

#: One word of the bit-packed matrix. 32-bit words: cells never straddle a word,
#: and a GPU thread reads one word per load.
PACKED_WORD_DTYPE = np.uint32

#: The fewest rows an out-of-core page may hold (data/pages.py): a budget that cannot hold two
#: pages of them is refused.
MIN_PAGE_ROWS = 64

#: Unpacked bin ids. int32 rather than uint8/uint16 because they are used at once
#: in index arithmetic (feature offset + bin) that overflows narrower types.
BIN_DTYPE = np.int32

#: Offsets of each feature's bins inside a histogram row.
BIN_OFFSET_DTYPE = np.int64

#: Fixed-point gradient pairs and histograms. Integers make sums exact and
#: independent of order, so every rank, device and partitioning gets the same
#: bits (see fixed_point.py for the headroom argument).
HIST_DTYPE = np.int64

#: Gradients and hessians before quantisation, and the training margins, as in
#: XGBoost's GPU code: float32 halves the bandwidth of the per-row state.
GRADIENT_DTYPE = np.float32
MARGIN_DTYPE = np.float32

#: Split gains and node weights are evaluated in float64: the inputs are exact
#: integer sums up to 2**53, which float32 would round away.
GAIN_DTYPE = np.float64

#: Leaf values and split thresholds stored in trees (XGBoost's float32).
LEAF_DTYPE = np.float32

#: Each row's leaf once a tree is grown, and the places of ``ridx`` and its ranges. int32
#: holds any node id of a tree that fits in memory.
POSITION_DTYPE = np.int32

#: A feature's monotone constraint: -1 decreasing, 0 free, 1 increasing (XGBoost's values).
MONOTONE_DTYPE = np.int8

#: Node and feature ids stored in trees.
NODE_INDEX_DTYPE = np.int32

#: Global row indices: data sets past 2**31 rows exist.
ROW_INDEX_DTYPE = np.int64

#: Counter-based random numbers (splitmix64 of a global row index).
HASH_DTYPE = np.uint64

#: Exact reductions of floating-point statistics (metrics, base score) go through
#: fixed point in this type; see fixed_point.py.
EXACT_SUM_DTYPE = np.int64

#: Statistics: metric sums, quantile weights, fixed-point scales, uniform draws.
#: Their sums need more than float32's 24 bits.
STAT_DTYPE = np.float64

#: Host-side index arithmetic and sizes (tree building, node offsets).
INDEX_DTYPE = np.int64

#: Exponents handed to ldexp (what numpy and cupy accept there).
EXPONENT_DTYPE = np.int32

#: Byte-aligned cells read straight from packed words, by cell width in bits.
CELL_VIEW_DTYPES = {8: np.uint8, 16: np.uint16}

#: A sparse row's column indices (CSR ``indices``): feature ids, below 2**31 as
#: NODE_INDEX_DTYPE's, and half the bytes of scipy's int64 where it widens them.
COLUMN_INDEX_DTYPE = np.int32

#: Where each sparse row's entries start (CSR ``indptr``): a matrix may hold more
#: than 2**31 entries.
ROW_POINTER_DTYPE = np.int64
