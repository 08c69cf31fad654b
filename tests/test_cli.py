"""The dgboost command: exit codes, help with examples, and a small demo."""

import subprocess

import pytest
import sys

from dgboost import __version__
from dgboost.cli import main


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


def test_info_lists_versions_and_a_clusters_workers(capsys):
    from dgboost.dask import local_cluster

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"dgboost {__version__}") and "numpy:" in out and "CUDA GPUs:" in out
    with local_cluster("cpu", 2, threads_per_worker=1) as cluster:
        assert main(["info", "--scheduler", cluster.scheduler_address]) == 0
    assert "2 workers" in capsys.readouterr().out
    assert main(["info", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "no Dask scheduler answered" in capsys.readouterr().err


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
    assert main(["train", str(config), "num_boost_round=7", "eta=0.5", "verbose_eval=1", "--quiet"]) == 0
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
])
def test_bad_config_inputs_exit_2_with_a_clear_message(tmp_path, capsys, change, message):
    frame = _tables(tmp_path)
    words = frame.iloc[:100].copy()
    words["b"] = "text"
    words.to_csv(tmp_path / "words.csv", index=False)
    config = {"train": str(tmp_path / "train.csv"), "label_column": "label", "model": str(tmp_path / "m.json"),
              "num_boost_round": 2} | change(tmp_path)
    (tmp_path / "job.toml").write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in config.items()))
    assert main(["train", str(tmp_path / "job.toml")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


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


def test_predict_to_parquet_through_a_given_scheduler(tmp_path, capsys):
    import numpy as np
    import pandas as pd

    import dgboost
    from dgboost.dask import local_cluster

    frame = _tables(tmp_path)
    features = frame[["a", "b", "c", "d"]]
    model = dgboost.train({}, features, frame["label"], num_boost_round=3)
    model.save_model(tmp_path / "model.json")
    with local_cluster("cpu", 2, threads_per_worker=1) as cluster:
        assert main(["predict", "--model", str(tmp_path / "model.json"), "--data", str(tmp_path / "train.csv"),
                     "--out", str(tmp_path / "out.parquet"), "--scheduler", cluster.scheduler_address]) == 0
    written = pd.read_parquet(tmp_path / "out.parquet")
    np.testing.assert_allclose(written.iloc[:, 0].to_numpy(), model.predict(features.iloc[:900]), rtol=1e-6)
    assert "wrote 900 predictions" in capsys.readouterr().out


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
