"""dgboost.dask and xgboost.dask side by side on 1, 2, 4 ... workers of one machine.

    python benchmarks/dask_scaling.py --rows 10000000 --rounds 500 --workers 1 2 4 --device cuda
    python benchmarks/dask_scaling.py --rows 200000 --rounds 20 --workers 1 2 --device cpu   # a smoke run
    python benchmarks/dask_scaling.py --dataset wide --rows 2000000 --rounds 100 --workers 1 2 4 --device cuda
    python benchmarks/dask_scaling.py --rows 10000000 --workers 1 2 --device cuda --systems dgboost --out-of-core 4

For each worker count: a fresh cluster (dask-cuda ``LocalCUDACluster`` on the
first N GPUs, or a CPU ``LocalCluster`` of N processes); the ``--dataset``'s data
(Higgs-like by default, or make_wide's 500 features) generated on the workers in ``--chunks`` blocks, each from its own seed, so
every worker count trains on the same rows; both systems warmed up on a slice
(kernel compilation stays out of the timings); then each system's job timed
from the dask collections to a trained model: dgboost.dask.train (which builds
its matrix inside), and xgboost.dask's DaskQuantileDMatrix plus train. On GPUs
dgboost's timed job reuses the NCCL communicator its warm-up made (as every job
after a cluster's first does); ``--fresh-nccl`` makes every job start its own.
Test AUC on held-out rows predicted in the client. Prints a markdown table with
each system's speed-up over its own one-worker run and writes JSON to --out.
``--repeat N`` times each system's job N times on each cluster (the systems taking
turns, after one warm-up and one set-up job each) and reports their median, every
job's time beside it: the issues' "median of 3 runs" in one command, one cluster and
one data set a worker count.

``--out-of-core TIMES`` (issue 21, out_of_core.py's benchmark on several workers):
then on each cluster, after the jobs above, four more dgboost.dask jobs on the same
persisted data, each configuration warmed up first (2 rounds on the warm-up slice):

- (a) in core, subsample=0.2 gradient-based; (b) the same out of core: each rank's
  ``max_device_matrix_bytes`` the compressed matrix of the largest worker's share
  (out_of_core._matrix_bytes) over TIMES;
- (c) in core every row (subsample=1); (d) the same out of core.

With ``--repeat N`` each of the four runs N times, the four taking turns, and the table gives
their medians (the ratios are the medians'), every job's time beside them; the AUC, pages and
models are the first job's.

For each: train seconds (rank 0's, from the first round's start, the matrix built,
to the last's end, as out_of_core.py times them), the whole job's seconds, test AUC,
and each rank's pages from dgboost's log line on the workers ("out of core: the
compressed matrix (... rows, ... MiB) in ... pages of at most ... MiB, in ...").
Checked: (d)'s saved model is (c)'s byte for byte. Reported against issue 21's targets:
(b)/(a) train time at most 2, (b)'s AUC within 0.003 of (c)'s. dgboost only:
xgboost.dask has no external memory (its ExtMemQuantileDMatrix is single-process;
out_of_core.py compares it on one GPU). With ``--device cuda`` the generated X sits
in the workers' GPU memory beside the pages (as every job's here), so these jobs
measure out of core's speed, not the device memory it saves.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import platform
import re
import subprocess
import sys
import time
import uuid

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import dgboost  # noqa: E402
from dgboost.callback import TrainingCallback  # noqa: E402
from dgboost.datasets import make_higgs_like, make_wide  # noqa: E402

#: --dataset: its generator (rows, seed -> X, y) and its features.
_DATASETS = {"higgs": (make_higgs_like, 28), "wide": (make_wide, 500)}
#: Rows of the warm-up job (both systems): past dgboost's cut sample size (2**18 rows).
_WARM_UP_ROWS = 1_000_000
#: --out-of-core's sampled jobs: issue 21's share of rows, gradient-based (out_of_core.py's default).
_SUBSAMPLE = 0.2
#: --out-of-core's jobs: name -> (sampled, out of core), in the order they run.
_OUT_OF_CORE_RUNS = {"in-core-sampled": (True, False), "out-of-core-sampled": (True, True),
                     "in-core": (False, False), "out-of-core": (False, True)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(_DATASETS), default="higgs",
                        help="higgs-like (28 features) or wide (500: split evaluation's work grows with them)")
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
    parser.add_argument("--out-of-core", type=float, metavar="TIMES",
                        help="also dgboost's out-of-core jobs (see above), each rank's compressed matrix TIMES its "
                             "device budget")
    parser.add_argument("--max-restarts", type=int, default=None,
                        help="dgboost.dask.train's max_restarts (0: no journal of rounds); its default if not given")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed jobs of each system on each cluster, the systems taking turns; the table "
                             "gives their median (the issues' 'median of 3 runs' in one command)")
    parser.add_argument("--kind", default="", help="the machine kind, for the record")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat} must be at least 1")
    if args.out_of_core is not None and not args.out_of_core > 1:
        parser.error(f"--out-of-core {args.out_of_core:g} must be above 1: a matrix within its budget stays in core")
    if args.out_of_core is not None and args.dataset != "higgs":
        parser.error(f"--out-of-core with --dataset {args.dataset}: the budget is sized as out_of_core.py sizes it, "
                     "for the higgs-like 28 features; use --dataset higgs")
    if args.out_of_core is not None and args.max_bin != 256:
        parser.error(f"--out-of-core with --max-bin {args.max_bin}: the budget is sized as out_of_core.py sizes it, "
                     "for max_bin 256 (a byte a cell); use --max-bin 256")
    args.out.mkdir(parents=True, exist_ok=True)
    X_test, y_test = _DATASETS[args.dataset][0](args.test_rows, seed=10_000)
    runs = []
    for n in args.workers:
        runs.append(_run_cluster(args, n, X_test, y_test))
        print(json.dumps(runs[-1]), flush=True)
    results = {"environment": _environment(args), "config": vars(args) | {"out": str(args.out)}, "runs": runs}
    name = f"dask-scaling-{'' if args.dataset == 'higgs' else args.dataset + '-'}{args.rows}-{args.device}.json"
    (args.out / name).write_text(json.dumps(results, indent=2))
    print(_table(results))
    if args.out_of_core:
        print()
        print(_out_of_core_table(results))
    return 0


def _cluster(args, n: int):
    from dgboost.dask import local_cluster

    kwargs = {} if args.device == "cuda" else {"threads_per_worker": 1}
    return local_cluster(args.device, n, **kwargs)


def _block(index: int, rows: int, device: str, dataset: str = "higgs"):
    """Block ``index`` of the data, from its own seed: X and y side by side (the features + 1 columns)."""
    X, y = _DATASETS[dataset][0](rows, seed=1 + index)
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
    dataset = getattr(args, "dataset", "higgs")  # restart.py's arguments have none
    n_features = _DATASETS[dataset][1]
    whole = da.concatenate([da.from_delayed(dask.delayed(_block)(i, rows, args.device, dataset),
                                            shape=(rows, n_features + 1), dtype=np.float32, meta=meta)
                            for i, rows in enumerate(sizes)])
    X, y = client.persist([whole[:, :n_features], whole[:, n_features]])
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
            record[system] = {"zero_rounds_s": round(time.perf_counter() - began, 3), "train_runs_s": []}
        models = {}
        for _ in range(args.repeat):  # the systems take turns, so a drift of the machine touches both
            for system in args.systems:
                began = time.perf_counter()
                with ClientLines() as lines:
                    models[system] = _RUNS[system](args, client, X, y, args.rounds)
                record[system]["train_runs_s"].append(round(time.perf_counter() - began, 3))
                wire = _wire_kib_a_round(lines.lines)
                if wire is not None:
                    record[system]["wire_kib_a_round"] = wire
        for system in args.systems:  # the last run's model for the AUC (dgboost's are the same bytes each run)
            record[system]["train_s"] = round(float(np.median(record[system]["train_runs_s"])), 3)
            record[system]["auc"] = _auc(system, models[system], X_test, y_test, args)
        if args.out_of_core:
            record["out_of_core"] = _out_of_core(args, client, n, X, y, X_test, y_test)
    return record


class ClientLines(logging.Handler):
    """While entered: dgboost's log lines in this process (the client's, or a worker's),
    ``(time, message)``."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record):
        self.lines.append((record.created, record.getMessage()))

    def __enter__(self):
        logging.getLogger("dgboost").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("dgboost").removeHandler(self)


def _wire_kib_a_round(lines) -> float | None:
    """The KiB a round dgboost's client logs of its collectives (the bytes every rank sent, at
    verbosity 2); None without such a line (one worker)."""
    found = [re.search(r"the collectives: .* ([\d.]+) KiB a round \(rank 0", line) for _, line in lines]
    return next((float(f[1]) for f in found if f), None)


def _params(args) -> dict:
    return {"objective": "binary:logistic", "eta": args.eta, "max_depth": args.depth, "max_bin": args.max_bin,
            "device": args.device}


def _run_dgboost(args, client, X, y, rounds, extra=None, callbacks=None):
    """dgboost.dask's model; ``extra``: params over _params(args)."""
    import dask

    import dgboost.dask

    with dask.config.set({"dgboost.keep-nccl": not args.fresh_nccl}):
        restarts = {} if args.max_restarts is None else {"max_restarts": args.max_restarts}
        return dgboost.dask.train(client, _params(args) | {"verbosity": 2} | (extra or {}), X, y,
                                  num_boost_round=rounds, callbacks=callbacks, **restarts)


def _run_xgboost(args, client, X, y, rounds):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401 - a submodule, loaded by name

    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=args.max_bin)
    return xgb.dask.train(client, _params(args) | {"tree_method": "hist"}, dtrain,
                          num_boost_round=rounds)["booster"]


_RUNS = {"dgboost": _run_dgboost, "xgboost": _run_xgboost}


def _out_of_core(args, client, n: int, X, y, X_test, y_test) -> dict:
    """--out-of-core's four jobs on this cluster (the module's docstring): each configuration
    warmed up, then each timed once."""
    from benchmarks.out_of_core import _matrix_bytes

    def budget(rows: int) -> int:  # the largest share of ``rows`` (dgboost.dask's differ by a row at most)
        return int(_matrix_bytes(-(-rows // n)) / args.out_of_core)

    def params(name: str, rows: int) -> dict:
        sampled, paged = _OUT_OF_CORE_RUNS[name]
        return ({"subsample": _SUBSAMPLE, "sampling_method": "gradient_based"} if sampled else {}) | (
            {"max_device_matrix_bytes": budget(rows)} if paged else {})

    client.run(_watch_out_of_core)
    warm = min(_WARM_UP_ROWS, args.rows)
    for name in _OUT_OF_CORE_RUNS:
        _run_dgboost(args, client, X[:warm], y[:warm], 2, params(name, warm))
    client.run(_out_of_core_lines)  # the warm-ups' lines, dropped
    runs = {name: {"train_s_each": [], "job_s_each": []} for name in _OUT_OF_CORE_RUNS}
    models = {}
    for _ in range(args.repeat):  # the four take turns, so a drift of the machine touches each
        for name, run in runs.items():
            clock = _RoundsClock(args.device)
            began = time.perf_counter()
            model = _run_dgboost(args, client, X, y, args.rounds, params(name, args.rows), [clock])
            run["job_s_each"].append(round(time.perf_counter() - began, 3))
            run["train_s_each"].append(round(clock.seconds(client), 3))
            lines = [line for _, got in sorted(client.run(_out_of_core_lines).items()) for line in got]
            if name not in models:  # the first job's: the others train the same model
                run |= {"auc": _auc("dgboost", model, X_test, y_test, args), "pages": [_pages(line) for line in lines]}
                models[name] = model.save_raw()
    for run in runs.values():  # the medians: the script's "median of N" (--repeat)
        run["train_s"], run["job_s"] = float(np.median(run["train_s_each"])), float(np.median(run["job_s_each"]))
    record = {"budget_bytes": budget(args.rows), "runs": runs,
              "identical_every_row": models["in-core"] == models["out-of-core"],
              "identical_sampled": models["in-core-sampled"] == models["out-of-core-sampled"],
              "sampled_ratio": round(runs["out-of-core-sampled"]["train_s"] / runs["in-core-sampled"]["train_s"], 3),
              "sampled_job_ratio": round(runs["out-of-core-sampled"]["job_s"] / runs["in-core-sampled"]["job_s"], 3),
              "auc_difference": round(runs["out-of-core-sampled"]["auc"] - runs["in-core"]["auc"], 5)}
    if not record["identical_every_row"]:  # both models kept, to see where they part
        for name in ("in-core", "out-of-core"):
            (args.out / f"dask-scaling-{n}-workers-{name}.json").write_bytes(models[name])
    return record


class _RoundsClock(TrainingCallback):
    """On the coordinator: the seconds from the first round's start (the matrix built) to the
    last's end (the device done), sent to the client as an event of its own tag."""

    never_stops = True
    TOPIC = "dask-scaling-rounds"

    def __init__(self, device: str):
        self.device, self.tag = device, uuid.uuid4().hex

    def before_training(self, model):
        if self.device == "cuda":  # the matrix's queued build is the set-up's, not the rounds'
            import cupy

            cupy.cuda.Device().synchronize()
        self.started = time.perf_counter()
        return model

    def after_training(self, model):
        from distributed import get_worker

        if self.device == "cuda":
            import cupy

            cupy.cuda.Device().synchronize()
        get_worker().log_event(self.TOPIC, {"tag": self.tag, "seconds": time.perf_counter() - self.started})
        return model

    def seconds(self, client, timeout: float = 30.0) -> float:
        """The seconds the coordinator sent: the event may reach the scheduler after the job's end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for _, message in client.get_events(self.TOPIC):
                if message["tag"] == self.tag:
                    return message["seconds"]
            time.sleep(0.05)
        raise TimeoutError(f"no {self.TOPIC} event of job {self.tag} in {timeout} s")


def _watch_out_of_core(dask_worker) -> None:
    """Run on each worker: a ClientLines on its 'dgboost' logger, once (kept on the Worker)."""
    if not hasattr(dask_worker, "dask_scaling_lines"):
        dask_worker.dask_scaling_lines = ClientLines().__enter__()


def _out_of_core_lines(dask_worker) -> list[str]:
    """Run on each worker: its lines saying a rank's matrix went out of core, since last asked."""
    handler = dask_worker.dask_scaling_lines
    lines, handler.lines = handler.lines, []
    return [message for _, message in lines if message.startswith("out of core")]


def _pages(line: str) -> dict:
    """A rank's pages from dgboost's line (data/pages.py, PagedMatrix.describe)."""
    match = re.search(r"\((\d+) rows, ([\d.]+) MiB\) in (\d+) pages of at most ([\d.]+) MiB, in (.+)$", line)
    if match is None:
        return {"line": line}
    return {"rows": int(match[1]), "matrix_mib": float(match[2]), "pages": int(match[3]),
            "largest_page_mib": float(match[4]),
            "where": "in pinned host memory" if match[5] == "pinned host memory" else "on disk"}


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
    environment = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
                   "kind": args.kind, "dgboost": dgboost.__version__}
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
    repeat = config.get("repeat", 1)
    median = f"; each time the median of {repeat} jobs (each job's in brackets)" if repeat > 1 else ""
    dataset = config.get("dataset", "higgs")
    lines = [f"{'higgs-like' if dataset == 'higgs' else dataset} {config['rows']:,} rows x {_DATASETS[dataset][1]}, "
             f"{config['rounds']} rounds, depth "
             f"{config['depth']}, on {config['device']} ({results['environment'].get('kind') or 'local'}){nccl}"
             f"{median}", "",
             "| workers | dgboost.dask | speed-up | AUC | the ranks sent a round | xgboost.dask | speed-up | AUC | "
             "dgboost / xgboost |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = {s: results["runs"][0].get(s, {}).get("train_s") for s in ("dgboost", "xgboost")}
    for run in results["runs"]:
        cells = [str(run["workers"])]
        for system in ("dgboost", "xgboost"):
            got = run.get(system)
            if got is None:
                cells += ["-", "-", "-"] + (["-"] if system == "dgboost" else [])
                continue
            speed_up = base[system] / got["train_s"] if base[system] else float("nan")
            runs = got.get("train_runs_s", [])
            each = f" ({', '.join(f'{t:.2f}' for t in runs)})" if len(runs) > 1 else ""
            cells += [f"{got['train_s']:.2f} s{each}", f"{speed_up:.2f}x", f"{got['auc']:.4f}"]
            if system == "dgboost":
                wire = got.get("wire_kib_a_round")
                cells.append("-" if wire is None else f"{wire:.1f} KiB")
        if run.get("dgboost") and run.get("xgboost"):
            cells.append(f"{run['dgboost']['train_s'] / run['xgboost']['train_s']:.2f}")
        else:
            cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _out_of_core_table(results) -> str:
    config = results["config"]
    names = {"in-core-sampled": "(a) in core, sampled", "out-of-core-sampled": "(b) out of core, sampled",
             "in-core": "(c) in core, every row", "out-of-core": "(d) out of core, every row"}
    repeat = config.get("repeat", 1)
    lines = [f"dgboost.dask out of core: each rank's budget its share's compressed matrix / {config['out_of_core']:g}; "
             f"sampled = subsample {_SUBSAMPLE} gradient-based; train = rank 0's rounds, job = the whole "
             "dgboost.dask.train" + (f"; each the median of {repeat} jobs (each job's in brackets), the four "
                                     "taking turns" if repeat > 1 else ""), "",
             "| workers | job | budget a rank | matrix / budget | pages a rank | train s | job s | test AUC |",
             "|---|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        record = run["out_of_core"]
        for name, got in record["runs"].items():
            pages = [p for p in got["pages"] if "pages" in p]
            paged = "-"
            if pages:
                paged = (f"{', '.join(str(p['pages']) for p in pages)} of <= "
                         f"{max(p['largest_page_mib'] for p in pages):.2f} MiB, {pages[0]['where']}")
            budget, times = "-", "-"
            if _OUT_OF_CORE_RUNS[name][1]:
                budget = f"{record['budget_bytes'] / 2**20:.2f} MiB"
                if pages:
                    times = f"{max(p['matrix_mib'] for p in pages) * 2**20 / record['budget_bytes']:.2f}"
            train, job = (f"{got[key]:.2f}" + (f" ({', '.join(f'{t:.2f}' for t in got[key + '_each'])})"
                                                 if len(got[key + "_each"]) > 1 else "")
                          for key in ("train_s", "job_s"))
            lines.append(f"| {run['workers']} | {names[name]} | {budget} | {times} | {paged} | {train} | {job} | "
                         f"{got['auc']:.4f} |")
    lines += ["", "| workers | (b) / (a) train (target <= 2) | (b) / (a) job | AUC (b) - (c) (target within 0.003) | "
              "(d) model = (c)'s | (b) model = (a)'s |", "|---|---|---|---|---|---|"]
    for run in results["runs"]:
        record = run["out_of_core"]
        lines.append(f"| {run['workers']} | {record['sampled_ratio']:.2f}x | {record['sampled_job_ratio']:.2f}x | "
                     f"{record['auc_difference']:+.4f} | {'yes' if record['identical_every_row'] else '**no**'} | "
                     f"{'yes' if record['identical_sampled'] else 'no'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
