"""What a lost worker costs a dgboost.dask job: the restart against a shard rebuild plus one round.

    python benchmarks/restart.py --rows 1000000 --rounds 60 --workers 3 --kill-at 30 --device cpu
    python benchmarks/restart.py --rows 2000000 --rounds 100 --workers 2 --kill-at 50 --device cuda

On a fresh local cluster (CPU worker processes, or one worker a GPU) with the Higgs-like data
generated on the workers and persisted there (so a lost worker's partitions are recomputed from
their graph, as a real job's would be), after a warm-up:

- the job without rounds: rows to the workers, the matrix built (what a restart rebuilds);
- the job uninterrupted, with restarts on (the journal sent each round) and off
  (``max_restarts=0``): their difference is the journal's cost;
- the job with the last rank's worker killed (SIGKILL) after round ``--kill-at``: its time, the
  model compared with the uninterrupted one byte for byte, and from dgboost's log the restart's
  two figures: loss to the new attempt's ranks starting (rows re-shared), loss to its first round;
- the budget, on the workers left: the job without rounds plus one round; and apart, the time
  they take to make the lost worker's blocks again (Dask recomputes them for the restart from
  the data's graph, here a generator's tasks: a real job's would read its files).

Prints a table and writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import re
import signal
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dgboost.callback import TrainingCallback  # noqa: E402
from dask_scaling import _DATASETS, ClientLines, _data, _environment  # noqa: E402  (the same data, generated on the workers)
from side_by_side import _extra_params  # noqa: E402

_N_FEATURES = _DATASETS["higgs"][1]


class KillAfter(TrainingCallback):
    """On the coordinator: kill process ``pid`` after round ``at``, once (``marker`` says it was done)."""

    never_stops = True

    def __init__(self, at: int, pid: int, marker: str):
        self.at, self.pid, self.marker = at, pid, marker

    def after_iteration(self, model, epoch, evals_log):
        if epoch == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(self.pid, signal.SIGKILL)
        return False


def _log_to_stderr() -> None:
    """On a worker: dgboost's info lines to the worker's stderr, with the time."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(created).3f worker %(process)d: %(message)s"))
    logging.getLogger("dgboost").addHandler(handler)
    logging.getLogger("dgboost").setLevel(logging.INFO)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-at", type=int, default=30, help="the round after which the last rank is killed")
    parser.add_argument("--chunks", type=int, default=12, help="blocks the data is generated in")
    parser.add_argument("--repeat", type=int, default=3, help="uninterrupted jobs with and without the journal")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="a training parameter over the defaults (max_device_matrix_bytes=...: out of core, "
                             "the rows streamed into pages where they are read)")
    parser.add_argument("--kind", default="", help="the machine kind, for the record")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import tempfile

    from distributed import Client

    import dgboost.dask

    logging.getLogger("dgboost").setLevel(logging.INFO)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "eta": 0.1, "device": args.device,
              "verbosity": 2, **_extra_params(args)}  # the client's info lines: the restart's steps, with their times
    kwargs = {} if args.device == "cuda" else {"threads_per_worker": max(1, (os.cpu_count() or 1) // args.workers)}
    record: dict = {}
    with ClientLines() as lines, dgboost.dask.local_cluster(args.device, args.workers, **kwargs) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(args.workers)
        X, y = _data(args, client)

        def job(rounds, wait=args.workers, **extra):
            client.wait_for_workers(wait, timeout=120)
            began = time.perf_counter()
            model = dgboost.dask.train(client, params, X, y, num_boost_round=rounds, **extra)
            return model, round(time.perf_counter() - began, 3)

        client.run(_log_to_stderr)  # the ranks' own lines (an abort, the GPU check), with their times
        # Warm-up: kernels compiled (a resumed job's margins from its trees too), the plugin registered
        job(2, init_model=job(2)[0])
        record["zero_rounds_s"] = job(0)[1]
        journal, bare, models = [], [], []
        for _ in range(args.repeat):  # alternated: the machine's drift falls on both alike
            whole_model, seconds = job(args.rounds)
            journal.append(seconds)
            models.append(whole_model.save_raw())
            bare.append(job(args.rounds, max_restarts=0)[1])
        record["uninterrupted_alike"] = len(set(models)) == 1
        record["uninterrupted_s"], record["uninterrupted_no_journal_s"] = journal, bare
        record["round_s"] = round(float(np.median(journal)) / max(1, args.rounds), 4)
        pids = client.run(os.getpid)
        victim = pids[sorted(pids)[-1]]
        lost = _blocks_on(client, X, sorted(pids)[-1])  # the blocks Dask must make again after the kill
        marker = os.path.join(tempfile.mkdtemp(), "killed")
        del lines.lines[:]
        killed_model, record["killed_s"] = job(args.rounds, callbacks=[KillAfter(args.kill_at, victim, marker)])
        record["identical"] = killed_model.save_raw() == whole_model.save_raw()
        if not record["identical"]:  # where they part, and both models to look at
            record["first_tree_apart"] = next((i for i, (a, b) in enumerate(zip(whole_model.get_dump(True),
                                                                             killed_model.get_dump(True)))
                                               if a != b), None)
            (args.out / "uninterrupted.json").write_bytes(whole_model.save_raw())
            (args.out / "restarted.json").write_bytes(killed_model.save_raw())
        record.update(_restart_figures(lines.lines, os.path.getmtime(marker)))
        record["killed_at"] = os.path.getmtime(marker)
        record["log"] = [f"{created - os.path.getmtime(marker):+.3f} s {line}" for created, line in lines.lines]
        # The budget on as many workers as the restart had: a shard rebuild and one round there.
        cluster.scale(record.get("workers_after", args.workers - 1))
        time.sleep(2)
        workers = len(client.run(os.getpid))
        zero = min(job(0, wait=workers)[1] for _ in range(2))  # the first also moves the lost worker's rows
        ten = min(job(10, wait=workers)[1] for _ in range(2))
        record["survivors_zero_rounds_s"], record["survivors_round_s"] = zero, round((ten - zero) / 10, 4)
        record["lost_blocks"], record["lost_blocks_made_s"] = len(lost), _make_again(client, args, lost)
    results = {"environment": _environment(args), "config": vars(args) | {"out": str(args.out)}, "run": record}
    suffix = "".join(f"-{pair}" for pair in args.param)
    (args.out / f"restart-{args.rows}-{args.device}{suffix}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(record))
    print(_table(results))
    return 0


def _blocks_on(client, X, worker: str) -> list[int]:
    """The indices of X's blocks (dask_scaling._block's) whose only copy is on ``worker``."""
    held = client.who_has(X)
    keys = [key for row in X.__dask_keys__() for key in row]
    return [i for i, key in enumerate(keys) if list(held.get(key, ())) == [worker]]


def _make_again(client, args, blocks: list[int]) -> float:
    """Seconds the workers left take to make ``blocks`` again, as Dask did for the restart (the
    data's own graph: a real job's would be reading its files): a part of the restart that is
    the data's, not dgboost's."""
    import dask
    from distributed import wait

    from dask_scaling import _block

    sizes = [len(part) for part in np.array_split(np.arange(args.rows), args.chunks)]
    made = [dask.delayed(_block, pure=False)(i, sizes[i], args.device) for i in blocks]
    began = time.perf_counter()
    futures = client.compute(made)
    wait(futures)
    seconds = round(time.perf_counter() - began, 3)
    del futures
    return seconds


def _restart_figures(lines: list[tuple[float, str]], killed_at: float) -> dict:
    """The restart's figures from dgboost's log; ``stopped_s``: from the kill (the marker file's
    time) to the client's decision to restart, every rank stopped (the log line saying so)."""
    figures = {}
    for created, line in lines:
        if "restart 1 of" in line:
            figures["stopped_s"] = round(created - killed_at, 3)
        if match := re.search(r"resuming on (\d+) workers \((\d+) rows moved\), ([\d.]+) s after the loss", line):
            figures.update(workers_after=int(match[1]), rows_moved=int(match[2]), reshared_s=float(match[3]))
        if match := re.search(r"round (\d+) finished ([\d.]+) s after the loss", line):
            figures.update(first_round=int(match[1]), restart_s=float(match[2]))
    return figures


def _table(results) -> str:
    config, run = results["config"], results["run"]
    budget = run["survivors_zero_rounds_s"] + run["survivors_round_s"]
    listed = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
    return "\n".join([
        f"higgs-like {config['rows']:,} rows x {_N_FEATURES}, {config['rounds']} rounds, depth {config['depth']}, "
        f"{config['workers']} workers on {config['device']} ({results['environment'].get('kind') or 'local'}); "
        f"the last rank killed after round {config['kill_at']}",
        "",
        "| job | seconds |",
        "|---|---|",
        f"| without rounds (shards and matrix) | {run['zero_rounds_s']} |",
        f"| uninterrupted, restarts on (journal) | {listed(run['uninterrupted_s'])} |",
        f"| uninterrupted, max_restarts=0 | {listed(run['uninterrupted_no_journal_s'])} |",
        f"| a worker killed | {run['killed_s']} (model identical: {run['identical']}) |",
        f"| the kill to every rank stopped and the restart decided | {run.get('stopped_s')} |",
        f"| the restart: loss noticed to rows re-shared | {run.get('reshared_s')} |",
        f"| the restart: loss noticed to the first new round | {run.get('restart_s')} |",
        f"| its budget: shards and matrix + one round, on the {run.get('workers_after')} workers left | "
        f"{run['survivors_zero_rounds_s']} + {run['survivors_round_s']} = {budget:.3f} |",
        f"| the lost worker's {run['lost_blocks']} blocks made again on the workers left (the data's graph) | "
        f"{run['lost_blocks_made_s']} |",
        f"| the budget with them | {budget + run['lost_blocks_made_s']:.3f} |",
    ])


if __name__ == "__main__":
    raise SystemExit(main())
