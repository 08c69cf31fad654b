"""deploy/: every recipe checked offline (linters, schemas, rendered scripts), and the
cluster scripts run end to end on this machine: a TLS scheduler and two CPU workers on
localhost, `dgboost train --scheduler-file` through them, everything torn down."""

import asyncio
import importlib.util
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

import dgboost

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
BIN = pathlib.Path(sys.executable).parent  # the environment's scripts: dask, shellcheck, hadolint
SCRIPTS = sorted(DEPLOY.rglob("*.sh"))


@pytest.fixture(autouse=True)
def _dask_config_kept():
    """Some recipes' libraries set dask's comm config for the whole process (a cloud cluster object
    turns TLS on, with its certificates); restore it, so that later test modules' clusters are what
    they would be alone."""
    import copy

    import dask
    import distributed  # noqa: F401 - its defaults in the config first

    saved = copy.deepcopy(dask.config.get("distributed.comm"))
    yield
    dask.config.config["distributed"]["comm"] = saved


def _load(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_recipe_is_there():
    for path in ["README.md", "workstation/workstation.py", "cluster/scheduler.sh", "cluster/worker.sh",
                 "cluster/make-certs.sh", "cluster/client-env.sh", "cluster/cluster.env.example",
                 "cluster/systemd/dgboost-scheduler.service", "cluster/systemd/dgboost-worker.service",
                 "docker/Dockerfile", "kubernetes/daskcluster.yaml", "slurm/slurm_cluster.py",
                 "cloud/cloud_cluster.py", "cloud/firewall.md"]:
        assert (DEPLOY / path).is_file(), path
    for script in ["cluster/scheduler.sh", "cluster/worker.sh", "cluster/make-certs.sh"]:
        assert os.access(DEPLOY / script, os.X_OK), f"{script} is not executable"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_shellcheck_passes(script):
    result = subprocess.run([str(BIN / "shellcheck"), "-x", "--severity=style", str(script)],
                            capture_output=True, text=True, cwd=script.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_passes_hadolint_and_runs_as_a_non_root_user():
    dockerfile = DEPLOY / "docker" / "Dockerfile"
    result = subprocess.run([str(BIN / "hadolint"), str(dockerfile)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    text = dockerfile.read_text()
    assert "FROM ${CUDA_IMAGE}" in text and "nvidia/cuda:" in text and "runtime" in text
    assert '"/src[cuda12' in text
    users = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")


def _crd_schema():
    """The DaskCluster CRD's openAPIV3Schema, as the dask-kubernetes operator's Helm chart ships it."""
    spec = importlib.util.find_spec("dask_kubernetes")
    assert spec is not None, "dask-kubernetes (test extra) is not installed"
    crd_path = (pathlib.Path(spec.submodule_search_locations[0]) / "operator" / "deployment" / "helm"
                / "dask-kubernetes-operator" / "crds" / "daskcluster.yaml")
    crd = yaml.safe_load(crd_path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return crd["spec"]["group"], crd["spec"]["names"]["kind"], version["schema"]["openAPIV3Schema"]


def _unknown_fields(value, schema, where="") -> list:
    """Fields the API server would prune: present in the manifest, absent from the schema."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or not isinstance(value, (dict, list)):
        return []
    if isinstance(value, list):
        return [f for i, item in enumerate(value) for f in _unknown_fields(item, schema.get("items", {}),
                                                                            f"{where}[{i}]")]
    properties = schema.get("properties")
    if properties is None:
        extra = schema.get("additionalProperties")
        return [f for k, v in value.items() for f in _unknown_fields(v, extra, f"{where}.{k}")] \
            if isinstance(extra, dict) else []
    found = []
    for key, item in value.items():
        if key not in properties:
            found.append(f"{where}.{key}")
        else:
            found += _unknown_fields(item, properties[key], f"{where}.{key}")
    return found


def test_kubernetes_manifest_validates_against_the_operators_crd():
    import jsonschema

    manifest = yaml.safe_load((DEPLOY / "kubernetes" / "daskcluster.yaml").read_text())
    group, kind, schema = _crd_schema()
    assert manifest["apiVersion"] == f"{group}/v1" and manifest["kind"] == kind
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind", "metadata")}
    jsonschema.validate(body, schema)
    assert _unknown_fields(body, schema) == []

    scheduler, worker = manifest["spec"]["scheduler"], manifest["spec"]["worker"]
    (scheduler_container,) = scheduler["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in scheduler_container["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    assert scheduler_container["readinessProbe"] and scheduler_container["livenessProbe"]
    assert "nvidia.com/gpu" not in scheduler_container["resources"].get("limits", {})
    assert scheduler["service"]["type"] == "ClusterIP"  # nothing exposed outside the cluster
    (worker_container,) = worker["spec"]["containers"]
    assert worker_container["args"][:3] == ["dask", "cuda", "worker"]
    assert worker_container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_slurm_job_script_asks_for_whole_gpu_nodes():
    recipe = _load(DEPLOY / "slurm" / "slurm_cluster.py")
    from dask_jobqueue import SLURMCluster

    options = recipe.cluster_options(gpus_per_node=4, cores_per_gpu=8, memory_per_gpu_gb=64, partition="gpu")
    with SLURMCluster(**options) as cluster:
        script = cluster.job_script()
    lines = script.splitlines()
    for directive in ["#SBATCH --gres=gpu:4", "#SBATCH --exclusive", "#SBATCH -p gpu", "#SBATCH --cpus-per-task=32",
                      "#SBATCH --mem=256GB"]:
        assert directive in lines, (directive, script)
    (command,) = [line for line in lines if " -m dask_cuda.cli worker " in line]
    assert "--nthreads 8" in command and "--memory-limit 59.60GiB" in command  # sized per GPU
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in lines
    with pytest.raises(ValueError, match="gpus_per_node=0"):
        recipe.cluster_options(gpus_per_node=0)


def _cloud_init(cluster_class, options):
    async def render():
        return cluster_class.get_cloud_init(**options)

    return asyncio.run(render())


def test_cloud_init_of_ec2_and_azure_runs_the_image_with_gpus_and_shared_memory():
    """Rendered offline: no credentials, no cloud call."""
    recipe = _load(DEPLOY / "cloud" / "cloud_cluster.py")
    image = "registry.example/dgboost:0.1.0"
    ec2 = recipe.ec2_options(image, n_workers=2, region="us-east-1", security_groups=["sg-0123"])
    azure = recipe.azure_options(image, "rg", "vnet", "nsg")
    azure["subscription_id"] = "00000000-0000-0000-0000-000000000000"  # a placeholder; nothing is called
    for cloud, options in [("ec2", ec2), ("azure", azure)]:
        text = _cloud_init(recipe.cluster_class(cloud), options)
        assert text.startswith("#cloud-config"), cloud
        (run,) = [line for line in text.splitlines() if "docker run" in line]
        assert "--gpus=all" in run and "--shm-size=16g" in run and image in run, (cloud, run)
        assert 'CUDA_DEVICE_ORDER="PCI_BUS_ID"' in run, (cloud, run)
    assert ec2["security"] is True and azure["security"] is True and azure["public_ingress"] is False
    gcp = recipe.gcp_options(image, "my-project")
    assert gcp["worker_ngpus"] == 1 and gcp["scheduler_ngpus"] == 0 and gcp["security"] is True
    with pytest.raises(SystemExit):  # ec2 without a security group: refused before any call
        recipe.main(["ec2", "job.toml", "--image", image])


def _wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _stop(processes):
    """SIGTERM every process group, then SIGKILL what is left; True if all ended on SIGTERM."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    clean = True
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            clean = False
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return clean


def _training_table(tmp_path):
    """A table written where job.toml points, and the model dgboost.train makes of it."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.standard_normal((3000, 4)).astype(np.float32), columns=list("abcd"))
    y = (X["a"] + X["b"] * X["c"] > 0).astype(np.float32)
    X.assign(label=y).to_csv(tmp_path / "train.csv", index=False, float_format="%.9g")
    (tmp_path / "job.toml").write_text(f"""
train = "{tmp_path / 'train.csv'}"
label_column = "label"
model = "{tmp_path / 'model.json'}"
num_boost_round = 8
objective = "binary:logistic"
max_depth = 3
""")
    return dgboost.train({"objective": "binary:logistic", "max_depth": 3}, X, y, num_boost_round=8)


def test_cluster_scripts_train_through_tls_on_localhost(tmp_path):
    expected = _training_table(tmp_path)
    tls = tmp_path / "tls"
    subprocess.run(["bash", str(DEPLOY / "cluster" / "make-certs.sh"), str(tls)], check=True, capture_output=True)
    assert (tls / "node.key").stat().st_mode & 0o077 == 0  # keys: owner only
    assert not (tls / "ca.key").exists()  # the CA's key is kept apart
    env = {**os.environ, "DGBOOST_TLS_DIR": str(tls), "DGBOOST_SCHEDULER_FILE": str(tmp_path / "scheduler.json"),
           "DGBOOST_SCHEDULER_PORT": "0", "DGBOOST_DASHBOARD": "127.0.0.1:0", "DGBOOST_DASK": str(BIN / "dask"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("scheduler", "worker-1", "worker-2")}
    processes = []
    try:
        processes.append(subprocess.Popen(["bash", str(DEPLOY / "cluster" / "scheduler.sh")], env=env,
                                          stdout=logs["scheduler"], stderr=subprocess.STDOUT, start_new_session=True))
        for name in ("worker-1", "worker-2"):
            processes.append(subprocess.Popen(["bash", str(DEPLOY / "cluster" / "worker.sh"), "--cpu", "--nthreads",
                                               "1"], env=env, stdout=logs[name], stderr=subprocess.STDOUT,
                                              start_new_session=True))
        scheduler_file = tmp_path / "scheduler.json"
        _wait_for(lambda: scheduler_file.exists() and scheduler_file.stat().st_size > 0, 60, "the scheduler file")
        assert json.loads(scheduler_file.read_text())["address"].startswith("tls://127.0.0.1:")
        _wait_for(lambda: (tmp_path / "scheduler.log").read_text().count("Register worker") >= 2, 60,
                  "two workers")
        command = (f"source {DEPLOY / 'cluster' / 'client-env.sh'} && "
                   f"{sys.executable} -m dgboost.cli train {tmp_path / 'job.toml'} --scheduler-file {scheduler_file} "
                   "--quiet")
        result = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.startswith("trained 8 rounds")
        # Without the client's certificate the TLS scheduler does not let the client in.
        plain = {k: v for k, v in env.items() if not k.startswith("DASK_DISTRIBUTED__COMM__TLS")}
        refused = subprocess.run([sys.executable, "-m", "dgboost.cli", "info", "--scheduler",
                                  json.loads(scheduler_file.read_text())["address"]], env=plain,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and "tls" in refused.stderr.lower(), refused.stderr
    finally:
        clean = _stop(processes)
        for log in logs.values():
            log.close()
    assert clean, "a process needed SIGKILL"
    assert all(process.returncode is not None for process in processes)
    trained = dgboost.Booster.load_model(tmp_path / "model.json")
    assert trained.save_raw() == expected.save_raw()  # two TLS workers train the single-process model


def test_workstation_keeps_a_cluster_up_until_stopped(tmp_path):
    expected = _training_table(tmp_path)
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "workstation.log", "w") as log:
        process = subprocess.Popen([sys.executable, str(DEPLOY / "workstation" / "workstation.py"), "--device", "cpu",
                                    "--workers", "2", "--dashboard", "", "--scheduler-file", str(scheduler_file)],
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_for(lambda: scheduler_file.exists(), 60, "the scheduler file")
            result = subprocess.run([sys.executable, "-m", "dgboost.cli", "train", str(tmp_path / "job.toml"),
                                     "--scheduler-file", str(scheduler_file), "--quiet"], env=env,
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stdout + result.stderr
        finally:
            clean = _stop([process])
    assert clean and not scheduler_file.exists()  # stopped cleanly, its scheduler file removed
    assert "127.0.0.1" in (tmp_path / "workstation.log").read_text()  # listening on localhost only
    trained = dgboost.Booster.load_model(tmp_path / "model.json")
    assert trained.save_raw() == expected.save_raw()
