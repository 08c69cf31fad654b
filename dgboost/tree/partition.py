"""Row partitioning: rows grouped by node (``ridx``), and each row's leaf once a tree is grown."""

from __future__ import annotations

from .._dtypes import POSITION_DTYPE
from ..backend import get_xp
from ..data.ellpack import EllpackMatrix
from ..data.pages import PagedMatrix
from ..kernels import partition_rows, place_rows, route_rows


def apply_level(matrix: EllpackMatrix, ridx, seg_begin, seg_end, split_table, left_child):
    """Send the rows of each split node of a level to a child: the new ridx, and each node's
    rows sent left.

    ``left_child`` (n_level_nodes,) int32 holds each node's left child id, -1 where the node
    does not split. No row's node id is written: a node's range of ridx stays put once it
    stops splitting, and ``place_leaves`` sets every row's leaf once the tree is grown. A
    paged matrix (data/pages.py) is read a page at a time, ``ridx``, the ranges and the counts
    sent left being tuples of each page's.
    """
    if isinstance(matrix, PagedMatrix):
        moved = [None] * matrix.n_pages
        for k, page in matrix.pages():
            moved[k] = apply_level(page, ridx[k], seg_begin[k], seg_end[k], split_table, left_child)
        return tuple(rows for rows, _ in moved), tuple(n_left for _, n_left in moved)
    layout = matrix.layout
    return partition_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, ridx, seg_begin,
                          seg_end, split_table.feature, split_table.bin, split_table.default_left, left_child,
                          matrix.feature_bins, split_table.categories)


def place_leaves(matrix: EllpackMatrix, ridx, positions, begin, end, node):
    """Each row at its leaf: ``positions[ridx[i]] = node[k]`` over the places of each range
    ``[begin[k], end[k])`` (kernels.place_rows); for a paged matrix ``ridx``, ``begin`` and
    ``end`` are tuples of each page's, and each page's rows are placed in its own part of
    ``positions``."""
    if isinstance(matrix, PagedMatrix):
        for start, size, rows, first, stop in zip(matrix.starts, matrix.page_sizes, ridx, begin, end):
            place_rows(rows, first, stop, node, positions[start:start + size])  # no page read
        return positions
    return place_rows(ridx, begin, end, node, positions)


def route(matrix: EllpackMatrix, split_feature, split_bin, default_left, left_child, depth: int, categories=None,
          each_page=None, out=None):
    """Leaf ids of a matrix's rows in one tree given by node arrays (see kernels.route_rows),
    into ``out`` where given; ``each_page(index, page)``, for a paged matrix, is called with
    each page of the pass too."""
    if isinstance(matrix, PagedMatrix):
        starts = matrix.starts
        leaf = get_xp(split_feature).empty(matrix.n_rows, dtype=POSITION_DTYPE) if out is None else out
        for k, page in matrix.pages():
            route(page, split_feature, split_bin, default_left, left_child, depth, categories,
                  out=leaf[starts[k]:starts[k + 1]])
            if each_page is not None:
                each_page(k, page)
        return leaf
    layout = matrix.layout
    return route_rows(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol, split_feature,
                      split_bin, default_left, left_child, depth, matrix.feature_bins, categories, out=out)
