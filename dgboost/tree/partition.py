"""Row partitioning: rows grouped by node (``ridx``), and each row's node id."""

from __future__ import annotations

from ..backend import get_xp
from ..data.ellpack import EllpackMatrix
from ..data.pages import PagedMatrix
from ..kernels import partition_rows, route_rows


def apply_level(matrix: EllpackMatrix, ridx, positions, level_start: int, seg_begin, seg_end, split_table,
                left_child):
    """Send the rows of each split node of a level to a child.

    ``left_child`` (n_level_nodes,) int32 holds each node's left child id, -1 where
    the node does not split; the right child is ``left_child + 1``. ``positions``
    is updated in place. Slot ``s`` is node ``level_start + s``, or with ``level_start``
    None the node its rows are at (a lossguide batch). Returns the new ridx, and each
    node's rows sent left. A paged matrix (data/pages.py) is read a page at a time, ``ridx``,
    the ranges and the counts sent left being tuples of each page's.
    """
    if isinstance(matrix, PagedMatrix):
        moved = [apply_level(page, rows, positions[start:start + page.n_rows], level_start, begin, end, split_table,
                             left_child)
                 for (start, page), rows, begin, end in zip(matrix.pages(), ridx, seg_begin, seg_end)]
        return tuple(rows for rows, _ in moved), tuple(n_left for _, n_left in moved)
    layout = matrix.layout
    return partition_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx,
                          positions, level_start, seg_begin, seg_end, split_table.feature, split_table.bin,
                          split_table.default_left, left_child, matrix.feature_bins, split_table.categories)


def route(matrix: EllpackMatrix, split_feature, split_bin, default_left, left_child, depth: int, categories=None):
    """Leaf ids of a matrix's rows in one tree given by node arrays (see kernels.route_rows)."""
    if isinstance(matrix, PagedMatrix):
        parts = [route(page, split_feature, split_bin, default_left, left_child, depth, categories)
                 for _, page in matrix.pages()]
        return get_xp(split_feature).concatenate(parts)
    layout = matrix.layout
    return route_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, split_feature,
                      split_bin, default_left, left_child, depth, matrix.feature_bins, categories)
