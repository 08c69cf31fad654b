"""The Communicator protocol every training rank talks through.

The training loop and the grower call these few collectives and nothing else,
so one code path serves a single process (``LocalCommunicator``), CPU workers
over Dask's comms, and GPU workers over NCCL. Arrays stay on their device:
a cupy array in gives a cupy array out.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

ReduceOp = Literal["sum", "max", "min"]


class CollectiveError(RuntimeError):
    """A collective could not complete: a peer aborted, died or did not answer in time.

    The message names the rank and worker at fault where it is known. A rank
    that raises this was stopped because of another rank's failure, whose own
    error is the one to report.
    """


class PeerUnreachable(CollectiveError):
    """A rank could not reach a peer (its connection refused or reset): the peer's worker died or
    the network between them failed, unlike a peer that answers late (a time-out). A job on a
    cluster may resume elsewhere after it (dgboost.dask's ``max_restarts``)."""


class Traffic:
    """What one rank's collectives put on the wire: calls made, and bytes this rank sent (the
    host communicator's exactly; NCCL's as its ring algorithms move them, an estimate)."""

    def __init__(self):
        self.calls = 0
        self.bytes_sent = 0

    def add(self, bytes_sent: float, calls: int = 1) -> None:
        self.calls += calls
        self.bytes_sent += int(bytes_sent)


def check_root(root: int, world_size: int) -> None:
    """Refuse a ``root`` that is no rank of a job of ``world_size`` ranks."""
    if not 0 <= root < world_size:
        raise ValueError(f"root={root} is not a rank of this {world_size}-rank job")


@runtime_checkable
class Communicator(Protocol):
    """Collectives over ``world_size`` ranks; rank 0 is the coordinator.

    Every rank must make the same calls in the same order with arrays of the same
    shape and dtype (``allgather`` excepted: its first dimension may differ).
    Results may share memory with the input: treat both as read-only afterwards.
    """

    @property
    def rank(self) -> int:
        """This rank's index in [0, world_size)."""

    @property
    def world_size(self) -> int:
        """The number of ranks."""

    def allreduce(self, array, op: ReduceOp = "sum"):
        """The element-wise reduction of ``array`` over all ranks, on every rank."""

    def reduce(self, array, root: int = 0):
        """The element-wise sum of ``array`` over all ranks, on ``root``; on the other ranks an
        array of its shape and dtype whose values mean nothing. For what one rank alone reads
        (the coordinator's histograms): fewer bytes than ``allreduce``, the same sums on root."""

    def broadcast(self, array, root: int = 0):
        """``root``'s ``array`` on every rank (others pass an array of the same shape)."""

    def allgather(self, array, rows: list[int] | None = None) -> list:
        """Every rank's ``array``, in rank order; first dimensions may differ. ``rows``: every
        rank's first dimension, where the caller knows them (a device gather then asks the
        host nothing, so a round replayed from a CUDA graph sends no host message)."""

    def exchange(self, sends: list, receives: list) -> list:
        """Point to point, unlike the rest: only the ranks named take part. Sends each ``(peer,
        array)`` of ``sends`` and returns, in order, the array of each ``(peer, shape, dtype,
        xp)`` of ``receives`` (xp, numpy or cupy: the sent array's module, where it arrives).
        Between two ranks the arrays match in the order each side lists them, and the
        receiver names each one's shape, dtype and module as the sender holds it. It moves
        rows between ranks before training (dgboost.dask's shares)."""

    def abort(self, reason: str) -> None:
        """Tear the group down so that no rank waits forever on a failed peer."""

    def check(self) -> None:
        """Raise CollectiveError if the group has failed. A device collective that a failure cut
        short leaves meaningless values (NCCL's kernels return early at an abort), which a host
        read would take for data before the next call raises: check after reading one."""

    traffic: Traffic  # this rank's collectives so far
