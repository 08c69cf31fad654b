"""Kernels: one Python signature per kernel for every device.

Each kernel has a reference implementation in ``cpu.py`` (NumPy, written
against its inputs' array module) and a CUDA one in ``cuda.py`` (``*.cu``
sources compiled through cupy.RawModule). The names below pick by their first
argument not None: cupy arrays go to the CUDA kernel, everything else to the reference.
Tests call ``cpu.<name>`` and ``cuda.<name>`` directly to compare the twins.
"""

import functools

from ..backend import is_cupy_array
from . import cpu
from .cpu import (MIN_SPLIT_GAIN, RECORD_COLUMNS, SPLIT_TABLE_COLUMNS, CategorySplits, Regularisation, ahead_room,
                  node_gains, node_weights, unpack)


def _dispatch(reference):
    @functools.wraps(reference)
    def kernel(*args, **kwargs):
        if is_cupy_array(next((arg for arg in args if arg is not None), None)):
            from . import cuda

            return getattr(cuda, reference.__name__)(*args, **kwargs)
        return reference(*args, **kwargs)

    return kernel


add_leaf_values = _dispatch(cpu.add_leaf_values)
bucket_counts = _dispatch(cpu.bucket_counts)
child_bounds = _dispatch(cpu.child_bounds)
choose_bucket = _dispatch(cpu.choose_bucket)
build_histograms = _dispatch(cpu.build_histograms)
build_sparse_histograms = _dispatch(cpu.build_sparse_histograms)
evaluate_level_split = _dispatch(cpu.evaluate_level_split)
evaluate_splits = _dispatch(cpu.evaluate_splits)
fill_sample_page = _dispatch(cpu.fill_sample_page)
first_infinite = _dispatch(cpu.first_infinite)
gather_page_rows = _dispatch(cpu.gather_page_rows)
gradient_bounds = _dispatch(cpu.gradient_bounds)
gradient_sums = _dispatch(cpu.gradient_sums)
group_order = _dispatch(cpu.group_order)
lambda_gradients = _dispatch(cpu.lambda_gradients)
mask_indices = _dispatch(cpu.mask_indices)
most_present = _dispatch(cpu.most_present)
next_frontier = _dispatch(cpu.next_frontier)
number_children = _dispatch(cpu.number_children)
partition_rows = _dispatch(cpu.partition_rows)
place_rows = _dispatch(cpu.place_rows)
predict_margins = _dispatch(cpu.predict_margins)
predict_oblivious = _dispatch(cpu.predict_oblivious)
quantise_and_pack = _dispatch(cpu.quantise_and_pack)
quantise_sparse = _dispatch(cpu.quantise_sparse)
rank_scores = _dispatch(cpu.rank_scores)
route_rows = _dispatch(cpu.route_rows)
rows_drawn_first = _dispatch(cpu.rows_drawn_first)
sample_keys = _dispatch(cpu.sample_keys)
sample_magnitude_max = _dispatch(cpu.sample_magnitude_max)
sample_rows = _dispatch(cpu.sample_rows)
sample_sizes = _dispatch(cpu.sample_sizes)
sibling_histograms = _dispatch(cpu.sibling_histograms)
tree_record = _dispatch(cpu.tree_record)

__all__ = [
    "CategorySplits",
    "MIN_SPLIT_GAIN",
    "RECORD_COLUMNS",
    "SPLIT_TABLE_COLUMNS",
    "Regularisation",
    "add_leaf_values",
    "ahead_room",
    "bucket_counts",
    "child_bounds",
    "choose_bucket",
    "build_histograms",
    "build_sparse_histograms",
    "evaluate_level_split",
    "evaluate_splits",
    "fill_sample_page",
    "first_infinite",
    "gather_page_rows",
    "gradient_bounds",
    "gradient_sums",
    "group_order",
    "lambda_gradients",
    "mask_indices",
    "most_present",
    "next_frontier",
    "node_gains",
    "node_weights",
    "number_children",
    "partition_rows",
    "place_rows",
    "predict_margins",
    "predict_oblivious",
    "quantise_and_pack",
    "quantise_sparse",
    "rank_scores",
    "route_rows",
    "rows_drawn_first",
    "sample_keys",
    "sample_magnitude_max",
    "sample_rows",
    "sample_sizes",
    "sibling_histograms",
    "tree_record",
    "unpack",
]
