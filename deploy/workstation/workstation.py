"""One command for a multi-GPU workstation: a dask-cuda LocalCUDACluster, one worker per GPU,
kept up until Ctrl-C (or SIGTERM), with a scheduler file for ``dgboost train --scheduler-file``.

    python deploy/workstation/workstation.py --scheduler-file ~/.dgboost/scheduler.json
    dgboost train job.toml --scheduler-file ~/.dgboost/scheduler.json      # another terminal

GPUs are numbered in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID, as nvidia-smi numbers
them). The scheduler and its dashboard listen on localhost only; --host opens the scheduler
to one interface of your choice. ``--device cpu`` starts CPU workers instead (no GPU needed).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import sys
import threading


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scheduler-file", type=pathlib.Path,
                        default=pathlib.Path.home() / ".dgboost" / "scheduler.json")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--workers", type=int, help="GPUs to use (default: all) or CPU worker processes")
    parser.add_argument("--host", default="127.0.0.1", help="the scheduler's interface (default: localhost only)")
    parser.add_argument("--dashboard", default="127.0.0.1:8787", help="the dashboard's address; '' for none")
    args = parser.parse_args(argv)

    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # before anything touches CUDA
    from distributed import Client

    from dgboost.dask import local_cluster

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    args.scheduler_file.parent.mkdir(parents=True, exist_ok=True)
    cluster = local_cluster(args.device, args.workers, host=args.host, dashboard_address=args.dashboard or None)
    with cluster, Client(cluster) as client:
        client.write_scheduler_file(str(args.scheduler_file))
        workers = len(client.scheduler_info(n_workers=-1)["workers"])
        print(f"dgboost workstation cluster: {workers} {args.device} workers at {cluster.scheduler_address}; "
              f"scheduler file {args.scheduler_file}; Ctrl-C stops it", flush=True)
        try:
            stop.wait()
        finally:
            args.scheduler_file.unlink(missing_ok=True)
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
