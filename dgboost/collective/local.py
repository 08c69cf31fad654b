"""The world of one: every collective is the identity."""

from __future__ import annotations

from .base import ReduceOp, Traffic, check_root


class LocalCommunicator:
    """A single rank; used by ``dgboost.train`` and by workers of a one-worker job."""

    rank = 0
    world_size = 1

    def __init__(self):
        self.traffic = Traffic()  # nothing goes on a wire: stays at none

    def allreduce(self, array, op: ReduceOp = "sum"):
        if op not in ("sum", "max", "min"):
            raise ValueError(f"op={op!r} must be 'sum', 'max' or 'min'")
        return array

    def reduce(self, array, root: int = 0):
        check_root(root, 1)
        return array

    def broadcast(self, array, root: int = 0):
        check_root(root, 1)
        return array

    def allgather(self, array, rows=None) -> list:
        return [array]

    def exchange(self, sends: list, receives: list) -> list:
        if sends or receives:
            raise ValueError("a world of one has no peer to exchange arrays with")
        return []

    def abort(self, reason: str) -> None:
        """Nothing to tear down: no peer can be waiting."""

    def check(self) -> None:
        """A world of one never fails."""
