"""Jobs on a shared cluster (dgboost/dask/_registry.py, _page.py): submitted and watched, queued by
priority, cancelled from any client, orphans cancelled, listed by the CLI, and the dashboard page
in a real browser (headless Chromium, where one is installed)."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
import urllib.request

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402
from dgboost.cli import main as cli  # noqa: E402
from _waiting import Slow, job_status, no_task_left, wait_for  # noqa: E402  (tests/_waiting.py)

N_ROWS = 3000
PARAMS = {"objective": "binary:logistic", "max_depth": 3, "eval_metric": ["logloss"]}


@pytest.fixture(scope="module")
def cluster():
    with dask.config.set({"dgboost.jobs.orphan-grace": "1s"}), \
            dgboost.dask.local_cluster("cpu", 2, threads_per_worker=1, dashboard_address=":0",
                                       silence_logs=logging.CRITICAL) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N_ROWS, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.float32)
    return X, y, da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)


def test_a_submitted_job_reports_its_progress_and_its_model(client, data):
    X, y, dX, dy = data
    job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=12, evals=[(dX, dy, "train")],
                              callbacks=[Slow(0.05)], name="watched")
    assert job.status in ("queued", "running") and not job.done()
    wait_for(lambda: (job.progress()["rounds_done"] or 0) >= 3, "three rounds")
    progress = job.progress()
    assert progress["status"] == "running" and progress["rounds"] == 12 and progress["rows"] == N_ROWS
    assert len(progress["workers"]) == 2 and "logloss" in progress["metrics"]["train"]
    assert progress["eta"] is not None and progress["eta"] >= 0
    model = job.result(timeout=120)
    assert job.status == "finished" and job.progress()["rounds_done"] == 12
    expected = dgboost.train(PARAMS, X, y, num_boost_round=12, evals=[(X, y, "train")])
    assert model.save_raw() == expected.save_raw()
    listed = {j["id"]: j for j in dgboost.dask.jobs(client)}[job.id]
    assert listed["status"] == "finished" and listed["name"] == "watched" and listed["round"] == 11
    curves = dgboost.dask.job_info(client, job.id[:8])["curves"]
    assert list(curves["train"]["logloss"]) == model.evals_result()["train"]["logloss"]
    job.record_model("/models/watched.json")  # where its model went, for whoever lists the jobs
    assert dgboost.dask.job_info(client, job.id)["model"] == "/models/watched.json"


def test_the_users_own_handler_of_the_progress_topic_keeps_its_events(client, data):
    from dgboost.dask._job import EVENT_TOPIC

    _, _, dX, dy = data
    seen = []
    client.subscribe_topic(EVENT_TOPIC, lambda event: seen.append(event[1]))
    try:
        job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=3)
        job.result(timeout=60)
        wait_for(lambda: sum(m.get("job", "").startswith(f"dgboost-train-{job.id}") for m in seen) >= 3,
                  "the user's handler to see the job's rounds")
        assert client._event_handlers[EVENT_TOPIC] is not None  # given back to the user's handler
        again = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2)
        again.result(timeout=60)
        wait_for(lambda: any(m.get("job", "").startswith(f"dgboost-train-{again.id}") for m in seen),
                  "the user's handler to see the next job")
    finally:
        client.unsubscribe_topic(EVENT_TOPIC)


def test_an_event_on_its_way_after_the_last_job_is_dropped(client, data):
    """distributed hands an event that arrives after the topic was unsubscribed to its handler,
    or unsubscribes again where it has none, which raised ("No event handler known") and
    logged an ERROR when a job was cancelled; the next job still hears its events."""
    from dgboost.dask._job import EVENT_TOPIC

    _, _, dX, dy = data
    dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2).result(timeout=60)
    client.sync(client._handle_event, EVENT_TOPIC, (0.0, {"job": "dgboost-train-late"}))
    job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=3)
    job.result(timeout=60)
    assert job.progress()["rounds_done"] == 3


def test_jobs_wait_their_turn_by_priority_then_submission(client, data):
    _, _, dX, dy = data
    first = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=15, callbacks=[Slow(0.1)], name="first")
    wait_for(lambda: first.status == "running", "the first job to run")
    low = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2, name="low")
    wait_for(lambda: job_status(client, low.id) == "queued", "the low job queued")
    high = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2, name="high", priority=5)
    wait_for(lambda: job_status(client, high.id) == "queued", "the high job queued")
    assert low.status == "queued" and high.status == "queued"
    for job in (first, low, high):
        job.result(timeout=120)
    table = {j["id"]: j for j in dgboost.dask.jobs(client)}
    assert table[first.id]["started"] < table[high.id]["started"] < table[low.id]["started"]


def _slowly(block, seconds: float):
    """A block made in ``seconds``: partitions that take a while to read."""
    time.sleep(seconds)
    return block


@pytest.mark.parametrize("stream", [False, True], ids=["held", "streamed"])
def test_a_queued_job_cuts_its_rows_in_its_turn_not_against_its_timeout(client, data, stream):
    """Jobs queued behind another read their rows once it ends; the first of them, its rows
    read sooner, then runs, its ranks holding the workers' one thread each. The second's
    pieces (its slices, or its streamed pages) are made in its own turn: the wait for them,
    bounded by dgboost.timeout (1 s here), does not count the first one's rounds (some 3 s)."""
    X, y, dX, dy = data
    long = dict(num_boost_round=20, callbacks=[Slow(0.15)])
    with dask.config.set({"dgboost.stream-partitions": stream}):
        running = dgboost.dask.submit(client, PARAMS, dX, dy, name="running", **long)
        wait_for(lambda: running.status == "running", "the first job to run")
        ahead = dgboost.dask.submit(client, PARAMS, dX, dy, name="ahead", **long)
        slowly = dX.map_blocks(_slowly, seconds=0.5, dtype=dX.dtype)  # read after the job ahead has started its ranks
        with dask.config.set({"dgboost.timeout": "1s"}):
            behind = dgboost.dask.submit(client, PARAMS, slowly, dy, num_boost_round=3, name="behind")
        wait_for(lambda: job_status(client, behind.id) == "queued", "the last job queued")
        model = behind.result(timeout=120)
        for job in (running, ahead):
            job.result(timeout=120)
    table = {j["id"]: j for j in dgboost.dask.jobs(client)}
    assert table[running.id]["started"] < table[ahead.id]["started"] < table[behind.id]["started"]
    assert model.save_raw() == dgboost.train(PARAMS, X, y, num_boost_round=3).save_raw()


def test_a_job_cancelled_while_its_pieces_are_made_stops_at_once(client, data):
    """A job in its turn but still packing its rows (eight partitions of a second each over two
    workers: some 4 s) ends at a cancel within the wait's half-second looks, starts no rank,
    and leaves the workers to the next job."""
    _, _, dX, dy = data
    slow, labels = dX.rechunk(375).map_blocks(_slowly, seconds=1.0, dtype=dX.dtype), dy.rechunk(375)
    with dask.config.set({"dgboost.stream-partitions": True}):
        job = dgboost.dask.submit(client, PARAMS, slow, labels, num_boost_round=3)
        wait_for(lambda: job.status == "running", "the job's turn")
        began = time.monotonic()
        job.cancel()
        with pytest.raises(dgboost.dask.JobCancelled):
            job.result(timeout=60)
    assert time.monotonic() - began < 3.0
    no_task_left(client)
    assert dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=2).num_boosted_rounds() == 2


def test_cancelling_a_running_and_a_queued_job(client, data):
    X, y, dX, dy = data
    running = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=500, callbacks=[Slow(0.05)])
    wait_for(lambda: running.status == "running", "the job to run")
    queued = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=3)
    wait_for(lambda: job_status(client, queued.id) == "queued", "the second job queued")
    queued.cancel()
    with pytest.raises(dgboost.dask.JobCancelled, match="cancelled"):
        queued.result(timeout=30)
    assert queued.status == "cancelled" and job_status(client, queued.id) == "cancelled"
    began = time.monotonic()
    running.cancel()
    with pytest.raises(dgboost.dask.JobCancelled):
        running.result(timeout=60)
    assert time.monotonic() - began < 10 and running.status == "cancelled"
    no_task_left(client)
    assert dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=2).num_boosted_rounds() == 2  # workers free


def test_cancelling_a_job_of_one_worker_stops_its_rank(data):
    """A job of one worker calls no collective an abort would interrupt: its rank looks for the
    abort before each round, so a cancel frees the worker within a round, not after the rounds
    left (100 s here)."""
    _, _, dX, dy = data
    with dgboost.dask.local_cluster("cpu", 1, threads_per_worker=1, silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2000, callbacks=[Slow(0.05)])
        wait_for(lambda: (job.progress()["rounds_done"] or 0) >= 2, "two rounds")
        began = time.monotonic()
        job.cancel()
        with pytest.raises(dgboost.dask.JobCancelled):
            job.result(timeout=60)
        assert time.monotonic() - began < 5
        no_task_left(client, timeout=5)
        again = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=2)  # its worker is free
        assert again.result(timeout=20).num_boosted_rounds() == 2


def test_a_cancelled_job_keeps_its_workers_until_its_ranks_stop(cluster, client, data, another_client):
    _, _, dX, dy = data
    first = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=500, callbacks=[Slow(0.05)])
    wait_for(lambda: first.status == "running", "the first job to run")
    second = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=3)
    wait_for(lambda: job_status(client, second.id) == "queued", "the second job queued")
    with another_client(cluster.scheduler_address) as other:
        dgboost.dask.cancel(other, first.id)
    wait_for(lambda: second.status != "queued", "the second job's turn")
    ranks = [key for keys in client.processing().values() for key in keys if first.id in str(key)]
    assert not ranks, f"the next job started beside the cancelled one's ranks: {ranks}"
    second.result(timeout=60)
    with pytest.raises(dgboost.dask.JobCancelled):
        first.result(timeout=60)
    assert job_status(client, first.id) == "cancelled"


async def _table(workers=(), **scheduler):
    """A job table started on a stand-in scheduler (its ``workers``; other attributes given)."""
    import types

    from dgboost.dask._registry import JobRegistry

    table = JobRegistry()
    await table.start(types.SimpleNamespace(handlers={}, workers=dict.fromkeys(workers, 0), tasks={},
                                            log_event=lambda *args: None, **scheduler))
    return table


def _submitted(table, id: str, priority: int = 0) -> None:
    table.submit({"id": id, "name": id, "owner": "c", "user": "u", "priority": priority, "rounds": 1})


def test_a_job_ended_while_queued_is_not_given_the_workers():
    import asyncio

    async def scenario():
        table = await _table()
        for id in ("a", "b"):
            _submitted(table, id)
        assert await table.acquire("a", "dgboost-train-a", ["w"]) == "running"
        waiting = asyncio.ensure_future(table.acquire("b", "dgboost-train-b", ["w"]))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await table.finish("b", "failed", "its client's thread raised")  # while it waited
        await table.release("a", final=True)
        assert await asyncio.wait_for(waiting, 5) == "failed"
        assert table.jobs["b"]["status"] == "failed" and table.jobs["a"]["status"] == "ending"
        await table.finish("a", "finished")
        assert table.jobs["a"]["status"] == "finished"

    asyncio.run(scenario())


def test_a_worker_leaving_aborts_its_running_jobs_ranks_elsewhere_at_once():
    """The table aborts the ranks of a running job that held a worker the scheduler removed, on
    the job's other workers (GPU ranks blocked in NCCL would wait for the client's next look);
    a queued job, and a job on other workers, are left alone."""
    import asyncio

    async def scenario():
        sent = []

        async def broadcast(msg, workers, on_error):
            sent.append((msg, sorted(workers)))

        table = await _table(("w1", "w2", "w3"), broadcast=broadcast)
        for id, workers in (("a", ["w0", "w1", "w2"]), ("b", ["w3"]), ("c", ["w1"])):
            _submitted(table, id)
            if id != "c":  # c stays queued behind a
                assert await table.acquire(id, f"dgboost-train-{id}", workers) == "running"
        table.remove_worker(table.scheduler, "w0", stimulus_id="gone")
        await asyncio.sleep(0.05)
        assert sent == [({"op": "dgboost_collective_abort", "job": "dgboost-train-a",
                          "reason": "worker w0 (rank 0) left the cluster"}, ["w1", "w2"])]

    asyncio.run(scenario())


def test_a_restart_keeps_its_turn_and_a_cancel_while_it_restarts_ends_it():
    import asyncio

    async def scenario():
        table = await _table()
        _submitted(table, "a")
        assert await table.acquire("a", "dgboost-train-a", ["w1", "w2"]) == "running"
        assert await table.release("a", final=False) == "restarting"  # a worker lost: a restart follows
        _submitted(table, "b", priority=5)
        waiting = asyncio.ensure_future(table.acquire("b", "dgboost-train-b", ["w1"]))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the restarting job keeps its workers, higher priority or not
        assert await table.acquire("a", "dgboost-train-a-r1", ["w1"]) == "running"  # its turn kept
        assert table.jobs["a"]["restarts"] == 1
        await table.release("a", final=False)
        assert await table.cancel("a") == "restarting"  # cancelled between attempts
        assert await table.acquire("a", "dgboost-train-a-r2", ["w1"]) == "cancelled"
        assert await asyncio.wait_for(waiting, 5) == "running"

    asyncio.run(scenario())


def test_another_client_lists_and_cancels_a_job(cluster, client, data, another_client):
    _, _, dX, dy = data
    job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=500, callbacks=[Slow(0.05)], name="theirs")
    wait_for(lambda: (job.progress()["rounds_done"] or 0) >= 1, "the job to run")
    with another_client(cluster.scheduler_address) as other:
        listed = {j["id"]: j for j in dgboost.dask.jobs(other)}[job.id]
        assert listed["status"] == "running" and listed["owner"] == client.id
        assert dgboost.dask.cancel(other, job.id) == "running"
        with pytest.raises(KeyError, match="no dgboost job 'nope'"):
            dgboost.dask.cancel(other, "nope")
        for call in (dgboost.dask.cancel, dgboost.dask.job_info):
            with pytest.raises(TypeError, match="^id=123 must be a job's id or its unique start, a non-empty string"):
                call(other, 123)
    with pytest.raises(dgboost.dask.JobCancelled, match="cancelled by client"):
        job.result(timeout=60)
    no_task_left(client)


def test_a_job_whose_client_left_is_cancelled_after_the_grace(cluster, client, data, another_client):
    _, _, dX, dy = data
    other = another_client(cluster.scheduler_address)
    job = dgboost.dask.submit(other, PARAMS, dX, dy, num_boost_round=2000, callbacks=[Slow(0.05)])
    wait_for(lambda: (job.progress()["rounds_done"] or 0) >= 1, "the job to run")
    other.close()  # a notebook that crashed; dgboost.jobs.orphan-grace is 1 s here
    wait_for(lambda: job_status(client, job.id) == "cancelled", "the orphan cancelled", timeout=30)
    no_task_left(client)


def test_the_cli_lists_shows_and_cancels(cluster, client, data, capsys):
    _, _, dX, dy = data
    done = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=6, evals=[(dX, dy, "train")], name="done")
    done.result(timeout=60)
    address = cluster.scheduler_address
    assert cli(["jobs", "--scheduler", address]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith(done.id[:8]))
    assert "done" in line and "finished" in line and "6/6" in line and "train-logloss" in line
    assert cli(["jobs", "show", done.id[:8], "--scheduler", address]) == 0
    out = capsys.readouterr().out
    assert "train-logloss" in out and "*" in out  # the curve drawn in the terminal
    running = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=500, callbacks=[Slow(0.05)])
    wait_for(lambda: running.status == "running", "the job to run")
    assert cli(["jobs", "cancel", running.id, "--scheduler", address]) == 0
    with pytest.raises(dgboost.dask.JobCancelled):
        running.result(timeout=60)
    assert cli(["jobs", "cancel", "nope", "--scheduler", address]) == 2
    assert "no dgboost job 'nope'" in capsys.readouterr().err
    no_task_left(client)


def _page_address(cluster) -> str:
    return cluster.dashboard_link.replace("/status", "")


def test_the_page_and_its_table(cluster, client, data):
    _, _, dX, dy = data
    job = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=4, evals=[(dX, dy, "train")])
    model = job.result(timeout=60)
    base = _page_address(cluster)
    with urllib.request.urlopen(base + "/dgboost/jobs", timeout=10) as response:
        assert b"<h1>dgboost jobs</h1>" in response.read()
    with urllib.request.urlopen(base + "/dgboost/jobs.json", timeout=10) as response:
        table = json.loads(response.read())["jobs"]
    assert table and all({"id", "status", "round"} <= set(row) and "curves" not in row for row in table)
    with urllib.request.urlopen(base + f"/dgboost/jobs.json?id={job.id}", timeout=10) as response:
        curves = json.loads(response.read())["curves"]
    assert curves["train"]["logloss"] == model.evals_result()["train"]["logloss"]
    with urllib.request.urlopen(base + "/sitemap.json", timeout=10) as response:  # the dashboard's own index
        assert "/dgboost/jobs" in json.loads(response.read())["paths"]


def test_long_curves_are_thinned_for_the_page():
    from dgboost.dask._page import _CURVE_POINTS, _thinned

    for n in (0, 1, _CURVE_POINTS, _CURVE_POINTS + 1, 10_007, 100_000):
        values = list(range(n))
        thin = _thinned(values)
        assert len(thin) <= _CURVE_POINTS + 1 and thin[:1] == values[:1] and thin[-1:] == values[-1:]
        assert thin == sorted(set(thin))  # in order, none twice


def _browser() -> str | None:
    return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)


def test_the_page_in_a_browser_shows_the_jobs_and_draws_the_curve(cluster, client, data, tmp_path):
    browser = _browser()
    if browser is None:
        pytest.skip("no headless browser (Debian's chromium package) installed")
    _, _, dX, dy = data
    finished = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=8, evals=[(dX, dy, "train")], name="one")
    finished.result(timeout=60)
    running = dgboost.dask.submit(client, PARAMS, dX, dy, num_boost_round=500, evals=[(dX, dy, "train")],
                                  callbacks=[Slow(0.05)], name="two")
    wait_for(lambda: (running.progress()["rounds_done"] or 0) >= 3, "three rounds")
    url = _page_address(cluster) + "/dgboost/jobs"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=4000",
             f"--user-data-dir={tmp_path / 'profile'}"]
    try:
        dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
        subprocess.run([browser, *flags, "--window-size=1000,800", f"--screenshot={tmp_path / 'jobs.png'}", url],
                       capture_output=True, timeout=120)
    finally:
        running.cancel()
    assert 'data-loaded="true"' in dom, dom[:2000]
    for job, status in ((finished, "finished"), (running, "running")):
        row = next(part for part in dom.split("<tr") if f'data-id="{job.id}"' in part)
        assert f">{status}<" in row and f">{job.name}<" in row
    assert 'class="curve"' in dom and "train-logloss" in dom  # the selected (running) job's curve
    assert (tmp_path / "jobs.png").stat().st_size > 1000
    with pytest.raises(dgboost.dask.JobCancelled):
        running.result(timeout=60)
