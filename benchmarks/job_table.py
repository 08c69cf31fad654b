"""What the cluster's job table costs a job: the same job with and without it, alternated.

    python benchmarks/job_table.py --rows 200000 --rounds 200 --repeat 5

On a fresh CPU local cluster (or one worker a GPU with --device cuda), after a warm-up: the job
through ``dgboost.dask.train`` as users run it (the job table on the scheduler: registered,
queued through it, its round events read by the plugin), and the same job with the table off
(dask config ``dgboost.jobs.table`` False: the job queues through a MultiLock, as dgboost did
before the table). Medians and every run, in seconds; JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from dgboost.datasets import make_higgs_like  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("benchmark-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import dask.array as da
    from distributed import Client

    import dask

    import dgboost.dask

    X, y = make_higgs_like(args.rows, seed=1)
    params = {"objective": "binary:logistic", "max_depth": args.depth, "device": args.device}
    kwargs = {} if args.device == "cuda" else {"threads_per_worker": max(1, (os.cpu_count() or 1) // args.workers)}
    times: dict[str, list[float]] = {"with the job table": [], "without": []}
    with dgboost.dask.local_cluster(args.device, args.workers, **kwargs) as cluster, Client(cluster) as client:
        dX = client.persist(da.from_array(X, chunks=len(X) // (2 * args.workers)))
        dy = client.persist(da.from_array(y, chunks=len(X) // (2 * args.workers)))
        dgboost.dask.train(client, params, dX, dy, num_boost_round=2)  # warm-up
        for _ in range(args.repeat):
            for setting in times:
                with dask.config.set({"dgboost.jobs.table": setting != "without"}):
                    began = time.perf_counter()
                    dgboost.dask.train(client, params, dX, dy, num_boost_round=args.rounds)
                    times[setting].append(round(time.perf_counter() - began, 3))
    result = {"config": vars(args) | {"out": str(args.out)}, "seconds": times,
              "medians": {k: float(np.median(v)) for k, v in times.items()}}
    (args.out / f"job-table-{args.rows}-{args.device}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result["medians"]))
    for setting, values in times.items():
        print(f"{setting}: median {np.median(values):.3f} s ({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
