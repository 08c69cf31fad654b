"""Where dgboost's training time goes: time per kernel.

On the GPU (``--device cuda``) it wraps every function of ``dgboost.kernels.cuda``
so that each call records a CUDA event before and after it on the current
stream, trains, then sums the elapsed times per kernel. What the kernels do not
account for is the glue between them (cupy array operations, Python, launches)
and is reported as "other". It also splits each round's wall time on the host:
issuing work and handling the finished rounds (trees on the host, callbacks),
against waiting for the GPU in device-to-host reads (a round's trees, and the
reads a policy makes inside a tree: lossguide's). A round that barely waits is
bound by the host's launches, not by the GPU. ``--param`` profiles any policy.

On the CPU (``--device cpu``, ``--nthread``) it times each call of the compiled
loops (``dgboost.kernels.loops``: each call is synchronous) by the wall clock;
"other" is then NumPy, Python and the collective between them.

With ``--workers N`` (GPUs only) it profiles a dgboost.dask job over N GPUs of this machine
(dask-cuda workers, the Higgs-like data generated on them as dask_scaling.py does): the same
timers on every rank, NCCL's collectives among the kernels (``nccl_reduce``, ...: their
time includes waiting for the slowest rank to join), and each rank's table beside the
others'. Rank 0's rounds are the wall.

A profile, not a comparison: side_by_side.py is the benchmark. It times rounds queued as
calls: a round replayed from a CUDA graph (dgboost/replay.py) calls no Python wrapper, so
it turns ``dgboost.cuda-graphs`` off, here and on its Dask workers.

    python benchmarks/kernel_profile.py --dataset higgs --rows 10000000 --rounds 50 --depth 8
    python benchmarks/kernel_profile.py --device cpu --rows 200000 --rounds 100 --depth 6 --nthread 16
    python benchmarks/kernel_profile.py --rows 10000000 --rounds 20 --param grow_policy=lossguide \
        --param max_leaves=255 --param max_depth=0
    python benchmarks/kernel_profile.py --rows 10000000 --rounds 100 --depth 8 --workers 2
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import pathlib
import sys
import time
import types

# Before dask reads its config (workers inherit it): rounds queued as calls, each call timed.
os.environ["DASK_DGBOOST__CUDA_GRAPHS"] = "False"
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from datasets import TASKS, load  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402
from side_by_side import _extra_params  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(TASKS), default="higgs")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--out", type=pathlib.Path, default=None, help="write the profile as JSON here")
    parser.add_argument("--python-profile", action="store_true", help="also print cProfile's top functions")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--nthread", type=int, default=0, help="CPU threads (0: every core)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a training parameter (VALUE read as JSON, else a string), e.g. "
                             "--param grow_policy=lossguide")
    parser.add_argument("--workers", type=int, default=0, help="profile a dgboost.dask job over this many GPUs")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="with --workers: the workers' sys.setswitchinterval (Python's GIL hand-over), seconds")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="with --workers: gc.freeze() on the workers before the jobs (the objects "
                             "they hold then escape the garbage collector's full passes)")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        if args.workers:
            parser.error("--workers profiles GPU ranks (dgboost.dask's CPU ranks: use --device cpu without it)")
        return _profile_cpu(args)
    if args.workers:
        return _profile_dask(args)

    import cupy

    import dgboost

    X, y, _, _ = load(args.dataset, args.rows, 1, "cuda")
    params = _params(args)
    dgboost.train(params, X[:10_000], y[:10_000], num_boost_round=2)  # compile and warm up

    cupy.cuda.Device().synchronize()
    started = time.perf_counter()
    dgboost.train(params, X, y, num_boost_round=0)  # the set-up alone: cuts, matrix, base score
    cupy.cuda.Device().synchronize()
    setup = time.perf_counter() - started
    class Clock(dgboost.callback.TrainingCallback):
        first_round = None

        def before_iteration(self, model, epoch, evals_log):
            if self.first_round is None:
                cupy.cuda.Device().synchronize()
                self.first_round = time.perf_counter()
                self.first_cpu = time.thread_time()
            return False

    clock = Clock()
    recorder = _Recorder()
    collector = _GcClock()
    try:
        cupy.cuda.Device().synchronize()
        started = time.perf_counter()
        if args.python_profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
        dgboost.train(params, X, y, num_boost_round=args.rounds, callbacks=[clock])
        cupy.cuda.Device().synchronize()
        wall = time.perf_counter() - clock.first_round
        cpu = time.thread_time() - clock.first_cpu
        if args.python_profile:
            profiler.disable()
            stats = pstats.Stats(profiler)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats("dgboost", 30)
    finally:
        recorder.stop()
        collector.stop()

    profile = recorder.profile()
    kernel_ms = sum(p["ms"] for p in profile.values())
    print(f"{args.dataset}-like, {args.rows:,} rows, {args.rounds} rounds, depth {args.depth}: set-up "
          f"{setup:.2f} s, then {wall:.2f} s of rounds, {1000 * wall / args.rounds:.2f} ms a round "
          "(the table's quantise_and_pack is the set-up's; the rounds' wall excludes it)")
    print("| kernel | calls | GPU ms | ms a round | share of wall |")
    print("|---|---|---|---|---|")
    for name, p in sorted(profile.items(), key=lambda item: -item[1]["ms"]):
        print(f"| {name} | {p['calls']} | {p['ms']:.1f} | {p['ms'] / args.rounds:.3f} | "
              f"{p['ms'] / 10 / wall:.1f}% |")
    other = 1000 * wall - kernel_ms
    print(f"| other (glue, launches, host) | | {other:.1f} | {other / args.rounds:.3f} | "
          f"{other / 10 / wall:.1f}% |")
    wait = recorder.host_wait
    print(f"host: {1000 * (wall - wait) / args.rounds:.2f} ms a round issuing work and handling trees, "
          f"{1000 * wait / args.rounds:.2f} ms waiting for the GPU in its reads; the thread's CPU time "
          f"{1000 * cpu / args.rounds:.2f} ms a round; garbage collections: "
          + ", ".join(f"generation {g} {n} in {t:.3f} s" for g, (n, t) in collector.seconds.items()))
    if args.out:
        args.out.write_text(json.dumps({"setup_s": setup, "rounds_s": wall, "host_wait_s": wait, "kernels": profile, "args": vars(args)}, default=str,
                                       indent=1))
    return 0


class _Recorder:
    """While it records: a CUDA event before and after each call of ``dgboost.kernels.cuda``'s
    functions and of the NCCL communicator's collectives, on the current stream, and the host's
    time waiting in device-to-host reads."""

    def __init__(self):
        from dgboost import backend
        from dgboost.collective import nccl
        from dgboost.kernels import cuda

        self.events = collections.defaultdict(list)
        self.host_wait = 0.0
        self._restore = []
        for name, value in list(vars(cuda).items()):
            if callable(value) and not name.startswith("_") and getattr(value, "__module__", None) == cuda.__name__:
                self._patch(cuda, name, self._timed(name, value))
        for name in ("allreduce", "reduce", "broadcast", "allgather"):  # reduce: a level's histograms
            self._patch(nccl.NcclCommunicator, name, self._timed(f"nccl_{name}", getattr(nccl.NcclCommunicator, name)))
        device_read = backend._device_read

        def timed_device_read(wait):  # every device-to-host read (to_numpy's, a round's trees')
            started = time.perf_counter()
            result = device_read(wait)
            self.host_wait += time.perf_counter() - started
            return result

        self._patch(backend, "_device_read", timed_device_read)

    def _patch(self, owner, name, replacement):
        self._restore.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _timed(self, name, function):
        import cupy

        @functools.wraps(function)
        def wrapper(*a, **k):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            result = function(*a, **k)
            stop.record()
            self.events[name].append((start, stop))
            return result
        return wrapper

    def stop(self) -> None:
        for owner, name, original in reversed(self._restore):
            setattr(owner, name, original)

    def profile(self) -> dict:
        """{kernel: {"calls", "ms"}} (the device synchronised first)."""
        import cupy

        cupy.cuda.Device().synchronize()
        return {name: {"calls": len(pairs), "ms": sum(cupy.cuda.get_elapsed_time(a, b) for a, b in pairs)}
                for name, pairs in self.events.items()}


# On a worker, between the client's calls, its recorder and rank 0's clock live on the Worker
# object (a function of this script reaches a worker as a copy, with copies of its globals).

def _record_on_worker(dask_worker) -> None:
    dask_worker.dgboost_kernel_profile = {"recorder": _Recorder(), "threads": _thread_cpu(),
                                          "started": time.perf_counter(), "gc": _GcClock()}


def _worker_profile(dask_worker) -> dict:
    state = dask_worker.dgboost_kernel_profile
    state["recorder"].stop()
    state["gc"].stop()
    before, after = state["threads"], _thread_cpu()
    busy = sorted(((after[tid][1] - before.get(tid, (None, 0.0))[1], name) for tid, (name, _) in after.items()),
                  reverse=True)
    return {"kernels": state["recorder"].profile(), "host_wait_s": state["recorder"].host_wait,
            "rounds_s": state.get("rounds_s"), "rounds_cpu_s": state.get("rounds_cpu_s"),
            "python_profile": state.get("python_profile"),
            "job_wall_s": time.perf_counter() - state["started"], "thread_cpu_s": busy[:8],
            "gc": state["gc"].seconds}


class _GcClock:
    """The time Python's garbage collector takes in this process, by generation, until ``stop``."""

    def __init__(self):
        import gc

        self.seconds = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}  # generation: [collections, seconds]
        self._began = None
        gc.callbacks.append(self._note)

    def _note(self, phase, info):
        if phase == "start":
            self._began = time.perf_counter()
        elif self._began is not None:
            record = self.seconds[info["generation"]]
            record[0] += 1
            record[1] += time.perf_counter() - self._began

    def stop(self):
        import gc

        if self._note in gc.callbacks:
            gc.callbacks.remove(self._note)


def _thread_cpu() -> dict:
    """{native thread id: (name, CPU seconds so far)} of this process's threads (Linux's
    /proc; empty elsewhere): which threads of a worker burn its cores while a job runs. A
    Python thread is named by its threading name, others by the kernel's (comm)."""
    import os
    import threading

    python = {thread.native_id: thread.name for thread in threading.enumerate()}
    ticks = os.sysconf("SC_CLK_TCK")
    threads = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as comm:
                name = comm.read().strip()
            threads[int(tid)] = (python.get(int(tid), name), (int(fields[11]) + int(fields[12])) / ticks)
    except OSError:
        return {}
    return threads


class _WorkerClock(TrainingCallback):
    """On rank 0: the rounds' wall, from the first round's start to the training's end (the
    device synchronised at both), kept on the worker for _worker_profile."""

    never_stops = True

    def __init__(self, python_profile: bool = False):
        self.python_profile = python_profile

    @staticmethod
    def _state() -> dict:
        from distributed import get_worker

        return get_worker().dgboost_kernel_profile

    def before_iteration(self, model, epoch, evals_log):
        state = self._state()
        if "first_round" not in state:
            import cupy

            cupy.cuda.Device().synchronize()
            state["first_round"] = time.perf_counter()
            state["first_cpu"] = time.thread_time()  # the rank's thread's CPU time
            if self.python_profile:  # the rank's own thread: cProfile follows the thread that enables it
                import cProfile

                state["profiler"] = cProfile.Profile()
                state["profiler"].enable()
        return False

    def after_training(self, model):
        import cupy

        cupy.cuda.Device().synchronize()
        state = self._state()
        state["rounds_s"] = time.perf_counter() - state["first_round"]
        state["rounds_cpu_s"] = time.thread_time() - state["first_cpu"]
        if "profiler" in state:
            import io
            import pstats

            state["profiler"].disable()
            text = io.StringIO()
            stats = pstats.Stats(state["profiler"], stream=text)
            stats.sort_stats("tottime").print_stats(30)
            stats.sort_stats("cumulative").print_stats(40)
            state["python_profile"] = text.getvalue()
        return model


def _profile_dask(args) -> int:
    """The profile of each rank of a dgboost.dask job over ``--workers`` GPUs."""
    from distributed import Client

    import dgboost.dask
    from dask_scaling import _data

    if args.dataset != "higgs":
        raise SystemExit("--workers profiles the Higgs-like data generated on the workers (dask_scaling.py's)")
    args.chunks = 4 * args.workers
    params = _params(args)
    with dgboost.dask.local_cluster("cuda", args.workers) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers)
        X, y = _data(args, client)
        if args.switch_interval:
            client.run(sys.setswitchinterval, args.switch_interval)
        if args.gc_freeze:
            import gc

            client.run(gc.freeze)
        dgboost.dask.train(client, params, X, y, num_boost_round=2)  # compile, start NCCL
        client.run(_record_on_worker)
        started = time.perf_counter()
        dgboost.dask.train(client, params, X, y, num_boost_round=args.rounds,
                           callbacks=[_WorkerClock(args.python_profile)])
        job = time.perf_counter() - started
        ranks = client.run(_worker_profile)
    by_rank = [ranks[address] for address in sorted(ranks)]  # the ranks' order: dgboost.dask sorts the workers
    wall = next(r["rounds_s"] for r in by_rank if r["rounds_s"] is not None)
    names = sorted({name for r in by_rank for name in r["kernels"]},
                   key=lambda name: -max(r["kernels"].get(name, {"ms": 0})["ms"] for r in by_rank))
    print(f"higgs-like, {args.rows:,} rows over {args.workers} GPUs, {args.rounds} rounds, depth {args.depth}: "
          f"the job {job:.2f} s, rank 0's rounds {wall:.2f} s, {1000 * wall / args.rounds:.2f} ms a round")
    print("| kernel | " + " | ".join(f"ms a round, rank {i}" for i in range(len(by_rank))) + " |")
    print("|---|" + "---|" * len(by_rank))
    for name in names:
        cells = [r["kernels"].get(name, {"ms": 0.0})["ms"] / args.rounds for r in by_rank]
        print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    others = [1000 * wall - sum(p["ms"] for p in r["kernels"].values()) for r in by_rank]
    print("| other (glue, launches, host) | " + " | ".join(f"{o / args.rounds:.3f}" for o in others) + " |")
    print("| host waiting in reads | " + " | ".join(f"{1000 * r['host_wait_s'] / args.rounds:.3f}"
                                                   for r in by_rank) + " |")
    cpu = next(r["rounds_cpu_s"] for r in by_rank if r["rounds_s"] is not None)
    print(f"rank 0's thread: {1000 * cpu / args.rounds:.2f} ms of CPU a round")
    for rank, r in enumerate(by_rank):
        print(f"rank {rank}'s busiest threads over the job's {r['job_wall_s']:.2f} s (CPU s): "
              + ", ".join(f"{name} {seconds:.2f}" for seconds, name in r["thread_cpu_s"])
              + "; garbage collections: " + ", ".join(f"generation {g} {n} in {t:.3f} s"
                                                       for g, (n, t) in r["gc"].items()))
    for r in by_rank:
        if r["python_profile"]:
            print("rank 0's thread under cProfile (the kernels' times above are then inflated):")
            print(r["python_profile"])
    if args.out:
        args.out.write_text(json.dumps({"job_s": job, "rounds_s": wall, "ranks": by_rank, "args": vars(args)},
                                       default=str, indent=1))
    return 0


def _params(args) -> dict:
    """The training parameters: the task's, --depth, eta 0.1, the device and threads, then --param."""
    objective, extra, _, _ = TASKS[args.dataset]
    params = {"objective": objective, **extra, "max_depth": args.depth, "eta": 0.1, "device": args.device}
    if args.nthread > 0:
        params["nthread"] = args.nthread
    return {**params, **_extra_params(args)}


def _profile_cpu(args) -> int:
    """The CPU twin of the profile: wall time of each compiled loop's calls."""
    import dgboost
    from dgboost.kernels import loops

    X, y, _, _ = load(args.dataset, args.rows, 1, "cpu")
    params = _params(args)
    dgboost.train(params, X[:10_000], y[:10_000], num_boost_round=2)  # load or compile the loops

    times = collections.defaultdict(lambda: [0, 0.0])

    def timed(name, function):
        @functools.wraps(function)
        def wrapper(*a, **k):
            started = time.perf_counter()
            result = function(*a, **k)
            record = times[name]
            record[0] += 1
            record[1] += time.perf_counter() - started
            return result
        return wrapper

    class Clock(dgboost.callback.TrainingCallback):
        """Starts the rounds' clock, and forgets the set-up's loops, at the first round."""

        first_round = None

        def before_iteration(self, model, epoch, evals_log):
            if self.first_round is None:
                times.clear()
                around.clear()
                self.first_round = time.perf_counter()
            return False

    from dgboost import kernels
    from dgboost.kernels import rank_loops, split_loops

    originals = {(module, name): function for module in (loops, split_loops, rank_loops)
                 for name, function in vars(module).items()
                 if callable(function) and hasattr(function, "__wrapped__") and not name.startswith("_")}
    # The kernels (dgboost.kernels' functions, cpu.py around the loops) where the rest of
    # dgboost imported them: their time less their loops' is their own Python and NumPy.
    dispatched = {getattr(kernels, name): name for name in kernels.__all__ if callable(getattr(kernels, name, None))}
    around = collections.defaultdict(float)

    def timed_kernel(name, function):
        @functools.wraps(function)
        def wrapper(*a, **k):
            started = time.perf_counter()
            try:
                return function(*a, **k)
            finally:
                around[name] += time.perf_counter() - started
        return wrapper

    importers = {(module, name): function for module in list(sys.modules.values())
                 if getattr(module, "__name__", "").startswith("dgboost.")
                 and not module.__name__.startswith("dgboost.kernels")
                 for name, function in list(vars(module).items())
                 if isinstance(function, types.FunctionType) and function in dispatched}
    started = time.perf_counter()
    dgboost.train(params, X, y, num_boost_round=0)
    setup = time.perf_counter() - started
    for (module, name), function in originals.items():
        setattr(module, name, timed(name, function))
    for (module, name), function in importers.items():
        setattr(module, name, timed_kernel(dispatched[function], function))
    clock = Clock()
    try:
        dgboost.train(params, X, y, num_boost_round=args.rounds, callbacks=[clock])
        wall = time.perf_counter() - clock.first_round
    finally:
        for (module, name), function in (originals | importers).items():
            setattr(module, name, function)
    print(f"{args.dataset}-like, {args.rows:,} rows, {args.rounds} rounds, depth {args.depth}, "
          f"{args.nthread or loops.cores()} threads: set-up {setup:.2f} s, then {wall:.2f} s of rounds, "
          f"{1000 * wall / args.rounds:.2f} ms a round")
    print("| loop | calls | ms | ms a round | share |")
    print("|---|---|---|---|---|")
    for name, (calls, seconds) in sorted(times.items(), key=lambda item: -item[1][1]):
        print(f"| {name} | {calls} | {1000 * seconds:.1f} | {1000 * seconds / args.rounds:.3f} | "
              f"{100 * seconds / wall:.1f}% |")
    in_loops, in_kernels = sum(seconds for _, seconds in times.values()), sum(around.values())
    own = max(0.0, in_kernels - in_loops)
    print(f"| the kernels' own Python and NumPy (cpu.py around the loops) | | {1000 * own:.1f} | "
          f"{1000 * own / args.rounds:.3f} | {100 * own / wall:.1f}% |")
    other = wall - max(in_kernels, in_loops)
    print(f"| other (growers, objectives, the boosting loop: NumPy, Python) | | {1000 * other:.1f} | "
          f"{1000 * other / args.rounds:.3f} | "
          f"{100 * other / wall:.1f}% |")
    if args.out:
        args.out.write_text(json.dumps({"setup_s": setup, "rounds_s": wall, "loops": dict(times),
                                        "args": vars(args)}, default=str, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
