"""Histograms of one level: build the smaller child of each split, subtract for its sibling.

A level's nodes come in sibling pairs (slots ``2r`` and ``2r + 1`` are the
children of the r-th parent that split). Only one child per pair is built from
rows, the one with the smaller hessian sum (a global quantity, so every rank
makes the same choice); the other is its parent's histogram minus the built one,
exact in fixed point::

    parent r  ──►  built child  = Σ rows        (build_histograms)
              └─►  sibling      = parent − built  (no pass over rows)
"""

from __future__ import annotations

from ..data.ellpack import EllpackMatrix
from ..data.pages import PagedMatrix
from ..kernels import build_histograms, build_sparse_histograms, sibling_histograms


def build(matrix: EllpackMatrix, gpair, scales, ridx, seg_begin, seg_end):
    """Histograms of the rows ``ridx[seg_begin[s]:seg_end[s]]`` of each slot ``s``.

    A paged matrix (data/pages.py) is read a page at a time, ``ridx`` and the ranges
    then being tuples of each page's (its rows numbered from its first).

    Parameters
    ----------
    gpair : array of shape (n_rows, 2), float32
    scales : array of shape (2,), float64: the fixed-point scales the sums are made in
    ridx : array of shape (n_rows,), int32: rows grouped by node
    seg_begin, seg_end : arrays of shape (n_slots,), int32

    Returns
    -------
    array of shape (n_slots, n_bins_total, 2), int64 (this rank's rows only)
    """
    if isinstance(matrix, PagedMatrix):  # ridx and the ranges are each page's (grower._start)
        hist = None
        for k, page in matrix.pages():
            start = matrix.starts[k]
            part = build(page, gpair[start:start + page.n_rows], scales, ridx[k], seg_begin[k], seg_end[k])
            if hist is None:
                hist = part
            else:
                hist += part  # integers: exact, in any order
        return hist
    layout = matrix.layout
    if layout.is_sparse:
        return build_sparse_histograms(matrix.packed, layout.bits, layout.cells_per_word, layout.row_stride,
                                       matrix.n_bins_total, gpair, scales, ridx, seg_begin, seg_end)
    return build_histograms(matrix.packed, layout.bits, layout.cells_per_word, layout.n_features,
                            layout.missing_symbol, matrix.host_bin_offsets, gpair, scales, ridx, seg_begin, seg_end)


def children(hist, slot_of_rank, built, build_left):
    """Full histograms of the children of ``n`` parents, in sibling pairs: (2 n, n_bins_total, 2)
    int64, from the parents' level ``hist`` (pair ``p``'s parent is ``hist[slot_of_rank[p]]``) and
    the built children (kernels.sibling_histograms)."""
    return sibling_histograms(hist, slot_of_rank, built, build_left)
