"""Row partitioning: each row's node id after a level's splits."""

from __future__ import annotations

from .ellpack import EllpackMatrix
from .kernels import update_positions


def apply_level(matrix: EllpackMatrix, positions, level_start: int, split_table, left_child):
    """Positions after sending the rows of each split node of a level to a child.

    ``left_child`` (n_level_nodes,) int32 holds each node's left child id, -1 where
    the node does not split; the right child is ``left_child + 1``.
    """
    layout = matrix.layout
    return update_positions(matrix.packed, layout.bits, layout.cells_per_word, layout.missing_symbol,
                            positions, level_start, split_table.feature, split_table.bin,
                            split_table.default_left, left_child)
