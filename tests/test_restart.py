"""A Dask job that loses a worker resumes on the workers left and makes the model an
uninterrupted run makes, byte for byte (dgboost/dask/_restart.py): worker processes killed
with SIGKILL at a round, callbacks' state kept across the restart, retryable errors
retried and others not, restarts bounded by max_restarts."""

from __future__ import annotations

import logging
import os
import re
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402
from dgboost.callback import TrainingCallback, TrainingCheckpoint  # noqa: E402
from _waiting import no_task_left  # noqa: E402  (tests/_waiting.py)

N_ROWS, N_WORKERS = 4000, 3
PARAMS = {"objective": "binary:logistic", "max_depth": 4, "subsample": 0.8, "colsample_bynode": 0.8,
          "eval_metric": ["logloss", "auc"]}


@pytest.fixture(scope="module")
def cluster():
    with dgboost.dask.local_cluster("cpu", N_WORKERS, threads_per_worker=1, silence_logs=logging.CRITICAL) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def client(cluster):
    with distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N_ROWS, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


class _KillAt(TrainingCallback):
    """On the coordinator, after round ``at[i]``, kills the process of ``victims[i]`` (a pid; None:
    the coordinator's own, whichever it is then), once (a marker file says it was done, so a
    restarted job does not kill again)."""

    never_stops = True

    def __init__(self, at, victims, marker_dir):
        self.at, self.victims, self.marker_dir = list(at), list(victims), str(marker_dir)

    def after_iteration(self, model, epoch, evals_log):
        for i, (epoch_i, pid) in enumerate(zip(self.at, self.victims)):
            marker = os.path.join(self.marker_dir, f"killed-{i}")
            if epoch == epoch_i and not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid() if pid is None else pid, signal.SIGKILL)
        return False


class _KillInAfterTraining(TrainingCallback):
    """Kills the coordinator's own process in after_training, once: every round is done, and
    (with early stopping) the decision to stop taken."""

    never_stops = True

    def __init__(self, marker):
        self.marker = str(marker)

    def after_training(self, model):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return model


class _RaiseOnce(TrainingCallback):
    """Raises ``error`` on the coordinator after round ``at``, the first time only."""

    never_stops = True

    def __init__(self, at, error, marker):
        self.at, self.error, self.marker = at, error, str(marker)

    def after_iteration(self, model, epoch, evals_log):
        if epoch == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise self.error
        return False


def _rank_pids(cluster, client) -> list[int]:
    """The process of each rank (the job's workers are the cluster's, sorted by address), with
    N_WORKERS of them: a killed worker's nanny starts another, and where it does not come (its
    name still taken at the scheduler, say) the cluster starts a new one."""
    try:
        client.wait_for_workers(N_WORKERS, timeout=20)
    except (TimeoutError, distributed.TimeoutError, distributed.exceptions.WorkerStartTimeoutError):
        cluster.scale(len(cluster.worker_spec) + N_WORKERS - len(client.run(os.getpid)))
        client.wait_for_workers(N_WORKERS, timeout=120)
    pids = client.run(os.getpid)
    return [pids[address] for address in sorted(pids)]


def _kept_here() -> int:
    from dgboost.dask import _streamed

    return len(_streamed._KEPT)


def _collections(X, y):
    return da.from_array(X, chunks=700), da.from_array(y, chunks=700)


def test_a_streamed_job_resumes_to_the_model_of_an_uninterrupted_run(cluster, client, data, tmp_path, caplog):
    """Rows streamed into pages (dask/_streamed.py): the new attempt keeps the pieces the
    workers left had packed, their margins continued by the rounds so far on their bins, and
    packs the lost worker's rows again (their margins from their values)."""
    from dgboost.dask._job import EVENT_TOPIC

    X, y = data
    # 8 bytes a row: a share of 1334 rows is paged; verbosity 2: the shares' log lines
    params = {**PARAMS, "max_device_matrix_bytes": 4000, "verbosity": 2}
    dX, dy = _collections(X, y)
    victim = _rank_pids(cluster, client)[1]  # rank 1: rows [1334, 2667)
    with caplog.at_level(logging.INFO, logger="dgboost"):
        model = dgboost.dask.train(client, params, dX, dy, num_boost_round=8,
                                   callbacks=[_KillAt([3], [victim], tmp_path)])
    assert os.path.exists(tmp_path / "killed-0")
    assert model.save_raw() == dgboost.train(params, X, y, num_boost_round=8).save_raw()
    assert "(2667 rows' pages kept from the last attempt, 1333 rows moved)" in caplog.text, caplog.text
    resumed = [msg["resumed"] for _, msg in client.get_events(EVENT_TOPIC) if "resumed" in msg]
    assert resumed[-1]["rows_moved"] == 1333
    assert set(client.run(_kept_here).values()) == {0}  # every kept piece taken, or dropped


def test_a_kept_piece_gone_from_its_worker_restarts_again(cluster, client, data, tmp_path, monkeypatch, caplog):
    """A worker replaced at its address between two attempts no longer holds the pieces it
    kept (here they are dropped as soon as kept): the attempt that wants them is interrupted
    (KeptPieceGone) and the next one packs those rows again, to the uninterrupted model."""
    from dgboost.dask import _attempts, _streamed

    keep, calls = _streamed.keep, []

    def keep_then_lose(client, *args):
        kept = keep(client, *args)
        calls.append(kept)
        if len(calls) == 1:
            client.run(_streamed._drop_kept, kept.tokens)
        return kept

    monkeypatch.setattr(_attempts, "keep", keep_then_lose)
    X, y = data
    params = {**PARAMS, "max_device_matrix_bytes": 4000}
    dX, dy = _collections(X, y)
    victim = _rank_pids(cluster, client)[1]
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        model = dgboost.dask.train(client, params, dX, dy, num_boost_round=8,
                                   callbacks=[_KillAt([3], [victim], tmp_path)])
    assert model.save_raw() == dgboost.train(params, X, y, num_boost_round=8).save_raw()
    assert "no longer holds the packed piece" in caplog.text and "restart 2 of 3" in caplog.text, caplog.text
    assert set(client.run(_kept_here).values()) == {0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_killed_worker_resumes_to_the_model_of_an_uninterrupted_run(cluster, client, data, seed, tmp_path, caplog):
    X, y = data
    rng = np.random.default_rng(seed)
    rank, at = int(rng.integers(N_WORKERS)), int(rng.integers(1, 14))
    dX, dy = _collections(X, y)
    evals = [(dX, dy, "train")]
    victim = _rank_pids(cluster, client)[rank]
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        model = dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=16, evals=evals,
                                   callbacks=[_KillAt([at], [victim], tmp_path)])
    assert os.path.exists(tmp_path / "killed-0")
    expected = dgboost.train(PARAMS, X, y, num_boost_round=16, evals=[(X, y, "train")])
    assert model.save_raw() == expected.save_raw(), f"rank {rank} killed after round {at}"
    assert model.evals_result() == expected.evals_result()
    text = caplog.text
    assert "left the cluster" in text and "restart 1 of 3" in text, text
    assert "finished" in text and "after the loss" in text  # how long the restart took
    from dgboost.dask._job import EVENT_TOPIC

    events = [msg for _, msg in client.get_events(EVENT_TOPIC)]
    restarts = [msg["restart"] for msg in events if "restart" in msg]
    # It goes on after the last round the client holds: the victim's (after its kill, on rank 0)
    # or the next (on GPUs, where peers vouch for rounds, the round of the loss may be done again).
    assert restarts and at - 1 <= restarts[-1]["round"] <= at + 1 and restarts[-1]["restart"] == 1
    resumed = [msg["resumed"] for msg in events if "resumed" in msg]
    assert resumed and resumed[-1]["workers"] >= N_WORKERS - 1 and resumed[-1]["rows_moved"] >= 0


def test_a_restart_takes_the_workers_there_are_then(cluster, client, data, tmp_path, monkeypatch, caplog):
    from dgboost.dask import _attempts

    X, y = data
    dX, dy = _collections(X, y)
    victim = _rank_pids(cluster, client)[1]
    before = set(_pids(client))
    restart = _attempts._Attempts._restart

    specs = []

    def once_one_joined(self, interrupted, restarts):
        cluster.scale(len(cluster.worker_spec) + 1)  # a worker joins while the job restarts
        client.wait_for_workers(len(before), timeout=120)
        specs.append(restart(self, interrupted, restarts))
        return specs[-1]

    monkeypatch.setattr(_attempts._Attempts, "_restart", once_one_joined)
    with caplog.at_level(logging.WARNING, logger="dgboost"):
        model = dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=10,
                                   callbacks=[_KillAt([3], [victim], tmp_path)])
    assert model.save_raw() == dgboost.train(PARAMS, X, y, num_boost_round=10).save_raw()
    resumed_on = int(re.search(r"resuming on (\d+) workers", caplog.text)[1])
    assert resumed_on >= len(before) and set(_pids(client)) - before  # the newcomer, among them
    cuts = specs[-1].resume.cuts  # the first attempt's, from its coordinator through the journal
    assert cuts is not None and cuts.n_features == X.shape[1] and len(cuts.values) > X.shape[1]


def _pids(client) -> dict:
    return client.run(os.getpid)


def test_early_stopping_and_checkpoints_keep_their_state_across_a_restart(cluster, client, data, tmp_path):
    X, y = data
    dX, dy = _collections(X, y)
    valid_X, valid_y = X[:1000], y[:1000]
    dvX, dvy = da.from_array(valid_X, chunks=400), da.from_array(valid_y, chunks=400)
    params = {**PARAMS, "eta": 0.6, "max_depth": 6}
    (tmp_path / "local").mkdir()
    (tmp_path / "dask").mkdir()
    expected = dgboost.train(params, X, y, num_boost_round=60, evals=[(valid_X, valid_y, "valid")],
                             early_stopping_rounds=4,
                             callbacks=[TrainingCheckpoint(tmp_path / "local" / "m-{round}.json", interval=3)])
    assert expected.num_boosted_rounds() < 60  # it did stop early
    victim = _rank_pids(cluster, client)[0]  # the coordinator, which runs the callbacks
    model = dgboost.dask.train(client, params, dX, dy, num_boost_round=60, evals=[(dvX, dvy, "valid")],
                               early_stopping_rounds=4,
                               callbacks=[TrainingCheckpoint(tmp_path / "dask" / "m-{round}.json", interval=3),
                                          _KillAt([4], [victim], tmp_path)])
    assert os.path.exists(tmp_path / "killed-0")
    assert model.save_raw() == expected.save_raw()
    assert model.best_iteration == expected.best_iteration
    local = sorted(os.listdir(tmp_path / "local"))
    assert sorted(os.listdir(tmp_path / "dask")) == local
    for name in local:
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name


def test_a_job_that_stopped_early_and_lost_its_coordinator_trains_no_more(client, data, tmp_path):
    X, y = data
    dX, dy = _collections(X, y)
    valid_X, valid_y = X[:1000], y[:1000]
    dvX, dvy = da.from_array(valid_X, chunks=400), da.from_array(valid_y, chunks=400)
    params = {**PARAMS, "eta": 0.6, "max_depth": 6}
    expected = dgboost.train(params, X, y, num_boost_round=60, evals=[(valid_X, valid_y, "valid")],
                             early_stopping_rounds=3)
    assert expected.num_boosted_rounds() < 60
    model = dgboost.dask.train(client, params, dX, dy, num_boost_round=60, evals=[(dvX, dvy, "valid")],
                               early_stopping_rounds=3, callbacks=[_KillInAfterTraining(tmp_path / "killed")])
    assert os.path.exists(tmp_path / "killed")
    assert model.save_raw() == expected.save_raw() and model.evals_result() == expected.evals_result()


class _Fetch:
    """A finished rank 0's future whose result arrives after ``seconds`` of one look's wait (a
    transfer a shorter look cuts short), or never (its worker gone with it)."""

    def __init__(self, seconds: float = float("inf"), status: str = "finished"):
        self.seconds, self.status, self.waits = seconds, status, []

    def result(self, timeout):
        self.waits.append(timeout)
        if timeout < self.seconds:
            raise TimeoutError(f"timed out after {timeout} s.")
        return "the model"


class _RunAgain(_Fetch):
    """Rank 0's future run again where its worker came back: the run fails (its peers gone)."""

    def result(self, timeout):
        self.waits.append(timeout)
        self.status = "error"
        raise ConnectionRefusedError("rank 0 could not reach rank 1")


@pytest.mark.parametrize("how", ["worker gone", "future lost, worker back", "run again, erred"])
def test_a_coordinator_lost_before_its_model_is_fetched_is_a_lost_worker(monkeypatch, how):
    """Rank 0 finished, then its worker died before the client fetched the model: the result
    went with it. The attempt is interrupted at once (the journal holds every round for the
    next), where the client used to wait dgboost.timeout and fail without a restart. A nanny
    may bring the worker back at the same address: the future is lost all the same (and the
    scheduler would run rank 0 again there, alone)."""
    from types import SimpleNamespace

    from dgboost.dask import _attempts

    stopped = []
    gone = how == "worker gone"
    monkeypatch.setattr(_attempts, "_alive", lambda client, workers: set(workers[1:] if gone else workers))
    monkeypatch.setattr(_attempts, "_stop", lambda client, job, tasks, reason, alive: stopped.append(reason))
    job = SimpleNamespace(addresses=("tcp://rank0", "tcp://rank1"), timeout=300.0, name="a-job")
    fetch = _RunAgain() if how == "run again, erred" else _Fetch(status="finished" if gone else "lost")
    with pytest.raises(_attempts._Interrupted, match=r"worker tcp://rank0 \(rank 0\) lost its finished model") as raised:
        _attempts._model_of(None, job, [fetch, None])
    assert fetch.waits == ([] if how == "future lost, worker back" else [0.5])
    assert stopped == ["worker tcp://rank0 (rank 0) lost its finished model"]
    assert raised.value.worker == "tcp://rank0"


def test_a_coordinator_model_slow_to_fetch_is_waited_for_in_longer_looks(monkeypatch):
    """A large model's transfer, which a look cut short starts again, completes: each look waits
    twice the last, to the job's timeout; one not fetched in a look of the whole timeout fails."""
    from types import SimpleNamespace

    from dgboost.dask import _attempts

    monkeypatch.setattr(_attempts, "_alive", lambda client, workers: set(workers))
    job = SimpleNamespace(addresses=("tcp://rank0", "tcp://rank1"), timeout=3.0, name="a-job")
    fetch = _Fetch(seconds=1.5)
    assert _attempts._model_of(None, job, [fetch, None]) == "the model"
    assert fetch.waits == [0.5, 1.0, 2.0]
    never = _Fetch()
    with pytest.raises(TimeoutError, match="not fetched within 3 s"):
        _attempts._model_of(None, job, [never, None])
    assert never.waits == [0.5, 1.0, 2.0, 3.0]


class _Pending:
    status = "pending"

    def done(self):
        return False


class _Cut:
    status = "finished"

    def done(self):
        return True


@pytest.mark.parametrize("holder_slice", ["being cut", "cut"])
def test_a_slice_cut_on_a_worker_outside_the_job_is_watched(monkeypatch, holder_slice):
    """A slice is cut where its partition lies, which may be a worker the job does not train on
    (fewer rows than workers, or queries leaving one empty). Its loss before the slice is cut
    leaves the slice waiting for ever, so it ends the wait at once, as a job worker's does, and
    the attempt is interrupted (a restart shares the rows again); before, the job failed after
    dgboost.timeout. A worker gone whose slices are all cut (a retired worker's data moved off
    it) interrupts nothing: the wait goes on for the job's own pieces."""
    from types import SimpleNamespace

    from dgboost.dask import _attempts

    monkeypatch.setattr(_attempts, "_alive", lambda client, workers: set(workers) - {"tcp://holder"})
    monkeypatch.setattr(_attempts, "settle", lambda futures, seconds, first=False: time.sleep(0.01))
    attempts = SimpleNamespace(client=None, owner=SimpleNamespace(_cancel_reason=lambda: None))
    pinned = {"tcp://holder": [_Pending() if holder_slice == "being cut" else _Cut()]}
    started = time.monotonic()
    expected = (_attempts._Interrupted, "worker tcp://holder left the cluster while the rows were shared") \
        if holder_slice == "being cut" else (RuntimeError, "was not cut within 0.3 s")
    with pytest.raises(expected[0], match=expected[1]):
        _attempts._Attempts._await_pieces(attempts, SimpleNamespace(timeout=0.3 if holder_slice == "cut" else 300.0),
                                          ["tcp://job"], {"tcp://job": [_Pending()]}, {"tcp://job": []}, pinned)
    assert time.monotonic() - started < 5


def test_restarts_are_bounded_by_max_restarts(cluster, client, data, tmp_path):
    X, y = data
    dX, dy = _collections(X, y)
    pids = _rank_pids(cluster, client)
    with pytest.raises(RuntimeError, match=r"left the cluster.*1 restart made, max_restarts=1"):
        # the second kill (the restarted job's coordinator, after round 6) ends it
        dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=30,
                           callbacks=[_KillAt([2, 6], [pids[2], None], tmp_path)], max_restarts=1)
    assert os.path.exists(tmp_path / "killed-0") and os.path.exists(tmp_path / "killed-1")
    no_task_left(client, timeout=30)


def test_a_retryable_error_restarts_and_bad_input_does_not(client, data, tmp_path):
    X, y = data
    dX, dy = _collections(X, y)
    model = dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=8,
                               callbacks=[_RaiseOnce(3, ConnectionResetError("peer reset"), tmp_path / "once")])
    assert model.save_raw() == dgboost.train(PARAMS, X, y, num_boost_round=8).save_raw()
    with pytest.raises(ValueError, match="a bug of the callback"):
        dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=8,
                           callbacks=[_RaiseOnce(3, ValueError("a bug of the callback"), tmp_path / "twice")])
    no_task_left(client, timeout=30)


def test_a_checkpoint_lets_a_new_client_finish_the_job(client, data, tmp_path, another_client):
    X, y = data
    dX, dy = _collections(X, y)  # on whichever workers there are (a nanny may still be restarting one)
    whole = dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=12,
                               callbacks=[TrainingCheckpoint(tmp_path / "m-{round}.json", interval=5)])
    # A client that died after round 9's checkpoint: another continues from the file.
    with another_client(client.scheduler.address) as other:
        resumed = dgboost.dask.train(other, PARAMS, dX, dy, num_boost_round=2, init_model=tmp_path / "m-9.json")
    assert resumed.save_raw() == whole.save_raw()


def test_partitions_that_cannot_be_recomputed_are_named(cluster, client, data, tmp_path):
    X, y = data
    pids = _rank_pids(cluster, client)
    workers = sorted(client.run(os.getpid))
    rows = np.array_split(np.arange(N_ROWS), N_WORKERS)
    blocks = [client.scatter(np.column_stack([X[r], y[r]]), workers=[w]) for r, w in zip(rows, workers)]
    whole = da.concatenate([da.from_delayed(b, shape=(len(r), 9), dtype=np.float32) for b, r in zip(blocks, rows)])
    with pytest.raises(RuntimeError, match=r"partitions \[2\] of X were lost with a worker and could not be "
                                           r"recomputed .*client.scatter"):
        dgboost.dask.train(client, PARAMS, whole[:, :8], whole[:, 8], num_boost_round=20,
                           callbacks=[_KillAt([3], [pids[2]], tmp_path)])
    no_task_left(client, timeout=30)


def test_max_restarts_is_checked(client, data):
    X, y = data
    dX, dy = _collections(X, y)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_restarts=.* must be an integer >= 0"):
            dgboost.dask.train(client, PARAMS, dX, dy, num_boost_round=2, max_restarts=bad)


def test_a_resumed_run_bins_its_rows_with_the_cuts_it_is_given(data, monkeypatch):
    """A restart's ranks take the first attempt's cuts from the journal (Resume.cuts): no sample is
    drawn or sketched, and the model is the uninterrupted run's (the same rows give the same cuts)."""
    from dgboost import training

    X, y = data
    agreed = []
    agree_cuts = training.agree_cuts

    def counted(*args, **kwargs):
        agreed.append(agree_cuts(*args, **kwargs))
        return agreed[-1]

    monkeypatch.setattr(training, "agree_cuts", counted)
    uninterrupted = dgboost.train(PARAMS, X, y, num_boost_round=8)
    first = dgboost.train(PARAMS, X, y, num_boost_round=5)
    assert len(agreed) == 2
    boost = training.boost
    monkeypatch.setattr(training, "boost", lambda *args, **kwargs: boost(
        *args, **kwargs, resume=training.Resume((), agreed[0])))
    resumed = dgboost.train(PARAMS, X, y, num_boost_round=3, init_model=first)
    assert len(agreed) == 2  # no cuts agreed again
    assert resumed.save_raw() == uninterrupted.save_raw()


def test_the_journal_keeps_the_rounds_every_peer_vouched_for(data):
    """A round is kept once every other rank finished the round after it: a peer that died in a
    round's collectives may have left the coordinator's sums half read (seen on two GPUs)."""
    import pickle
    import zlib

    import cloudpickle

    from dgboost.dask._restart import Journal
    from dgboost.data.sketch import Cuts

    X, y = data
    model = dgboost.train({"max_depth": 2}, X, y, num_boost_round=6)

    def round_message(job, epoch, **extra):  # as JournalSender sends a round of ``model``
        state = ([(model.trees[epoch], 0)], -1, float("nan"), None, {"t": {"rmse": float(epoch)}})
        return {"job": job, "round": epoch, "state": zlib.compress(pickle.dumps(state)), "last": epoch == 5, **extra}

    def callbacks(text):
        return zlib.compress(cloudpickle.dumps((text,)))

    journal = Journal(None)
    journal.begin("job", ranks=3)
    cuts = Cuts(np.array([0.5, 1.5, -2.0], dtype=np.float32), np.array([0, 2, 3]))
    journal.receive({"job": "late", "cuts": zlib.compress(pickle.dumps(Cuts(cuts.values[:1], np.array([0, 1]))))})
    journal.receive({"job": "job", "cuts": zlib.compress(pickle.dumps(cuts))})
    journal.receive({"job": "job", "frame": zlib.compress(pickle.dumps(model._rounds(0, 0)))})
    for epoch in range(6):
        journal.receive(round_message("job", epoch, callbacks=callbacks(f"after {epoch}")))
    for rank, done in ((1, 5), (2, 3), (2, 2)):  # rank 2 last finished round 3: it vouches for 0 to 2
        journal.receive({"job": "job", "rank": rank, "done": done})
    journal.receive({"job": "late", "rank": 2, "done": 5})  # another attempt's word counts for nothing
    assert journal.finished_rounds() == 6
    journal.begin(None)
    assert journal.finished_rounds() == 3 and not journal.ended
    resumed, resume = journal.resume()
    assert resumed.save_raw() != model.save_raw() and resumed.get_dump() == model[:3].get_dump()
    assert resumed.evals_result() == {"t": {"rmse": [0.0, 1.0, 2.0]}} and resume.started == ("after 2",)
    np.testing.assert_array_equal(resume.cuts.values, cuts.values)  # the first attempt's, for the restart's shards
    np.testing.assert_array_equal(resume.cuts.offsets, cuts.offsets)
    journal.begin("job-r1", ranks=2)  # a peer that vouches for nothing keeps what was held
    journal.receive(round_message("job-r1", 3))
    journal.begin(None)
    assert journal.finished_rounds() == 3
    journal.begin("job-r2", ranks=1)  # alone, the coordinator vouches for itself
    journal.receive(round_message("job-r2", 3))  # without callbacks: as after the round before
    journal.begin(None)
    assert journal.finished_rounds() == 4 and journal.resume()[1].started == ("after 2",)
