"""A dgboost GPU cluster on AWS EC2, Google Cloud or Azure through dask-cloudprovider.

    pip install "dgboost[cuda12]" "dask-cloudprovider[aws]"      # or [gcp], [azure]
    python deploy/cloud/cloud_cluster.py ec2 --image ghcr.io/your-org/dgboost:0.1.0 \\
        --security-group sg-0123 --workers 2 job.toml

starts a scheduler VM and GPU worker VMs, each running the image of deploy/docker with
``docker run --gpus=all --shm-size=...``, trains ``job.toml`` (the config of ``dgboost train``)
through them, writes the model where the config says, and terminates every VM on exit:
normally, on an error, on Ctrl-C or on SIGTERM. Credentials come from each cloud's usual
place (AWS profile, gcloud, az login); nothing here stores one.

Traffic: dask-cloudprovider's ``security=True`` (the default, kept here) gives the cluster
temporary TLS certificates, and only this process holds the client's. The firewall must let
the workers reach the scheduler and each other (8786 and the workers' ports, NCCL between
GPUs) and let you reach 8786 from your address only: ``firewall.md`` beside this file has
the commands. The dashboard is not opened; reach it with an SSH tunnel.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys

#: The worker class of every recipe: one dask-cuda worker per GPU of a VM.
WORKER_CLASS = "dask_cuda.CUDAWorker"
#: NCCL needs more than docker's default 64 MiB of /dev/shm.
DOCKER_ARGS = "--shm-size=16g --ulimit memlock=-1"
ENVIRONMENT = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_DEBUG": "WARN"}


def ec2_options(image: str, n_workers: int = 2, instance_type: str = "g5.2xlarge", region: str | None = None,
                security_groups: list | None = None, subnet_id: str | None = None) -> dict:
    """EC2Cluster's keyword arguments: GPU instances (g5: A10G, g6: L4, p4d/p5: A100/H100),
    the scheduler's VM included (see below).
    Give ``security_groups`` made as firewall.md says: without it dask-cloudprovider makes a
    group open to every address."""
    # One instance type for scheduler and workers: dask-cloudprovider decides from it whether
    # the VMs get NVIDIA drivers and `docker run --gpus=all`.
    options = {"region": region, "instance_type": instance_type,
               "docker_image": image, "docker_args": DOCKER_ARGS, "worker_class": WORKER_CLASS,
               "n_workers": n_workers, "env_vars": dict(ENVIRONMENT), "filesystem_size": 100,
               "security": True, "bootstrap": True, "security_groups": security_groups, "subnet_id": subnet_id,
               "enable_detailed_monitoring": False}
    return {key: value for key, value in options.items() if value is not None}


def gcp_options(image: str, projectid: str, n_workers: int = 2, zone: str = "us-central1-a",
                machine_type: str = "g2-standard-8", gpu_type: str = "nvidia-l4", ngpus: int = 1,
                network: str = "default") -> dict:
    """GCPCluster's keyword arguments: G2 machines with L4 GPUs by default (a2 for A100).
    The scheduler asks for no GPU."""
    return {"projectid": projectid, "zone": zone, "network": network, "machine_type": machine_type,
            "scheduler_machine_type": "n2-standard-2", "worker_gpu_type": gpu_type, "worker_ngpus": ngpus,
            "scheduler_ngpus": 0, "docker_image": image, "docker_args": DOCKER_ARGS,
            "worker_class": WORKER_CLASS, "n_workers": n_workers, "env_vars": dict(ENVIRONMENT),
            "filesystem_size": 100, "security": True, "bootstrap": True}


def azure_options(image: str, resource_group: str, vnet: str, security_group: str, n_workers: int = 2,
                  location: str = "eastus", vm_size: str = "Standard_NC4as_T4_v3") -> dict:
    """AzureVMCluster's keyword arguments: NC-series GPU VMs (T4 by default; NC A100 v4 for
    A100s). ``security_group`` is the network security group of firewall.md."""
    return {"resource_group": resource_group, "vnet": vnet, "security_group": security_group,
            "location": location, "vm_size": vm_size, "scheduler_vm_size": "Standard_D2s_v3",
            "docker_image": image, "docker_args": DOCKER_ARGS, "worker_class": WORKER_CLASS,
            "n_workers": n_workers, "env_vars": dict(ENVIRONMENT), "security": True, "bootstrap": True,
            "public_ingress": False}


def cluster_class(cloud: str):
    if cloud == "ec2":
        from dask_cloudprovider.aws import EC2Cluster

        return EC2Cluster
    if cloud == "gcp":
        from dask_cloudprovider.gcp import GCPCluster

        return GCPCluster
    if cloud == "azure":
        from dask_cloudprovider.azure import AzureVMCluster

        return AzureVMCluster
    raise ValueError(f"cloud={cloud!r}: choose ec2, gcp or azure")


@contextlib.contextmanager
def _cloud_client(make_cluster, options: dict, workers: int):
    """A Client of a new cluster of VMs, every one terminated on exit."""
    from distributed import Client

    with make_cluster(**options) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        yield client


def _interrupt(signum, frame):
    """SIGTERM unwinds like Ctrl-C, so the context managers terminate the VMs."""
    raise KeyboardInterrupt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cloud", choices=("ec2", "gcp", "azure"))
    parser.add_argument("config", help="a dgboost train config (TOML), as `dgboost train` reads")
    parser.add_argument("--image", required=True, help="the image of deploy/docker/Dockerfile, in a registry")
    parser.add_argument("--workers", type=int, default=2, help="GPU VMs")
    parser.add_argument("--instance-type", help="ec2 instance type, gcp machine type or azure VM size")
    parser.add_argument("--region", help="ec2 region")
    parser.add_argument("--security-group", help="ec2 security group id, or azure network security group")
    parser.add_argument("--project", help="gcp project id")
    parser.add_argument("--zone", default="us-central1-a", help="gcp zone")
    parser.add_argument("--resource-group", help="azure resource group")
    parser.add_argument("--vnet", help="azure virtual network")
    parser.add_argument("--location", default="eastus", help="azure location")
    args = parser.parse_args(argv)

    if args.cloud == "ec2":
        if not args.security_group:
            parser.error("ec2 needs --security-group (firewall.md): the default group is open to the world")
        options = ec2_options(args.image, args.workers, args.instance_type or "g5.2xlarge", args.region,
                              [args.security_group])
    elif args.cloud == "gcp":
        if not args.project:
            parser.error("gcp needs --project")
        options = gcp_options(args.image, args.project, args.workers, args.zone,
                              args.instance_type or "g2-standard-8")
    else:
        if not (args.resource_group and args.vnet and args.security_group):
            parser.error("azure needs --resource-group, --vnet and --security-group")
        options = azure_options(args.image, args.resource_group, args.vnet, args.security_group, args.workers,
                                args.location, args.instance_type or "Standard_NC4as_T4_v3")

    from dgboost.jobs import evaluation_path, load_config, train_job

    config = load_config(args.config, [])
    signal.signal(signal.SIGTERM, _interrupt)
    # train_job checks the config, its tables and the model's path before it connects:
    # bad input is an error before any VM starts.
    summary = train_job(config, functools.partial(_cloud_client, cluster_class(args.cloud), options, args.workers))
    print(f"trained {summary.get('rounds', '?')} rounds; model at {config['model']}, "
          f"evaluation at {evaluation_path(config['model'])}; every VM terminated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
