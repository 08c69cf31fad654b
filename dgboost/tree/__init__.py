"""Tree construction and trees: growth (the grower and its policies), histograms, split
evaluation, row partitioning and sampling, the finished tree and its prediction."""

from __future__ import annotations


def make_grower(matrix, params, n_total: int, comm, features=None, categories=None):
    """The grower of ``params.grow_policy`` (a ``grower.Grower``) over one rank's rows;
    ``features``: the resolved per-feature rules (``constraints.FeatureRules``), or None;
    ``categories``: the categorical features (data/categories.Categories), or None."""
    from .depthwise import DepthwiseGrower
    from .lossguide import LossguideGrower
    from .symmetric import SymmetricGrower

    growers = {"depthwise": DepthwiseGrower, "lossguide": LossguideGrower, "symmetric": SymmetricGrower}
    return growers[params.grow_policy](matrix, params, n_total, comm, features, categories)
