"""The array module (``xp``): numpy on the CPU, cupy on a CUDA device.

cupy is imported lazily, inside these functions, so a CPU-only install imports
dgboost without it. Everything above this module receives arrays and asks
``get_xp(array)`` which module they belong to; nothing passes device flags down.
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np


def is_cupy_array(array) -> bool:
    """True when ``array`` is a cupy ndarray, decided without importing cupy."""
    return type(array).__module__.split(".", 1)[0] == "cupy"


def get_xp(array) -> ModuleType:
    """The array module that ``array`` belongs to: ``cupy`` or ``numpy``."""
    if is_cupy_array(array):
        import cupy

        return cupy
    return np


@functools.lru_cache(maxsize=1)
def cuda_device_count() -> int:
    """The number of CUDA devices cupy can use; 0 without cupy or a driver."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no cupy, no driver, no device: all mean "no GPU"
        return 0


def xp_for_device(device: str) -> ModuleType:
    """The array module for a validated ``device`` parameter ("cpu" or "cuda[:N]")."""
    if device == "cpu":
        return np
    import cupy

    ordinal = int(device.partition(":")[2] or 0)
    cupy.cuda.Device(ordinal).use()
    return cupy


def to_numpy(array) -> np.ndarray:
    """A host numpy copy (or view) of a numpy or cupy array."""
    if is_cupy_array(array):
        return array.get()
    return np.asarray(array)


def asarray(xp: ModuleType, array, dtype=None):
    """``array`` on ``xp``'s device, copying between host and device if needed."""
    if xp is np:
        return np.asarray(to_numpy(array), dtype=dtype)
    return xp.asarray(array, dtype=dtype)
