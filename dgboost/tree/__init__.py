"""Tree construction and trees: growth (the grower and its policies), histograms, split
evaluation, row partitioning and sampling, the finished tree and its prediction."""

from __future__ import annotations


def make_grower(matrix, params, n_total: int, comm, features=None, categories=None, sampler=None):
    """The grower of ``params.grow_policy`` (a ``grower.Grower``) over one rank's rows;
    ``features``: the resolved per-feature rules (``constraints.FeatureRules``), or None;
    ``categories``: the categorical features (data/categories.Categories), or None;
    ``sampler``: the rows' sampler (sampling.RowSampler), whose guesses of the next tree's
    sample a paged matrix's pass gathers ahead."""
    from .depthwise import DepthwiseGrower
    from .lossguide import LossguideGrower
    from .symmetric import SymmetricGrower

    from ..data.pages import PagedMatrix
    from .grower import PagedGrower

    growers = {"depthwise": DepthwiseGrower, "lossguide": LossguideGrower, "symmetric": SymmetricGrower}
    grower = growers[params.grow_policy](matrix, params, n_total, comm, features, categories)
    if not isinstance(matrix, PagedMatrix):
        return grower
    streams = params.grow_policy in PagedGrower.STREAMS
    if not (streams or (params.subsample < 1.0 and params.sampling_method != "goss")):
        raise ValueError(f"grow_policy={params.grow_policy!r} trains out of core only from a row sample, and this "
                         f"rank's compressed matrix ({matrix.nbytes} bytes) exceeds its device budget "
                         f"({matrix.budget} bytes): set subsample < 1 (best with sampling_method='gradient_based'; "
                         "not 'goss', whose first rounds take every row), use grow_policy='depthwise', or raise "
                         "max_device_matrix_bytes")
    return PagedGrower(grower, matrix, streams, sampler)
