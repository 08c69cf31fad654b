"""dgboost.dask and xgboost.dask side by side on 1, 2, 4 ... workers of one machine.

    python benchmarks/dask_scaling.py --rows 10000000 --rounds 500 --workers 1 2 4 --device cuda
    python benchmarks/dask_scaling.py --rows 200000 --rounds 20 --workers 1 2 --device cpu   # a smoke run

For each worker count: a fresh cluster (dask-cuda ``LocalCUDACluster`` on the
first N GPUs, or a CPU ``LocalCluster`` of N processes); the Higgs-like data
generated on the workers in ``--chunks`` blocks, each from its own seed, so
every worker count trains on the same rows; both systems warmed up on a slice
(kernel compilation stays out of the timings); then each system's job timed
from the dask collections to a trained model: dgboost.dask.train (which builds
its matrix inside), and xgboost.dask's DaskQuantileDMatrix plus train. On GPUs
dgboost's timed job reuses the NCCL communicator its warm-up made (as every job
after a cluster's first does); ``--fresh-nccl`` makes every job start its own.
Test AUC on held-out rows predicted in the client. Prints a markdown table with
each system's speed-up over its own one-worker run and writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import dgboost  # noqa: E402
from dgboost.datasets import make_higgs_like  # noqa: E402

_N_FEATURES = 28
#: Rows of the warm-up job (both systems): past dgboost's cut sample size (2**18 rows).
_WARM_UP_ROWS = 1_000_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--eta", type=float, default=0.1)
    parser.add_argument("--max-bin", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--chunks", type=int, default=16, help="blocks the data is generated in")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--systems", nargs="+", choices=("dgboost", "xgboost"), default=["dgboost", "xgboost"])
    parser.add_argument("--fresh-nccl", action="store_true",
                        help="dask config dgboost.keep-nccl=False: every dgboost job starts NCCL afresh, as the "
                             "first job on a cluster does (by default the timed job reuses the warm-up's)")
    parser.add_argument("--kind", default="", help="the machine kind, for the record")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    X_test, y_test = make_higgs_like(args.test_rows, seed=10_000)
    runs = []
    for n in args.workers:
        runs.append(_run_cluster(args, n, X_test, y_test))
        print(json.dumps(runs[-1]), flush=True)
    results = {"environment": _environment(args), "config": vars(args) | {"out": str(args.out)}, "runs": runs}
    name = f"dask-scaling-{args.rows}-{args.device}.json"
    (args.out / name).write_text(json.dumps(results, indent=2))
    print(_table(results))
    return 0


def _cluster(args, n: int):
    from dgboost.dask import local_cluster

    kwargs = {} if args.device == "cuda" else {"threads_per_worker": 1}
    return local_cluster(args.device, n, **kwargs)


def _block(index: int, rows: int, device: str):
    """Block ``index`` of the data, from its own seed: X and y side by side (28 + 1 columns)."""
    X, y = make_higgs_like(rows, seed=1 + index)
    block = np.concatenate([X, y[:, None]], axis=1)
    if device == "cuda":
        import cupy

        return cupy.asarray(block)
    return block


def _data(args, client):
    """X and y generated on the workers (one task a block) and persisted there."""
    import dask
    import dask.array as da
    from distributed import wait

    meta = np.empty((0, 0), np.float32)
    if args.device == "cuda":
        import cupy

        meta = cupy.empty((0, 0), np.float32)
    sizes = [len(part) for part in np.array_split(np.arange(args.rows), args.chunks)]
    whole = da.concatenate([da.from_delayed(dask.delayed(_block)(i, rows, args.device), shape=(rows, _N_FEATURES + 1),
                                            dtype=np.float32, meta=meta) for i, rows in enumerate(sizes)])
    X, y = client.persist([whole[:, :_N_FEATURES], whole[:, _N_FEATURES]])
    wait([X, y])
    return X, y


def _run_cluster(args, n: int, X_test, y_test) -> dict:
    from distributed import Client

    started = time.perf_counter()
    with _cluster(args, n) as cluster, Client(cluster) as client:
        client.wait_for_workers(n)
        cluster_seconds = time.perf_counter() - started
        made = time.perf_counter()
        X, y = _data(args, client)
        data_seconds = time.perf_counter() - made
        warm = min(_WARM_UP_ROWS, args.rows)
        record = {"workers": n, "cluster_s": round(cluster_seconds, 2), "data_s": round(data_seconds, 2)}
        for system in args.systems:
            run = _RUNS[system]
            run(args, client, X[:warm], y[:warm], 2)  # warm-up: kernels compiled, pools filled
            began = time.perf_counter()
            run(args, client, X, y, 0)  # the job without rounds: data to workers, matrix, communicators
            build_seconds = time.perf_counter() - began
            began = time.perf_counter()
            model = run(args, client, X, y, args.rounds)
            seconds = time.perf_counter() - began
            record[system] = {"train_s": round(seconds, 3), "zero_rounds_s": round(build_seconds, 3),
                              "auc": _auc(system, model, X_test, y_test, args)}
    return record


def _params(args) -> dict:
    return {"objective": "binary:logistic", "eta": args.eta, "max_depth": args.depth, "max_bin": args.max_bin,
            "device": args.device}


def _run_dgboost(args, client, X, y, rounds):
    import dask

    import dgboost.dask

    with dask.config.set({"dgboost.keep-nccl": not args.fresh_nccl}):
        return dgboost.dask.train(client, _params(args) | {"verbosity": 2}, X, y, num_boost_round=rounds)


def _run_xgboost(args, client, X, y, rounds):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, loaded by name

    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=args.max_bin)
    return xgb.dask.train(client, _params(args) | {"tree_method": "hist"}, dtrain,
                          num_boost_round=rounds)["booster"]


_RUNS = {"dgboost": _run_dgboost, "xgboost": _run_xgboost}


def _auc(system: str, model, X_test, y_test, args) -> float:
    from dgboost.backend import to_numpy
    from dgboost.collective import LocalCommunicator
    from dgboost.objectives.metrics import make_metric
    from dgboost.params import TrainParams

    X = X_test
    if args.device == "cuda":
        import cupy

        X = cupy.asarray(X_test)
    if system == "dgboost":
        predicted = model.predict(X)
    else:
        model.set_param({"device": args.device})
        predicted = model.inplace_predict(X)
    auc = make_metric("auc", TrainParams.from_dict({}))
    return round(float(auc(y_test, to_numpy(predicted).astype(np.float32), None, LocalCommunicator())), 5)


def _environment(args) -> dict:
    environment = {"python": platform.python_version(), "machine": platform.machine(), "kind": args.kind,
                   "dgboost": dgboost.__version__}
    for module in ("numpy", "dask", "distributed", "xgboost", "cupy", "dask_cuda"):
        try:
            environment[module] = __import__(module).__version__
        except ImportError:
            pass
    if args.device == "cuda":
        query = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True)
        environment["gpus"] = query.stdout.strip().splitlines()
    return environment


def _table(results) -> str:
    config = results["config"]
    nccl = "; dgboost starts NCCL in every job" if config.get("fresh_nccl") else ""
    lines = [f"higgs-like {config['rows']:,} rows x {_N_FEATURES}, {config['rounds']} rounds, depth "
             f"{config['depth']}, on {config['device']} ({results['environment'].get('kind') or 'local'}){nccl}", "",
             "| workers | dgboost.dask | speed-up | AUC | xgboost.dask | speed-up | AUC | dgboost / xgboost |",
             "|---|---|---|---|---|---|---|---|"]
    base = {s: results["runs"][0].get(s, {}).get("train_s") for s in ("dgboost", "xgboost")}
    for run in results["runs"]:
        cells = [str(run["workers"])]
        for system in ("dgboost", "xgboost"):
            got = run.get(system)
            if got is None:
                cells += ["-", "-", "-"]
                continue
            speed_up = base[system] / got["train_s"] if base[system] else float("nan")
            cells += [f"{got['train_s']:.2f} s", f"{speed_up:.2f}x", f"{got['auc']:.4f}"]
        if run.get("dgboost") and run.get("xgboost"):
            cells.append(f"{run['dgboost']['train_s'] / run['xgboost']['train_s']:.2f}")
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
