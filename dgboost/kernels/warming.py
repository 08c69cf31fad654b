"""Helper processes that compile a cold numba cache's CPU loops beside a process's first training.

With numba's cache cold, a first training compiles its loops one after another (numba compiles
under one lock a process): some 4 s on two cores, 17 s on a device machine's 16 slower cores.
Helpers compile them in other processes at the same time. Each helper compiles into a cache
folder of its own, as the only writer there (numba's cache is not safe for two writers: it
writes a loop's index before its data and numbers data files from the index it read, so two
processes' signatures can cross). The training process hands out the work and puts each loop
a helper compiled into its own cache, where numba then loads it:

- ``SIGNATURES`` lists the loops of a default training (float32 data, 256 bins, depthwise
  trees, binary:logistic and reg:squarederror, no weights, two threads) with their signatures,
  the kernels' parallel drivers among them (``loops.over_runs``), in the order such a training
  first calls them from Python. tests/test_warming.py checks it against what a training calls;
  after changing a loop's arguments print it again with ``python -m dgboost.kernels.warming
  --record``, which also prints ``COSTS``, each loop's compile time. A training of other
  settings compiles what the table lacks itself, as before.
- The training and the helpers share the table's loops through pipes. The training takes the
  loop it is about to call (``loops.compiled``'s ``ready`` calls ``before_first_call``),
  unless a helper has started it; a helper, once started (it says so), the slowest loop the
  training has not reached, one at a time, then the drivers. Where a helper compiles the loop
  the training calls, the training compiles the next loops no one has started, and waits only
  when none is left. A driver is the helpers' (``compiled_elsewhere``): until it is in the
  cache the kernel's runs go on the host's threads, as they do while the process's own
  background thread compiles one (drivers.py).
- A loop a helper compiled is copied into the training's cache under numba's compiler lock, so
  not while this process compiles or loads, and only where the training's cache holds nothing
  of the loop that numba would read (no index, or a stale one): its data files first, then its
  index, each by an atomic rename. What this process compiled is not overwritten. Other
  processes writing the same cache at the same moment (a machine's other Dask workers) race
  with it as they race with each other's numba today.
- A helper runs the training's own dgboost (its folder first on the path; it checks the loops'
  files are the training's) and answers on its standard output; one that does not answer
  within ``_REPLY_SECONDS`` is killed, its loops left to the training.

``start`` (called by ``training.boost`` on the CPU) starts them once a process, where the cache
holds nothing of the table's last entry (a read of its index, before numba's registries are
filled) and no other process of the machine started helpers for the same cache in the last
``_CLAIM_SECONDS``: one set for the Dask workers of a machine (the others compile for
themselves, as numba does). ``DGBOOST_COMPILE_HELPERS`` in the environment sets how
many (``0``: none; by default one for every two cores, at most 4). They never touch the
training's results: numba's machine code is the same whoever compiled it, and a helper that
fails or dies leaves its loops to the training.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob
import hashlib
import logging
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types

logger = logging.getLogger("dgboost")

#: The most helpers a process starts by default (one for every two cores beyond them).
_MOST_HELPERS = 4
#: Seconds a machine's claim on starting helpers holds (their work takes seconds).
_CLAIM_SECONDS = 300
#: The longest the training waits for a helper's loop before compiling it itself.
_WAIT_SECONDS = 60.0
#: The longest a helper may take over one entry before it is killed.
_REPLY_SECONDS = 300.0
#: The modules whose loops the table names (importing them registers their loops).
_MODULES = ("dgboost.kernels.loops", "dgboost.kernels.split_loops", "dgboost.kernels.rank_loops")

#: (loop, signature) of a default training, in the order it first calls them (see above).
SIGNATURES = (
    ('dgboost.kernels.loops:quantise',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), int64, int64, int64, Array(uint32, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:quantise_on_threads',
     "(int64, Tuple((Array(float32, 2, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), int64, int64, int64, Array(uint32, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:column_bounds',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:column_bounds_on_threads',
     "(int64, Tuple((Array(float32, 2, 'C', False, aligned=True), Array(float64, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:fixed_sums',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:fixed_sums_on_threads',
     "(int64, Tuple((Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:pair_gradients',
     "(int64, int64, int64, Array(float32, 1, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), none, float32, float32, Array(float32, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:pair_gradients_on_threads',
     "(int64, Tuple((int64, Array(float32, 1, 'C', False, aligned=True), Array(float32, 1, 'C', False, aligned=True), none, float32, float32, Array(float32, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:run_plan',
     "(Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:histograms',
     "(int64, int64, Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, int64, Array(int64, 1, 'C', False, aligned=True), Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:histograms_on_threads',
     "(int64, Tuple((Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, int64, Array(int64, 1, 'C', False, aligned=True), Array(float32, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:add_partials',
     "(int64, int64, Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:splits',
     "(int64, int64, Array(int64, 3, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), none, none, none, int64, Array(float64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:node_best',
     "(Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), int64, Array(float64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:number_children',
     "(Array(int64, 2, 'C', False, aligned=True), int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:partition_sides',
     "(int64, int64, Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:partition_sides_on_threads',
     "(int64, Tuple((Array(uint8, 2, 'C', False, aligned=True), Array(uint32, 2, 'C', False, aligned=True), int64, int64, int64, none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), none, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:partition_scatter',
     "(int64, int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:partition_scatter_on_threads',
     "(int64, Tuple((Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(uint8, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:next_frontier',
     "(Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), int64, Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:siblings',
     "(int64, int64, Array(int64, 2, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(bool, 1, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))"),
    ('dgboost.kernels.split_loops:splits_on_threads',
     "(int64, Tuple((Array(int64, 3, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True), Array(int64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), Array(float64, 1, 'C', False, aligned=True), none, none, none, int64, Array(float64, 2, 'C', False, aligned=True), Array(int64, 2, 'C', False, aligned=True))))"),
    ('dgboost.kernels.loops:place_rows',
     "(int64, int64, Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:place_rows_on_threads',
     "(int64, UniTuple(Array(int32, 1, 'C', False, aligned=True), 5))"),
    ('dgboost.kernels.loops:add_leaf_values',
     "(int64, int64, Array(float32, 2, 'C', False, aligned=True), int64, Array(float32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))"),
    ('dgboost.kernels.loops:add_leaf_values_on_threads',
     "(int64, Tuple((Array(float32, 2, 'C', False, aligned=True), int64, Array(float32, 1, 'C', False, aligned=True), Array(int32, 1, 'C', False, aligned=True))))"),
)

#: Seconds each loop of the table took to compile where the table was recorded (two cores):
#: helpers take the slowest first. Printed with the table (``--record``).
COSTS = {
    'dgboost.kernels.loops:quantise': 0.2,
    'dgboost.kernels.loops:column_bounds': 0.09,
    'dgboost.kernels.loops:fixed_sums': 0.11,
    'dgboost.kernels.loops:pair_gradients': 0.12,
    'dgboost.kernels.loops:run_plan': 0.32,
    'dgboost.kernels.loops:histograms': 0.37,
    'dgboost.kernels.loops:add_partials': 0.2,
    'dgboost.kernels.split_loops:splits': 0.94,
    'dgboost.kernels.split_loops:node_best': 0.36,
    'dgboost.kernels.loops:number_children': 0.1,
    'dgboost.kernels.loops:partition_sides': 0.49,
    'dgboost.kernels.loops:partition_scatter': 0.21,
    'dgboost.kernels.loops:next_frontier': 0.17,
    'dgboost.kernels.loops:siblings': 0.13,
    'dgboost.kernels.loops:place_rows': 0.1,
    'dgboost.kernels.loops:add_leaf_values': 0.08,
}

_started = False
_start_lock = threading.Lock()
_active: "_Helpers | None" = None  # the helpers this process started (kept once their work is done)


def start() -> None:
    """Start the helpers, once a process, where they would help (module text); never raises."""
    global _started, _active
    with _start_lock:
        if _started:
            return
        _started = True
    try:
        count = _helpers_wanted()
        if count and not _held(SIGNATURES[-1][0]) and _claim():
            from .drivers import guard_forks

            guard_forks()  # a loop's copy into the cache holds numba's lock, as a driver's compile does
            _active = _Helpers(count)
            logger.debug("dgboost: %d processes compile the CPU loops beside this one (a cold numba cache)", count)
    except Exception:  # noqa: BLE001 - an aid to speed: the training compiles what it needs anyway
        logger.debug("dgboost: no compile helpers", exc_info=True)


def before_first_call(loop: str) -> None:
    """Before this process first calls ``loop`` (``loops.compiled``): the loop is the training's
    to compile if no helper has started it; if one compiles it, wait for it (at most
    ``_WAIT_SECONDS``), so that numba loads it from the cache rather than compiling it again."""
    helpers = _active
    if helpers is not None:
        helpers.take(loop)


def compiled_elsewhere(loop: str):
    """A future done once no helper will compile ``loop`` any more (a kernel's driver: its
    ``Driver`` runs on the host's threads meanwhile, rather than compiling it in the
    background too), or None where none is to: then compile it here."""
    helpers = _active
    return None if helpers is None else helpers.future(loop)


def helpers_done(timeout: float | None = None) -> bool:
    """Wait until the helpers have no work left (drivers.background_compiles_done); False if
    they still have at ``timeout``."""
    helpers = _active
    if helpers is None:
        return True
    with helpers.lock:
        return helpers.lock.wait_for(lambda: not helpers.queue and not helpers.running, timeout)


def _forget_in_child() -> None:
    """In a forked child: the helpers and their threads are the parent's (it would wait for their
    loops forever); the child compiles what it calls itself, and closes its copies of their
    pipes, so that a helper sees its input end when the parent closes it."""
    global _active, _start_lock
    helpers, _active, _start_lock = _active, None, threading.Lock()
    if helpers is not None:
        for helper in helpers.processes:
            for pipe in (helper.stdin, helper.stdout):
                with contextlib.suppress(OSError, ValueError):
                    os.close(pipe.fileno())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def _helpers_wanted() -> int:
    from .loops import cores

    setting = os.environ.get("DGBOOST_COMPILE_HELPERS", "")
    if setting.strip():
        return max(0, int(setting))
    return min(_MOST_HELPERS, cores() // 2) if SIGNATURES else 0


class _Helpers:
    """The helper processes and the table's work: ``queue``, the entries no one has started
    (helpers take from its end, the training from anywhere); ``running``, the entries a helper
    compiles now."""

    def __init__(self, count: int):
        self.lock = threading.Condition()
        self.queue = list(range(len(SIGNATURES)))
        self.running: set[int] = set()
        self.futures: dict[int, concurrent.futures.Future] = {}  # entries the training waits for
        from .loops import DRIVERS

        _loops()
        self.drivers = {entry for entry, (loop, _) in enumerate(SIGNATURES) if loop in DRIVERS}
        self.serving = count
        self.processes: list[subprocess.Popen] = []
        from . import loops

        # The training's own dgboost, whatever the working folder holds (-c puts it first on the path).
        command = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                   "from dgboost.kernels.warming import main; sys.exit(main(sys.argv[2:]))",
                   str(pathlib.Path(__file__).resolve().parents[2]), "--serve", os.path.abspath(loops.__file__)]
        for _ in range(count):
            folder = tempfile.mkdtemp(prefix="dgboost-compile-")  # the helper's own numba cache
            environment = dict(os.environ, NUMBA_CACHE_DIR=folder, DGBOOST_COMPILE_HELPERS="0")
            helper = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=environment, start_new_session=True, text=True)
            self.processes.append(helper)
            threading.Thread(target=self._serve, args=(helper, folder), name="dgboost-compile-helper",
                             daemon=True).start()

    def take(self, loop: str) -> None:
        """The training is about to call ``loop``: the entries of it no helper has started are
        the training's to compile (off the queue). While a helper compiles one, the training
        compiles the next loops of the queue itself, then waits for what is left."""
        entries = {entry for entry, (name, _) in enumerate(SIGNATURES) if name == loop}
        if not entries:
            return
        from .drivers import hold_off

        deadline = time.monotonic() + _WAIT_SECONDS
        with self.lock:
            self.queue = [entry for entry in self.queue if entry not in entries]
        while True:
            with self.lock:
                if not self.running & entries or time.monotonic() >= deadline:
                    return
                ahead = next((entry for entry in self.queue if entry not in self.drivers), None)
                if ahead is None:
                    # Waiting is the foreground's work: the background thread must not take numba's
                    # lock for a driver meanwhile, since the loop's copy into the cache needs it.
                    hold_off()
                    self.lock.wait(0.05)
                    continue
                self.queue.remove(ahead)
            _compile_here(ahead)  # a loop the training calls soon, rather than wait idle

    def future(self, loop: str):
        with self.lock:
            entry = next((entry for entry in self.running | set(self.queue) if SIGNATURES[entry][0] == loop), None)
            if entry is None:
                return None
            return self.futures.setdefault(entry, concurrent.futures.Future())

    def _done(self, entry: int) -> None:
        """(Under the lock.) ``entry`` is settled: installed, failed, or no helper left for it."""
        self.running.discard(entry)
        future = self.futures.pop(entry, None)
        if future is not None:
            future.set_result(None)

    def _next(self) -> int | None:
        """The next entry for a helper: the slowest to compile (``COSTS``) of the loops the
        training has not reached, the first of equals, else the first driver (the training runs
        a kernel on the host's threads until its driver is in). Every loop is called in the
        first round, so the slowest first ends the work soonest."""
        with self.lock:
            loops = [entry for entry in self.queue if entry not in self.drivers]
            entry = max(loops, key=lambda entry: COSTS.get(SIGNATURES[entry][0], 0.0), default=None)
            if entry is None and self.queue:
                entry = self.queue[0]
            if entry is not None:
                self.queue.remove(entry)
                self.running.add(entry)
            return entry

    def _settle(self, entry: int) -> None:
        with self.lock:
            self._done(entry)
            self.lock.notify_all()

    def _give(self, helper: subprocess.Popen) -> int | None:
        """The next entry the cache lacks, sent to ``helper``; None when none is left."""
        while (entry := self._next()) is not None:
            try:
                if not _held(SIGNATURES[entry][0]):  # else a partly warm cache has it: nothing to copy
                    helper.stdin.write(f"{entry}\n")
                    helper.stdin.flush()
                    return entry
            except BaseException:
                self._settle(entry)
                raise
            self._settle(entry)
        return None

    def _serve(self, helper: subprocess.Popen, folder: str) -> None:
        """One helper's work: an entry at a time, each loop it compiled installed before the
        training may call it (``running`` keeps the entry until then). The helper is sent its
        next entry before the last is copied in, which waits for numba's lock, so it never idles
        while the training compiles."""
        sent: list[int] = []  # the entries the helper has, the first the one it compiles now
        try:
            # Its first entry once it has started (a second or two): the loops the training
            # reaches meanwhile are the training's.
            if _reply(helper, None) is not None and (entry := self._give(helper)) is not None:
                sent.append(entry)
            while sent:
                reply = _reply(helper, sent[0])
                if reply is None:
                    return  # the helper died or hung: what it did not finish is the training's
                if (entry := self._give(helper)) is not None:
                    sent.append(entry)  # compiled while this one waits for the lock to be copied in
                if reply:
                    _install(SIGNATURES[sent[0]][0], reply)
                self._settle(sent.pop(0))
        except Exception:  # noqa: BLE001 - a broken pipe, a copy that failed: the training compiles
            logger.debug("dgboost: a compile helper stopped", exc_info=True)
        finally:
            for entry in sent:
                self._settle(entry)
            with self.lock:
                self.serving -= 1
                if not self.serving:  # the last helper: what is left is the training's
                    for entry in self.queue:
                        self._done(entry)
                    self.queue.clear()
                    self.lock.notify_all()
            with contextlib.suppress(OSError):
                helper.stdin.close()
            helper.wait()
            shutil.rmtree(folder, ignore_errors=True)


def _compile_here(entry: int) -> None:
    """Compile the table's ``entry`` in this process (into its own cache, as a call would)."""
    loop, signature = SIGNATURES[entry]
    try:
        _dispatcher(loop).compile(_types(signature))
    except Exception:  # noqa: BLE001 - a loop whose arguments changed: its call compiles what it needs
        logger.debug("dgboost: %s not compiled ahead", loop, exc_info=True)


def _reply(helper: subprocess.Popen, entry: int | None) -> str | None:
    """The helper's answer for ``entry``: the folder of the loop it compiled, "" if it failed
    (for None: "" once it is ready for work), or None if it ended or took longer than
    ``_REPLY_SECONDS`` (then it is killed). Other lines on its output (numba's debug prints)
    are passed over."""
    timer = threading.Timer(_REPLY_SECONDS, helper.kill)
    timer.start()
    try:
        while line := helper.stdout.readline():
            words = line.rstrip("\n").split(" ", 2)
            if entry is None and words == ["ready"]:
                return ""
            if words[:2] == ["compiled", str(entry)] and len(words) == 3:
                return words[2]
            if words[:2] == ["failed", str(entry)]:
                return ""
        return None
    finally:
        timer.cancel()


def _held(loop: str) -> bool:
    """Whether this process's numba cache holds entries of ``loop`` that numba would read. A
    read of the index file alone, which numba replaces whole: no need of numba's lock, which
    the training holds through each of its compiles."""
    from numba.core.caching import FunctionCache

    return bool(FunctionCache(_function(loop))._cache_file._load_index())


def _install(loop: str, source: str) -> bool:
    """Copy ``loop``'s cache files from a helper's folder ``source`` into this process's numba
    cache, under numba's compiler lock, where this cache holds nothing of the loop numba would
    read; its data files first, then its index. Whether it copied them."""
    from numba.core.caching import FunctionCache
    from numba.core.compiler_lock import global_compiler_lock

    function = _function(loop)
    with global_compiler_lock:
        cache = FunctionCache(function)
        index = cache._cache_file  # numba's reader of the loop's index and data files
        if index._load_index():  # this process, or another, already cached the loop here
            return False
        base = index._index_name[: -len(".nbi")]
        cache._impl.locator.ensure_cache_path()
        for path in sorted(glob.glob(os.path.join(glob.escape(source), glob.escape(base) + ".*.nbc"))):
            _copy(path, os.path.join(cache.cache_path, os.path.basename(path)))
        _copy(os.path.join(source, index._index_name), index._index_path)
    return True


def _copy(source: str, target: str) -> None:
    """``source``'s bytes at ``target``, which appears whole or not at all."""
    partial = f"{target}.tmp.{os.getpid()}.{threading.get_ident()}"
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _function(loop: str):
    """The Python function numba compiles as ``loop`` (a stand-in for a driver, whose cache
    files numba names by its code and name alone), made here: the loops' own ``machine_code``
    and ``driver`` are the training thread's to make."""
    from . import loops

    if loop in loops.DRIVERS:
        function = types.FunctionType(loops._drive.__code__, {}, "_drive")
        function.__qualname__ = loops.DRIVERS[loop].cached_name()
        return function
    return _loops()[loop].__wrapped__


def _dispatcher(loop: str):
    """``loop``'s numba dispatcher in this process (a driver's, for a kernel's driver)."""
    from . import loops

    return loops.DRIVERS[loop]().dispatcher if loop in loops.DRIVERS else _loops()[loop].machine_code()


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


def serve(expected_loops: str) -> None:
    """A helper: say ``ready`` once started, then compile the entries its standard input names,
    one a line, into its own cache (NUMBA_CACHE_DIR), answering each with ``compiled <entry>
    <the loop's cache folder>`` or ``failed <entry>``; at the input's end, remove that cache. It ends at once where its loops
    are not the training's (``expected_loops``, the path of its loops.py)."""
    from . import loops

    if os.path.abspath(loops.__file__) != expected_loops:
        shutil.rmtree(os.environ.get("NUMBA_CACHE_DIR", ""), ignore_errors=True)
        return
    _loops()
    try:
        _start_numba()
        print("ready", flush=True)
        for line in sys.stdin:
            entry = int(line)
            loop, signature = SIGNATURES[entry]
            try:
                dispatcher = _dispatcher(loop)
                dispatcher.compile(_types(signature))
                reply = f"compiled {entry} {dispatcher._cache.cache_path}"
            except Exception:  # noqa: BLE001 - a loop whose arguments changed: the training compiles it
                reply = f"failed {entry}"
            print(reply, flush=True)
    finally:
        shutil.rmtree(os.environ.get("NUMBA_CACHE_DIR", ""), ignore_errors=True)


def _start_numba() -> None:
    """What numba does before its first compile in a process (its contexts' registries: some
    0.3 s, much of it importing scipy), done before a helper says it is ready."""
    from numba.core.registry import cpu_target

    with contextlib.suppress(Exception):  # numba's own affair: the first compile does it anyway
        cpu_target.typing_context.refresh()
        cpu_target.target_context.refresh()


def record() -> tuple[list[tuple[str, str]], dict[str, float]]:
    """The table as default trainings use it (``--record``), compiled afresh in an empty cache,
    and the seconds each of its loops took to compile (its own compiles, callees included)."""
    if "numba" in sys.modules:
        raise RuntimeError("record() must run before numba is imported (it sets NUMBA_CACHE_DIR)")
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dgboost-record-")
    os.environ["DGBOOST_COMPILE_HELPERS"] = "0"
    import numpy as np

    import dgboost

    from numba.core import event

    from .drivers import background_compiles_done
    from .loops import DRIVERS, FIRST_CALLED

    seconds: dict[int, float] = {}  # by dispatcher, the compiles the training thread made

    class Timer(event.Listener):
        def __init__(self):
            self.started: list[float] = []  # the compiles under way, callers first

        def on_start(self, compiling):
            if threading.current_thread() is threading.main_thread():
                self.started.append(time.perf_counter())

        def on_end(self, compiling):
            if threading.current_thread() is threading.main_thread():
                dispatcher = id(compiling.data["dispatcher"])
                seconds[dispatcher] = seconds.get(dispatcher, 0.0) + time.perf_counter() - self.started.pop()

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50_000, 8)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    with event.install_listener("numba:compile", Timer()):
        for objective in ("binary:logistic", "reg:squarederror"):  # on two threads: the kernels' drivers too
            dgboost.train({"objective": objective, "nthread": 2}, X, y, num_boost_round=2)
    background_compiles_done()
    table = [(loop, repr(signature)) for loop in FIRST_CALLED for signature in _dispatcher(loop).signatures]
    costs = {loop: round(seconds.get(id(_dispatcher(loop)), 0.0), 2) for loop in FIRST_CALLED if loop not in DRIVERS}
    return table, costs


def main(argv: list[str]) -> int:
    if argv == ["--record"]:
        table, costs = record()
        print("SIGNATURES = (")
        for loop, signature in table:
            print(f"    ({loop!r},\n     {signature!r}),")
        print(")")
        print("COSTS = {")
        for loop, seconds in costs.items():
            print(f"    {loop!r}: {seconds!r},")
        print("}")
        return 0
    if len(argv) == 2 and argv[0] == "--serve":
        serve(argv[1])
        return 0
    print("usage: python -m dgboost.kernels.warming --record | --serve LOOPS_PY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
