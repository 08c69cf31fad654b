"""The helper processes that compile the CPU loops beside a first training (kernels/warming.py):
their table is what a default training compiles, what they compile a training then loads from
numba's cache, and a machine starts one set of them, only for a cold cache."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import types

import pytest

from dgboost.kernels import warming

_ENVIRONMENT = {**os.environ, "DGBOOST_COMPILE_HELPERS": "0"}


def test_the_table_is_what_a_default_training_compiles():
    """Kept in step with the loops: after changing one's arguments, print the table again
    (``python -m dgboost.kernels.warming --record``) and paste it into kernels/warming.py."""
    done = subprocess.run([sys.executable, "-m", "dgboost.kernels.warming", "--record"], capture_output=True,
                          text=True, env=_ENVIRONMENT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    recorded = ast.literal_eval(done.stdout.split("=", 1)[1])
    assert recorded == warming.SIGNATURES, "kernels/warming.py's SIGNATURES is stale: print it again with --record"


def test_what_the_helpers_compile_a_training_loads_from_the_cache(tmp_path):
    environment = {**_ENVIRONMENT, "NUMBA_CACHE_DIR": str(tmp_path)}
    for part in range(2):  # two helpers' shares: the whole table
        helper = subprocess.run([sys.executable, "-m", "dgboost.kernels.warming", str(part), "2"],
                                capture_output=True, text=True, env=environment, timeout=600)
        assert helper.returncode == 0, helper.stderr[-2000:]
    script = """
import numpy as np, dgboost
from dgboost.kernels import warming
rng = np.random.default_rng(1)
X = rng.standard_normal((3000, 5)).astype(np.float32)
dgboost.train({"objective": "binary:logistic", "nthread": 1}, X, (X[:, 1] > 0).astype(np.float32), num_boost_round=2)
stats = [warming._loops()[loop].machine_code().stats for loop in {loop for loop, _ in warming.SIGNATURES}]
print(sum(sum(s.cache_hits.values()) for s in stats), sum(sum(s.cache_misses.values()) for s in stats))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    hits, misses = map(int, done.stdout.split())
    assert hits > 0 and misses == 0, (hits, misses)


@pytest.fixture
def spawned(monkeypatch, tmp_path):
    """start() run by hand: the helpers' processes noted, not made; a claim file of this test's."""
    made = []
    monkeypatch.setattr(warming.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(warming.subprocess, "Popen", lambda command, **_: made.append(command) or
                        types.SimpleNamespace(wait=lambda: 0))
    monkeypatch.setattr("dgboost.kernels.loops.cores", lambda: 4)
    monkeypatch.setattr(warming, "_cached", lambda loop, signature: False)
    monkeypatch.delenv("DGBOOST_COMPILE_HELPERS", raising=False)

    def start():
        monkeypatch.setattr(warming, "_started", False)
        warming.start()
        return len(made)

    return start, made


def test_a_machine_starts_one_set_of_helpers_for_a_cold_cache(spawned, monkeypatch):
    start, made = spawned
    assert start() == 2  # one for every two cores
    assert made[0][-3:] == ["dgboost.kernels.warming", "0", "2"] and made[1][-2:] == ["1", "2"]
    assert start() == 2  # claimed: another process of the machine started them
    warming.start()
    assert len(made) == 2  # and once a process


def test_no_helpers_for_a_warm_cache_or_when_turned_off(spawned, monkeypatch):
    start, _ = spawned
    monkeypatch.setenv("DGBOOST_COMPILE_HELPERS", "0")
    assert start() == 0
    monkeypatch.delenv("DGBOOST_COMPILE_HELPERS")
    monkeypatch.setattr(warming, "_cached", lambda loop, signature: True)
    assert start() == 0
    monkeypatch.setattr("dgboost.kernels.loops.cores", lambda: 1)
    monkeypatch.setattr(warming, "_cached", lambda loop, signature: False)
    assert start() == 0
