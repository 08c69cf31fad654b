"""Learning to rank: LambdaMART with XGBoost's rank:ndcg, rank:pairwise and rank:map.

Rows come in query groups (``Dataset.group``), whole on one rank: a Dask job cuts its
shares at query boundaries. Each round every group's documents are ordered by their
scores, pairs are formed ('topk': each of the first k places with every place below
it; 'mean': partners drawn for each document among those of another label) and each
pair's gradient is weighted by how much swapping the two would change the group's
metric (kernels ``lambda_gradients``). Draws are keyed by (seed, round, global row
index), so the model is the same on any number of workers.
"""

from __future__ import annotations

import numpy as np

from .._dtypes import INDEX_DTYPE, MARGIN_DTYPE
from .._hashing import STREAM_RANK_PAIRS, stream_key, uniform
from ..backend import asarray, get_xp, to_numpy
from ..kernels import group_order, lambda_gradients
from ..kernels.cpu import Partners
from ..kernels.rank_loops import MAP, NDCG, PAIRWISE
from ..fixed_point import SUM_HEADROOM_BITS, from_fixed, power_of_two_scale, to_fixed
from ..reduce import device_count, exact_sums
from .base import Objective, raise_for_first

#: The largest relevance of exponential gain (2**31 - 1 is float64-exact; XGBoost's bound).
MAX_EXP_RELEVANCE = 31


def not_exp_relevance(label):
    """Where a label is not a relevance that exp gain (2**label - 1) takes: an integer in
    [0, MAX_EXP_RELEVANCE]."""
    xp = get_xp(label)
    return (label < 0) | (label > MAX_EXP_RELEVANCE) | (label != xp.floor(label))


class LambdaRank(Objective):
    """rank:ndcg, rank:pairwise and rank:map."""

    def __init__(self, params):
        super().__init__(params)
        self.name = params.objective
        self.kind = {"rank:ndcg": NDCG, "rank:pairwise": PAIRWISE, "rank:map": MAP}[params.objective]
        self.topk = params.lambdarank_pair_method == "topk"
        self.k = params.num_pair if self.topk else None
        self._groups = None

    def check_labels(self, label, name):
        xp = get_xp(label)
        if self.kind == MAP:
            raise_for_first((label != 0) & (label != 1), label, name,
                             "labels must be 0 or 1 (relevant or not) for objective='rank:map'", xp)
        elif self.kind == NDCG and self.params.ndcg_exp_gain:
            raise_for_first(not_exp_relevance(label), label, name,
                             f"relevance labels must be integers in [0, {MAX_EXP_RELEVANCE}] for objective='rank:ndcg' "
                             "with ndcg_exp_gain (gain 2**label - 1); set ndcg_exp_gain=False for other labels", xp)

    def link(self, base_score):
        return np.full(1, base_score, dtype=MARGIN_DTYPE)

    def estimate_base_score(self, label, weight, comm):
        return 0.0  # XGBoost's one Newton step from 0, whose pairs cancel: 0 up to its rounding

    def prepare(self, data, rows, comm):
        super().prepare(data, rows, comm)
        self._groups = QueryGroups(data.group, data.label, data.weight, comm, ideal_cut=self.k,
                                   exp_gain=self.params.ndcg_exp_gain, global_index=rows.global_index(data.xp),
                                   ideal_dcg=self.kind == NDCG)
        self.bias = PositionBias(self._groups, self.k, self.params.lambdarank_bias_norm, comm) \
            if self.params.lambdarank_unbiased else None

    def resume(self, init_model):
        if self.bias is not None and init_model.position_bias is not None:
            self.bias.load(*init_model.position_bias)

    def state(self):
        return None if self.bias is None else (self.bias.t_plus.copy(), self.bias.t_minus.copy())

    def training_gradients(self, margins, label, weight, epoch=0):
        return self.gradients(margins, label, weight, epoch)

    def gradients(self, margins, label, weight, epoch=0):
        groups = self._groups
        score = margins[:, 0]
        order = group_order(score, groups.group_of_row)
        partners = None if self.topk else groups.partners(order, self.params.num_pair,
                                                          stream_key(self.params.seed, STREAM_RANK_PAIRS, epoch))
        bias = {} if self.bias is None else {"t_plus": self.bias.t_plus, "t_minus": self.bias.t_minus}
        gpair = lambda_gradients(groups.ptr, order, score, label, self.kind, self.k or 0,
                                 self.params.ndcg_exp_gain, self.params.lambdarank_score_normalization,
                                 self.params.lambdarank_normalization, groups.inv_ideal, groups.discount, partners,
                                 groups.scale, **bias)
        if self.bias is not None:
            gpair, costs = gpair
            self.bias.update(costs)
        return gpair[:, None, :]


class PositionBias:
    """Unbiased LambdaMART's position biases (Hu et al. 2019, XGBoost's): t+ and t- of the first k
    places of each query's input order (the order it was shown in), 1 at first; each round
    re-estimated from the pairs' costs summed by place over every query of every rank (exactly,
    in fixed point), ``(sum / sum at place 0) ** (1 / (1 + bias_norm))``; on the device throughout."""

    def __init__(self, groups: "QueryGroups", top_k: int | None, bias_norm: float, comm):
        xp = get_xp(groups.ptr)
        if top_k is None:  # 'mean': the first 32 places, or the longest query's (XGBoost's)
            longest = int(to_numpy(comm.allreduce(xp.asarray([int(groups.longest)]), "max"))[0])
            top_k = min(longest, 32)
        self.t_plus = xp.ones(top_k, dtype=np.float64)
        self.t_minus = xp.ones(top_k, dtype=np.float64)
        self.exponent = 1.0 / (1.0 + bias_norm)
        self.comm = comm
        self.n_total = device_count(groups.start_of_row.shape[0], comm, xp)
        shown = xp.arange(groups.start_of_row.shape[0], dtype=INDEX_DTYPE) - groups.start_of_row
        tracked = xp.nonzero(shown < top_k)[0]
        by_place = xp.argsort(shown[tracked], kind="stable") if xp is np else xp.argsort(shown[tracked])
        self.tracked = tracked[by_place]  # the rows of the first k places, by place
        self.bounds = xp.searchsorted(shown[self.tracked], xp.arange(top_k + 1, dtype=INDEX_DTYPE))

    def load(self, t_plus, t_minus) -> None:
        """Biases a model kept (its training's last), to go on from."""
        xp = get_xp(self.t_plus)
        if len(t_plus) != self.t_plus.shape[0]:
            raise ValueError(f"init_model tracks the position bias of {len(t_plus)} places, this training "
                             f"{self.t_plus.shape[0]} (lambdarank_num_pair_per_sample under 'topk'; under 'mean' the "
                             "longest query's places, at most 32): continue it with the same pairs on like queries")
        self.t_plus[:] = xp.asarray(np.asarray(t_plus, np.float64))
        self.t_minus[:] = xp.asarray(np.asarray(t_minus, np.float64))

    def update(self, costs) -> None:
        """t+ and t- from this round's costs: (n_rows, 2) float64, each row's as the higher of its
        tracked pairs and as the lower."""
        xp = get_xp(costs)
        tracked = costs[self.tracked]
        bound = self.comm.allreduce(xp.abs(tracked).max(axis=0) if tracked.shape[0] else xp.zeros(2), "max")
        scale = power_of_two_scale(bound, self.n_total, SUM_HEADROOM_BITS)
        running = xp.cumsum(xp.concatenate([xp.zeros((1, 2), np.int64), to_fixed(tracked, scale[None, :])]), axis=0)
        sums = running[self.bounds[1:]] - running[self.bounds[:-1]]  # a place's rows are a run: exact integers
        by_place = from_fixed(self.comm.allreduce(sums, "sum"), scale[None, :])
        for column, bias in ((0, self.t_plus), (1, self.t_minus)):
            first = by_place[0, column]
            bias[:] = xp.where(first >= 1e-16, (by_place[:, column] / xp.where(first >= 1e-16, first, 1.0))
                               ** self.exponent, bias)


class QueryLayout:
    """Query groups on their labels' device, as the gradients and the ranking metrics read them:
    the group pointer, each row's group and its group's first row, the longest group, the
    discounts 1 / log2(place + 2), and the ideal order (each group's rows by label, descending)."""

    def __init__(self, ptr: np.ndarray, label):
        xp = get_xp(label)
        sizes = np.diff(ptr)
        self.ptr = asarray(xp, ptr.astype(INDEX_DTYPE))
        self.group_of_row = asarray(xp, np.repeat(np.arange(sizes.shape[0], dtype=INDEX_DTYPE), sizes))
        self.start_of_row = self.ptr[self.group_of_row]
        self.longest = int(sizes.max()) if sizes.size else 0
        self.discount = asarray(xp, 1.0 / np.log2(np.arange(self.longest, dtype=np.float64) + 2.0))
        self.ideal = group_order(label, self.group_of_row)


class QueryGroups(QueryLayout):
    """One rank's query groups on its device, and what every round reads of them beyond their
    layout: the groups' weights (normalised to average 1 over all ranks, XGBoost's rule), each
    group's ideal DCG, and for 'mean' each row's partners to draw from."""

    def __init__(self, ptr: np.ndarray, label, weight, comm, *, ideal_cut: int | None, exp_gain: bool, global_index,
                 ideal_dcg: bool = True):
        super().__init__(ptr, label)
        xp = get_xp(label)
        n_groups = ptr.shape[0] - 1
        self.global_index = global_index
        host_label, ideal = to_numpy(label), to_numpy(self.ideal)
        group_weight = np.ones(n_groups) if weight is None else to_numpy(weight)[ptr[:-1]].astype(np.float64)
        total_weight, total_groups = exact_sums(np.stack([group_weight, np.ones(n_groups)], axis=1), comm)
        self.scale = asarray(xp, group_weight * (total_groups / total_weight))
        self.inv_ideal = asarray(xp, _inverse_ideal_dcg(ptr, host_label, ideal, ideal_cut, exp_gain) if ideal_dcg
                                 else np.zeros(n_groups))
        self._ideal_host, self._label_host = ideal, host_label
        self._others = None

    def partners(self, order, n_draws: int, key: int) -> Partners:
        """'mean''s pairs of this round: each row's draws (``draws``) and the rows that drew it,
        listed by row, each row's partners in the order of their places in ``order``."""
        xp = get_xp(order)
        place = xp.empty_like(order)
        place[order] = xp.arange(order.shape[0], dtype=INDEX_DTYPE) - self.start_of_row[order]
        return partners_of(self.draws(n_draws, key), place, order, self.start_of_row, self.longest)

    def draws(self, n_draws: int, key: int):
        """'mean''s partners: for each row ``n_draws`` rows of its group of another label, drawn
        uniformly by (key, global row index, draw): (n_rows, n_draws) int64, -1 where a group has
        one label only."""
        xp = get_xp(self.ptr)
        ideal, first_other, n_other = self._other_labels()
        columns = []
        for t in range(n_draws):
            u = uniform(self.global_index * n_draws + t, key)
            pick = xp.floor(u * n_other).astype(INDEX_DTYPE)
            pick = xp.where(pick >= first_other[0], pick + first_other[1], pick)  # skip the row's own label
            partner = ideal[self.start_of_row + xp.where(n_other > 0, pick, 0)]
            columns.append(xp.where(n_other > 0, partner, -1))
        return xp.stack(columns, axis=1)

    def _other_labels(self):
        """Each row's group's rows of other labels, as ranges of the ideal order: (the ideal
        order, (the row's label's first ideal place, the count of its label), the count of
        the others)."""
        if self._others is None:
            xp = get_xp(self.ptr)
            ideal, label = self._ideal_host, self._label_host
            ptr = to_numpy(self.ptr)
            n = ideal.shape[0]
            sizes = np.diff(ptr)
            group = np.repeat(np.arange(sizes.shape[0]), sizes)
            sorted_label = label[ideal]
            new_run = np.ones(n, dtype=bool)
            new_run[1:] = (sorted_label[1:] != sorted_label[:-1]) | (group[1:] != group[:-1])
            run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
            run_id = np.cumsum(new_run) - 1
            run_length = np.bincount(run_id)[run_id]
            first, length = np.empty(n, INDEX_DTYPE), np.empty(n, INDEX_DTYPE)
            first[ideal] = run_start - ptr[group]  # the row's label's run, by place in its group
            length[ideal] = run_length
            n_other = sizes[group] - length  # a group's rows hold its places: row and place share it
            self._others = (self.ideal, (asarray(xp, first), asarray(xp, length)), asarray(xp, n_other))
        return self._others


def partners_of(draws, place, order, start_of_row, longest: int) -> Partners:
    """Each row's partners from the rows' draws ((n_rows, n_draws) int64, -1 for none): the rows
    it drew and those that drew it, by the partners' places (``place``, each row's in its group's
    ``order``; ``start_of_row`` each row's group's first row; ``longest`` the longest group).
    One sort of (row, partner's place) keys: a partner's row is its group's row at that place."""
    xp = get_xp(draws)
    n, n_draws = draws.shape
    drawer = xp.repeat(xp.arange(n, dtype=INDEX_DTYPE), n_draws)
    drawn = draws.reshape(-1)
    kept = drawn >= 0
    drawer, drawn = drawer[kept], drawn[kept]
    span = max(int(longest), 1)
    keys = xp.sort(xp.concatenate([drawer * span + place[drawn], drawn * span + place[drawer]]))
    source = keys // span
    partner = order[start_of_row[source] + keys % span]
    return Partners(place, xp.searchsorted(source, xp.arange(n + 1, dtype=INDEX_DTYPE)), partner, n_draws)


def _inverse_ideal_dcg(ptr, label, ideal, cut, exp_gain) -> np.ndarray:
    """1 / each group's DCG in its ideal order over its first ``cut`` places (all for None); 0
    where it is 0 (no relevant document)."""
    n = ideal.shape[0]
    place = np.arange(n) - np.repeat(ptr[:-1], np.diff(ptr))
    sorted_label = label[ideal].astype(np.float64)
    gain = np.exp2(sorted_label) - 1.0 if exp_gain else sorted_label
    contribution = np.where(place < (cut or n), (1.0 / np.log2(place + 2.0)) * gain, 0.0)
    best = np.add.reduceat(contribution, ptr[:-1]) if n else np.zeros(0)  # each group's own run
    return np.where(best > 0, 1.0 / np.where(best > 0, best, 1.0), 0.0)
