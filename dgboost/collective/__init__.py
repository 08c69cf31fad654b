"""Collective communication between training ranks; knows nothing of trees."""

from .base import Communicator, ReduceOp
from .local import LocalCommunicator

__all__ = ["Communicator", "LocalCommunicator", "ReduceOp"]
