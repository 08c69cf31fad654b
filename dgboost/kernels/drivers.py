"""The CPU kernels' parallel drivers, and their compiling in the background on a cold cache.

A kernel over runs (``loops.over_runs``) runs on threads through a driver: a ``prange``
loop over its runs, compiled by numba apart from the body it calls. A training's drivers
took longer to compile than all their bodies (6 s against 4 s on two cores), and numba
compiles one function at a time (its global compiler lock), so a first train on a cold
cache waited for both. Here a driver that numba's disk cache does not hold for a call's
argument types is compiled by one background thread, once the process's other threads
have stopped asking for numba's lock, and until it is ready the kernel's caller runs the
runs on the host's threads (the bodies release the GIL): the same runs, so the same
results. A driver the cache holds is loaded at the call, as numba always does. Where helper
processes compile the process's loops (``warming.py``), a driver one of them will compile is
left to it, and the runs stay on the host's threads until it is in the cache.

This leans on numba's event API (``numba.core.event``), its compiler lock and its
dispatcher's disk cache (``_cache``). Where any of them is not as expected, a driver is
compiled at its call, in the foreground, as before.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import os
import threading
import time

#: Seconds the other threads must have left numba's compiler lock alone before the background
#: thread takes it: a train's first tree compiles or loads its bodies one after another.
QUIET_SECONDS = 0.25

#: A fork's count: a driver's compiles pending from before a fork are forgotten in the child.
_generation = 0


class Driver:
    """A kernel's driver (``dispatcher``, a numba dispatcher of ``_drive(n_runs, *arguments)``),
    ``body``'s dispatcher and ``key``, its name in loops.DRIVERS; ``ready(arguments)`` is the
    driver to call, or None while it compiles in the background or in a helper process."""

    def __init__(self, dispatcher, body, key: str):
        self.dispatcher, self.body, self.key = dispatcher, body, key
        self.called = False
        self.settled = False  # every type seen is compiled: calls go straight to the driver
        self.pending: dict[tuple, concurrent.futures.Future] = {}
        self.generation = _generation

    def ready(self, arguments: tuple):
        if self.settled:
            return self.dispatcher
        if self.generation != _generation:  # forked: the parent's compile thread is not here
            self.pending.clear()
            self.generation = _generation
        for types, compiling in list(self.pending.items()):
            if compiling.done():  # compiled, or failed: then numba compiles it at the call, and raises there
                del self.pending[types]
        n_runs, *rest = arguments
        typeof = self.dispatcher.typeof_pyval
        types = (typeof(n_runs), typeof(tuple(rest)))  # numba's key of a call _drive(n_runs, *rest)
        if types in self.pending:
            return None
        if not self.called:
            from .loops import FIRST_CALLED

            self.called = True
            FIRST_CALLED.append(self.key)
        if types not in self.dispatcher.overloads and not self._in_disk_cache(types):
            import numba

            from . import warming

            self.body.compile((numba.int64, types[0], *types[1]))  # in the foreground: the runs need it now
            elsewhere = warming.compiled_elsewhere(self.key)  # by a helper process, or None
            if elsewhere is None and self._in_disk_cache(types):  # a helper's, copied in meanwhile
                return self.dispatcher
            compiles = None if elsewhere is not None else _background()
            if elsewhere is not None or compiles is not None:
                self.pending[types] = elsewhere or compiles.submit(self.dispatcher, types)
                return None
        self.settled = not self.pending
        return self.dispatcher

    def _in_disk_cache(self, types: tuple) -> bool:
        """Whether numba's disk cache holds the driver for these types (asked as numba asks it,
        under its compiler lock: its registries are not thread-safe). If it cannot be asked,
        True: numba then compiles the driver at the call, as it would without this module."""
        try:
            from numba.core.compiler_lock import global_compiler_lock

            with global_compiler_lock:
                return self.dispatcher._cache.load_overload(types, self.dispatcher.targetctx) is not None
        except Exception:  # noqa: BLE001 - numba's internals moved
            return True


class _Compiles:
    """The background thread: compiles the drivers sent to it one at a time, each once no
    other thread has asked for numba's compiler lock for QUIET_SECONDS (numba announces each
    ask before it waits; a listener notes the time)."""

    def __init__(self):
        import numba.core.event

        self.lock = threading.Condition()
        self.queue: list = []
        self.busy = False
        self.stopping = False
        self.last_foreground = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="dgboost-compile", daemon=True)
        compiles = self

        class Foreground(numba.core.event.Listener):
            def on_start(self, event):
                if threading.current_thread() is not compiles.thread:
                    compiles.last_foreground = time.monotonic()

            on_end = on_start

        self.listener = Foreground()
        numba.core.event.register("numba:compiler_lock", self.listener)
        self.thread.start()

    def submit(self, dispatcher, types) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        with self.lock:
            self.queue.append((dispatcher, types, future))
            self.lock.notify_all()
        return future

    def _run(self) -> None:
        while True:
            with self.lock:
                while not self.stopping and not self.queue:
                    self.lock.wait()
                if self.stopping:
                    return
            quiet = time.monotonic() - self.last_foreground
            if quiet < QUIET_SECONDS:
                time.sleep(QUIET_SECONDS - quiet)
                continue
            with self.lock:
                if self.stopping:
                    return
                dispatcher, types, future = self.queue.pop(0)
                self.busy = True
            try:
                dispatcher.compile(types)
                future.set_result(None)
            except BaseException as error:  # noqa: BLE001 - the kernel's call compiles it again, and raises
                future.set_exception(error)
            finally:
                with self.lock:
                    self.busy = False
                    self.lock.notify_all()

    def wait_idle(self, timeout: float | None) -> bool:
        with self.lock:
            return self.lock.wait_for(lambda: not self.queue and not self.busy, timeout)

    def stop(self) -> None:
        """At exit: no new compile, the one going on finished (a thread ended inside LLVM while
        the interpreter shuts down can crash it); the queued ones are the next process's."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.thread.join(timeout=30)

    def forget(self) -> None:
        """In a forked child: this object is the parent's, its thread is not here."""
        import numba.core.event

        numba.core.event.unregister("numba:compiler_lock", self.listener)
        atexit.unregister(self.stop)


_made_lock = threading.Lock()
_made: _Compiles | None = None
_broken = False  # numba's event API was not as expected: drivers compile in the foreground


def _background() -> _Compiles | None:
    global _made, _broken
    with _made_lock:
        if _made is None and not _broken:
            try:
                _made = _Compiles()
                atexit.register(_made.stop)
            except Exception:  # noqa: BLE001 - numba's event API moved
                _broken = True
        return _made


def hold_off() -> None:
    """Count this moment as the foreground's: a thread that waits for a loop another process
    compiles (kernels/warming.py) keeps the background from taking numba's lock meanwhile, as a
    thread compiling would, since the loop's copy into the cache needs that lock."""
    if _made is not None:
        _made.last_foreground = time.monotonic()


def background_compiles_done(timeout: float | None = None) -> bool:
    """Wait until every driver sent to the background, and every loop left to helper processes
    (kernels/warming.py), is compiled (and so in numba's disk cache); False if some still
    compile at ``timeout``. For a benchmark or a test that wants the drivers in use, or a
    script about to end that wants them cached for the next process."""
    from . import warming

    deadline = None if timeout is None else time.monotonic() + timeout
    if not warming.helpers_done(timeout):
        return False
    return _made is None or _made.wait_idle(None if deadline is None else max(0.0, deadline - time.monotonic()))


_held_at_fork = False
_forks_guarded = False  # another thread of this process may hold numba's lock (guard_forks)


def guard_forks() -> None:
    """Take numba's lock before every fork from now on, as once the background thread runs:
    for another thread that takes it (warming.py's copies of a helper's loops)."""
    global _forks_guarded
    _forks_guarded = True


def _before_fork() -> None:
    """No fork while a driver compiles (or a thread of guard_forks' holds numba's lock): the
    child would inherit numba's compiler lock held by a thread it does not have, and wait for
    it at its first compile."""
    global _held_at_fork
    if _made is not None or _forks_guarded:
        from numba.core.compiler_lock import global_compiler_lock

        global_compiler_lock.acquire()
        _held_at_fork = True


def _release_after_fork() -> None:
    global _held_at_fork
    if _held_at_fork:
        from numba.core.compiler_lock import global_compiler_lock

        _held_at_fork = False
        global_compiler_lock.release()


def _after_fork_in_child() -> None:
    global _made, _made_lock, _generation
    if _made is not None:
        _made.forget()  # first: its listener's clock is all it touches, but its exit hook waits on its lock
    _made, _made_lock = None, threading.Lock()
    _generation += 1
    _release_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_release_after_fork, after_in_child=_after_fork_in_child)
