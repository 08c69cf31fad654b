"""What a fresh process pays on its first train and first predict, against the next call.

Each scenario runs in a new Python process, first with empty kernel caches
(``CUPY_CACHE_DIR`` and ``NUMBA_CACHE_DIR`` a new folder: every CUDA kernel
compiled by NVRTC, every CPU loop by numba) and then again with the caches
filled (the state of any later process on the machine). Python's own bytecode
is written first, by a run of the scenario with throwaway kernel caches, so the
cold process finds it as a pip-installed machine has it (pip compiles it at
install); ``--cold-bytecode`` leaves it out, and the cold process then also
compiles every module it imports (numba's some 5 s on 2 cores). A call's cost is
timed with the device synchronised before and after; "added" is the first
call less the same call repeated. On the CPU with a cold cache the loops'
parallel drivers compile in the background while the first call runs their
work on host threads; the time they take after the first call is reported
apart ("then compiling in the background"), and the repeat waits for them.

Scenarios (``--scenario``):

- ``train``: train on rows x features for ``--rounds`` rounds, twice;
- ``grow``: a small train first (``--warmup-rows``), then the set-up alone
  (cuts and the compressed matrix: ``num_boost_round=0``) on the full rows,
  twice: a cost that depends on the data's size shows here;
- ``predict``: train ``--trees`` rounds on ``--predict-train-rows`` rows, then
  predict ``--predict-rows`` rows, twice;
- ``serve``: a new process loads that model from its file and predicts, twice.

With ``--profile`` each first call also records cProfile's top functions, the
kernels NVRTC compiled and the page-locked allocations made, to show where the
time goes. Not a comparison with a peer: a measure of dgboost against itself.

    python benchmarks/first_call.py --device cuda --out first-call
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIOS = ("train", "grow", "predict", "serve")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the 'train' scenario")
    parser.add_argument("--warmup-rows", type=int, default=300_000)
    parser.add_argument("--trees", type=int, default=500, help="rounds of the model the 'predict' scenario uses")
    parser.add_argument("--predict-train-rows", type=int, default=200_000)
    parser.add_argument("--predict-rows", type=int, default=1000)
    parser.add_argument("--scenario", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--nthread", type=int, default=0, help="dgboost's nthread (0: every core)")
    parser.add_argument("--profile", action="store_true", help="record where each first call's time goes")
    parser.add_argument("--repeat", type=int, default=1, help="processes with a warm cache, each scenario")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="folder for first_call.json")
    parser.add_argument("--cold-bytecode", action="store_true",
                        help="the cold process also compiles Python's bytecode (site-packages without it)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_run_child(args)))
        return 0
    if "serve" in args.scenario and "predict" not in args.scenario[:args.scenario.index("serve")]:
        parser.error("--scenario serve loads the model that 'predict' saves: name predict before it")

    results = {}
    with tempfile.TemporaryDirectory(prefix="dgboost-cupy-cache-") as cache, \
            tempfile.TemporaryDirectory(prefix="dgboost-pycache-") as bytecode:
        args.model = str(pathlib.Path(bytecode) / "model.json")  # written by 'predict', read by 'serve'
        for scenario in args.scenario:
            if not args.cold_bytecode:
                with tempfile.TemporaryDirectory(prefix="dgboost-throwaway-cache-") as throwaway:
                    _spawn(args, scenario, throwaway, bytecode)  # writes the bytecode the cold run finds
            shutil.rmtree(cache)  # each scenario starts from empty caches
            os.mkdir(cache)
            results[f"{scenario}/cold"] = _spawn(args, scenario, cache, bytecode)
            for run in range(args.repeat):
                results[f"{scenario}/warm" + (f"{run + 1}" if args.repeat > 1 else "")] = \
                    _spawn(args, scenario, cache, bytecode)
    _print_table(results)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first_call.json").write_text(json.dumps(results, indent=2))
    return 0


def _spawn(args, scenario: str, cache: str, bytecode: str) -> dict:
    """One scenario in a new process. Python's bytecode goes to a folder of this run's, so
    that a warm process reads it as one on an installed machine does, even where
    site-packages is read-only (as on the device machines, where every process
    would otherwise compile the modules it imports afresh)."""
    command = [sys.executable, __file__, *_own_options(args), "--child", scenario]
    environment = dict(os.environ, CUPY_CACHE_DIR=cache, NUMBA_CACHE_DIR=cache, PYTHONPYCACHEPREFIX=bytecode)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{scenario} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = round(time.perf_counter() - started, 3)
    return result


def _own_options(args) -> list[str]:
    return ["--device", args.device, "--rows", str(args.rows), "--features", str(args.features),
            "--rounds", str(args.rounds), "--warmup-rows", str(args.warmup_rows), "--trees", str(args.trees),
            "--predict-train-rows", str(args.predict_train_rows), "--predict-rows", str(args.predict_rows),
            "--nthread", str(args.nthread), "--model", args.model, *(["--profile"] if args.profile else [])]


# ---- in the child process ---------------------------------------------------------------------

def _run_child(args) -> dict:
    started = time.perf_counter()
    import numpy as np

    import dgboost

    result = {"import_seconds": round(time.perf_counter() - started, 3)}
    probe = _Probe(args.device, args.profile)
    result["context_seconds"] = probe.timed(probe.start_device)
    result["cupyx_import_seconds"] = probe.timed(probe.import_cupyx)
    rng = np.random.default_rng(0)

    def data(n):
        X = rng.standard_normal((n, args.features), dtype=np.float32)
        y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.float32)
        return X, y

    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.1, "device": args.device,
              **({"nthread": args.nthread} if args.nthread > 0 else {})}
    if args.child == "train":
        X, y = data(args.rows)
        call = lambda: dgboost.train(params, X, y, num_boost_round=args.rounds)  # noqa: E731
        result.update(probe.first_and_again("train", call))
    elif args.child == "grow":
        X_small, y_small = data(args.warmup_rows)
        result["warmup_seconds"] = probe.timed(lambda: dgboost.train(params, X_small, y_small, num_boost_round=10))
        X, y = data(args.rows)
        result.update(probe.first_and_again("setup", lambda: dgboost.train(params, X, y, num_boost_round=0)))
    elif args.child == "predict":
        X, y = data(args.predict_train_rows)
        booster = dgboost.train(params, X, y, num_boost_round=args.trees)
        booster.save_model(args.model)
        result.update(probe.first_and_again("predict", lambda: booster.predict(_rows(probe, X, args))))
    else:  # serve: a new process loads the model and predicts
        X, _ = data(args.predict_train_rows)
        rows = _rows(probe, X, args)
        loaded = dgboost.Booster.load_model(args.model)
        result.update(probe.first_and_again("serve", lambda: loaded.predict(rows)))
    return result


def _background_compiles() -> None:
    """Wait for the CPU loops' drivers that the first call sent to be compiled in the background
    (a cold cache; the first call ran their runs on host threads meanwhile), so that "again"
    is the call with everything compiled."""
    from dgboost.kernels import drivers

    if not drivers.background_compiles_done(timeout=600):
        raise RuntimeError("the drivers compiling in the background took over 600 s")


def _rows(probe, X, args):
    """The rows to predict, on the device for a GPU run (predicted there)."""
    rows = X[:args.predict_rows]
    if probe.gpu:
        import cupy

        rows = cupy.asarray(rows)
    return rows


class _Probe:
    """Times calls with the device synchronised; with ``profile``, records what a first call did."""

    def __init__(self, device: str, profile: bool):
        self.gpu = device.startswith("cuda")
        self.profile = profile
        self.compiled: list = []
        self.pinned: list = []
        self.imports: list = []

    def start_device(self):
        if self.gpu:
            import cupy

            cupy.zeros(1).sum()
            if self.profile:
                self._watch_cupy(cupy)

    def import_cupyx(self):
        """What CuPy imports at a program's first operation between an array and a scalar
        (its ``__array_ufunc__`` imports ``cupyx.scipy.special``, and with it SciPy): a
        cost of any CuPy program, timed apart from dgboost's first calls."""
        if self.gpu:
            import cupyx.scipy.special  # noqa: F401

    def sync(self):
        if self.gpu:
            import cupy

            cupy.cuda.Device().synchronize()

    def timed(self, call) -> float:
        self.sync()
        started = time.perf_counter()
        call()
        self.sync()
        return round(time.perf_counter() - started, 4)

    def first_and_again(self, name: str, call) -> dict:
        calls = [call, call]
        if self.profile:
            import cProfile

            self.compiled.clear()
            self.pinned.clear()
            self.imports.clear()
            profiles = [cProfile.Profile(), cProfile.Profile()]
            calls = [lambda profile=profile: profile.runcall(call) for profile in profiles]
        first = self.timed(calls[0])
        background = self.timed(_background_compiles)
        again = self.timed(calls[1])
        timings = {f"{name}_first": first, f"{name}_again": again, f"{name}_added": round(first - again, 4),
                   f"{name}_background": background}
        if not self.profile:
            return timings
        import pstats

        return {**timings, f"{name}_extra": _extra_time(*(pstats.Stats(p).stats for p in profiles)),
                f"{name}_compiled": list(self.compiled), f"{name}_pinned": list(self.pinned),
                f"{name}_imports": list(self.imports)}

    def _watch_cupy(self, cupy):
        """Note every NVRTC compile (kernel name, seconds) and page-locked allocation (bytes, seconds)."""
        from cupy.cuda import compiler

        compile_source = compiler._compile_using_nvrtc_no_warning  # what a kernel-cache miss calls

        def noted_compile(source, *a, **k):
            started = time.perf_counter()
            out = compile_source(source, *a, **k)
            head = next((line for line in source.splitlines() if "__global__" in line), source[:60])
            self.compiled.append([head.strip()[:100], round(time.perf_counter() - started, 4)])
            return out

        compiler._compile_using_nvrtc_no_warning = noted_compile
        pool = cupy.get_default_pinned_memory_pool()

        def noted_pinned(size):
            started = time.perf_counter()
            memory = pool.malloc(size)
            seconds = time.perf_counter() - started
            if size >= 1 << 20:
                self.pinned.append([int(size), round(seconds, 4)])
            return memory

        cupy.cuda.set_pinned_memory_allocator(noted_pinned)
        sys.meta_path.insert(0, _ImportWatch(self.imports))


class _ImportWatch:
    """Notes who first imports a cupy submodule during a call (an import can cost more than the work)."""

    def __init__(self, seen: list):
        self.seen = seen

    def find_spec(self, name, path=None, target=None):
        if name.startswith(("cupyx", "cupy.")) and name.count(".") <= 1:
            import traceback

            caller = [line.strip() for line in traceback.format_stack(limit=12)[:-1] if "importlib" not in line]
            self.seen.append([name, caller[-6:]])
        return None


def _extra_time(first: dict, again: dict, top: int = 20) -> list:
    """The functions whose own time the first call spent beyond the repeated call's:
    [[seconds more, calls first, calls again, 'file:line(function)']], most first."""
    rows = []
    for key, (_, calls, own, _, _) in first.items():
        _, calls_again, own_again, _, _ = again.get(key, (0, 0, 0.0, 0.0, {}))
        where = f"{pathlib.Path(key[0]).name}:{key[1]}({key[2]})"
        rows.append([round(own - own_again, 4), calls, calls_again, where])
    return sorted(rows, reverse=True)[:top]


def _print_table(results: dict) -> None:
    """Every process's figures, then the median "added" of each scenario's warm processes."""
    print("| scenario | cache | first | then compiling in the background | again | added |")
    print("|---|---|---|---|---|---|")
    for key, result in results.items():
        print(f"| {key}: import dgboost / CUDA context / CuPy's cupyx import | | {result['import_seconds']:.3f} s / "
              f"{result['context_seconds']:.3f} s / {result['cupyx_import_seconds']:.3f} s | | | |")
    for key, result in results.items():
        scenario, cache = key.split("/")
        for name in ("train", "setup", "predict", "serve"):
            if f"{name}_first" in result:
                print(f"| {scenario}: {name} | {cache} | {result[f'{name}_first']:.4f} s | "
                      f"{result[f'{name}_background']:.4f} s | {result[f'{name}_again']:.4f} s | "
                      f"{result[f'{name}_added']:.4f} s |")
    warm = {}
    for key, result in results.items():
        scenario, cache = key.split("/")
        for name in ("train", "setup", "predict", "serve"):
            if cache.startswith("warm") and f"{name}_added" in result:
                warm.setdefault(f"{scenario}: {name}", []).append(result[f"{name}_added"])
    for name, added in warm.items():
        print(f"| {name} | warm, median of {len(added)} | | | | {statistics.median(added):.4f} s |")


if __name__ == "__main__":
    sys.exit(main())
