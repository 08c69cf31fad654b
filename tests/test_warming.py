"""The helper processes that compile the CPU loops beside a first training (kernels/warming.py):
their table is what a default training calls, what they compile reaches the training's cache
without overwriting what it holds, the model is the same, and a machine starts one set of them,
only for a cold cache."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
import time

import pytest

from dgboost.kernels import warming

_ENVIRONMENT = {**os.environ, "DGBOOST_COMPILE_HELPERS": "0"}


def _python(script: str, cache, helpers: int = 0) -> str:
    """``script``'s output, run in a new process over the numba cache folder ``cache``."""
    environment = {**_ENVIRONMENT, "NUMBA_CACHE_DIR": str(cache), "DGBOOST_COMPILE_HELPERS": str(helpers),
                   "TMPDIR": str(cache) + "-tmp"}  # a claim file of this test's (warming._claim)
    os.makedirs(environment["TMPDIR"], exist_ok=True)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_table_is_what_a_default_training_calls():
    """Kept in step with the loops: after changing one's arguments, print the table again
    (``python -m dgboost.kernels.warming --record``) and paste it into kernels/warming.py."""
    done = subprocess.run([sys.executable, "-m", "dgboost.kernels.warming", "--record"], capture_output=True,
                          text=True, env=_ENVIRONMENT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = {statement.targets[0].id: ast.literal_eval(statement.value) for statement in ast.parse(done.stdout).body}
    assert printed["SIGNATURES"] == warming.SIGNATURES, "kernels/warming.py's SIGNATURES is stale: print it again with --record"
    loops = {loop for loop, _ in warming.SIGNATURES if not loop.endswith("_on_threads")}
    assert set(printed["COSTS"]) == set(warming.COSTS) == loops  # the seconds are the recording machine's
    assert all(seconds > 0 for seconds in printed["COSTS"].values())


_TRAIN = """
import hashlib, numpy as np, dgboost
from dgboost.kernels import loops, warming
installed = []
install = warming._install
warming._install = lambda loop, source: installed.append(install(loop, source)) or installed[-1]
warming.start()  # as the training would; then the helpers' work is done before it calls a loop
assert warming.helpers_done(timeout=300)
rng = np.random.default_rng(1)
X = rng.standard_normal((3000, 5)).astype(np.float32)
booster = dgboost.train({"objective": "binary:logistic", "nthread": 1}, X, (X[:, 1] > 0).astype(np.float32),
                        num_boost_round=3)
table = {loop for loop, _ in warming.SIGNATURES}
stats = [loops.LOOPS[loop].machine_code().stats for loop in loops.FIRST_CALLED if loop in table]
print(hashlib.sha256(bytes(booster.save_raw())).hexdigest(), sum(installed),
      sum(sum(s.cache_hits.values()) for s in stats), sum(sum(s.cache_misses.values()) for s in stats))
"""


def test_a_training_after_helpers_loads_their_loops_and_makes_the_same_model(tmp_path):
    """Every loop of the table that the helpers compiled is in the training's cache, where numba
    loads it (none compiled); the model is the one trained without them. How the training and
    the helpers share the table while both run: the next test."""
    alone = _python(_TRAIN, tmp_path / "alone").split()
    model, installed, hits, misses = _python(_TRAIN, tmp_path / "helped", helpers=2).split()
    assert (model, installed, misses) == (alone[0], str(len(warming.SIGNATURES)), "0") and int(hits) == int(alone[3])
    model, installed, hits, misses = _python(_TRAIN, tmp_path / "helped").split()  # the next process
    assert (model, installed, misses) == (alone[0], "0", "0") and int(hits) == int(alone[3])


def test_a_kernel_runs_on_the_host_threads_until_a_helper_brings_its_driver(tmp_path):
    """A driver the helpers compile is not compiled in the background too: the kernel's runs go
    on the host's threads until it is in the cache, and then numba loads it there."""
    script = """
import numpy as np, dgboost
from dgboost.kernels import drivers, loops, warming
rng = np.random.default_rng(1)
X = rng.standard_normal((20_000, 5)).astype(np.float32)
y = (X[:, 1] > 0).astype(np.float32)
params = {"objective": "binary:logistic", "nthread": 2}
first = dgboost.train(params, X, y, num_boost_round=3).save_raw()
assert drivers.background_compiles_done(timeout=300)
later = dgboost.train(params, X, y, num_boost_round=3).save_raw()
made = [loops.DRIVERS[key]() for key in loops.FIRST_CALLED if key in loops.DRIVERS]
print(warming._active is not None, drivers._made is None, first == later, len(made) > 0,
      all(len(driver.dispatcher.overloads) for driver in made),
      sum(sum(driver.dispatcher.stats.cache_misses.values()) for driver in made))
"""
    assert _python(script, tmp_path, helpers=2).split() == ["True", "True", "True", "True", "True", "0"]


def _serve(cache, loops_py: str, entry: int) -> str:
    """What a helper (``--serve``) over the numba cache folder ``cache`` answers for ``entry``."""
    served = subprocess.run([sys.executable, "-m", "dgboost.kernels.warming", "--serve", loops_py],
                            input=f"{entry}\n", capture_output=True, text=True, timeout=600,
                            env={**_ENVIRONMENT, "NUMBA_CACHE_DIR": str(cache)})
    assert served.returncode == 0, served.stderr[-2000:]
    return served.stdout


def test_a_helper_says_it_is_ready_answers_with_its_loops_folder_and_removes_its_cache_at_the_end(tmp_path):
    from dgboost.kernels import loops

    last = len(warming.SIGNATURES) - 1
    ready, answer = _serve(tmp_path / "helper", os.path.abspath(loops.__file__), last).splitlines()
    word, entry, folder = answer.split(" ", 2)
    assert (ready, word, entry) == ("ready", "compiled", str(last))
    assert folder.startswith(str(tmp_path / "helper")) and not (tmp_path / "helper").exists()
    # A helper whose dgboost is not the training's (another copy first on its path) compiles nothing.
    assert _serve(tmp_path / "other", str(tmp_path / "elsewhere" / "loops.py"), last) == ""
    assert not (tmp_path / "other").exists()


_LAST_LOOP = next(entry for entry in reversed(warming.SIGNATURES) if not entry[0].endswith("_on_threads"))


@pytest.mark.parametrize("entry", [_LAST_LOOP, warming.SIGNATURES[-1]], ids=["loop", "driver"])
def test_a_helpers_loop_never_replaces_what_the_cache_holds(tmp_path, entry):
    """_install copies a helper's files only where the training's cache holds nothing of the
    loop that numba reads (then numba loads it); else it leaves the cache as it was."""
    loop, signature = entry
    compile_it = f"""
from dgboost.kernels import warming
dispatcher = warming._dispatcher({loop!r})
dispatcher.compile(warming._types({signature!r}))
print(dispatcher._cache.cache_path)
"""
    source = _python(compile_it, tmp_path / "helper").strip()  # what a helper leaves in its folder
    install = f"""
from numba.core.caching import FunctionCache
from dgboost.kernels import warming
loop, signature = {loop!r}, {signature!r}
index = FunctionCache(warming._function(loop))._cache_file
OWN = False
if OWN:
    warming._dispatcher(loop).compile(warming._types(signature))  # the training's own, first
    before = open(index._index_path, "rb").read()
installed = warming._install(loop, {source!r})
dispatcher = warming._dispatcher(loop)
print(installed, dispatcher._cache.load_overload(warming._types(signature), dispatcher.targetctx) is not None)
if OWN:
    assert open(index._index_path, "rb").read() == before, "the training's own index was replaced"
"""
    assert _python(install.replace("OWN = False", "OWN = True"), tmp_path / "own").split() == ["False", "True"]
    assert _python(install, tmp_path / "empty").split() == ["True", "True"]


def _bare_helpers():
    """A _Helpers without processes: its queue and running set are the test's to fill."""
    helpers = warming._Helpers.__new__(warming._Helpers)
    helpers.lock = threading.Condition()
    helpers.drivers = {entry for entry, (loop, _) in enumerate(warming.SIGNATURES) if loop.endswith("_on_threads")}
    return helpers


def test_the_training_takes_what_no_helper_started_and_compiles_ahead_while_a_helper_has_its_loop(monkeypatch):
    """The loop the training calls is its own unless a helper has started it; while one has, the
    training compiles the next loops no one has started (never a driver: those are the
    helpers'), one at a time, until the helper's loop is in, and waits when none is left."""
    helpers = _bare_helpers()
    first = warming.SIGNATURES[0][0]
    mine = [entry for entry, (loop, _) in enumerate(warming.SIGNATURES) if loop == first]
    loops_after = [entry for entry in range(len(warming.SIGNATURES)) if entry not in mine + sorted(helpers.drivers)]
    compiled_ahead = []
    monkeypatch.setattr(warming, "_compile_here", lambda entry: compiled_ahead.append(entry) or time.sleep(0.1))

    def finish_after(seconds):
        time.sleep(seconds)
        with helpers.lock:
            helpers.running.discard(mine[0])
            helpers.lock.notify_all()

    helpers.queue, helpers.running = list(range(len(warming.SIGNATURES))), {mine[0]}
    threading.Thread(target=finish_after, args=(0.35,)).start()
    helpers.take(first)
    assert 3 <= len(compiled_ahead) <= 5 and compiled_ahead == loops_after[:len(compiled_ahead)]
    assert helpers.queue == [entry for entry in range(len(warming.SIGNATURES))
                             if entry not in mine + compiled_ahead]  # the helpers' still, drivers and all

    helpers.queue, helpers.running = sorted(helpers.drivers), {mine[0]}  # no loop left to compile: wait
    compiled_ahead.clear()
    threading.Thread(target=finish_after, args=(0.3,)).start()
    started = time.monotonic()
    helpers.take(first)
    assert time.monotonic() - started >= 0.25 and not compiled_ahead and helpers.queue == sorted(helpers.drivers)

    helpers.queue, helpers.running = [mine[0], *loops_after], set()  # no helper started it: the training's
    helpers.take(first)
    assert helpers.queue == loops_after and not compiled_ahead
    helpers.take("dgboost.kernels.loops:no_such_loop")
    assert helpers.queue == loops_after


def test_helpers_take_the_slowest_loops_first_then_the_drivers_in_order(monkeypatch):
    helpers = _bare_helpers()
    loops = [entry for entry in range(1, len(warming.SIGNATURES)) if entry not in helpers.drivers]
    costs = {warming.SIGNATURES[entry][0]: 1.0 for entry in loops}
    slow, slower = (warming.SIGNATURES[entry][0] for entry in loops[-1:-3:-1])  # the last two loops
    costs.update({slow: 2.0, slower: 3.0})
    monkeypatch.setattr(warming, "COSTS", costs)
    helpers.queue, helpers.running = list(range(1, len(warming.SIGNATURES))), set()
    taken = []
    while (entry := helpers._next()) is not None:
        taken.append(entry)
    assert taken == [loops[-2], loops[-1], *loops[:-2], *sorted(helpers.drivers)]  # equals: the first first
    assert helpers.running == set(taken) and not helpers.queue


@pytest.fixture
def spawned(monkeypatch, tmp_path):
    """start() run by hand: the helpers noted, not started; a claim file of this test's."""
    made = []
    monkeypatch.setattr(warming.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(warming, "_Helpers", made.append)
    monkeypatch.setattr("dgboost.kernels.loops.cores", lambda: 4)
    monkeypatch.setattr(warming, "_held", lambda loop: False)
    monkeypatch.delenv("DGBOOST_COMPILE_HELPERS", raising=False)
    monkeypatch.setattr(warming, "_active", None)

    def start():
        monkeypatch.setattr(warming, "_started", False)
        warming.start()
        return made

    return start


def test_a_machine_starts_one_set_of_helpers_for_a_cold_cache(spawned):
    assert spawned() == [2]  # one for every two cores
    assert spawned() == [2]  # claimed: another process of the machine started them
    warming.start()
    assert spawned() == [2]  # and once a process


def test_no_helpers_for_a_warm_cache_or_when_turned_off(spawned, monkeypatch):
    monkeypatch.setenv("DGBOOST_COMPILE_HELPERS", "0")
    assert spawned() == []
    monkeypatch.setenv("DGBOOST_COMPILE_HELPERS", "3")
    assert spawned() == [3]
    monkeypatch.delenv("DGBOOST_COMPILE_HELPERS")
    monkeypatch.setattr(warming, "_claim", lambda: True)
    monkeypatch.setattr(warming, "_held", lambda loop: True)
    assert spawned() == [3]
    monkeypatch.setattr("dgboost.kernels.loops.cores", lambda: 1)
    monkeypatch.setattr(warming, "_held", lambda loop: False)
    assert spawned() == [3]
