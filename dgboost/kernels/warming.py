"""Helper processes that fill numba's disk cache beside a process's first CPU training.

With numba's cache cold, a first training compiles its loops one after another (numba
compiles under one lock a process): some 4 s on 2 cores, 9.5 s on 16. numba looks in its
disk cache before compiling a signature it has not seen, so a second process compiling the
same loops into the same cache shares the work: the training compiles from the first loop it
uses, the helpers from the last, and each takes what the others have written (on 2 cores a
cold first train added 3.0 s rather than 3.75 s; docs/performance.md).

The helpers need each loop's signature before the training's first call makes it:
``SIGNATURES`` holds those of a default training (float32 data, 256 bins, depthwise trees,
binary:logistic and reg:squarederror, no weights), in the order a training first uses them.
tests/test_warming.py checks it against what such a training compiles; after changing a
loop's arguments, print it again with ``python -m dgboost.kernels.warming --record``. A
training of other settings compiles what the table lacks itself, as before.

``start`` (called by ``training.boost`` on the CPU) starts them once a process, where the
cache lacks the table's last loop and no other process on the machine started helpers for
the same cache in the last ``_CLAIM_SECONDS``: one set for the Dask workers of a machine.
``DGBOOST_COMPILE_HELPERS=0`` in the environment turns them off. They never touch the
training's results: numba's machine code is the same whoever compiled it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

logger = logging.getLogger("dgboost")

#: The most helpers a process starts (one for every two cores beyond them).
_MOST_HELPERS = 4
#: Seconds a machine's claim on starting helpers holds (their work takes a few).
_CLAIM_SECONDS = 300
#: The modules whose loops the table names (importing them registers their loops).
_MODULES = ("dgboost.kernels.loops", "dgboost.kernels.split_loops", "dgboost.kernels.rank_loops")

#: (loop, signature) of a default training, in the order it first uses them (see above).
SIGNATURES = (
    ('dgboost.kernels.loops:quantise',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), int64, int64, int64, Array(uint32, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:column_bounds',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:fixed_sums',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:pair_gradients',
     "(int64, int64, int64, Array(float32, 1, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), none, float32, float32, Array(float32, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:run_plan',
     "(Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:histograms',
     "(int64, int64, Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, int64, Array(int64, 1, 'C', False, aligned=True), Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:add_partials',
     "(int64, int64, Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:splits',
     "(int64, int64, Array(int64, 3, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), none, none, none, int64, Array(float64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:_group_best',
     "(Array(int64, 3, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), none, none, none, int64, int64, int64, Array(float64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:_node_gain',
     '(float64, float64, float64, float64, float64, float64)'),
    ('dgboost.kernels.split_loops:node_best',
     "(Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), int64, Array(float64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:number_children',
     "(Array(int64, 2, 'C', False, aligned=True), int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:partition_sides',
     "(int64, int64, Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:partition_scatter',
     "(int64, int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:next_frontier',
     "(Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), int64, Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:siblings',
     "(int64, int64, Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:add_leaf_values',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), int64, Array(float32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
)

_started = False
_start_lock = threading.Lock()


def start() -> None:
    """Start the helpers, once a process, where they would help (module text); never raises."""
    global _started
    with _start_lock:
        if _started:
            return
        _started = True
    try:
        _start()
    except Exception:  # noqa: BLE001 - an aid to speed: the training compiles what it needs anyway
        logger.debug("dgboost: no compile helpers", exc_info=True)


def _start() -> None:
    from .loops import cores

    helpers = min(_MOST_HELPERS, cores() // 2)
    if os.environ.get("DGBOOST_COMPILE_HELPERS", "1") == "0" or helpers < 1 or not SIGNATURES:
        return
    if _cached(*SIGNATURES[-1]) or not _claim():
        return
    package_parent = str(pathlib.Path(__file__).resolve().parents[2])
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    for part in range(helpers):
        helper = subprocess.Popen([sys.executable, "-m", "dgboost.kernels.warming", str(part), str(helpers)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env=environment, start_new_session=True)
        threading.Thread(target=helper.wait, name="dgboost-compile-helper", daemon=True).start()  # reaped
    logger.debug("dgboost: %d processes compile the CPU loops beside this one (a cold numba cache)", helpers)


def _cached(loop: str, signature: str) -> bool:
    """Whether numba's disk cache holds ``loop`` at ``signature``."""
    dispatcher = _loops()[loop].machine_code()
    return dispatcher._cache.load_overload(_types(signature), dispatcher.targetctx) is not None


def _claim() -> bool:
    """Whether this process may start the helpers for its numba cache: no other process on
    the machine has in the last ``_CLAIM_SECONDS`` (a file in the temporary folder says)."""
    import numba

    from .. import __version__

    key = "\0".join([numba.__version__, __version__, os.environ.get("NUMBA_CACHE_DIR", ""), str(os.getuid())])
    path = pathlib.Path(tempfile.gettempdir()) / f"dgboost-compile-helpers-{hashlib.sha1(key.encode()).hexdigest()}"
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        if time.time() - path.stat().st_mtime < _CLAIM_SECONDS:
            return False
        os.utime(path)  # an old claim: this process's now
        return True


def _loops() -> dict:
    import importlib

    for module in _MODULES:
        importlib.import_module(module)
    from .loops import LOOPS

    return LOOPS


def _types(signature: str) -> tuple:
    """A signature's argument types from their repr (``Array(float32, 2, 'C', False, aligned=True)``)."""
    from numba import types

    return eval(signature, {"__builtins__": {}}, {**vars(types), "bool": types.boolean, "none": types.none})


def compile_part(part: int, parts: int) -> None:
    """Compile every ``parts``-th entry of the table from its end, starting at ``part``."""
    loops = _loops()
    for loop, signature in list(reversed(SIGNATURES))[part::parts]:
        with contextlib.suppress(Exception):  # a loop whose arguments changed: the training compiles it
            loops[loop].machine_code().compile(_types(signature))


def record() -> list[tuple[str, str]]:
    """The table as default trainings use it (``--record``), compiled afresh in an empty cache:
    a loop loaded from the cache would not list the loops it calls."""
    if "numba" in sys.modules:
        raise RuntimeError("record() must run before numba is imported (it sets NUMBA_CACHE_DIR)")
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dgboost-record-")
    import numpy as np

    import dgboost

    from .loops import FIRST_USED

    os.environ["DGBOOST_COMPILE_HELPERS"] = "0"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    for objective in ("binary:logistic", "reg:squarederror"):
        dgboost.train({"objective": objective, "nthread": 1}, X, y, num_boost_round=2)
    loops = _loops()
    return [(loop, repr(signature)) for loop in FIRST_USED for signature in loops[loop].machine_code().signatures]


def main(argv: list[str]) -> int:
    if argv == ["--record"]:
        print("SIGNATURES = (")
        for loop, signature in record():
            print(f"    ({loop!r},\n     {signature!r}),")
        print(")")
        return 0
    compile_part(int(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
