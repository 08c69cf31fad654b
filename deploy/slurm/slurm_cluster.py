"""A dgboost cluster on SLURM through dask-jobqueue: one job per GPU node, one worker per GPU.

    pip install "dgboost[cuda12]" dask-jobqueue
    python deploy/slurm/slurm_cluster.py --nodes 2 --gpus-per-node 4 --partition gpu train job.toml

starts the jobs, waits for every worker, runs ``dgboost train job.toml`` against them and
cancels the jobs on exit (also on Ctrl-C or an error). ``--print-job-script`` shows the
batch script without submitting anything. The scheduler runs in this process, on the login
(or a submit) node, listening on ``--interface``'s address; its dashboard stays on localhost.
"""

from __future__ import annotations

import argparse
import sys


def cluster_options(gpus_per_node: int = 4, cores_per_gpu: int = 8, memory_per_gpu_gb: int = 64,
                    partition: str | None = None, account: str | None = None, walltime: str = "02:00:00",
                    interface: str | None = None, python: str | None = None) -> dict:
    """SLURMCluster's keyword arguments for whole GPU nodes: ``gpus_per_node`` workers a job
    (``dask cuda worker`` through ``python -m dask_cuda.cli worker``), each with its GPU,
    ``cores_per_gpu`` threads' worth of cores and ``memory_per_gpu_gb`` of host memory."""
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node={gpus_per_node}: give at least 1")
    directives = [f"--gres=gpu:{gpus_per_node}", "--exclusive", f"--gpus-per-task={gpus_per_node}"]
    options = {
        "queue": partition,
        "account": account,
        "walltime": walltime,
        # dask cuda worker starts one worker per GPU and gives each the --nthreads and
        # --memory-limit that SLURMCluster derives from cores and memory: size them per GPU,
        # and book the whole node's share through job_cpu and job_mem.
        "processes": 1,
        "cores": cores_per_gpu,
        "memory": f"{memory_per_gpu_gb}GB",
        "job_cpu": gpus_per_node * cores_per_gpu,
        "job_mem": f"{gpus_per_node * memory_per_gpu_gb}GB",
        "worker_command": "dask_cuda.cli worker",
        "job_extra_directives": directives,
        "job_script_prologue": ["export CUDA_DEVICE_ORDER=PCI_BUS_ID", "export NCCL_DEBUG=WARN"],
        "scheduler_options": {"dashboard_address": "127.0.0.1:8787"},
        "interface": interface,
    }
    if python:
        options["python"] = python
    return {key: value for key, value in options.items() if value is not None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--gpus-per-node", type=int, default=4)
    parser.add_argument("--cores-per-gpu", type=int, default=8)
    parser.add_argument("--memory-per-gpu-gb", type=int, default=64)
    parser.add_argument("--partition")
    parser.add_argument("--account")
    parser.add_argument("--walltime", default="02:00:00")
    parser.add_argument("--interface", help="network interface the nodes reach this host on (ib0, eth0)")
    parser.add_argument("--print-job-script", action="store_true", help="print the batch script and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="a dgboost command, e.g. train job.toml")
    args = parser.parse_args(argv)

    from dask_jobqueue import SLURMCluster
    from distributed import Client

    options = cluster_options(args.gpus_per_node, args.cores_per_gpu, args.memory_per_gpu_gb, args.partition,
                              args.account, args.walltime, args.interface)
    with SLURMCluster(**options) as cluster:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.nodes)
        with Client(cluster) as client:
            client.wait_for_workers(args.nodes * args.gpus_per_node)
            if not args.command:
                print(f"cluster up at {cluster.scheduler_address}; Ctrl-C ends it")
                import threading

                threading.Event().wait()
            from dgboost.cli import main as dgboost_main

            return dgboost_main([*args.command, "--scheduler", cluster.scheduler_address])


if __name__ == "__main__":
    sys.exit(main())
