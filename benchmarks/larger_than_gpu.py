"""Data larger than one GPU's memory, through dgboost.dask on one GPU worker (issue 21).

    python benchmarks/larger_than_gpu.py --rows 1500000000 --rounds 20 --kind nvidia-h200-x2

Higgs-like rows (``dgboost.datasets.make_higgs_like``'s formula and coefficients, drawn on
the GPU a block at a time for speed, 5% of columns 7-9 missing, binary labels) are made by
the worker and kept in its host memory: ``rows x 28`` float32, more than the GPU holds. Then
``dgboost.dask.train`` with the defaults (no budget given): the worker's X stays on the host
in its blocks, and its compressed matrix is built from them a chunk at a time, in core where
it fits the device's free memory and in pages where it does not (the log says which).

``--lazy`` leaves X unmade until the job reads it (each block made, on the worker, when a
task needs it, and again when another does): the job streams its rows into pages where they
are read (dask config ``dgboost.stream-partitions``, ``--stream``: auto, true or false), so
the worker's host memory holds its compressed pages and the blocks in flight, never the whole
float X; ``--stream false`` holds every block (the comparison). Without ``--lazy`` X is made
and persisted first, as a user's persisted collection is.

Reported: X's bytes against the GPU's memory, the data's making, the job (cuts, matrix,
rounds), the worker's peak device memory (NVML, sampled every 5 ms in the worker) and peak
host RSS, test AUC on ``--test-rows`` rows drawn the same way from another seed. JSON to
--out. ``--device cpu`` (with numpy generation) is a smoke test of the script.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from benchmarks.dask_scaling import ClientLines  # noqa: E402
from benchmarks.side_by_side import _extra_params  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402

_N_FEATURES = 28
#: Rows a block's generation draws at once on the GPU (its temporaries: some 2.5 GB).
_DRAW_ROWS = 10_000_000


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_500_000_000)
    parser.add_argument("--block-rows", type=int, default=50_000_000, help="rows of each dask partition")
    parser.add_argument("--test-rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a training parameter over the defaults (max_device_matrix_bytes=..., subsample=...)")
    parser.add_argument("--lazy", action="store_true", help="X made as the job reads it, not persisted first")
    parser.add_argument("--stream", choices=("auto", "true", "false"), default="auto",
                        help="dask config dgboost.stream-partitions")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a smoke test of the script")
    parser.add_argument("--kind", default="", help="the machine kind, for the record")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    import dask
    from distributed import Client

    from dgboost.dask import local_cluster

    record = {"rows": args.rows, "features": _N_FEATURES, "x_bytes": args.rows * _N_FEATURES * 4,
              "rounds": args.rounds, "depth": args.depth, "params": _extra_params(args), "kind": args.kind,
              "lazy": args.lazy, "stream": args.stream}
    options = {"memory_limit": 0}  # the worker keeps its rows in host memory: no spilling, no pausing
    if args.device == "cpu":
        options["threads_per_worker"] = 2
    with local_cluster(args.device, 1, **options) as cluster, Client(cluster) as client:
        client.wait_for_workers(1)
        record["gpu_bytes"] = client.submit(_gpu_bytes, args.device, pure=False).result()
        started = time.perf_counter()
        X, y = _data(client, args)
        record["data_s"] = round(time.perf_counter() - started, 1)
        print(f"data made in {record['data_s']} s", flush=True)  # a run cut short shows how far it got
        client.run(_start_watch, args.device)
        started = time.perf_counter()
        stream = {"auto": "auto", "true": True, "false": False}[args.stream]
        with ClientLines() as lines, dask.config.set({"dgboost.stream-partitions": stream}):
            booster = _train(client, args, X, y)
        record["job_s"] = round(time.perf_counter() - started, 1)
        print(f"job done in {record['job_s']} s", flush=True)
        record.update(next(iter(client.run(_stop_watch).values())))
        record["log"] = [message for _, message in lines.lines[:40]]  # the client's (out of core says so)
        X_test, y_test = client.submit(_block, 10_000, args.test_rows, args.device, pure=False).result()
        record["test_auc"] = _auc(y_test, booster.predict(X_test))
    print(json.dumps(record, indent=1))
    suffix = "".join(f"-{pair}" for pair in args.param) + ("-lazy" if args.lazy else "") + \
        ("" if args.stream == "auto" else f"-stream-{args.stream}")
    (args.out / f"larger-than-gpu-{args.rows}-{args.device}{suffix}.json").write_text(json.dumps(record, indent=2))
    return 0


def _train(client, args, X, y):
    import dgboost.dask

    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "device": args.device,
              "verbosity": 2, **_extra_params(args)}
    return dgboost.dask.train(client, params, X, y, num_boost_round=args.rounds,
                              callbacks=[_Progress()])


class _Progress(TrainingCallback):
    """Prints each round's end, timed from the first's, on rank 0 (the worker's output)."""

    def __init__(self):
        self.started = None

    def after_iteration(self, model, epoch, evals_log):
        now = time.perf_counter()
        self.started = self.started or now
        print(f"round {epoch} done at {now - self.started:.1f} s", flush=True)
        return False


def _data(client, args):
    """X and y made on the worker, a block a task, persisted in its host memory (with
    ``--lazy``, left to be made as the job reads them)."""
    import dask
    import dask.array as da
    from distributed import wait

    sizes = [min(args.block_rows, args.rows - start) for start in range(0, args.rows, args.block_rows)]
    X_parts, y_parts = [], []
    for index, rows in enumerate(sizes):
        block = dask.delayed(_block, nout=2, pure=False)(1 + index, rows, args.device)
        X_parts.append(da.from_delayed(block[0], shape=(rows, _N_FEATURES), dtype=np.float32))
        y_parts.append(da.from_delayed(block[1], shape=(rows,), dtype=np.float32))
    X, y = da.concatenate(X_parts), da.concatenate(y_parts)
    if args.lazy:
        return X, y
    X, y = client.persist([X, y])
    wait([X, y])
    return X, y


def _block(seed: int, n_rows: int, device: str):
    """``n_rows`` higgs-like rows (make_higgs_like's formula) in host memory, drawn on the GPU."""
    from dgboost.datasets import _COEFFICIENT_SEED

    if device == "cpu":
        from dgboost.datasets import make_higgs_like

        return make_higgs_like(n_rows, seed=seed)
    import cupy as cp

    weights = cp.asarray(np.random.default_rng(_COEFFICIENT_SEED).standard_normal(_N_FEATURES), dtype=cp.float32)
    rng = cp.random.default_rng(seed)
    X = np.empty((n_rows, _N_FEATURES), np.float32)
    y = np.empty(n_rows, np.float32)
    for start in range(0, n_rows, _DRAW_ROWS):
        stop = min(start + _DRAW_ROWS, n_rows)
        x = rng.standard_normal((stop - start, _N_FEATURES), dtype=cp.float32)
        z = (0.3 * (x @ weights) + cp.sin(x[:, 0] * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3] - cp.abs(x[:, 4])
             + 0.3 * (x[:, 5] > 0.5) * x[:, 6])
        label = rng.random(stop - start, dtype=cp.float32) < 1.0 / (1.0 + cp.exp(-z))
        missing = x[:, 7:10]
        missing[rng.random(missing.shape, dtype=cp.float32) < 0.05] = cp.nan
        x[:, 7:10] = missing
        x.get(out=X[start:stop])
        y[start:stop] = label.astype(cp.float32).get()
    return X, y


def _gpu_bytes(device: str) -> int:
    if device == "cpu":
        return 0
    import cupy

    return int(cupy.cuda.Device().mem_info[1])


def _start_watch(device: str, dask_worker=None) -> None:
    """In the worker: its device's peak memory in use, from now (kept on the worker: functions
    from this script travel by value, their globals with them)."""
    import threading

    _watch = dask_worker.larger_than_gpu_watch = {"stop": threading.Event(), "device_peak": 0}
    if device == "cpu":
        return
    import pynvml

    pynvml.nvmlInit()
    import cupy

    handle = pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device().pci_bus_id.encode())

    def sample():
        while not _watch["stop"].is_set():
            _watch["device_peak"] = max(_watch["device_peak"], pynvml.nvmlDeviceGetMemoryInfo(handle).used)
            time.sleep(0.005)

    _watch["thread"] = threading.Thread(target=sample, daemon=True)
    _watch["thread"].start()


def _stop_watch(dask_worker=None) -> dict:
    """The worker's peak device memory in use since _start_watch, and its process's peak RSS."""
    import resource

    _watch = dask_worker.larger_than_gpu_watch
    _watch["stop"].set()
    if "thread" in _watch:
        _watch["thread"].join()
    return {"worker_peak_device_bytes": int(_watch["device_peak"]),
            "worker_peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _auc(y, score) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(np.asarray(y), np.asarray(score))), 4)


if __name__ == "__main__":
    sys.exit(main())
