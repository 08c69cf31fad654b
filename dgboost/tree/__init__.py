"""Tree construction and trees: growth (the grower), histograms, split evaluation, row
partitioning and sampling, the finished tree and its prediction."""
