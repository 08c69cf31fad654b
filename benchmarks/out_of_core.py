"""Out of core on one GPU: dgboost's pages against its in-core matrix and XGBoost's external memory.

    python benchmarks/out_of_core.py --rows 10000000 --rounds 100 --kind nvidia-h100-x1

higgs-like data (BENCHMARKS.md) on the host. dgboost's device budget,
``max_device_matrix_bytes``, is the compressed matrix's size over ``--times`` (4: the
matrix is four times the budget). Each run in its own subprocess, after a warm-up:

- dgboost in core and out of core, with ``subsample`` (0.2) gradient-based: the
  target is out of core at most 2x the in-core time, test AUC within 0.003 of the
  in-core unsampled model's;
- dgboost in core and out of core with every row (``subsample=1``): out of core
  against the PCIe floor, the bytes its pages stream per round (depth + 1 passes over
  the pages: the root's histograms, then each level's partition and the next level's
  histograms together, the last level's partition alone; each pass but the first copies
  every page but the two the last pass left on the device) over the measured pinned
  host-to-device bandwidth;
- XGBoost's ``ExtMemQuantileDMatrix`` (its cache in host memory, ``on_host=True``, all of it
  unless ``--cache-host-ratio`` says otherwise) and its in-core ``QuantileDMatrix``, with the
  same sampling.

Reported for each: training seconds (after the matrix is built; with ``--repeat N`` the median of N
trainings in the run's process, each one's too), build seconds, test
AUC, peak device memory (NVML, this process, above what was in use before). A markdown
table last; everything as JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.datasets import TASKS, load  # noqa: E402
from benchmarks.side_by_side import _PeakDeviceMemory, _environment  # noqa: E402

RUNS = ("dgboost-in-core-sampled", "dgboost-out-of-core-sampled", "dgboost-in-core", "dgboost-out-of-core",
        "xgboost-external-sampled", "xgboost-in-core-sampled", "xgboost-external")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--test-rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--subsample", type=float, default=0.2)
    parser.add_argument("--times", type=float, default=4.0, help="the compressed matrix over the device budget")
    parser.add_argument("--runs", default=",".join(RUNS), help="which runs, comma-separated")
    parser.add_argument("--cache-host-ratio", type=float, default=1.0,
                        help="XGBoost's cache_host_ratio: 1 keeps its whole cache on the host, as dgboost's pages "
                             "are (the matched comparison); -1 lets XGBoost keep what fits on the device")
    parser.add_argument("--repeat", type=int, default=1,
                        help="train each run this many times in its process (after its warm-up): train s is the median, "
                             "train_runs_s every time")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke test of the script")
    parser.add_argument("--kind", default="")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    parser.add_argument("--run", choices=RUNS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat} must be at least 1")
    if args.run:
        print(json.dumps(_run(args)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"environment": _environment(argparse.Namespace(device=args.device, kind=args.kind)),
               "config": {k: getattr(args, k) for k in ("rows", "test_rows", "rounds", "depth", "subsample", "times",
                                                   "cache_host_ratio", "repeat")},
               "h2d_gb_s": _pinned_bandwidth() / 1e9 if args.device == "cuda" else float("nan"), "runs": {}}
    for run in args.runs.split(","):
        command = [sys.executable, __file__, *(argv or sys.argv[1:]), "--run", run]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            print(completed.stderr[-3000:], file=sys.stderr)
            errors = [line for line in completed.stderr.splitlines() if "Error" in line or "error" in line]
            results["runs"][run] = {"error": (errors or completed.stderr.strip().splitlines())[-3:]}
            continue
        results["runs"][run] = json.loads(completed.stdout.strip().splitlines()[-1])
        print(run, results["runs"][run], file=sys.stderr, flush=True)
    (args.out / f"out-of-core-{args.rows}.json").write_text(json.dumps(results, indent=2))
    print(_table(args, results))
    return 0


def _params(args, run: str) -> dict:
    sampled = run.endswith("sampled")
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "max_bin": 256,
              "device": args.device, "eval_metric": "auc"}
    if sampled:
        params.update(subsample=args.subsample, sampling_method="gradient_based")
    return params


def _matrix_bytes(rows: int) -> int:
    return rows * 28  # 28 features of 8 bits: 7 words a row


def _run(args) -> dict:
    X, y, X_test, y_test = load("higgs", args.rows, args.test_rows, "cpu")
    params = _params(args, args.run)
    system = args.run.split("-")[0]
    with _PeakDeviceMemory(args.device) as memory:
        if system == "dgboost":
            timings, predictions = _dgboost(args, params, X, y, X_test)
        else:
            timings, predictions = _xgboost(args, params, X, y, X_test)
    _, auc = TASKS["higgs"][3](y_test, predictions)
    return {**timings, "auc": auc, "peak_device_mib": memory.peak_mib}


def _dgboost(args, params, X, y, X_test):
    import logging

    import dgboost

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger("dgboost").addHandler(handler)
    if "out-of-core" in args.run:
        params = {**params, "max_device_matrix_bytes": int(_matrix_bytes(len(y)) / args.times)}
    params["verbosity"] = 2
    warm = slice(0, 300_000)
    warm_params = dict(params)
    if "max_device_matrix_bytes" in params:
        warm_params["max_device_matrix_bytes"] = int(_matrix_bytes(300_000) / args.times)
    dgboost.train(warm_params, X[warm], y[warm], num_boost_round=2)

    class Clock(dgboost.callback.TrainingCallback):
        """When the rounds start (the matrix built) and end (the device done)."""

        def before_training(self, model):
            self.started = time.perf_counter()
            return model

        def after_training(self, model):
            if args.device == "cuda":
                import cupy

                cupy.cuda.Device().synchronize()
            self.finished = time.perf_counter()
            return model

    runs = []
    for _ in range(args.repeat):
        clock = Clock()
        started = time.perf_counter()
        booster = dgboost.train(params, X, y, num_boost_round=args.rounds, callbacks=[clock])
        runs.append((clock.started - started, clock.finished - clock.started, time.perf_counter() - started))
    build, _, total = runs[0]  # the rounds start once the matrix is built
    predictions = dgboost.backend.to_numpy(booster.predict(X_test))
    matrix = next((line for line in reversed(lines) if "compressed matrix" in line), None)
    return {"build_s": build, **_trained([run[1] for run in runs]), "total_s": total, "matrix": matrix,
            "budget_bytes": params.get("max_device_matrix_bytes")}, predictions


def _trained(seconds: list) -> dict:
    """train_s, the median of the runs' training seconds, and each run's."""
    return {"train_s": float(np.median(seconds)), "train_runs_s": [round(s, 3) for s in seconds]}


def _xgboost(args, params, X, y, X_test):
    import xgboost as xgb

    params = {**params, "tree_method": "hist"}
    external = "external" in args.run
    n_batches = max(2, int(round(args.times * 2)))

    class Batches(xgb.DataIter):
        def __init__(self, X, y, n_batches, directory):
            self.bounds = np.linspace(0, len(y), n_batches + 1).astype(int)
            self.X, self.y, self.index = X, y, 0
            super().__init__(cache_prefix=str(pathlib.Path(directory) / "xgb"), on_host=True)

        def next(self, input_data):
            if self.index == len(self.bounds) - 1:
                return False
            rows = slice(self.bounds[self.index], self.bounds[self.index + 1])
            X, y = self.X[rows], self.y[rows]
            if args.device == "cuda":  # the pages are then built on the device, as XGBoost's examples do
                import cupy

                X, y = cupy.asarray(X), cupy.asarray(y)
            input_data(data=X, label=y)
            self.index += 1
            return True

        def reset(self):
            self.index = 0

    with tempfile.TemporaryDirectory() as directory:
        def matrix(X, y):
            if external:
                ratio = {} if args.cache_host_ratio < 0 or args.device != "cuda" else \
                    {"cache_host_ratio": args.cache_host_ratio}  # a GPU's option: XGBoost refuses it on a CPU
                return xgb.ExtMemQuantileDMatrix(Batches(X, y, n_batches, directory), max_bin=256, **ratio)
            return xgb.QuantileDMatrix(X, y, max_bin=256)

        xgb.train(params, matrix(X[:300_000], y[:300_000]), 2)
        started = time.perf_counter()
        dtrain = matrix(X, y)
        build = time.perf_counter() - started
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            booster = xgb.train(params, dtrain, args.rounds)
            seconds.append(time.perf_counter() - started)
        predictions = booster.inplace_predict(X_test)
    return {"build_s": build, **_trained(seconds), "batches": n_batches if external else None}, np.asarray(predictions)


def _pinned_bandwidth() -> float:
    """Pinned host-to-device bytes a second, best of five copies of 512 MiB."""
    import cupy
    import cupyx

    host = cupyx.empty_pinned(1 << 29, np.uint8)
    host[:] = 1
    device = cupy.empty(1 << 29, np.uint8)
    best = np.inf
    for _ in range(5):
        start = time.perf_counter()
        device.set(host)
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - start)
    return (1 << 29) / best


def _table(args, results) -> str:
    runs = results["runs"]
    bandwidth = results["h2d_gb_s"] * 1e9
    # Every row: the root's histograms, then per level its partition and the next level's histograms in
    # one pass, the last level's partition alone: depth + 1 passes over the pages a tree, each starting
    # with the two pages (of at most half the budget) the last one left on the device.
    page_bytes = int(_matrix_bytes(args.rows) / args.times) // (2 * 28) * 28
    streamed = (args.depth + 1) * max(_matrix_bytes(args.rows) - 2 * page_bytes, 0)
    floor = args.rounds * streamed / bandwidth
    lines = [f"higgs-like {args.rows} rows, {args.rounds} rounds, depth {args.depth}; matrix "
             f"{_matrix_bytes(args.rows) / 2**30:.2f} GiB = {args.times:g}x dgboost's budget; pinned H2D "
             f"{results['h2d_gb_s']:.1f} GB/s", "",
             "| run | build s | train s | test AUC | peak device MiB |", "|---|---|---|---|---|"]
    for name, run in runs.items():
        if "error" in run:
            lines.append(f"| {name} | error: {run['error']} | | | |")
            continue
        lines.append(f"| {name} | {run['build_s']:.2f} | {run['train_s']:.2f} | {run['auc']:.4f} | "
                     f"{run['peak_device_mib'] or 0:.0f} |")
    ratio = lambda a, b: (runs[a]["train_s"] / runs[b]["train_s"]  # noqa: E731
                          if "train_s" in runs.get(a, {}) and "train_s" in runs.get(b, {}) else float("nan"))
    lines += ["", f"out of core / in core, sampled: {ratio('dgboost-out-of-core-sampled', 'dgboost-in-core-sampled'):.2f}x "
              "(target <= 2)",
              f"dgboost / XGBoost external memory, sampled: "
              f"{ratio('dgboost-out-of-core-sampled', 'xgboost-external-sampled'):.2f}x",
              f"every row out of core: floor {floor:.2f} s ({streamed / 2**30:.2f} GiB streamed a round); "
              f"train / floor {runs.get('dgboost-out-of-core', {}).get('train_s', float('nan')) / floor:.2f}"]
    sampled, whole = runs.get("dgboost-out-of-core-sampled", {}), runs.get("dgboost-in-core", {})
    if "auc" in sampled and "auc" in whole:
        lines.append(f"AUC, out of core sampled - in core unsampled: {sampled['auc'] - whole['auc']:+.4f} "
                     "(target within 0.003)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
