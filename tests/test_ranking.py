"""Learning to rank: rank:ndcg, rank:pairwise and rank:map against XGBoost (the same trees on
discrete features), the ranking metrics against XGBoost's, query input and its errors, the
estimator, the export, and the CUDA kernels against their twins."""

from __future__ import annotations

import numpy as np
import pytest

import dgboost
from dgboost.collective import LocalCommunicator
from dgboost.data.inputs import query_groups
from dgboost.kernels import cpu
from dgboost.kernels.rank_loops import MAP, NDCG, PAIRWISE, SCORE_MAP, SCORE_NDCG, SCORE_PRECISION
from dgboost.objectives.metrics import make_metric
from dgboost.objectives.ranking import partners_of
from dgboost.params import TrainParams
from _queries import uneven_queries  # tests/_queries.py

xgb = pytest.importorskip("xgboost")




@pytest.fixture(scope="module")
def ranking():
    """Discrete features (every value its own bin, in both systems: the same trees), graded
    relevance 0-4, queries of 1 to 59 documents."""
    rng = np.random.default_rng(7)
    n = 6000
    X = (np.round(rng.standard_normal((n, 8)) * 2) / 2).astype(np.float32)
    qid = uneven_queries(rng, n, 60)
    y = np.clip(np.round(X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(n) + 1), 0, 4).astype(np.float32)
    return X, y, qid


@pytest.mark.parametrize("objective, extra", [
    ("rank:ndcg", {}), ("rank:pairwise", {}), ("rank:map", {}), ("rank:ndcg", {"ndcg_exp_gain": False}),
    ("rank:ndcg", {"lambdarank_num_pair_per_sample": 4}), ("rank:ndcg", {"lambdarank_normalization": False}),
    ("rank:pairwise", {"lambdarank_score_normalization": False}),
    ("rank:ndcg", {"lambdarank_unbiased": True}), ("rank:ndcg", {"lambdarank_unbiased": True, "lambdarank_bias_norm": 2.0}),
    ("rank:map", {"lambdarank_unbiased": True, "lambdarank_num_pair_per_sample": 8}),
])
def test_topk_trees_are_xgboosts(ranking, objective, extra):
    X, y, qid = ranking
    if objective == "rank:map":
        y = (y > 1).astype(np.float32)
    params = {"objective": objective, "max_depth": 4, "eta": 0.5, "base_score": 0.0, **extra}
    ours = dgboost.train(params, X, y, qid=qid, num_boost_round=8)
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, qid=qid), 8)
    expected = theirs.predict(xgb.DMatrix(X))
    np.testing.assert_allclose(ours.predict(X), expected, atol=2e-6 * max(1.0, np.abs(expected).max()))


def test_mean_pairs_rank_as_well_as_xgboosts():
    """'mean' draws its pairs (XGBoost's draws are its own): the same quality, not the same trees.
    NDCG@10 on other queries within the issue's 0.005 of XGBoost's, dgboost's averaged over three
    seeds (on a set of this size one seed's draws move it by about 0.005 either way)."""
    from dgboost.datasets import make_ranking_like

    X, y, qid = make_ranking_like(20000, seed=1)
    X_test, y_test, qid_test = make_ranking_like(20000, seed=2)
    params = {"objective": "rank:ndcg", "max_depth": 4, "lambdarank_pair_method": "mean"}
    metric = make_metric("ndcg@10", TrainParams.from_dict({"objective": "rank:ndcg"}))
    group = query_groups(qid_test, None, len(qid_test))
    score = lambda p: metric(y_test, p.astype(np.float32), None, LocalCommunicator(), group)  # noqa: E731
    ours = [score(dgboost.train({**params, "seed": seed}, X, y, qid=qid, num_boost_round=30).predict(X_test))
            for seed in range(3)]
    theirs = xgb.train({**params, "tree_method": "hist"}, xgb.DMatrix(X, y, qid=qid), 30)
    assert np.mean(ours) == pytest.approx(score(theirs.predict(xgb.DMatrix(X_test))), abs=0.005)


@pytest.mark.parametrize("name", ["ndcg@5", "ndcg@10-", "ndcg", "map@5", "map-", "pre@3", "pre@10"])
@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_are_xgboosts(ranking, name, weighted):
    X, y, qid = ranking
    if name.startswith(("map", "pre")):
        y = (y > 1).astype(np.float32)
    rng = np.random.default_rng(1)
    n_groups = int(qid.max()) + 1
    group_weight = rng.uniform(0.5, 2.0, n_groups).astype(np.float32) if weighted else None
    theirs_name = name if "@" in name else name.replace("-", "") + "@100" + ("-" if name.endswith("-") else "")
    matrix = xgb.DMatrix(X, y, qid=qid, weight=group_weight)
    model = xgb.train({"objective": "rank:ndcg" if name.startswith("ndcg") else "rank:map", "max_depth": 3,
                       "eval_metric": theirs_name}, matrix, 3)
    expected = float(model.eval(matrix).split(":")[-1])
    predictions = model.predict(matrix)
    params = TrainParams.from_dict({"objective": "rank:ndcg"})
    weight = None if group_weight is None else np.repeat(group_weight, np.bincount(qid))
    got = make_metric(name, params)(y, predictions, weight, LocalCommunicator(), query_groups(qid, None, len(qid)))
    assert got == pytest.approx(expected, abs=1e-6)


def test_qid_and_group_give_the_same_model(ranking, tmp_path):
    X, y, qid = ranking
    params = {"objective": "rank:ndcg", "max_depth": 3}
    by_qid = dgboost.train(params, X, y, qid=qid, num_boost_round=3)
    by_group = dgboost.train(params, X, y, group=np.bincount(qid), num_boost_round=3)
    assert by_qid.save_raw() == by_group.save_raw()


def test_query_weights_one_a_query_or_one_a_row(ranking):
    X, y, qid = ranking
    rng = np.random.default_rng(3)
    per_query = rng.uniform(0.5, 2.0, int(qid.max()) + 1).astype(np.float32)
    params = {"objective": "rank:ndcg", "max_depth": 3}
    a = dgboost.train(params, X, y, qid=qid, sample_weight=per_query, num_boost_round=3)
    b = dgboost.train(params, X, y, qid=qid, sample_weight=per_query[qid], num_boost_round=3)
    unweighted = dgboost.train(params, X, y, qid=qid, num_boost_round=3)
    assert a.save_raw() == b.save_raw() != unweighted.save_raw()
    theirs = xgb.train({**params, "tree_method": "hist", "base_score": 0.0, "eta": 0.3},
                       xgb.DMatrix(X, y, qid=qid, weight=per_query), 3)
    ours = dgboost.train({**params, "base_score": 0.0}, X, y, qid=qid, sample_weight=per_query, num_boost_round=3)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(xgb.DMatrix(X)), atol=1e-5)


def test_eval_sets_report_ranking_metrics_and_stop_early(ranking):
    X, y, qid = ranking
    half = int(np.searchsorted(qid, qid[len(qid) // 2]))
    model = dgboost.train({"objective": "rank:ndcg", "eval_metric": ["ndcg@5"], "max_depth": 3},
                          X[:half], y[:half], qid=qid[:half], num_boost_round=200,
                          evals=[(X[half:], y[half:], "valid")], eval_qid=[qid[half:]], early_stopping_rounds=5)
    curve = model.evals_result()["valid"]["ndcg@5"]
    assert model.best_iteration is not None and len(curve) < 200
    assert curve[model.best_iteration] == max(curve)  # ndcg is maximised


def test_unbiased_training_keeps_its_position_bias(ranking, tmp_path):
    """The bias moves the model; the model keeps its last estimate, which continued training takes
    up (6 rounds then 4 make the model file of 10), which XGBoost reads from the export."""
    X, y, qid = ranking
    params = {"objective": "rank:ndcg", "max_depth": 3, "lambdarank_unbiased": True,
              "lambdarank_num_pair_per_sample": 8}
    whole = dgboost.train(params, X, y, qid=qid, num_boost_round=10)
    assert whole.save_raw() != dgboost.train({**params, "lambdarank_unbiased": False}, X, y, qid=qid,
                                             num_boost_round=10).save_raw()
    t_plus, t_minus = whole.position_bias
    assert len(t_plus) == 8 and t_plus[0] == 1.0 and len(set(t_plus)) > 1
    path = tmp_path / "first.json"
    dgboost.train(params, X, y, qid=qid, num_boost_round=6).save_model(path)
    assert dgboost.train(params, X, y, qid=qid, num_boost_round=4, init_model=path).save_raw() == whole.save_raw()
    whole.save_model(tmp_path / "x.json", format="xgboost")
    exported = xgb.Booster()
    exported.load_model(tmp_path / "x.json")
    import json

    objective = json.loads(exported.save_config())["learner"]["objective"]
    np.testing.assert_allclose([float(v) for v in objective["ti+"]], t_plus, rtol=1e-6)


def test_default_metrics_follow_xgboost():
    assert TrainParams.from_dict({"objective": "rank:ndcg"}).metrics == ("ndcg@32",)
    assert TrainParams.from_dict({"objective": "rank:map", "lambdarank_pair_method": "mean"}).metrics == ("map",)
    assert TrainParams.from_dict({"objective": "rank:pairwise",
                                  "lambdarank_num_pair_per_sample": 8}).metrics == ("ndcg@8",)


def test_ranker_estimator_and_export(ranking, tmp_path):
    X, y, qid = ranking
    ranker = dgboost.DGBRanker(n_estimators=5, max_depth=3).fit(X, y, qid=qid, eval_set=[(X, y)], eval_qid=[qid])
    assert list(ranker.evals_result()["validation_0"]) == ["ndcg@32"]
    scores = ranker.predict(X)
    assert scores.shape == (len(y),) and np.unique(scores).size > 10
    path = tmp_path / "ranker.json"
    ranker.get_booster().save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    np.testing.assert_allclose(exported.predict(xgb.DMatrix(X)), scores, atol=1e-5)


@pytest.mark.parametrize("objective", ["rank:pairwise", "rank:map"])
def test_other_ranking_objectives_export(ranking, objective, tmp_path):
    X, y, qid = ranking
    if objective == "rank:map":
        y = (y > 1).astype(np.float32)
    model = dgboost.train({"objective": objective, "max_depth": 4}, X, y, qid=qid, num_boost_round=5)
    path = tmp_path / "model.json"
    model.save_model(path, format="xgboost")
    exported = xgb.Booster()
    exported.load_model(path)
    assert exported.save_config().count(f'"name":"{objective}"') == 1
    np.testing.assert_allclose(exported.predict(xgb.DMatrix(X)), model.predict(X), atol=1e-5)


@pytest.mark.parametrize("call, match", [
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y), "pass qid"),
    (lambda X, y, q: dgboost.train({}, X, y, qid=q), "only ranking objectives"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q[::-1]), "qid is not sorted"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=np.concatenate([q[1:], q[:1]])),
     "qid is not sorted"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y + 0.5, qid=q), "integers in \\[0, 31\\]"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y + 40, qid=q), "ndcg_exp_gain=False"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y - 1, qid=q), "has -1.0 at row .*integers in"),
    (lambda X, y, q: dgboost.train({"objective": "rank:map"}, X, y, qid=q), "0 or 1"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg", "eval_metric": "map@5"}, X, y, qid=q), "labels 0 or 1"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, group=[len(y)]*2), "add up to"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q, group=np.bincount(q)), "pass one"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q,
                                   sample_weight=np.arange(len(y), dtype=np.float32)), "differs within a query"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg", "eval_metric": "ndcg@0"}, X, y, qid=q), "integer >= 1"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg", "eval_metric": "auc"}, X, y, qid=q), "does not fit"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q, evals=[(X[:9], y[:9], "v")]),
     "pass evals\\[0\\]'s query ids in eval_qid"),
    # XGBoost casts query ids to integers (0.1 and 0.2 one query): refused, as group's sizes are
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q + 0.5), "qid is 0.5 at row 0.*integers"),
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q,
                                   sample_weight=np.ones(len(y)).astype(object)), "sample_weight has dtype object"),
    # A NaN weight is not a weight that differs within its query: its own check names it
    (lambda X, y, q: dgboost.train({"objective": "rank:ndcg"}, X, y, qid=q,
                                   sample_weight=np.where(np.arange(len(y)) == 0, np.nan, 1.0)),
     "sample_weight has a non-finite value \\(nan\\) at row 0"),
])
def test_bad_query_input_is_refused_before_any_work(ranking, call, match):
    X, y, qid = ranking
    with pytest.raises((ValueError, TypeError), match=match):
        call(X, y, qid)


# ---- the kernels ----------------------------------------------------------------------------

def _kernel_inputs(rng, n_rows=3000, largest=300, ties=False):
    qid = uneven_queries(rng, n_rows, largest)
    ptr = query_groups(qid, None, n_rows)
    score = rng.standard_normal(n_rows).astype(np.float32)
    if ties:
        score = np.round(score).astype(np.float32)
    label = rng.integers(0, 5, n_rows).astype(np.float32)
    return qid.astype(np.int64), ptr, score, label


def _reference_gradients(ptr, score, label, kind, k, normalise=True):
    """A plain loop over XGBoost's pairs (i < min(n, k), j > i), one pair at a time."""
    gpair = np.zeros((len(score), 2), np.float64)
    for a, b in zip(ptr[:-1], ptr[1:]):
        rows = a + np.lexsort((np.arange(b - a), -score[a:b]))
        n = b - a
        disc = 1.0 / np.log2(np.arange(n) + 2.0)
        ideal = np.sort(label[a:b])[::-1][:k]
        idcg = np.sum((2.0 ** ideal - 1) * disc[:len(ideal)])
        best, worst = score[rows[0]], score[rows[-1]]
        total, local = 0.0, np.zeros((n, 2))
        for i in range(min(n, k)):
            for j in range(i + 1, n):
                hi, lo = (i, j) if label[rows[i]] > label[rows[j]] else (j, i)
                if label[rows[i]] == label[rows[j]]:
                    continue
                s = float(score[rows[hi]] - score[rows[lo]])
                sig = 1.0 / (np.exp(-s) + 1.0)
                gh, gl = 2.0 ** label[rows[hi]] - 1, 2.0 ** label[rows[lo]] - 1
                delta = 1.0 if kind == PAIRWISE else abs((gh - gl) * (disc[hi] - disc[lo])) / idcg
                if best != worst:
                    delta /= abs(s) + 0.01
                lam, hes = (sig - 1) * delta, max(sig * (1 - sig), 1e-16) * delta * 2
                local[hi] += (lam, hes)
                local[lo] += (-lam, hes)
                total += -2 * lam
        norm = np.log2(1 + total) / total if normalise and total > 0 else 1.0
        gpair[rows] = local * norm
    return gpair


@pytest.mark.parametrize("kind", [NDCG, PAIRWISE])
def test_lambda_loop_equals_a_plain_loop_over_xgboosts_pairs(kind):
    rng = np.random.default_rng(0)
    group_of_row, ptr, score, label = _kernel_inputs(rng, 1500, 80)
    order = cpu.group_order(score, group_of_row)
    ideal = cpu.group_order(label, group_of_row)
    from dgboost.objectives.ranking import _inverse_ideal_dcg

    inv = _inverse_ideal_dcg(ptr, label, ideal, 8, True)
    got = cpu.lambda_gradients(ptr, order, score, label, kind, 8, True, True, True, inv,
                               1.0 / np.log2(np.arange(80) + 2.0), None, np.ones(len(ptr) - 1))
    np.testing.assert_allclose(got, _reference_gradients(ptr, score, label, kind, 8), rtol=2e-5, atol=1e-7)


def _all_gradients(xp, kernels, group_of_row, ptr, score, label, draws_of):
    from dgboost.objectives.ranking import _inverse_ideal_dcg

    out = []
    order = kernels.group_order(xp.asarray(score), xp.asarray(group_of_row))
    ideal = cpu.group_order(label, group_of_row)
    discount = xp.asarray(1.0 / np.log2(np.arange(int(np.diff(ptr).max())) + 2.0))
    for kind in (NDCG, PAIRWISE, MAP):
        lab = (label > 2).astype(np.float32) if kind == MAP else label
        inv = xp.asarray(_inverse_ideal_dcg(ptr, lab, cpu.group_order(lab, group_of_row), 16, True))
        for draws in (None, draws_of):
            partners = None if draws is None else partners_of(
                xp.asarray(draws), _places(order, ptr, xp), order, xp.asarray(np.repeat(ptr[:-1], np.diff(ptr))),
                int(np.diff(ptr).max()))
            for normalise in (True, False):
                out.append(kernels.lambda_gradients(
                    xp.asarray(ptr), order, xp.asarray(score), xp.asarray(lab), kind, 16, True, True, normalise,
                    inv, discount, partners, xp.asarray(np.linspace(0.5, 2, len(ptr) - 1))))
            bias = xp.asarray(np.linspace(1.0, 0.3, 16)), xp.asarray(np.linspace(1.0, 1.5, 16))  # unbiased
            out.extend(kernels.lambda_gradients(
                xp.asarray(ptr), order, xp.asarray(score), xp.asarray(lab), kind, 16, True, True, True, inv, discount,
                partners, xp.asarray(np.ones(len(ptr) - 1)), *bias))
    for metric in (SCORE_NDCG, SCORE_MAP, SCORE_PRECISION):
        for k in (3, 10**9):
            out.append(kernels.rank_scores(xp.asarray(ptr), metric, order, xp.asarray(ideal), xp.asarray(
                label if metric == SCORE_NDCG else (label > 2).astype(np.float32)), k, True, metric == SCORE_MAP,
                discount))
    return [np.asarray(a.get() if hasattr(a, "get") else a) for a in [order] + out]


def _places(order, ptr, xp):
    sizes = np.diff(ptr)
    start = xp.asarray(np.repeat(ptr[:-1], sizes))
    place = xp.empty_like(order)
    place[order] = xp.arange(order.shape[0]) - start[order]
    return place


def _draws(rng, ptr, n_draws=3):
    """Partners within each row's group (any label: the kernels skip equal labels)."""
    sizes = np.diff(ptr)
    start = np.repeat(ptr[:-1], sizes)
    return (start[:, None] + rng.integers(0, 1 << 30, (len(start), n_draws)) % sizes[np.repeat(
        np.arange(len(sizes)), sizes)][:, None]).astype(np.int64)


@pytest.mark.gpu
@pytest.mark.parametrize("ties", [False, True])
def test_cuda_ranking_kernels_equal_their_twins(ties):
    import cupy

    from dgboost.kernels import cuda

    rng = np.random.default_rng(5)
    group_of_row, ptr, score, label = _kernel_inputs(rng, 20000, 400, ties)
    draws = _draws(rng, ptr)
    expected = _all_gradients(np, cpu, group_of_row, ptr, score, label, draws)
    got = _all_gradients(cupy, cuda, group_of_row, ptr, score, label, draws)
    for a, b in zip(got, expected):
        if a.dtype == np.float64 and a.ndim == 2:  # unbiased costs: log(1 / (1 - sigmoid)), CUDA's log and numba's
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)  # may differ in the last bit of a float64
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("objective, extra", [("rank:ndcg", {}), ("rank:map", {}), ("rank:pairwise", {}),
                                              ("rank:ndcg", {"lambdarank_pair_method": "mean"}),
                                              ("rank:ndcg", {"lambdarank_unbiased": True})])
def test_gpu_ranking_model_is_the_cpus(ranking, objective, extra):
    X, y, qid = ranking
    if objective == "rank:map":
        y = (y > 1).astype(np.float32)
    params = {"objective": objective, "max_depth": 5, **extra}
    evals = {"evals": [(X, y, "t")], "eval_qid": [qid]}  # the ranking metrics on the device too
    cpu_model = dgboost.train(params, X, y, qid=qid, num_boost_round=10, **evals)
    gpu_model = dgboost.train({**params, "device": "cuda"}, X, y, qid=qid, num_boost_round=10, **evals)
    np.testing.assert_allclose(gpu_model.predict(X), cpu_model.predict(X), atol=1e-6)
    (name, curve), = cpu_model.evals_result()["t"].items()  # the objective's default metric
    np.testing.assert_allclose(gpu_model.evals_result()["t"][name], curve, rtol=1e-6)
