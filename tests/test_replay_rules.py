"""Which GPU rounds may replay a CUDA graph (dgboost/replay.py): the rules, and the settings
that switch it, decided without a GPU (the GPU's side is tests/test_replay.py)."""

import contextlib
from types import SimpleNamespace

import dask
import numpy as np
import pytest

from dgboost import _settings
from dgboost.collective import LocalCommunicator
from dgboost.data.pages import PagedMatrix
from dgboost.objectives import make_objective
from dgboost.objectives.metrics import make_metric
from dgboost.params import TrainParams
from dgboost.replay import why_not, why_not_trees
from dgboost.tree.depthwise import DepthwiseGrower
from dgboost.tree.grower import PagedGrower
from dgboost.tree.lossguide import LossguideGrower
from dgboost.tree.symmetric import SymmetricGrower

def _cupy(allocator="the default pool's"):
    """What the rules ask of cupy: its name, and whether its allocator is the default pool's."""
    pool = SimpleNamespace(malloc="the default pool's")
    return SimpleNamespace(__name__="cupy", get_default_memory_pool=lambda: pool,
                           cuda=SimpleNamespace(memory=SimpleNamespace(get_allocator=lambda: allocator)))


CUPY = _cupy()


def _grower(kind=DepthwiseGrower, max_depth=8, bins=28 * 256, columns=False, categories=None):
    grower = kind.__new__(kind)  # the attributes the rules read, no matrix built
    grower.matrix = SimpleNamespace(host_bin_offsets=np.array([0, bins]))
    grower.max_depth, grower.categories = max_depth, categories
    grower.columns = SimpleNamespace(active=columns)
    return grower


def _rules(**changed):
    params = TrainParams.from_dict({"objective": "binary:logistic"})
    rules = {"xp": CUPY, "grower": _grower(), "sampler": SimpleNamespace(method="uniform"),
             "objective": make_objective(params), "metrics": [make_metric("logloss", params),
                                                              make_metric("auc", params)],
             "schedule": None, "comm": LocalCommunicator(), "graphs": (True, True)}
    return why_not(**{**rules, **changed})


TWO_RANKS = SimpleNamespace(world_size=2)


@pytest.mark.parametrize("changed, reason", [
    ({}, None),
    ({"sampler": SimpleNamespace(method="gradient_based")}, None),  # keyed by the tree index on the device
    ({"grower": _grower(SymmetricGrower)}, None),
    ({"comm": TWO_RANKS}, None),
    ({"xp": np}, "on the host"),
    ({"xp": _cupy(allocator="rmm's")}, "another allocator"),
    ({"eval_matrices": [PagedMatrix.__new__(PagedMatrix)]}, "eval set's matrix is paged"),
    ({"graphs": (False, False)}, "dgboost.cuda-graphs is False"),
    ({"comm": TWO_RANKS, "graphs": (True, False)}, "cuda-graphs-across-gpus is False"),
    ({"grower": _grower(LossguideGrower)}, "growth policy"),
    ({"grower": _grower(max_depth=12)}, "upper-bound budget"),  # 2**11 parents' children: 470 MB of histograms
    ({"sampler": SimpleNamespace(method="goss")}, "GOSS"),
    ({"grower": _grower(columns=True)}, "column sampling"),
    ({"schedule": object()}, "learning-rate schedule"),
    ({"grower": _grower(categories=object())}, "categorical"),
    ({"objective": make_objective(TrainParams.from_dict({"objective": "reg:absoluteerror"}))},
     "'reg:absoluteerror' reads the host"),
    ({"objective": make_objective(TrainParams.from_dict({"objective": "rank:ndcg"}))}, "rank:ndcg"),
    ({"metrics": [make_metric("cox-nloglik", TrainParams.from_dict({"objective": "survival:cox"}))]},
     "'cox-nloglik' reads the host"),
])
def test_rounds_replay_only_where_every_launch_is_the_same_each_round(changed, reason):
    got = _rules(**changed)
    assert got is None if reason is None else reason in got, got


@pytest.mark.parametrize("changed, reason", [
    ({}, None),
    ({"comm": TWO_RANKS}, None),
    ({"alone": True}, "a peer's rows are in core"),
    ({"xp": np}, "on the host"),
    ({"xp": _cupy(allocator="rmm's")}, "another allocator"),
    ({"graphs": (False, False)}, "dgboost.cuda-graphs is False"),
    ({"comm": TWO_RANKS, "graphs": (True, False)}, "cuda-graphs-across-gpus is False"),
    ({"inner": _grower(LossguideGrower)}, "growth policy"),
    ({"inner": _grower(columns=True)}, "column sampling"),
    ({"schedule": object()}, "learning-rate schedule"),
])
def test_a_paged_growers_trees_replay_on_the_rounds_device_rules(changed, reason):
    """why_not_trees: the device's rules of why_not (host, switches, allocator), a rank that
    decides with its peers, and the growth's rules of the tree alone."""
    inner = changed.pop("inner", _grower())
    inner.comm = LocalCommunicator()
    grower = PagedGrower(inner, None, True, SimpleNamespace(likely_never=False))
    grower.together = not changed.pop("alone", False)
    rules = {"xp": CUPY, "grower": grower, "schedule": None, "comm": LocalCommunicator(), "graphs": (True, True)}
    got = why_not_trees(**{**rules, **changed})
    assert got is None if reason is None else reason in got, got


def test_multi_target_objectives_replay_as_their_single_target_does():
    several = make_objective(TrainParams.from_dict({"objective": "reg:squarederror", "num_target": 3}))
    assert several.replayable and _rules(objective=several) is None
    huber = make_objective(TrainParams.from_dict({"objective": "reg:pseudohubererror", "num_target": 2}))
    assert huber.replayable


def test_the_settings_and_their_bad_values():
    assert _settings.cuda_graphs() == (True, True)
    with dask.config.set({"dgboost.cuda-graphs-across-gpus": False}):
        assert _settings.cuda_graphs() == (True, False)
    with dask.config.set({"dgboost.cuda-graphs": False}):
        assert _settings.cuda_graphs() == (False, False)  # off is off everywhere
    with dask.config.set({"dgboost.cuda-graphs": "yes"}):
        with pytest.raises(ValueError, match="dgboost.cuda-graphs='yes' must be True or False"):
            _settings.cuda_graphs()


def test_a_dask_job_takes_the_clients_settings(monkeypatch):
    """The workers' own config is not the client's: the job spec carries the client's switches."""
    from dgboost.dask import _job

    captured = {}
    real = _job.JobSpec

    def spec(*args, **kwargs):
        captured["graphs"] = kwargs.get("cuda_graphs")
        raise RuntimeError("stop before any task")

    import dgboost.dask as dgb_dask

    monkeypatch.setattr(dgb_dask, "JobSpec", spec)
    distributed = pytest.importorskip("distributed")
    da = pytest.importorskip("dask.array")
    X = da.from_array(np.random.default_rng(0).standard_normal((200, 3)).astype(np.float32), chunks=(100, 3))
    y = da.from_array(np.zeros(200, np.float32), chunks=100)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        with dask.config.set({"dgboost.cuda-graphs-across-gpus": False}), pytest.raises(RuntimeError, match="stop"):
            dgb_dask.train(client, {"objective": "reg:squarederror"}, X, y, num_boost_round=1)
    assert captured["graphs"] == (True, False)
    assert real.__dataclass_fields__["cuda_graphs"].default == (True, True)


class _FakeGraph:
    """Stands for replay.RoundGraph on the host: runs each round as queued, notes how it is closed."""

    closed: list = []

    def __init__(self, comm):
        self.rounds = 0

    def run(self, queue, part="round"):
        self.rounds += 1
        return queue()

    def close(self, failed=False):
        _FakeGraph.closed.append((self.rounds, failed))


@pytest.mark.parametrize("fails", [False, True])
def test_a_failed_job_gives_its_graph_back_without_waiting_on_the_device(monkeypatch, fails):
    """The rounds' graph is closed once: after a job that ended well, waiting for its stream; after
    one that failed (a peer lost mid-round), without waiting, since a round may hang in a
    collective until the caller aborts NCCL. The job's own error is raised."""
    import dgboost
    from dgboost import replay
    from dgboost.callback import TrainingCallback

    class Boom(TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            if fails and epoch == 3:
                raise RuntimeError("boom at round 3")
            return False

    monkeypatch.setattr(replay, "why_not", lambda *args: None)
    monkeypatch.setattr(replay, "RoundGraph", _FakeGraph)
    monkeypatch.setattr(_FakeGraph, "closed", [])
    X = np.random.default_rng(0).standard_normal((500, 4)).astype(np.float32)
    y = X[:, 0] > 0
    train = lambda: dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=6,  # noqa: E731
                                  callbacks=[Boom()])
    if fails:
        with pytest.raises(RuntimeError, match="boom at round 3"):
            train()
        assert _FakeGraph.closed == [(4, True)]
    else:
        assert train().num_boosted_rounds() == 6
        assert _FakeGraph.closed == [(6, False)]


class _Stream(contextlib.nullcontext):
    """A cupy stream of the host: it records nothing, and captures a _Graph."""

    def record(self):
        return "an event"

    def wait_event(self, event):
        pass

    def begin_capture(self):
        pass

    def synchronize(self):
        pass

    def end_capture(self):
        return _Graph()


class _Graph:
    launched = 0

    def launch(self, stream):
        _Graph.launched += 1


@pytest.fixture
def fake_cupy(monkeypatch):
    """What RoundGraph asks of cupy, on the host; the lanes its own."""
    import sys

    from dgboost import replay

    pool = SimpleNamespace(malloc=None, free_all_blocks=lambda: None)
    cuda = SimpleNamespace(Device=lambda: SimpleNamespace(id=0), Stream=lambda non_blocking: _Stream(),
                           MemoryPool=lambda: pool, get_current_stream=_Stream,
                           using_allocator=lambda malloc: contextlib.nullcontext(),
                           set_pinned_memory_allocator=lambda allocate: None)
    cupy = SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool,
                           get_default_pinned_memory_pool=lambda: pool)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(replay, "_lanes", {})
    monkeypatch.setattr(_Graph, "launched", 0)
    return cupy


class _Ranks:
    """Rank 0 of a two-rank job whose peer shows ``peer`` when the ranks agree (a host gather)."""

    rank, world_size = 0, 2

    def __init__(self, peer: bool):
        self.peer, self.gathers = peer, []
        self.traffic = SimpleNamespace(calls=0, bytes_sent=0)

    def allgather(self, array):
        assert isinstance(array, np.ndarray)  # through the host
        self.gathers.append(bool(array[0]))
        return [array, np.array([self.peer], dtype=np.uint8)]


@pytest.mark.parametrize("peer", [True, False])
def test_the_ranks_run_their_rounds_all_captured_or_all_as_calls(fake_cupy, peer):
    """A captured round replays no host message: where the peer could not capture its second
    round, this rank drops its graph and runs every round as calls, as the peer does."""
    from dgboost import replay

    ranks = _Ranks(peer)
    rounds, queued = replay.RoundGraph(ranks), []
    for epoch in range(5):
        rounds.run(lambda: queued.append(epoch))
    rounds.close()
    assert ranks.gathers == [True]  # once, at the second round's capture
    if peer:  # the second round queued in the capture, and every round from it replayed
        assert queued == [0, 1] and _Graph.launched == 4 and rounds.failed is None
    else:  # the second round queued in the capture, dropped, and queued again as calls
        assert queued == [0, 1, 1, 2, 3, 4] and _Graph.launched == 0
        assert rounds.failed == "rank(s) [1] did not capture their rounds"


def test_a_rank_that_cannot_capture_still_shows_it_at_the_second_round(fake_cupy):
    from dgboost import replay

    ranks = _Ranks(peer=True)
    held = replay._lane(fake_cupy)
    held.lock.acquire()  # another job holds the device's lane
    rounds = replay.RoundGraph(ranks)
    for _ in range(3):
        rounds.run(lambda: None)
    assert ranks.gathers == [False] and _Graph.launched == 0


@pytest.mark.parametrize("reason, peer, gathers, expected", [
    (None, True, [True], None),
    (None, False, [True], "rank(s) [1] cannot capture their rounds"),
    ("its shard is paged", True, [False], "its shard is paged"),
])
def test_the_ranks_show_whether_they_can_capture_before_the_first_round(reason, peer, gathers, expected):
    from dgboost.replay import why_not_anywhere

    ranks = _Ranks(peer)
    assert why_not_anywhere(CUPY, ranks, (True, True), reason) == expected
    assert ranks.gathers == gathers


@pytest.mark.parametrize("xp, comm, graphs", [(np, _Ranks(True), (True, True)), (CUPY, LocalCommunicator(), (True, True)),
                                              (CUPY, _Ranks(True), (True, False))])
def test_no_gather_where_every_rank_knows_the_answer(xp, comm, graphs):
    from dgboost.replay import why_not_anywhere

    assert why_not_anywhere(xp, comm, graphs, "the same everywhere") == "the same everywhere"
    assert getattr(comm, "gathers", []) == []


def test_a_closed_graph_is_gone_though_the_refused_launchs_traceback_lives(fake_cupy):
    """NCCL's abort waits until every CUDA graph that captured its calls is destroyed. A failed
    job's rank closes its graph, then aborts NCCL while the job's error (a launch refused since a
    peer died) is still being handled, its traceback's frames alive: none may hold the graph."""
    import weakref

    from dgboost import replay
    from dgboost.collective.base import CollectiveError

    class Failed:
        """An NCCL communicator after its abort: it refuses every launch."""

        rank, world_size, traffic = 0, 2, SimpleNamespace(calls=0, bytes_sent=0)

        def launch(self, what, launch):
            raise CollectiveError("rank 1 died")

    rounds = replay.RoundGraph(Failed())
    rounds._parts["round"] = replay._Part(runs=3, graph=_Graph())
    graph = weakref.ref(rounds._parts["round"].graph)
    with pytest.raises(CollectiveError) as refused:
        rounds._replay("round")
    rounds.close(failed=True)
    assert refused.value.__traceback__.tb_next is not None  # the refusing frame is kept
    assert graph() is None


def test_a_graph_refused_through_run_is_gone_after_close(fake_cupy):
    """As above, the launch refused where training meets it, in RoundGraph.run (a part of a
    round out of core, here): no frame of the refused run may hold the part's graph."""
    import weakref

    from dgboost import replay
    from dgboost.collective.base import CollectiveError

    class Refusing:
        """An NCCL communicator that launches until a peer dies, then refuses."""

        rank, world_size, traffic = 0, 1, SimpleNamespace(calls=0, bytes_sent=0)
        refuse = False

        def launch(self, what, launch):
            if self.refuse:
                raise CollectiveError("rank 1 died")
            launch(None)

    comm = Refusing()
    rounds = replay.RoundGraph(comm)
    for _ in range(2):  # as calls, then captured and replayed
        rounds.run(lambda: None, part="draw")
    graph = weakref.ref(rounds._parts["draw"].graph)
    comm.refuse = True
    with pytest.raises(CollectiveError) as refused:
        rounds.run(lambda: None, part="draw")
    rounds.close(failed=True)
    assert refused.value.__traceback__.tb_next is not None
    assert graph() is None


@pytest.mark.parametrize("metric", ["auc", "aucpr"])
def test_auc_asks_the_host_for_the_ranks_rows_in_its_first_round_only(metric):
    """A captured round replays its device collectives and none of the host's messages, so a
    replayable metric may send host messages in its first round only (uncaptured on every
    rank): AUC gathers each eval set's rows per rank once, then gathers scores knowing them."""

    class Mirror:
        """Two ranks, the peer's rows the same as this one's; notes each host gather."""

        rank, world_size = 0, 2

        def __init__(self):
            self.host_gathers, self.rows_given = 0, []

        def allreduce(self, array, op="sum"):
            return array if op == "max" else array * 2

        def allgather(self, array, rows=None):
            if rows is None:
                self.host_gathers += 1
            else:
                self.rows_given.append(rows)
            return [array, array]

    params = TrainParams.from_dict({"objective": "binary:logistic"})
    auc, comm = make_metric(metric, params), Mirror()
    label = (np.arange(50) % 3 == 0).astype(np.float32)
    other = np.ones(20, dtype=np.float32)  # another eval set
    for _ in range(3):
        parts = auc.partial(label, np.linspace(0, 1, 50, dtype=np.float32), None, comm)
        auc.partial(other, np.linspace(0, 1, 20, dtype=np.float32), None, comm)
    assert comm.host_gathers == 2  # once an eval set
    assert comm.rows_given == [[50, 50]] * 3 + [[20, 20]] * 3 + [[50, 50]] * 3 + [[20, 20]] * 3 + [[50, 50]] * 3 + [[20, 20]] * 3
    assert 0 < auc.finish(parts) < 1
