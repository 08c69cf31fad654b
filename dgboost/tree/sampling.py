"""Sampling: rows before the histograms, columns before split evaluation.

A row left out of a tree's sample contributes nothing to its histograms (the grower
reads only the rows drawn) but still gets its leaf, and its margin is updated. The
draw for a row depends on (seed, tree, global row index) only.

Columns are sampled as XGBoost's ``colsample_bytree``, ``colsample_bylevel`` and
``colsample_bynode`` sample them, each from the set before it: a tree's set from
all features, a level's from the tree's, a node's from its level's, keeping
``max(1, floor(rate * size))`` features each time (the product in float32, as
XGBoost's). The draw is Efraimidis and Spirakis's weighted sampling without
replacement: the features of largest ``log(u) / weight``, with ``u`` keyed by
(seed, tree, level, node slot, feature), the same on every rank and device.
Without ``feature_weights`` the largest ``u`` (the same order, and no ``log``,
whose last bit may differ between machines). Node slots are the
level's slots in order, the same on the host and the GPU (whose padding slots
follow the real ones); a lossguide node's is its path from the root, 31 bits
(tree/lossguide.py ``_child_path``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._dtypes import GAIN_DTYPE, INDEX_DTYPE
from .._hashing import (STREAM_COLUMNS_BY_LEVEL, STREAM_COLUMNS_BY_NODE, STREAM_COLUMNS_BY_TREE,
                        STREAM_ROW_SUBSAMPLE, stream_base, stream_key, sub_key, uniform)
from ..backend import get_xp
from ..data.inputs import RowSpans
from ..kernels import bucket_counts, choose_bucket, sample_keys, sample_magnitude_max, sample_rows
from ..kernels.cpu import GOSS, MVS, SEARCH_STATE, UNIFORM


class RowSampler:
    """The rows each tree is grown from, and their pairs (``subsample`` by
    ``sampling_method``).

    ``draw`` returns the tree's gradient pairs, zero for the rows left out and divided
    by their probability for the rows drawn (gradient-based sampling and GOSS), and which
    rows were drawn, a mask: the grower reads those alone. Every threshold is found over
    all ranks' rows by a radix select of exact integer counts and sums whose buckets are
    chosen on the device (kernels.choose_bucket), so a draw reads nothing back to the
    host, and every draw is keyed by (seed, tree, global row index), so the sample does
    not depend on the partitioning.

    - ``uniform``: each row with probability ``subsample`` (no host read).
    - ``gradient_based`` (XGBoost's, the minimal variance sampling of Ibragimov and
      Gusev): each row with probability ``min(1, m / mu)``, ``m = sqrt(g^2 + 0.1 h^2)`` in
      fixed point, ``mu`` the largest integer whose expected sample is at least
      ``subsample`` of the rows; its pair divided by that probability.
    - ``goss`` (LightGBM's gradient-based one-side sampling): the ``top_rate`` of rows of
      largest ``|g h|`` (all tied at the threshold), and from the others ``other_rate`` of
      all rows, their pairs multiplied by ``(1 - top_rate) / other_rate``; as LightGBM,
      from round ``1 / eta`` on.

    On a GPU the tree's index the draws are keyed by is held on the device and advanced
    there after each draw, so the launches of a round are the same every round and a
    round replayed from a CUDA graph draws each tree's own sample (dgboost/replay.py).

    ``likely`` guesses a tree's sample before its gradients exist (out of core, the pass
    that finds every row's leaf gathers the next tree's rows while their pages are on the
    device: tree/grower.py PagedGrower); a sampler that ``remembers`` keeps, at each
    gradient-based draw, its guess of the output's next tree.
    """

    def __init__(self, params, n_total: int, n_outputs: int, rows: RowSpans, comm):
        self.method = params.sampling_method
        self.rate = params.subsample
        self.top_rate, self.other_rate = params.top_rate, params.other_rate
        self.warm_up_rounds = int(1.0 / params.eta) if params.eta > 0 else 0
        self.seed = params.seed
        self.n_total = n_total
        self.n_outputs = n_outputs
        self.rows = rows
        self.comm = comm
        self._global_index = None  # the rows' global indices, on the device of the pairs drawn from
        self._tree_at = None  # on a GPU, (1,) int64: the index of the tree drawn next, advanced on the device
        self.remembers = False  # whether gradient-based draws keep a guess of the output's next tree for ``likely``
        self._guessed = {}  # output: (the tree guessed, its guess: a (n_rows,) bool mask), where remembered
        self.graph = None  # a replay.RoundGraph the draws run through (out of core: training._replayed)
        self._graph_pairs = None  # (n_rows, 2) float32, where the graph's draws read their pairs
        # Gradient-based keys stay below 2**31 / room (room a power of two, at least 1 / subsample
        # down to 2**-30), so that the threshold mu, up to the largest key / subsample where the
        # magnitudes are alike (logistic loss's first rounds), is found below 2**31. The keys keep
        # 31 - log2(room) bits: a row below the largest magnitude / 2**(31 - log2(room)) has key 0
        # and is not drawn.
        self._key_room = 2.0 ** min(30, max(0, math.ceil(-math.log2(self.rate))))
        if self.method != "uniform" and self.active and n_total >= 1 << 32:  # choose_bucket's exact range
            raise ValueError(f"sampling_method={self.method!r} takes fewer than 2**32 rows, got {n_total}")

    @property
    def active(self) -> bool:
        return self.method == "goss" or self.rate < 1.0

    def draw(self, gpair, tree_index: int):
        """``(gpair, drawn)`` for the tree ``tree_index`` (round * n_outputs + output):
        ``gpair`` (n_rows, 2) float32 as the tree sees it; ``drawn`` the rows drawn, a
        (n_rows,) bool mask, or None for every row. Through ``graph`` (a replay.RoundGraph,
        out of core), every draw runs as one part of it, from the tree's pairs copied where the
        graph reads them; what it returns is then written again by the next draw (each output's
        guess of its next tree is copied apart where there are several)."""
        if not self.active or (self.method == "goss" and tree_index // self.n_outputs < self.warm_up_rounds):
            return gpair, None
        xp = get_xp(gpair)
        if self._global_index is None or get_xp(self._global_index) is not xp:
            self._global_index = self.rows.global_index(xp)
        output = tree_index % self.n_outputs
        if self.graph is None:
            pairs, drawn, guess = self._drawn(gpair, xp, tree_index)
        else:
            if self._graph_pairs is None:
                self._graph_pairs = xp.empty(gpair.shape, gpair.dtype)
            fixed = self._graph_pairs
            fixed[...] = gpair
            pairs, drawn, guess = self.graph.run(lambda: self._drawn(fixed, xp, tree_index), part="draw")
            if guess is not None and self.n_outputs > 1:  # the next output's draw writes over it
                kept = self._guessed.get(output, (None, None))[1]
                kept = xp.empty_like(guess) if kept is None else kept
                kept[...] = guess
                guess = kept
        if guess is not None:
            self._guessed[output] = tree_index + self.n_outputs, guess
        return pairs, drawn

    def _drawn(self, gpair, xp, tree_index: int) -> tuple:
        """``draw``'s pairs and rows, and the guess of the output's next tree where the sampler
        remembers one (else None); on a GPU the tree's index on the device is advanced after.
        The same launches for every tree of a gradient-based or uniform draw (the tree's index
        is the device's: ``_key``)."""
        result = self._draw(gpair, *self._key(xp, tree_index, 0), tree_index=tree_index)
        if self._tree_at is not None:
            self._tree_at += 1  # in place, after the draw: the next tree's
        return result

    def _key(self, xp, tree_index: int, ahead: int) -> tuple:
        """(key, tree_at) of sample_rows for the tree ``ahead`` trees after ``tree_index``: the
        tree's key on the host; on a GPU the stream's base and the tree's index on the device
        (set at the first draw, then advanced by each)."""
        if xp is np:
            return stream_key(self.seed, STREAM_ROW_SUBSAMPLE, tree_index + ahead), None
        if self._tree_at is None:
            self._tree_at = xp.full(1, tree_index, dtype=INDEX_DTYPE)
        return stream_base(self.seed, STREAM_ROW_SUBSAMPLE), self._tree_at + ahead if ahead else self._tree_at

    @property
    def likely_never(self) -> bool:
        """Whether ``likely`` guesses no tree (every row, or GOSS)."""
        return not self.active or self.method == "goss"

    def likely(self, tree_index: int):
        """The rows the tree ``tree_index`` will likely draw, before its gradients are known:
        a (n_rows,) bool mask on the device of the draws, or None where nothing tells (GOSS;
        every row; a gradient-based tree whose output's last draw was not the tree before it
        of that output, or a sampler that does not remember). Uniform draws: the tree's own
        sample. Gradient-based: its rows' draws against the probabilities of its output's
        last tree, raised by ``LIKELY_SLACK`` (its threshold divided by it), made at that
        tree's draw: gradients change little from one round to the next, and the sample is
        rarely off by more than a few rows in ten thousand."""
        if self.likely_never or self._global_index is None:  # no draw yet
            return None
        if self.method == "uniform":
            key = stream_key(self.seed, STREAM_ROW_SUBSAMPLE, tree_index)
            return sample_rows(None, self._global_index, key, UNIFORM, None, None, None, self.rate, 1.0)[1]
        guessed, guess = self._guessed.get(tree_index % self.n_outputs, (None, None))
        if guessed != tree_index:
            return None
        return guess if self.graph is None else guess.copy()  # a graph's is written again by the next draw

    def _draw(self, gpair, key: int, tree_at, tree_index: int) -> tuple:
        index = self._global_index
        if self.method == "uniform":
            return sample_rows(gpair, index, key, UNIFORM, None, None, None, self.rate, 1.0, tree_at) + (None,)
        kind = MVS if self.method == "gradient_based" else GOSS
        largest = self.comm.allreduce(sample_magnitude_max(gpair, kind), "max")
        keys = sample_keys(gpair, kind, largest * self._key_room if kind == MVS else largest)
        if kind == MVS:
            threshold = self._mvs_threshold(keys)
            guess = None
            if self.remembers:  # the output's next tree guessed from these keys (1 byte a row kept, not 8)
                xp = get_xp(keys)
                lowered = xp.maximum(threshold * LIKELY_SLACK.denominator // LIKELY_SLACK.numerator, 1)
                following, following_at = self._key(xp, tree_index, self.n_outputs)
                guess = sample_rows(None, index, following, MVS, keys, lowered, largest, 1.0, 1.0, following_at)[1]
            return sample_rows(gpair, index, key, MVS, keys, threshold, largest, 1.0, 1.0, tree_at) + (guess,)
        top_k = max(1, int(self.top_rate * self.n_total))
        other_k = max(1, int(self.other_rate * self.n_total))
        top = self._threshold(keys, _COUNT_RULE, least=0, numerator=top_k)
        return sample_rows(gpair, index, key, GOSS, keys, top, largest,
                           other_k / max(1, self.n_total - top_k), (self.n_total - top_k) / other_k, tree_at) + (None,)

    def _mvs_threshold(self, keys):
        """The largest integer ``mu >= 1`` whose expected sample, ``#(key >= mu) + sum(key < mu) /
        mu`` over every rank's keys, is at least ``subsample`` of the rows (compared exactly);
        0 where even mu = 1 draws too few. A (1,) int64 array on the keys' device."""
        # subsample * n_total as a fraction (exact for a subsample of 1/256 or more; nearest
        # with a denominator of at most 2**60 below that), for choose_bucket's integers.
        target = (Fraction(self.rate) * self.n_total).limit_denominator(1 << 60)
        return self._threshold(keys, _MVS_RULE, least=1, numerator=target.numerator, denominator=target.denominator)

    def _threshold(self, keys, kind: int, least: int, numerator: int, denominator: int = 1):
        """The largest integer ``t >= least`` for which the rule (kernels.choose_bucket's
        ``kind``) holds over every rank's keys, ``least - 1`` if none: a (1,) int64 array on
        the keys' device. Radix steps of _RADIX_STEPS bits, highest first: each one bucket
        histogram over every rank (one allreduce) narrows ``t`` to a bucket, chosen on the
        device, so that a tree's sample costs no host read."""
        xp = get_xp(keys)
        state = xp.zeros(len(SEARCH_STATE), dtype=INDEX_DTYPE)
        rule = (kind, least, numerator >> 62, numerator & ((1 << 62) - 1), denominator)
        for shift, bits in _RADIX_STEPS:
            counts, sums = bucket_counts(keys, shift, bits, state)
            choose_bucket(self.comm.allreduce(xp.concatenate([counts, sums])), state, shift, bits, rule)
        return state[:1]


#: How much likelier than its last tree's draw a row is guessed to be drawn (RowSampler.likely):
#: on higgs-like rows (logistic, eta 0.1, subsample 0.2) the guess takes 10% more rows than are
#: drawn and misses 0 to 3 rows in ten thousand of them (1.05: 5% more, 1 to 29 missed).
LIKELY_SLACK = Fraction(11, 10)


#: choose_bucket's rules: gradient-based sampling's expected sample, GOSS's count.
_MVS_RULE, _COUNT_RULE = 0, 1


#: The radix steps (shift, bits) of a threshold search over 31-bit keys: 2048 buckets at most,
#: so that each block of the CUDA twin counts into shared memory.
_RADIX_STEPS = ((20, 11), (9, 11), (0, 9))



#: The least weight a feature is drawn with (XGBoost's kRtEps): a weight of 0 is drawn last.
_LEAST_FEATURE_WEIGHT = 1e-6


class ColumnSampler:
    """The features each node of a tree may split on, under column sampling.

    Parameters
    ----------
    n_features : int
    by_tree, by_level, by_node : float in (0, 1]: colsample_bytree, _bylevel, _bynode
    seed : int
    feature_weights : array of shape (n_features,), float, >= 0, or None (all equal)
    """

    def __init__(self, n_features: int, by_tree: float, by_level: float, by_node: float, seed: int,
                 feature_weights=None):
        self.n_features = n_features
        self.rates = (by_tree, by_level, by_node)
        self.seed = seed
        self._weights = (None if feature_weights is None
                         else np.maximum(np.asarray(feature_weights, GAIN_DTYPE), _LEAST_FEATURE_WEIGHT))
        self._tree_set = (None, None)  # (tree index, its features)

    @property
    def active(self) -> bool:
        """Whether any rate leaves features out."""
        return any(rate < 1.0 for rate in self.rates)

    def level(self, tree_index: int, depth, slots):
        """The features each slot may split on: a host array of shape (n_slots, n_features),
        bool; None where every feature may be used. ``depth``: the slots' depth, an int for a
        level, or one a slot (lossguide's steps mix depths); ``slots``: how many (slots 0,
        1, ...), or the slots' keys (int array; lossguide keys a node by its path from the root)."""
        if not self.active:
            return None
        slots = np.arange(slots) if np.ndim(slots) == 0 else np.asarray(slots, dtype=INDEX_DTYPE)
        if np.ndim(depth) == 0:
            return self._at_depth(tree_index, int(depth), slots)
        depth = np.asarray(depth)
        chosen = np.empty((len(slots), self.n_features), bool)
        for level in np.unique(depth):
            at = depth == level
            chosen[at] = self._at_depth(tree_index, int(level), slots[at])
        return chosen

    def _at_depth(self, tree_index: int, depth: int, slots: np.ndarray) -> np.ndarray:
        """The features of the given slots' keys, at one depth of the tree."""
        by_tree, by_level, by_node = self.rates
        tree = self._tree(tree_index)
        level = self._choose(tree[None, :], by_level, sub_key(stream_key(self.seed, STREAM_COLUMNS_BY_LEVEL,
                                                                         tree_index), depth))
        if by_node >= 1.0:
            return np.repeat(level, len(slots), axis=0)
        node_key = sub_key(stream_key(self.seed, STREAM_COLUMNS_BY_NODE, tree_index), depth)
        return self._choose(np.repeat(level, len(slots), axis=0), by_node, node_key, slots)

    def _tree(self, tree_index: int) -> np.ndarray:
        if self._tree_set[0] != tree_index:
            everything = np.ones((1, self.n_features), bool)
            key = stream_key(self.seed, STREAM_COLUMNS_BY_TREE, tree_index)
            self._tree_set = (tree_index, self._choose(everything, self.rates[0], key)[0])
        return self._tree_set[1]

    def _choose(self, candidates: np.ndarray, rate: float, key: int, rows=None) -> np.ndarray:
        """Of each row's ``candidates`` (bool, (n_rows, n_features)), the ``max(1, floor(rate * m))``
        of largest ``log(u) / weight``, ``u`` drawn for (row's key, feature) under ``key``
        (``rows``: the rows' keys, 0, 1, ... by default); ties to the lower feature."""
        if rate >= 1.0:
            return candidates
        n_rows, n_features = candidates.shape
        rows = np.arange(n_rows, dtype=INDEX_DTYPE) if rows is None else rows
        index = rows[:, None] * n_features + np.arange(n_features, dtype=INDEX_DTYPE)[None, :]
        scores = uniform(index.reshape(-1), key).reshape(n_rows, n_features)
        if self._weights is not None:
            with np.errstate(divide="ignore"):  # u = 0: log 0 = -inf, drawn last
                scores = np.log(scores) / self._weights
        scores = np.where(candidates, scores, -np.inf)
        keep = np.maximum(1, (np.float32(rate) * candidates.sum(axis=1).astype(np.float32)).astype(INDEX_DTYPE))
        order = np.argsort(-scores, axis=1, kind="stable")  # largest first; ties to the lower feature
        chosen = np.zeros_like(candidates)
        rank = np.empty_like(order)
        np.put_along_axis(rank, order, np.arange(n_features)[None, :], axis=1)
        chosen[:] = (rank < keep[:, None]) & candidates
        return chosen
