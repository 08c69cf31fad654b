"""dgboost and XGBoost (or CatBoost) side by side on one machine, same data, same parameters.

    python benchmarks/side_by_side.py --dataset higgs --rows 200000 --rounds 100 --depth 6 --device cpu

Each system runs in its own subprocess (so its peak memory is its own) and
reports, as ../shared/BENCHMARKS.md asks: data-load time, matrix-build time,
training time (after a warm-up run on a slice), prediction time, the test
metric, peak memory. The parent prints the environment, a markdown table with
the dgboost / XGBoost ratios, and the bandwidth floor of the run, and writes
everything as JSON to --out.

How each phase is timed:
- dgboost: matrix build = ``train(num_boost_round=0)`` (cuts, compression,
  intercept); training = ``train(rounds)`` minus that build time.
- XGBoost: matrix build = ``QuantileDMatrix`` construction; training = ``xgb.train``.
- CatBoost (``--peer catboost``): matrix build = ``Pool`` construction (its quantisation
  happens in ``fit``); training = ``fit``.

``--param KEY=VALUE`` gives both systems a parameter (CatBoost takes none of them: it grows
its own symmetric trees at the run's depth, learning rate and rounds).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.datasets import QUERY_SETS, SPARSE, TASKS, load_with_queries  # noqa: E402
from dgboost.backend import to_numpy  # noqa: E402


#: Rows of the warm-up run (both systems): past dgboost's cut sample size (2**18
#: rows) and its reductions' row chunks (2**21), so that the warm-up takes every
#: path of the timed run and the timings hold no kernel compilation.
_WARM_UP_ROWS = 2_500_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(TASKS), default="higgs")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--eta", type=float, default=0.1)
    parser.add_argument("--max-bin", type=int, default=256)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--nthread", type=int, default=0, help="CPU threads of both systems (0: every core)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a training parameter for both systems (VALUE read as JSON, else a string), "
                             "e.g. --param subsample=0.2 --param sampling_method=gradient_based")
    parser.add_argument("--kind", default="", help="the machine kind, for the record (the table also "
                        "names the GPU nvidia-smi reports)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    parser.add_argument("--peer", choices=("xgboost", "catboost"), default="xgboost",
                        help="the system dgboost runs beside: XGBoost's hist, or CatBoost (its symmetric trees, "
                             "128 borders, its own defaults otherwise; compare with --param grow_policy=symmetric)")
    parser.add_argument("--system", choices=("dgboost", "xgboost", "catboost"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.system:
        print(json.dumps(_run_system(args)))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = {"environment": _environment(args), "config": _config(args), "systems": {}}
    for system in ("dgboost", args.peer):
        command = [sys.executable, __file__, *(argv or sys.argv[1:]), "--system", system]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            print(completed.stderr, file=sys.stderr)
            results["systems"][system] = {"error": completed.stderr.strip().splitlines()[-1:]}
            continue
        results["systems"][system] = json.loads(completed.stdout.strip().splitlines()[-1])
    results["floor"] = _floor(args, results)
    name = f"{args.dataset}-{args.rows}-{args.device}.json"
    (args.out / name).write_text(json.dumps(results, indent=2))
    print(_table(results))
    return 0


def _config(args):
    return {**{k: getattr(args, k) for k in ("dataset", "rows", "test_rows", "rounds", "depth", "eta",
                                             "max_bin", "device", "nthread", "kind", "peer")}, **_extra_params(args)}


def _extra_params(args) -> dict:
    """The --param KEY=VALUE pairs, each VALUE read as JSON where it parses, else a string."""
    extra = {}
    for pair in args.param:
        key, _, value = pair.partition("=")
        try:
            extra[key] = json.loads(value)
        except ValueError:
            extra[key] = value
    return extra


def _params(args):
    objective, extra, _, _ = TASKS[args.dataset]
    threads = {"nthread": args.nthread} if args.nthread > 0 else {}
    return {"objective": objective, "max_depth": args.depth, "eta": args.eta, "max_bin": args.max_bin,
            **threads, **extra, **_extra_params(args)}


def _run_system(args) -> dict:
    started = time.perf_counter()
    X, y, X_test, y_test, qid, qid_test = load_with_queries(args.dataset, args.rows, args.test_rows, args.device)
    load_seconds = time.perf_counter() - started
    params = _params(args)
    with _PeakDeviceMemory(args.device) as device_memory:
        if args.system == "dgboost":
            timings, predictions = _dgboost(params, args, X, y, X_test, qid)
        elif args.system == "catboost":
            timings, predictions = _catboost(params, args, to_numpy(X), to_numpy(y), to_numpy(X_test))
        else:
            timings, predictions = _xgboost(params, args, X, y, X_test, qid)
    queries = (qid_test,) if args.dataset in QUERY_SETS else ()
    metric_name, metric = TASKS[args.dataset][3](y_test, predictions, *queries)
    return {"load_s": load_seconds, **timings, "metric": metric_name, "value": metric,
            "peak_host_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_device_mib": device_memory.peak_mib}


def _dgboost(params, args, X, y, X_test, qid=None):
    import logging

    import dgboost

    matrices = _Lines()  # the compressed matrix each train reports (layout, bytes a row)
    logging.getLogger("dgboost").addHandler(matrices)
    params = {**params, "device": args.device, "verbosity": 2}
    warm = slice(0, min(len(y), _WARM_UP_ROWS))
    queries = (lambda rows: {}) if qid is None else (lambda rows: {"qid": qid[rows]})  # noqa: E731
    dgboost.train(params, X[warm], y[warm], num_boost_round=2, **queries(warm)).predict(X[warm])  # warm-up: kernels
    if args.device == "cpu":  # with numba's cache cold, the kernels' parallel drivers are still compiling
        from dgboost.kernels.drivers import background_compiles_done

        background_compiles_done()
    started = time.perf_counter()
    dgboost.train(params, X, y, num_boost_round=0, **queries(slice(None)))
    build = time.perf_counter() - started
    started = time.perf_counter()
    booster = dgboost.train(params, X, y, num_boost_round=args.rounds, **queries(slice(None)))
    total = time.perf_counter() - started
    predictions, predict = _timed(args.device, booster.predict, X_test)
    _, predict_train = _timed(args.device, booster.predict, X)
    return ({"build_s": build, "train_s": total - build, "predict_s": predict, "predict_train_s": predict_train,
             "matrix": next((line for line in reversed(matrices.lines) if "compressed matrix" in line), None)},
            to_numpy(predictions))


class _Lines:
    """A logging handler keeping each message."""

    level = 0

    def __init__(self):
        self.lines = []

    def handle(self, record):
        self.lines.append(record.getMessage())


def _xgboost(params, args, X, y, X_test, qid=None):
    import xgboost as xgb

    params = {**params, "device": args.device, "tree_method": "hist"}
    # Categorical columns (feature_types) are the DMatrix's to know, as XGBoost takes them.
    kinds = {key: params.pop(key) for key in ("feature_types", "enable_categorical") if key in params}
    matrix_of = functools.partial(xgb.QuantileDMatrix, max_bin=args.max_bin, nthread=args.nthread or None, **kinds)
    queries = (lambda rows: {}) if qid is None else (lambda rows: {"qid": qid[rows]})  # noqa: E731
    warm = slice(0, min(len(y), _WARM_UP_ROWS))
    xgb.train(params, matrix_of(X[warm], y[warm], **queries(warm)), 2).inplace_predict(X[warm])
    started = time.perf_counter()
    matrix = matrix_of(X, y, **queries(slice(None)))
    build = time.perf_counter() - started
    started = time.perf_counter()
    booster = xgb.train(params, matrix, args.rounds)
    train = time.perf_counter() - started
    predictions, predict = _timed(args.device, booster.inplace_predict, X_test)
    _, predict_train = _timed(args.device, booster.inplace_predict, X)
    return ({"build_s": build, "train_s": train, "predict_s": predict, "predict_train_s": predict_train},
            to_numpy(predictions))


def _catboost_frame(X, categorical):
    """X as a pandas frame whose ``categorical`` columns hold integer codes, -1 for missing."""
    import pandas as pd

    frame = pd.DataFrame(X)
    for column in categorical:
        frame[column] = np.nan_to_num(X[:, column], nan=-1.0).astype(np.int64)
    return frame


def _catboost(params, args, X, y, X_test):
    """CatBoost (symmetric trees) at the same depth, learning rate and rounds, 128 borders (its
    GPU default), on the GPU for --device cuda; its data from the host, as it takes it."""
    import catboost

    objective = params["objective"]
    loss = {"binary:logistic": "Logloss", "reg:squarederror": "RMSE"}.get(objective, "MultiClass")
    options = {"depth": args.depth, "learning_rate": args.eta, "iterations": args.rounds, "border_count": 128,
               "loss_function": loss, "verbose": False, "allow_writing_files": False,
               "task_type": "GPU" if args.device == "cuda" else "CPU"}
    if args.nthread > 0:
        options["thread_count"] = args.nthread
    model_class = catboost.CatBoostRegressor if loss == "RMSE" else catboost.CatBoostClassifier
    categorical = [i for i, kind in enumerate(params.get("feature_types") or ()) if kind == "c"]
    if categorical:  # CatBoost's cat_features: integer columns (a missing code as its own category, -1)
        X, X_test = _catboost_frame(X, categorical), _catboost_frame(X_test, categorical)
        options["cat_features"] = categorical
    warm = slice(0, min(len(y), _WARM_UP_ROWS))
    model_class(**{**options, "iterations": 2}).fit(X[warm], y[warm])
    started = time.perf_counter()
    pool = catboost.Pool(X, y, cat_features=categorical or None)
    build = time.perf_counter() - started
    started = time.perf_counter()
    model = model_class(**options).fit(pool)
    train = time.perf_counter() - started

    def predict(rows):
        return model.predict(rows) if loss == "RMSE" else model.predict_proba(rows)[:, 1] if loss == "Logloss" \
            else model.predict_proba(rows)

    predictions, predict_s = _timed("cpu", predict, X_test)
    _, predict_train = _timed("cpu", predict, X)
    return {"build_s": build, "train_s": train, "predict_s": predict_s, "predict_train_s": predict_train}, predictions


def _timed(device, function, *args):
    """(function(*args), seconds until the device has finished it)."""
    started = time.perf_counter()
    result = function(*args)
    _synchronise(device)
    return result, time.perf_counter() - started


def _synchronise(device):
    if device == "cuda":
        import cupy

        cupy.cuda.Device().synchronize()


class _PeakDeviceMemory:
    """Peak GPU memory in use by this process's device, sampled through NVML every 5 ms."""

    def __init__(self, device):
        self.device = device
        self.peak_mib = None

    def __enter__(self):
        if self.device != "cuda":
            return self
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        baseline = pynvml.nvmlDeviceGetMemoryInfo(handle).used
        self._stop = threading.Event()

        def sample():
            peak = 0
            while not self._stop.is_set():
                peak = max(peak, pynvml.nvmlDeviceGetMemoryInfo(handle).used - baseline)
                time.sleep(0.005)
            self.peak_mib = peak / 2**20

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device == "cuda":
            self._stop.set()
            self._thread.join()


def _environment(args) -> dict:
    environment = {"python": platform.python_version(), "machine": platform.machine(),
                   "cpus": os.cpu_count(), "kind": args.kind, "numpy": np.__version__}
    for name in ("dgboost", "xgboost", "catboost", "cupy"):
        try:
            environment[name] = __import__(name).__version__
        except ImportError:
            environment[name] = None
    if args.device == "cuda":
        environment["gpus"] = _command(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
        environment["topology"] = _command(["nvidia-smi", "topo", "-m"])
    return environment


def _command(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        return f"unavailable: {error}"


def _floor(args, results) -> dict:
    """Seconds of memory traffic a training run cannot avoid, at the measured copy bandwidth.

    Per tree: the compressed matrix and the fixed-point gradient pairs (16 bytes) are read
    for every row at the root and for about half the rows (the smaller children) at each
    deeper level; positions are read and written (8 bytes a row) at every level; margins,
    labels and gradients are touched once (16 bytes a row).
    """
    _, extra, n_features, _ = TASKS[args.dataset]
    if args.dataset in SPARSE or args.dataset == "bosch":  # a dense matrix's bytes do not apply
        return {"floor_s": None}
    trees = args.rounds * extra.get("num_class", 1)
    bytes_per_row = _packed_bytes_per_row(n_features, args.max_bin)
    built_rows = args.rows * (1 + (args.depth - 1) / 2)
    per_tree = built_rows * (bytes_per_row + 16) + args.rows * (8 * args.depth + 16)
    bandwidth = _copy_bandwidth(args.device)
    seconds = trees * per_tree / bandwidth
    train = results["systems"].get("dgboost", {}).get("train_s")
    return {"bytes_per_tree": per_tree, "copy_bandwidth_gb_s": bandwidth / 1e9, "floor_s": seconds,
            "dgboost_train_over_floor": None if train is None else train / seconds}


def _packed_bytes_per_row(n_features: int, max_bin: int) -> int:
    bits = max(1, int(np.ceil(np.log2(max_bin))))
    per_word = 32 // bits
    return 4 * -(-n_features // per_word)


def _copy_bandwidth(device) -> float:
    """Bytes read plus written per second by a large array copy, best of five."""
    if device == "cuda":
        import cupy as xp
    else:
        xp = np
    source = xp.ones(1 << 27, dtype=np.float32)  # 512 MiB
    target = xp.empty_like(source)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        xp.copyto(target, source)
        if device == "cuda":
            xp.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * source.nbytes / best


def _table(results) -> str:
    systems = results["systems"]
    peer = results["config"].get("peer", "xgboost")
    ours, theirs = systems.get("dgboost", {}), systems.get(peer, {})
    name = {"xgboost": "XGBoost", "catboost": "CatBoost"}[peer]
    rows = [("data load (s)", "load_s"), ("matrix build (s)", "build_s"), ("training (s)", "train_s"),
            ("prediction (s)", "predict_s"), ("prediction of the training rows (s)", "predict_train_s"),
            (f"test {ours.get('metric', 'metric')}", "value"),
            ("peak host RSS (MiB)", "peak_host_rss_mib"), ("peak device memory (MiB)", "peak_device_mib")]
    lines = [f"| | dgboost | {name} | dgboost / {name} |", "|---|---|---|---|"]
    for label, key in rows:
        a, b = ours.get(key), theirs.get(key)
        ratio = f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) and b else "-"
        if key == "value" and isinstance(a, float) and isinstance(b, float):
            ratio = f"difference {a - b:+.4f}"
        lines.append(f"| {label} | {_show(a)} | {_show(b)} | {ratio} |")
    floor = results["floor"]
    if ours.get("matrix"):
        lines.append(f"\ndgboost's {ours['matrix']}")
    if floor["floor_s"] is not None:
        lines.append(f"\nbandwidth floor: {floor['floor_s']:.3f} s of training at "
                     f"{floor['copy_bandwidth_gb_s']:.0f} GB/s copy bandwidth; dgboost's training time is "
                     f"{_show(floor['dgboost_train_over_floor'])} x the floor")
    config = results["config"]
    seen = results["environment"].get("gpus") or f"{results['environment']['cpus']} CPU cores"
    lines.insert(0, f"{config['dataset']}: {config['rows']} rows, {config['rounds']} rounds, depth "
                    f"{config['depth']}, eta {config['eta']}, max_bin {config['max_bin']}, "
                    f"nthread {config.get('nthread') or 'all'}, on "
                    f"{config['device']} ({seen}; kind given: {config['kind'] or 'none'})\n")
    return "\n".join(lines)


def _show(value):
    """A table cell: four decimals below 10, one above, as-is for anything else."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return str(value)

if __name__ == "__main__":
    sys.exit(main())
