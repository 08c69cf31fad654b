"""Helpers of the tests that watch jobs run (the job service's, on CPU workers and on GPUs)."""

from __future__ import annotations

import time

from dgboost.callback import TrainingCallback


class Slow(TrainingCallback):
    """Sleeps ``seconds`` after each round: a job that runs long enough to be watched."""

    never_stops = True

    def __init__(self, seconds: float):
        self.seconds = seconds

    def after_iteration(self, model, epoch, evals_log):
        time.sleep(self.seconds)
        return False


def wait_for(predicate, what: str, timeout: float = 60) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def no_task_left(client, timeout: float = 60) -> None:
    """Wait for every task of the cluster to end (the ranks of a failed or cancelled job)."""
    wait_for(lambda: not any(client.processing().values()), "every task to end", timeout)


def job_status(client, id: str) -> str:
    """Job ``id``'s status in the cluster's job table."""
    import dgboost.dask

    return {j["id"]: j for j in dgboost.dask.jobs(client)}[id]["status"]


def bundle_transfers(dask_worker) -> list:
    """The keys of a job's partitions (bundles, slices of them) this worker fetched through Dask
    (its transfer log): none where the ranks move rows themselves (dask/_shards.move_pieces)."""
    return [str(key) for transfer in dask_worker.transfer_incoming_log for key in transfer["keys"]
            if "make_bundle" in str(key) or "slice_bundle" in str(key)]
