"""Parameter names, aliases, defaults and validation (XGBoost's conventions)."""

import math

import pytest

from dgboost.params import DEFAULT_METRIC, OBJECTIVES, PARAMETERS, TrainParams


def test_defaults_are_xgboosts():
    p = TrainParams.from_dict({})
    assert (p.objective, p.eta, p.max_depth, p.min_child_weight) == ("reg:squarederror", 0.3, 6, 1.0)
    assert (p.reg_lambda, p.alpha, p.gamma, p.max_bin, p.seed) == (1.0, 0.0, 0.0, 256, 0)
    assert p.base_score is None and p.device == "cpu" and math.isnan(p.missing)
    assert p.metrics == ("rmse",)


@pytest.mark.parametrize("alias, name, field", [
    ("learning_rate", "eta", "eta"), ("reg_lambda", "lambda", "reg_lambda"),
    ("reg_alpha", "alpha", "alpha"), ("min_split_loss", "gamma", "gamma"),
    ("random_state", "seed", "seed"),
])
def test_aliases_resolve(alias, name, field):
    value = 3 if field == "seed" else 0.25
    assert getattr(TrainParams.from_dict({alias: value}), field) == value
    assert getattr(TrainParams.from_dict({name: value}), field) == value


def test_name_and_alias_together_is_an_error():
    with pytest.raises(ValueError, match="'eta' twice"):
        TrainParams.from_dict({"eta": 0.1, "learning_rate": 0.2})


def test_unknown_name_suggests_nearest():
    with pytest.raises(ValueError, match=r"params\['max_dept'\] is not a dgboost parameter.*Did you mean 'max_depth'"):
        TrainParams.from_dict({"max_dept": 3})


def test_xgboost_name_not_yet_supported_says_so():
    with pytest.raises(ValueError, match="num_parallel_tree.*not supported by dgboost yet"):
        TrainParams.from_dict({"num_parallel_tree": 4})


@pytest.mark.parametrize("params, message", [
    ({"eta": 1.5}, r"eta=1.5 is out of range: it must be in \[0, 1\]"),
    ({"max_depth": -1}, r"max_depth=-1 is out of range: it must be in \[0, inf\)"),
    ({"max_depth": 0}, r"max_depth=0 \(no limit\) needs grow_policy='lossguide'"),
    ({"max_bin": 1}, r"max_bin=1 is out of range: it must be in \[2, 65536\]"),
    ({"min_child_weight": -1}, r"min_child_weight=-1.0 is out of range"),
    ({"subsample": 0}, r"subsample=0.0 is out of range: it must be in \(0, 1\]"),
    ({"objective": "binary:logistc"}, r"not one of .*Did you mean 'binary:logistic'"),
    ({"grow_policy": "leafwise"}, r"grow_policy='leafwise' is not one of 'depthwise', 'lossguide', 'symmetric'"),
    ({"tree_method": "exact"}, r"builds histograms only"),
    ({"device": "tpu"}, r"device='tpu' is not a device"),
    ({"eval_metric": "aucc"}, r"not one of"),
    ({"eval_metric": ["auc", "auc"]}, r"names a metric twice"),
])
def test_values_out_of_range_name_the_range(params, message):
    with pytest.raises(ValueError, match=message):
        TrainParams.from_dict(params)


@pytest.mark.parametrize("params", [{"max_depth": 2.5}, {"eta": "0.1"}, {"max_depth": True}])
def test_wrong_types(params):
    with pytest.raises(TypeError, match="must be"):
        TrainParams.from_dict(params)


def test_multiclass_needs_num_class_and_others_refuse_it():
    with pytest.raises(ValueError, match="needs num_class"):
        TrainParams.from_dict({"objective": "multi:softprob"})
    with pytest.raises(ValueError, match="only for multi"):
        TrainParams.from_dict({"objective": "binary:logistic", "num_class": 3})
    assert TrainParams.from_dict({"objective": "multi:softmax", "num_class": 3}).n_outputs == 3


def test_metric_must_fit_objective():
    with pytest.raises(ValueError, match="'mlogloss' does not fit objective='reg:squarederror'"):
        TrainParams.from_dict({"eval_metric": "mlogloss"})


def test_base_score_range_depends_on_objective():
    with pytest.raises(ValueError, match=r"probability in \(0, 1\)"):
        TrainParams.from_dict({"objective": "binary:logistic", "base_score": 1.5})
    assert TrainParams.from_dict({"base_score": 1.5}).base_score == 1.5


def test_device_spellings():
    assert TrainParams.from_dict({"device": "GPU"}).device == "cuda"
    assert TrainParams.from_dict({"device": "cuda:1"}).device == "cuda:1"


def test_every_objective_has_a_default_metric():
    assert set(DEFAULT_METRIC) == set(OBJECTIVES)


def test_to_dict_round_trips():
    p = TrainParams.from_dict({"objective": "multi:softprob", "num_class": 4, "eta": 0.05,
                               "eval_metric": ["mlogloss", "merror"]})
    raw = p.to_dict()
    raw["missing"] = float(raw["missing"])
    assert TrainParams.from_dict(raw).to_dict() == p.to_dict()  # dict form: NaN == NaN as "nan"
    assert set(raw) == {spec.name for spec in PARAMETERS}
