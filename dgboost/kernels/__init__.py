"""Kernels: one Python signature per kernel for every device.

Each name below resolves to the reference implementation in ``cpu.py``, which
is written against its inputs' array module and so also runs on cupy arrays.
CUDA kernels (``*.cu``, compiled through cupy.RawModule) replace a name for cupy
inputs as they are written; the reference stays as their test twin.
"""

from .cpu import (
    MIN_SPLIT_GAIN,
    Regularisation,
    build_histograms,
    evaluate_splits,
    node_gains,
    node_weights,
    predict_leaves,
    quantise_and_pack,
    unpack,
    update_positions,
)

__all__ = [
    "MIN_SPLIT_GAIN",
    "Regularisation",
    "build_histograms",
    "evaluate_splits",
    "node_gains",
    "node_weights",
    "predict_leaves",
    "quantise_and_pack",
    "unpack",
    "update_positions",
]
