"""The dgboost command: exit codes, help with examples, and a small demo."""

import subprocess
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
