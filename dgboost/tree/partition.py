"""Row partitioning: rows grouped by node (``ridx``), and each row's node id."""

from __future__ import annotations

from ..data.ellpack import EllpackMatrix
from ..kernels import partition_rows, route_rows


def apply_level(matrix: EllpackMatrix, ridx, positions, level_start: int, seg_begin, seg_end, split_table,
                left_child):
    """Send the rows of each split node of a level to a child.

    ``left_child`` (n_level_nodes,) int32 holds each node's left child id, -1 where
    the node does not split; the right child is ``left_child + 1``. ``positions``
    is updated in place. Slot ``s`` is node ``level_start + s``, or with ``level_start``
    None the node its rows are at (a lossguide batch). Returns the new ridx, and each
    node's rows sent left.
    """
    layout = matrix.layout
    return partition_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                          positions, level_start, seg_begin, seg_end, split_table.feature, split_table.bin,
                          split_table.default_left, left_child, matrix.feature_bins, split_table.categories)


def route(matrix: EllpackMatrix, split_feature, split_bin, default_left, left_child, depth: int, categories=None):
    """Leaf ids of a matrix's rows in one tree given by node arrays (see kernels.route_rows)."""
    layout = matrix.layout
    return route_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, split_feature,
                      split_bin, default_left, left_child, depth, matrix.feature_bins, categories)
