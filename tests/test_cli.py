"""The dgboost command: exit codes, help with examples, and a small demo."""

import json
import os
import subprocess
import sys

import pytest

from dgboost import __version__
from dgboost.backend import cuda_device_count
from dgboost.cli import main

#: chmod does not stop root, so the cases of unreadable and unwritable paths skip under it.
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def cluster():
    """One small CPU cluster for every test here that needs a running scheduler."""
    from dgboost.dask import local_cluster

    # its HTTP server on a free port: the local clusters of other tests take 8787
    with local_cluster("cpu", 2, threads_per_worker=1, dashboard_address=":0") as cluster:
        yield cluster


def test_demo_trains_and_reports_the_test_auc(capsys):
    assert main(["demo", "--rows", "3000", "--test-rows", "1000", "--rounds", "4", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "higgs-like data, 3000 training and 1000 test rows" in out
    assert out.splitlines()[1].startswith("[0]\ttest-logloss:")
    assert "trained 4 rounds" in out and "test AUC 0." in out


def test_quiet_demo_prints_only_the_result(capsys):
    assert main(["demo", "--rows", "2000", "--test-rows", "500", "--rounds", "2", "--quiet", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trained 2 rounds")


def test_bad_usage_exits_2(capsys):
    for argv in (["demo", "--rows", "0"], ["demo", "--device", "tpu"], ["train-everything"], []):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse exits by itself on bad arguments
            code = exit_.code
        assert code == 2, argv
    assert "must be at least 1" in capsys.readouterr().err


def test_help_shows_an_example():
    result = subprocess.run([sys.executable, "-m", "dgboost.cli", "demo", "--help"],
                            capture_output=True, text=True, check=True)
    assert "example:" in result.stdout and "dgboost demo --rows" in result.stdout


def test_version():
    result = subprocess.run([sys.executable, "-m", "dgboost.cli", "--version"],
                            capture_output=True, text=True, check=True)
    assert result.stdout.strip() == f"dgboost {__version__}"


def test_info_lists_versions_and_a_clusters_workers(capsys, cluster):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"dgboost {__version__}") and "numpy:" in out and "CUDA GPUs:" in out
    assert main(["info", "--scheduler", cluster.scheduler_address]) == 0
    assert "2 workers" in capsys.readouterr().out


def _tables(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.standard_normal((1200, 4)).astype(np.float32), columns=["a", "b", "c", "d"])
    frame["label"] = (frame["a"] + frame["b"] * frame["c"] > 0).astype(np.float32)
    frame.iloc[:900].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[900:].to_parquet(tmp_path / "valid.parquet", index=False)
    return frame


def test_train_predict_evaluate_from_a_config(tmp_path, capsys):
    import json

    import numpy as np
    import pandas as pd

    import dgboost

    frame = _tables(tmp_path)
    config = tmp_path / "job.toml"
    config.write_text(f"""
train = "{tmp_path / 'train.csv'}"
label_column = "label"
model = "{tmp_path / 'model.json'}"
num_boost_round = 50
objective = "binary:logistic"
eval_metric = ["logloss", "auc"]
max_depth = 3

[evals]
valid = "{tmp_path / 'valid.parquet'}"
""")
    # key=value after an option too (argparse ended the positionals at the option: "unrecognized arguments")
    assert main(["train", str(config), "num_boost_round=7", "--quiet", "eta=0.5", "verbose_eval=1"]) == 0
    assert capsys.readouterr().out.startswith("trained 7 rounds")  # --quiet: no progress lines
    model = dgboost.Booster.load_model(tmp_path / "model.json")
    features, train = frame[["a", "b", "c", "d"]], frame.iloc[:900]
    expected = dgboost.train({"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "max_depth": 3,
                              "eta": 0.5}, train[["a", "b", "c", "d"]], train["label"], num_boost_round=7)
    assert model.save_raw() == expected.save_raw()  # the command line trains the same model
    evaluation = json.loads((tmp_path / "model.eval.json").read_text())
    assert evaluation["rounds"] == 7 and len(evaluation["evals_result"]["valid"]["auc"]) == 7

    out = tmp_path / "predictions.csv"
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "valid.parquet"),
                 "--out", str(out)]) == 0
    written = pd.read_csv(out)
    np.testing.assert_allclose(written.iloc[:, 0].to_numpy(), model.predict(features.iloc[900:]), rtol=1e-6)

    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "valid.parquet"),
                 "--label-column", "label"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["rows"] == 300
    assert result["metrics"]["auc"] == pytest.approx(evaluation["evals_result"]["valid"]["auc"][-1], abs=1e-12)


def test_evaluate_refuses_labels_and_weights_that_would_make_its_metrics_meaningless(tmp_path, capsys):
    """A NaN label, one outside the objective's range or a negative weight is refused, naming
    its row, as training refuses an eval set's: not scored into a NaN or a wrong AUC."""
    import dgboost

    frame = _tables(tmp_path)
    model = tmp_path / "model.json"
    dgboost.train({"objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}, frame[list("abcd")],
                  frame["label"], num_boost_round=3).save_model(model)
    frame["weight"] = 1.0
    nan_label, bad_label, negative_weight = frame.copy(), frame.copy(), frame.copy()
    nan_label.loc[5, "label"] = float("nan")
    bad_label.loc[8, "label"] = 7.0
    negative_weight.loc[3, "weight"] = -1.0
    for table, message in ((nan_label, "--data's labels has a non-finite value (nan) at row 5"),
                           (bad_label, "--data's labels has 7.0 at row 8"),
                           (negative_weight, "--data's weights is negative (-1.0) at row 3: weights must be >= 0")):
        path = tmp_path / "scored.parquet"
        table.to_parquet(path, index=False)
        capsys.readouterr()
        assert main(["evaluate", "--model", str(model), "--data", str(path), "--label-column", "label",
                     "--weight-column", "weight"]) == 2
        assert message in capsys.readouterr().err
    # The model's features name the label: it would be scored on what it reads.
    assert main(["evaluate", "--model", str(model), "--data", str(path), "--label-column", "a"]) == 2
    assert "feature_columns holds 'a', which label_column names" in capsys.readouterr().err


def test_a_label_weight_or_qid_column_read_as_a_feature_is_refused(tmp_path, capsys):
    _tables(tmp_path)
    config = tmp_path / "job.toml"
    config.write_text(f"""
train = "{tmp_path / 'train.csv'}"
label_column = "label"
model = "{tmp_path / 'model.json'}"
num_boost_round = 2
""")
    assert main(["train", str(config), 'feature_columns=["a", "label"]']) == 2
    assert "feature_columns holds 'label', which label_column names: a model must not read its labels as a " \
        "feature" in capsys.readouterr().err
    assert main(["train", str(config), "weight_column=label"]) == 2
    assert "label_column and weight_column both name column 'label'" in capsys.readouterr().err
    assert not (tmp_path / "model.json").exists()


def test_categorical_columns_of_text_train_predict_and_evaluate(tmp_path, capsys):
    """categorical_columns: text columns of a CSV train as categories (the model of dgboost.train on
    the frame with those columns as categories); predict and evaluate code them by the model's."""
    import numpy as np
    import pandas as pd

    import dgboost

    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"carrier": rng.choice(["AA", "DL", "UA", "WN", "B6"], 1000),
                          "x": rng.standard_normal(1000).astype(np.float32)})
    frame["label"] = ((frame["carrier"].isin(["AA", "UA"])) ^ (frame["x"] > 0.5)).astype(np.float32)
    frame.iloc[:800].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[800:].to_csv(tmp_path / "test.csv", index=False)
    config = tmp_path / "job.toml"
    config.write_text(f"""
train = "{tmp_path / 'train.csv'}"
label_column = "label"
categorical_columns = ["carrier"]
model = "{tmp_path / 'model.json'}"
num_boost_round = 5
objective = "binary:logistic"
eval_metric = "error"
""")
    assert main(["train", str(config), "--quiet"]) == 0
    model = dgboost.Booster.load_model(tmp_path / "model.json")
    train = frame.iloc[:800].astype({"carrier": "category"})
    expected = dgboost.train({"objective": "binary:logistic", "eval_metric": "error", "enable_categorical": True},
                             train[["carrier", "x"]], train["label"], num_boost_round=5)
    assert model.save_raw() == expected.save_raw()
    out = tmp_path / "predictions.csv"
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "test.csv"),
                 "--out", str(out)]) == 0
    test = frame.iloc[800:].astype({"carrier": "category"})
    np.testing.assert_allclose(pd.read_csv(out).iloc[:, 0].to_numpy(), model.predict(test[["carrier", "x"]]),
                               rtol=1e-6)
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "test.csv"),
                 "--label-column", "label"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["error"] < 0.05


def test_libsvm_files_train_predict_and_evaluate(tmp_path, capsys):
    """libsvm text, as XGBoost's command line read it: indices from 0 as written, absent
    entries missing; the model of dgboost.train on the same sparse matrix."""
    import numpy as np
    import pandas as pd
    import scipy.sparse
    from sklearn.datasets import dump_svmlight_file

    import dgboost

    rng = np.random.default_rng(4)
    dense = np.round(rng.standard_normal((1000, 12)), 3).astype(np.float32)
    dense[rng.random(dense.shape) < 0.7] = 0.0
    y = (dense[:, 0] + dense[:, 1] > 0).astype(np.float32)
    X = scipy.sparse.csr_matrix(dense)  # zeros absent: missing
    dump_svmlight_file(X[:800], y[:800], str(tmp_path / "train.svm"), zero_based=True)
    dump_svmlight_file(X[800:, :10], y[800:], str(tmp_path / "valid.txt"), zero_based=True)  # fewer columns
    dump_svmlight_file(scipy.sparse.hstack([X[:5], X[:5]]).tocsr(), y[:5], str(tmp_path / "wide.svm"), zero_based=True)
    config = tmp_path / "job.toml"
    config.write_text(f"""
train = "{tmp_path / 'train.svm'}"
model = "{tmp_path / 'model.json'}"
num_boost_round = 5
objective = "binary:logistic"
eval_metric = ["auc"]
max_depth = 3
""")
    assert main(["train", str(config), "--quiet"]) == 0
    model = dgboost.Booster.load_model(tmp_path / "model.json")
    expected = dgboost.train({"objective": "binary:logistic", "eval_metric": ["auc"], "max_depth": 3}, X[:800],
                             y[:800], num_boost_round=5)
    assert model.save_raw() == expected.save_raw()

    out = tmp_path / "predictions.csv"
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "valid.txt"),
                 "--format", "libsvm", "--out", str(out)]) == 0
    np.testing.assert_allclose(pd.read_csv(out).iloc[:, 0].to_numpy(), expected.predict(X[800:]), rtol=1e-6)
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "valid.txt"),
                 "--format", "libsvm"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 200
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "wide.svm"),
                 "--out", str(out)]) == 2
    assert "the model was trained on 12 features" in capsys.readouterr().err


def test_a_libsvm_ranking_file_trains_and_evaluates_by_its_qid_fields(tmp_path, capsys):
    """qid:q on each line gives the queries, as XGBoost's command line reads them (the reader
    dropped them: a ranking file could not be trained)."""
    import numpy as np
    import scipy.sparse
    from sklearn.datasets import dump_svmlight_file

    import dgboost

    rng = np.random.default_rng(8)
    X = scipy.sparse.csr_matrix(np.round(rng.random((400, 6)), 3).astype(np.float32))
    y = rng.integers(0, 4, 400).astype(np.float32)
    qid = np.repeat(np.arange(40), 10)
    dump_svmlight_file(X[:300], y[:300], str(tmp_path / "train.svm"), zero_based=True, query_id=qid[:300])
    dump_svmlight_file(X[300:], y[300:], str(tmp_path / "valid.svm"), zero_based=True, query_id=qid[300:])
    (tmp_path / "job.toml").write_text(f'train = "{tmp_path / "train.svm"}"\nmodel = "{tmp_path / "m.json"}"\n'
                                       f'num_boost_round = 4\nobjective = "rank:ndcg"\nmax_depth = 3\n'
                                       f'[evals]\nvalid = "{tmp_path / "valid.svm"}"\n')
    assert main(["train", str(tmp_path / "job.toml"), "--quiet"]) == 0
    expected = dgboost.train({"objective": "rank:ndcg", "max_depth": 3}, X[:300], y[:300], qid=qid[:300],
                             num_boost_round=4, evals=[(X[300:], y[300:], "valid")], eval_qid=[qid[300:]])
    model = dgboost.Booster.load_model(tmp_path / "m.json")
    assert model.save_raw() == expected.save_raw()
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "m.json"), "--data", str(tmp_path / "valid.svm")]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics == pytest.approx({k: v[-1] for k, v in expected.evals_result()["valid"].items()}, abs=1e-12)
    # Other objectives leave the qid: fields be, as XGBoost does; lines without them all are refused.
    (tmp_path / "job.toml").write_text(f'train = "{tmp_path / "train.svm"}"\nmodel = "{tmp_path / "r.json"}"\n'
                                       'num_boost_round = 2\n')
    assert main(["train", str(tmp_path / "job.toml"), "--quiet"]) == 0
    lines = (tmp_path / "train.svm").read_text().splitlines()
    (tmp_path / "part.svm").write_text("\n".join(lines[:5] + [line.replace(" qid:0", "") for line in lines[5:10]]))
    (tmp_path / "job.toml").write_text(f'train = "{tmp_path / "part.svm"}"\nmodel = "{tmp_path / "r.json"}"\n'
                                       'num_boost_round = 2\n')
    capsys.readouterr()
    assert main(["train", str(tmp_path / "job.toml"), "--quiet"]) == 2
    assert "gives qid:q on 5 of its 10 lines" in capsys.readouterr().err


def test_command_line_bad_input_exits_2_with_a_message(tmp_path, capsys):
    _tables(tmp_path)
    config = tmp_path / "job.toml"
    config.write_text(f'train = "{tmp_path / "train.csv"}"\nmodel = "{tmp_path / "m.json"}"\n')
    assert main(["train", str(config)]) == 2
    assert "label_column is required" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "nope.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["train", str(config), "label_column=label", "max_depth=-3"]) == 2
    assert "max_depth" in capsys.readouterr().err
    assert main(["train", str(config), "oops"]) == 2
    assert "must be key=value" in capsys.readouterr().err


@pytest.mark.parametrize("change, message", [
    (lambda t: {"train": str(t / "missing.csv")}, "missing.csv does not exist"),
    (lambda t: {"label_column": "nope"}, "label_column='nope' is not a column"),
    (lambda t: {"max_dept": 3}, "max_dept"),
    (lambda t: {"train": str(t / "words.csv")}, "not numeric"),
    (lambda t: {"train": str(t / "unlabelled.csv")}, "y has a non-finite value (nan) at row 850"),
])
def test_bad_config_inputs_exit_2_with_a_clear_message(tmp_path, capfd, change, message):
    """capfd: the workers' processes write to the terminal's file descriptors, where a failed
    task's "Compute Failed" would show."""
    frame = _tables(tmp_path)
    words = frame.iloc[:100].copy()
    words["b"] = "text"
    words.to_csv(tmp_path / "words.csv", index=False)
    unlabelled = frame.iloc[:900].copy()
    unlabelled.loc[850, "label"] = float("nan")  # found by the workers, named by the client
    unlabelled.to_csv(tmp_path / "unlabelled.csv", index=False)
    config = {"train": str(tmp_path / "train.csv"), "label_column": "label", "model": str(tmp_path / "m.json"),
              "num_boost_round": 2} | change(tmp_path)
    (tmp_path / "job.toml").write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in config.items()))
    assert main(["train", str(tmp_path / "job.toml")]) == 2
    err = capfd.readouterr().err
    assert message in err and "Traceback" not in err and "Compute Failed" not in err


def test_the_progress_bar_shows_on_a_terminal_and_stays_out_of_logs(tmp_path):
    import os
    import pty
    import select

    _tables(tmp_path)
    code = ("import sys, pandas as pd, dgboost; f = pd.read_csv(sys.argv[1]); "
            "dgboost.train({}, f[['a', 'b']], f['label'], num_boost_round=5, evals=[(f[['a', 'b']], f['label'], 't')], "
            "verbose_eval=True)")
    command = [sys.executable, "-c", code, str(tmp_path / "train.csv")]
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, stdout=follower, stderr=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    process.wait(60)
    os.close(leader)
    assert b"\r[" in seen and b"5/5 rounds" in seen and b"[0]\t" not in seen
    logged = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert "\r" not in logged and logged.startswith("[0]\tt-rmse:")


@pytest.mark.parametrize("command", ["demo", "info", "train", "predict", "evaluate"])
def test_every_command_shows_an_example_in_its_help(command):
    result = subprocess.run([sys.executable, "-m", "dgboost.cli", command, "--help"], capture_output=True, text=True,
                            check=True)
    assert "example:" in result.stdout and f"dgboost {command}" in result.stdout


def test_predict_to_parquet_through_a_given_scheduler(tmp_path, capsys, cluster):
    import numpy as np
    import pandas as pd

    import dgboost

    frame = _tables(tmp_path)
    features = frame[["a", "b", "c", "d"]]
    model = dgboost.train({}, features, frame["label"], num_boost_round=3)
    model.save_model(tmp_path / "model.json")
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "train.csv"),
                 "--out", str(tmp_path / "out.parquet"), "--scheduler", cluster.scheduler_address]) == 0
    written = pd.read_parquet(tmp_path / "out.parquet")
    np.testing.assert_allclose(written.iloc[:, 0].to_numpy(), model.predict(features.iloc[:900]), rtol=1e-6)
    assert "wrote 900 predictions" in capsys.readouterr().out
    # Again into the same directory: its parts would mix with the new ones (read as 900 + more rows).
    assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "valid.parquet"),
                 "--out", str(tmp_path / "out.parquet"), "--scheduler", cluster.scheduler_address]) == 2
    assert "out.parquet is a directory that holds files already" in capsys.readouterr().err
    assert len(pd.read_parquet(tmp_path / "out.parquet")) == 900


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    import dgboost.jobs

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(dgboost.jobs, "evaluate_job", interrupted)
    monkeypatch.setattr(dgboost.jobs, "client_for", lambda *a: __import__("contextlib").nullcontext(None))
    assert main(["evaluate", "--model", "m.json", "--data", "d.csv", "--label-column", "y"]) == 130
    assert capsys.readouterr().err == "dgboost evaluate: interrupted\n"


def test_other_failures_exit_1_and_debug_shows_the_traceback(monkeypatch, capsys):
    import dgboost.jobs

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(dgboost.jobs, "evaluate_job", broken)
    monkeypatch.setattr(dgboost.jobs, "client_for", lambda *a: __import__("contextlib").nullcontext(None))
    argv = ["evaluate", "--model", "m.json", "--data", "d.csv", "--label-column", "y"]
    assert main(argv) == 1
    assert "RuntimeError: disk on fire (--debug shows the traceback)" in capsys.readouterr().err
    with pytest.raises(RuntimeError, match="disk on fire"):
        main(["--debug", *argv])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A good model and tables, and the broken files the bad-input cases point at."""
    import dgboost

    root = tmp_path_factory.mktemp("files")
    frame = _tables(root)
    model = dgboost.train({}, frame[["a", "b", "c", "d"]], frame["label"], num_boost_round=2)
    model.save_model(root / "model.json")
    document = json.loads(model.save_raw())
    document["learner"]["base_score"] = 0.25  # the checksum no longer matches
    (root / "damaged.json").write_text(json.dumps(document))
    (root / "xgboost.json").write_text('{"learner": {}, "version": [2, 1, 0]}')
    binary = bytes(range(128, 256)) * 8
    for name in ("binary.json", "binary.csv", "binary.toml"):
        (root / name).write_bytes(binary)
    (root / "text.parquet").write_text("a,b\n1,2\n")
    (root / "table.xlsx").write_text("a,b\n1,2\n")
    (root / "empty.csv").write_text("")
    (root / "other.csv").write_text("x,y\n1,2\n")
    # dask parses a CSV's first rows when it reads the table, the rest only as the job computes
    lines = (root / "train.csv").read_text().splitlines()
    (root / "ragged.csv").write_text("\n".join(lines[:200] + [lines[200] + ",1,2"] + lines[201:]) + "\n")
    (root / "parts").mkdir()  # a directory without Parquet parts
    (root / "dir.csv").mkdir()
    (root / "file").write_text("")  # a file where a directory should be
    for name in ("locked.csv", "locked.json", "locked.toml"):
        (root / name).write_text("a\n1\n")
        (root / name).chmod(0)
    (root / "readonly").mkdir(mode=0o555)
    return root


def _train(files, tmp_path, *argv, **changes):
    """train's argv: a good config but for ``changes`` (None removes a key)."""
    config = {"train": str(files / "train.csv"), "label_column": "label", "model": str(tmp_path / "m.json"),
              "num_boost_round": 2} | changes
    toml = "".join(f"{key} = {_toml(value)}\n" for key, value in config.items() if value is not None)
    (tmp_path / "job.toml").write_text(toml)
    return ["train", str(tmp_path / "job.toml"), *argv]


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key} = {_toml(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)  # JSON's strings, numbers, booleans and lists are TOML's


def _predict(files, tmp_path, **given):
    """predict's argv: the good model and table, output in tmp_path, but for ``given``."""
    options = {"model": files / "model.json", "data": files / "train.csv", "out": tmp_path / "p.csv"} | given
    return ["predict", *(x for key, value in options.items() for x in (f"--{key.replace('_', '-')}", str(value)))]


def _evaluate(files, tmp_path, **given):
    options = {"model": files / "model.json", "data": files / "valid.parquet", "label_column": "label"} | given
    return ["evaluate", *(x for key, value in options.items() for x in (f"--{key.replace('_', '-')}", str(value)))]


def _needs_a_user():
    return pytest.mark.skipif(AS_ROOT, reason="root reads and writes whatever the permissions say")


# (argv of the files directory, tmp_path and a running scheduler's address; what stderr must say)
BAD_INPUT = [
    # the config file and its keys
    pytest.param(lambda f, t, s: ["train", str(f / "parts")], ["config file", "parts", "is a directory",
                                                               "give the path of a TOML file"], id="config-dir"),
    pytest.param(lambda f, t, s: ["train", str(f / "binary.toml")], ["config file", "binary.toml",
                                                                     "not UTF-8 text"], id="config-binary"),
    pytest.param(lambda f, t, s: ["train", str(f / "locked.toml")], ["config file", "locked.toml",
                                                                     "permission denied"],
                 id="config-unreadable", marks=_needs_a_user()),
    pytest.param(lambda f, t, s: _train(f, t, num_boost_round="ten"), ["num_boost_round='ten'", "integer"],
                 id="num_boost_round-text"),
    pytest.param(lambda f, t, s: _train(f, t, "num_boost_round=ten"), ["num_boost_round='ten'", "integer"],
                 id="num_boost_round-override"),
    pytest.param(lambda f, t, s: _train(f, t, early_stopping_rounds=1.5, evals={"v": str(f / "valid.parquet")}),
                 ["early_stopping_rounds=1.5", "integer"], id="early_stopping_rounds-float"),
    pytest.param(lambda f, t, s: _train(f, t, early_stopping_rounds=3),
                 ["early_stopping_rounds=3 needs an eval set", "[evals]"], id="early_stopping_rounds-no-evals"),
    pytest.param(lambda f, t, s: _train(f, t, verbose_eval="x"), ["verbose_eval='x'", "integer"],
                 id="verbose_eval-text"),
    pytest.param(lambda f, t, s: _train(f, t, evals=3), ["evals=3", "table of name = path"], id="evals-number"),
    pytest.param(lambda f, t, s: _train(f, t, evals={"v": 3}), ["evals={'v': 3}", "table of name = path"],
                 id="evals-path-number"),
    pytest.param(lambda f, t, s: _train(f, t, label_column=5), ["label_column=5", "a column's name"],
                 id="label_column-number"),
    pytest.param(lambda f, t, s: _train(f, t, weight_column=["w"]), ["weight_column=['w']", "a column's name"],
                 id="weight_column-list"),
    pytest.param(lambda f, t, s: _train(f, t, feature_columns="a"), ["feature_columns='a'",
                                                                     "a list of column names"],
                 id="feature_columns-text"),
    pytest.param(lambda f, t, s: _train(f, t, model=3), ["model=3", "must be a string: where to write the model",
                                                         'model = "model.json"'], id="model-number"),
    pytest.param(lambda f, t, s: _train(f, t, model=None), ["the config needs model"], id="model-missing"),
    pytest.param(lambda f, t, s: _train(f, t, train=[]), ["train=[]", "the training table's path"],
                 id="train-list"),
    pytest.param(lambda f, t, s: _train(f, t, max_depth=2.5), ["max_depth=2.5", "integer"], id="param-type"),
    pytest.param(lambda f, t, s: _train(f, t, init_model=str(f / "model.json")),
                 ["init_model", "not a dgboost parameter"], id="init_model"),
    # the config's tables
    pytest.param(lambda f, t, s: _train(f, t, evals={"v": str(f / "missing.parquet")}),
                 ["evals.v", "missing.parquet does not exist", "give the path of a .csv or .parquet"],
                 id="evals-missing"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "parts")),
                 ["train", "parts cannot be read as Parquet", "give the path"], id="train-dir-without-parts"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "table.xlsx")),
                 ["train", "table.xlsx is neither CSV nor Parquet", "give the path"], id="train-extension"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "text.parquet")),
                 ["train", "text.parquet cannot be read as Parquet"], id="train-text-as-parquet"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "binary.csv")),
                 ["train", "binary.csv cannot be read as CSV"], id="train-binary-csv"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "empty.csv")),
                 ["train", "empty.csv cannot be read as CSV"], id="train-empty-csv"),
    pytest.param(lambda f, t, s: _train(f, t, train=str(f / "locked.csv")),
                 ["train", "locked.csv cannot be read as CSV (permission denied)"],
                 id="train-unreadable", marks=_needs_a_user()),
    pytest.param(lambda f, t, s: _train(f, t, "--scheduler", s, train=str(f / "ragged.csv")),
                 ["train", "ragged.csv: a row cannot be parsed as CSV", "fix the file"], id="train-ragged-csv"),
    # the config's outputs, checked before training
    pytest.param(lambda f, t, s: _train(f, t, model=str(f / "file" / "m.json")),
                 ["model", "m.json", "is not a directory you can write to"], id="model-under-a-file"),
    pytest.param(lambda f, t, s: _train(f, t, model=str(f / "parts")), ["model", "parts is a directory"],
                 id="model-a-directory"),
    pytest.param(lambda f, t, s: (t / "m.eval.json").mkdir() or _train(f, t),
                 ["model's evaluation file", "m.eval.json is a directory"], id="evaluation-a-directory"),
    pytest.param(lambda f, t, s: _train(f, t, model=str(f / "readonly" / "m.json")),
                 ["model", "readonly", "is not a directory you can write to"],
                 id="model-unwritable", marks=_needs_a_user()),
    pytest.param(lambda f, t, s: _train(f, t, "--plot", str(t / "curves.xyz"),
                                        evals={"v": str(f / "valid.parquet")}),
                 ["--plot", "cannot write .xyz files", "give a .png"], id="plot-extension"),
    pytest.param(lambda f, t, s: _train(f, t, "--plot", str(t / "curves.png")), ["--plot needs eval sets"],
                 id="plot-without-evals"),
    # predict: the output first, then the model, the table, the scheduler
    pytest.param(lambda f, t, s: _predict(f, t, out=t / "p.txt", model=f / "missing.json"),
                 ["--out", "p.txt", "give a .csv or .parquet path"], id="out-extension"),
    pytest.param(lambda f, t, s: _predict(f, t, out=f / "file" / "p.csv"),
                 ["--out", "p.csv", "is not a directory you can write to"], id="out-under-a-file"),
    pytest.param(lambda f, t, s: _predict(f, t, out=f / "dir.csv"), ["--out", "dir.csv is a directory"],
                 id="out-a-directory"),
    pytest.param(lambda f, t, s: _predict(f, t, out=f / "text.parquet"), ["--out", "text.parquet is a file"],
                 id="out-parquet-a-file"),
    pytest.param(lambda f, t, s: _predict(f, t, out=f / "readonly" / "p.csv"),
                 ["--out", "readonly", "is not a directory you can write to"],
                 id="out-unwritable", marks=_needs_a_user()),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "missing.json"),
                 ["--model", "missing.json does not exist", "give a model file"], id="model-file-missing"),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "parts"),
                 ["--model", "parts cannot be read (is a directory)", "give a model file"], id="model-file-dir"),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "locked.json"),
                 ["--model", "locked.json cannot be read (permission denied)"],
                 id="model-file-unreadable", marks=_needs_a_user()),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "train.csv"),
                 ["--model", "train.csv is not a complete JSON document"], id="model-file-csv"),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "binary.json"),
                 ["--model", "binary.json is not a dgboost model"], id="model-file-binary"),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "xgboost.json"),
                 ["--model", "xgboost.json is not a dgboost model", "XGBoost"], id="model-file-foreign"),
    pytest.param(lambda f, t, s: _predict(f, t, model=f / "damaged.json"),
                 ["--model", "damaged.json has been modified or damaged"], id="model-file-damaged"),
    pytest.param(lambda f, t, s: _predict(f, t, data=f / "missing.csv"),
                 ["--data", "missing.csv does not exist", "give the path"], id="data-missing"),
    pytest.param(lambda f, t, s: _predict(f, t, data=f / "text.parquet"),
                 ["--data", "text.parquet cannot be read as Parquet"], id="data-text-as-parquet"),
    pytest.param(lambda f, t, s: _predict(f, t, data=f / "other.csv"),
                 ["--data", "other.csv lacks the model's feature columns"], id="data-other-columns"),
    pytest.param(lambda f, t, s: _predict(f, t, data=f / "ragged.csv", scheduler=s),
                 ["--data", "ragged.csv: a row cannot be parsed as CSV"], id="data-ragged-csv"),
    pytest.param(lambda f, t, s: _predict(f, t, scheduler="tcp://127.0.0.1:1"),
                 ["--scheduler tcp://127.0.0.1:1", "no Dask scheduler answered", "within 1 s"],
                 id="scheduler-nowhere"),
    pytest.param(lambda f, t, s: _predict(f, t, scheduler="nonsense"),
                 ["--scheduler nonsense", "give an address such as"], id="scheduler-not-an-address"),
    pytest.param(lambda f, t, s: _predict(f, t, scheduler_file=f / "missing.json"),
                 ["--scheduler-file", "missing.json does not exist", "waited"], id="scheduler-file-missing"),
    pytest.param(lambda f, t, s: _predict(f, t, scheduler_file=f / "train.csv"),
                 ["--scheduler-file", "train.csv is not a Dask scheduler file"], id="scheduler-file-foreign"),
    # evaluate
    pytest.param(lambda f, t, s: _evaluate(f, t, model=f / "missing.json"), ["--model", "does not exist"],
                 id="evaluate-model-missing"),
    pytest.param(lambda f, t, s: _evaluate(f, t, data=f / "parts"), ["--data", "cannot be read as Parquet"],
                 id="evaluate-data-dir"),
    pytest.param(lambda f, t, s: _evaluate(f, t, label_column="nope"), ["label_column='nope' is not a column"],
                 id="evaluate-label-column"),
    pytest.param(lambda f, t, s: _evaluate(f, t, data=f / "ragged.csv", scheduler=s),
                 ["--data", "ragged.csv: a row cannot be parsed as CSV"], id="evaluate-ragged-csv"),
    pytest.param(lambda f, t, s: _evaluate(f, t, scheduler_file=f / "parts"),
                 ["--scheduler-file", "parts cannot be read (is a directory)"], id="evaluate-scheduler-file-dir"),
    # info
    pytest.param(lambda f, t, s: ["info", "--scheduler", "tcp://127.0.0.1:1"],
                 ["--scheduler tcp://127.0.0.1:1", "no Dask scheduler answered", "within 1 s"],
                 id="info-scheduler-nowhere"),
]


@pytest.mark.parametrize("argv, says", BAD_INPUT)
def test_bad_input_exits_2_with_one_line_naming_it(argv, says, files, tmp_path, cluster, monkeypatch, capsys):
    """Checked before any cluster starts (a local one would fail the case), on one line of stderr."""
    import dask

    import dgboost.dask

    def no_cluster(*args, **kwargs):
        raise AssertionError("a local cluster started before the input was checked")

    monkeypatch.setattr(dgboost.dask, "local_cluster", no_cluster)
    args = argv(files, tmp_path, cluster.scheduler_address)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):  # the cases of no scheduler wait this long
        assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dgboost {args[0]}: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for text in says:
        assert text in err, (text, err)


@pytest.mark.skipif(cuda_device_count() > 0, reason="a GPU is here")
def test_cuda_without_a_gpu_is_bad_input(files, tmp_path, capsys):
    assert main(["demo", "--device", "cuda"]) == 2
    assert "--device cuda: no CUDA GPU found: use --device cpu" in capsys.readouterr().err
    assert main(_train(files, tmp_path, device="cuda")) == 2
    assert "device='cuda' needs a CUDA GPU, and none was found" in capsys.readouterr().err
    assert main(_train(files, tmp_path, device="gpu")) == 2  # XGBoost's spelling: CPU workers were started
    assert "needs a CUDA GPU, and none was found" in capsys.readouterr().err


def test_ranking_trains_and_evaluates_by_query(tmp_path, capsys):
    """qid_column: the queries of a table; train gives dgboost.train's model (each query kept on one
    worker), evaluate scores by query as training does."""
    import pandas as pd

    import dgboost
    from dgboost.datasets import make_ranking_like

    X, y, qid = make_ranking_like(3000)
    frame = pd.DataFrame(X[:, :6], columns=[f"f{i}" for i in range(6)])
    frame["relevance"], frame["query"] = y, qid
    frame.to_csv(tmp_path / "train.csv", index=False)
    config = tmp_path / "job.toml"
    config.write_text(f"""
train = "{tmp_path / 'train.csv'}"
label_column = "relevance"
qid_column = "query"
model = "{tmp_path / 'model.json'}"
num_boost_round = 4
objective = "rank:ndcg"
eval_metric = "ndcg@10"
""")
    assert main(["train", str(config), "--quiet"]) == 0
    model = dgboost.Booster.load_model(tmp_path / "model.json")
    features = frame[[f"f{i}" for i in range(6)]]
    expected = dgboost.train({"objective": "rank:ndcg", "eval_metric": "ndcg@10"}, features, y, qid=qid,
                             num_boost_round=4, evals=[(features, y, "train")], eval_qid=[qid])
    assert model.save_raw() == expected.save_raw()
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "train.csv"),
                 "--label-column", "relevance", "--qid-column", "query"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["ndcg@10"] == pytest.approx(
        expected.evals_result()["train"]["ndcg@10"][-1], rel=1e-9)
    assert main(["evaluate", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "train.csv"),
                 "--label-column", "relevance"]) == 2


def test_a_bad_row_found_on_a_local_clusters_worker_is_one_line(tmp_path, capfd):
    """A CSV row that does not parse, beyond what the client reads for the columns, fails a
    worker's task: the command prints one line, and no worker's traceback reaches the terminal."""
    lines = ["a,b,label"] + [f"{i % 7}.5,{i % 3}.25,{i % 2}" for i in range(40_000)] + ["1.5,2.5,1,9"]
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "job.toml").write_text(f'train = "{tmp_path / "bad.csv"}"\nlabel_column = "label"\n'
                                       f'model = "{tmp_path / "m.json"}"\nnum_boost_round = 2\n')
    capfd.readouterr()
    assert main(["train", str(tmp_path / "job.toml"), "--quiet"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("dgboost train: ") and err.count("\n") == 1 and "Traceback" not in err, err
