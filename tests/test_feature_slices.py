"""Split evaluation spread over ranks (tree/split.FeatureSlices): each rank scores a slice of
the features of the summed histograms, and the merged table is the one one rank makes."""

import threading

import numpy as np
import pytest

from dgboost.kernels import CategorySplits, Regularisation, evaluate_splits
from dgboost.tree.split import FeatureSlices, SplitTable


class _Ranks:
    """``n`` ranks in threads of one process, making the collectives the slices make."""

    def __init__(self, n: int):
        self.world_size = n
        self._barrier = threading.Barrier(n)
        self._box = [None] * n

    def exchange(self, rank: int, value) -> list:
        self._box[rank] = value
        self._barrier.wait()
        values = list(self._box)
        self._barrier.wait()
        return values


class _Rank:
    def __init__(self, ranks: _Ranks, rank: int):
        self.ranks, self.rank, self.world_size = ranks, rank, ranks.world_size

    def reduce_scatter(self, blocks):
        return sum(other[self.rank] for other in self.ranks.exchange(self.rank, blocks))

    def allgather(self, array, rows=None):
        assert rows == [array.shape[0]] * self.world_size  # a device gather asks the host nothing
        return self.ranks.exchange(self.rank, array)


def _on_ranks(n: int, work) -> list:
    """``work(comm)`` on each of ``n`` threaded ranks; their results in rank order."""
    ranks, results, errors = _Ranks(n), [None] * n, []

    def run(rank):
        try:
            results[rank] = work(_Rank(ranks, rank))
        except BaseException as error:  # noqa: BLE001 (raised below)
            errors.append(error)
            ranks._barrier.abort()

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    if errors:
        raise errors[0]
    return results


def _level(rng, n_nodes: int, n_features: int):
    """A level's summed histograms from random rows (features of 0 to 6 bins, some copies of
    feature 0 so that features tie, small sums with many ties or large ones), and each
    rank's share of them drawn at random."""
    n_bins = rng.integers(0, 7, size=n_features)
    n_bins[rng.integers(n_features)] = max(n_bins.max(), 1)
    offsets = np.concatenate([[0], np.cumsum(n_bins)]).astype(np.int64)
    hist = np.zeros((n_nodes, offsets[-1], 2), np.int64)
    node_sums = np.zeros((n_nodes, 2), np.int64)
    largest = rng.choice([3, 2**30])
    for node in range(n_nodes):
        n_rows = rng.integers(0, 40)
        pairs = np.stack([rng.integers(-largest, largest + 1, n_rows), rng.integers(0, largest, n_rows)], axis=1)
        node_sums[node] = pairs.sum(axis=0)
        missing = rng.choice([0.0, 0.3])
        for feature in np.flatnonzero(n_bins):
            source = 0 if n_bins[feature] == n_bins[0] and rng.random() < 0.4 else feature
            bins = np.random.default_rng([node, source]).integers(0, n_bins[feature], n_rows)
            present = np.random.default_rng([node, source, 1]).random(n_rows) >= missing
            np.add.at(hist[node], offsets[feature] + bins[present], pairs[present])
    return hist, node_sums, offsets


def _shares(rng, hist, n: int) -> list:
    """``hist`` as the sum of ``n`` ranks' histograms."""
    shares = [rng.integers(-2**20, 2**20, hist.shape) for _ in range(n - 1)]
    return shares + [hist - sum(shares, np.zeros_like(hist))]


@pytest.mark.parametrize("n_ranks", [2, 3, 4])
@pytest.mark.parametrize("seed", range(12))
def test_spread_splits_are_the_splits_of_one_rank(n_ranks, seed):
    """Every rank gets the same table, and it is the one-rank table wherever a node splits
    (a node that does not split is a leaf, its row read no further): with ties between
    features across slices, features without bins, column sampling, monotone constraints
    and categorical features."""
    rng = np.random.default_rng(seed)
    n_nodes, n_features = int(rng.integers(1, 12)), int(rng.integers(n_ranks, 12))
    hist, node_sums, offsets = _level(rng, n_nodes, n_features)
    active = rng.random(n_nodes) < 0.9
    allowed = rng.random((n_nodes, n_features)) < 0.8 if seed % 3 == 0 else None
    monotone = rng.integers(-1, 2, n_features).astype(np.int8) if seed % 4 == 1 else None
    bounds = np.sort(rng.normal(size=(n_nodes, 2)), axis=1) * 3 if monotone is not None else None
    categories = None
    if seed % 4 == 2:
        chosen = np.flatnonzero(rng.random(n_features) < 0.5).astype(np.int32)
        categories = CategorySplits(chosen, int(rng.integers(1, 5)), 64, 1)
    rules = Regularisation(float(rng.choice([0.0, 1.0])), 0.0, float(rng.choice([0.0, 2.0])), 0.0,
                           float(rng.choice([0.0, 0.5])))
    scales = np.array([1.0, 1.0])
    feature_of_bin = np.repeat(np.arange(n_features), np.diff(offsets)).astype(np.int32)
    whole = SplitTable(evaluate_splits(hist, node_sums, active, feature_of_bin, offsets, scales, rules, allowed,
                                       monotone, bounds, categories))
    shares = _shares(rng, hist, n_ranks)
    n_words = 0 if categories is None else categories.n_words

    def rank_work(comm):
        slices = FeatureSlices.of(offsets, comm, np, monotone, categories)
        mine = slices.reduce(shares[comm.rank], comm)
        first, end = slices.bins[comm.rank], slices.bins[comm.rank + 1]
        np.testing.assert_array_equal(mine, hist[:, first:end])  # its slice, summed
        return slices.find_splits(mine, node_sums, active, scales, rules, comm, allowed, bounds, n_words).table

    tables = _on_ranks(n_ranks, rank_work)
    for table in tables[1:]:
        np.testing.assert_array_equal(table, tables[0])
    spread = SplitTable(tables[0])
    np.testing.assert_array_equal(spread.valid, whole.valid)
    np.testing.assert_array_equal(spread.table[whole.valid], whole.table[whole.valid])


def test_the_slices_are_whole_features_of_even_bins():
    offsets = np.cumsum([0, 5, 5, 5, 5, 0, 10])  # 30 bins, a feature without bins
    slices = [_on_ranks(n, lambda comm: FeatureSlices.of(offsets, comm, np)) for n in (2, 3, 5)]
    assert [s[0].features for s in slices] == [(0, 3, 6), (0, 2, 4, 6), (0, 1, 2, 4, 5, 6)]
    assert [s[0].bins for s in slices] == [(0, 15, 30), (0, 10, 20, 30), (0, 5, 10, 20, 20, 30)]
    assert [s[0].width for s in slices] == [15, 10, 10]
    assert slices[1][2].feature_of_bin.tolist() == [1] * 10 and slices[1][2].bin_offsets.tolist() == [0, 0, 10]
    # Nothing to spread: one rank, or fewer features with bins than ranks
    assert _on_ranks(1, lambda comm: FeatureSlices.of(offsets, comm, np)) == [None]
    assert _on_ranks(6, lambda comm: FeatureSlices.of(offsets, comm, np)) == [None] * 6
    assert _on_ranks(2, lambda comm: FeatureSlices.of(np.array([0, 0, 4]), comm, np)) == [None, None]


def test_a_slice_without_bins_scores_no_split():
    """A rank whose features have no bins adds no candidate: the others' splits stand."""
    offsets = np.cumsum([0, 5, 5, 5, 5, 0, 10])  # on 5 ranks rank 3 holds feature 4 alone, no bins
    rng = np.random.default_rng(3)
    hist = rng.integers(-50, 50, (3, 30, 2))
    hist[..., 1] = np.abs(hist[..., 1]) + 1
    node_sums = hist[:, :5].sum(axis=1)  # no missing values in feature 0
    rules, active, scales = Regularisation(1.0, 0.0, 0.0, 0.0, 0.0), np.ones(3, bool), np.ones(2)
    feature_of_bin = np.repeat(np.arange(6), np.diff(offsets)).astype(np.int32)
    whole = SplitTable(evaluate_splits(hist, node_sums, active, feature_of_bin, offsets, scales, rules))

    def rank_work(comm):
        slices = FeatureSlices.of(offsets, comm, np)
        mine = slices.reduce(hist if comm.rank == 0 else np.zeros_like(hist), comm)
        return mine.shape, slices.find_splits(mine, node_sums, active, scales, rules, comm).table

    results = _on_ranks(5, rank_work)
    assert [shape for shape, _ in results] == [(3, 5, 2), (3, 5, 2), (3, 10, 2), (3, 0, 2), (3, 10, 2)]
    assert whole.valid.all()
    for _, table in results:
        np.testing.assert_array_equal(table, whole.table)
