"""Collective communication between training ranks; knows nothing of trees.

``LocalCommunicator`` is the world of one. The Dask implementations import
distributed or cupy, so they load only when asked for: ``collective.host``
(CPU workers, over Dask's comms) and ``collective.nccl`` (GPU workers).
"""

from .base import CollectiveError, Communicator, PeerUnreachable, ReduceOp
from .local import LocalCommunicator

__all__ = ["CollectiveError", "Communicator", "LocalCommunicator", "PeerUnreachable", "ReduceOp"]
