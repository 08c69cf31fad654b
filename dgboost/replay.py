"""A GPU round captured once as a CUDA graph and replayed (``dgboost.cuda-graphs``).

A depthwise or symmetric round on the GPU reads nothing of the host: its levels are
allocated for the upper bound, its splits chosen and applied on the device, and its
trees and metrics read once, after it (``training._RoundWork``). Its launches and
their arguments are then the same every round, and issuing them, a few hundred
kernel and copy calls from Python, took longer than the device took to run them
(docs/performance.md). So the first round runs as usual, the second is captured
(``cudaStreamBeginCapture``) and every round from it is one graph launch.

What capture needs, and how it is met here:

- Fixed memory. A graph writes the addresses it was captured with, so nothing else
  may be handed them. Rounds run on a stream and a cupy memory pool of their own
  (``_Lane``, one a device, held by one job at a time; a pool for each part of a
  round captured apart); the first round warms the pool, so capture reuses its
  blocks, and after capture nothing else allocates from it. The default pool's
  unused blocks are given back first, so the job's peak memory is what it was. The
  lane outlives jobs: a kernel's cached constants made in a round stay valid.
- Fixed inputs. Kernel arguments are baked in. Row sampling keys its draws by the
  tree's index held on the device, which each draw advances (``RowSampler``), so a
  sampled round replays too. Rounds that differ otherwise (GOSS's first rounds,
  column sampling's host draws, a learning-rate schedule, categorical splits,
  objectives and metrics that read the host or keep state) are not captured:
  ``why_not`` says why, and those rounds run as before.
- No host copies. A copy from host memory inside a capture would read a staging
  buffer that cupy reuses; during capture cupy's page-locked allocator refuses
  this thread (``_no_host_copies``), so such a copy fails the capture instead.
- The collectives, unless ``dgboost.cuda-graphs-across-gpus`` is False (default
  True since tests/test_dask_gpu.py passed whole with it on, faults included). NCCL
  calls capture and replay (NCCL >= 2.9); the communicator launches a replayed round,
  watching it as a whole and refusing it once NCCL has failed
  (``NcclCommunicator.launch``); its traffic is counted each replay. NCCL's abort
  returns only once every graph that captured its calls is destroyed, so a failed
  job's graph is dropped before it (``close``) and nothing else may hold it.

Out of core, where rounds read pages and are not captured, two parts of them are, each
a graph of its own (``RoundGraph.run``'s ``part``), where a paged grower's trees are grown
from the rows gathered ahead (tree/grower.py ``PagedGrower``, ``why_not_trees``), on one
GPU or on several whose ranks are all paged, and so decide together when a tree comes
from the page: the sampler's draw of each tree (every output's, from the tree's pairs
copied where the graph reads them), and the tree grown from the page. The host's work
between them (the sample's sizes read, the misses gathered, the pass over the pages)
runs as calls.

A capture that fails (a synchronisation or host copy nobody expected) is dropped
before anything ran, and the job goes on uncaptured. The ranks of a job run their
rounds all captured or all as calls, since a captured round replays none of the
host's messages: they show whether they can before the first round and whether
they did after the second (``why_not_anywhere``). Nothing of the model depends on
capture: the graph replays the same kernels on the same memory, and the GPU tests
hold captured models to uncaptured ones byte for byte.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import threading

import numpy as np

logger = logging.getLogger("dgboost")

_captures: collections.Counter = collections.Counter()  # graphs captured in this process, by part (tests)
_replays: collections.Counter = collections.Counter()  # runs from a graph in this process, by part (tests)


def counts(part: str | None = None) -> tuple[int, int]:
    """(captures, replays) made in this process, of one part of RoundGraphs (``run``'s) or of
    all: a debug counter the GPU tests read."""
    if part is None:
        return sum(_captures.values()), sum(_replays.values())
    return _captures[part], _replays[part]


def why_not(xp, grower, sampler, objective, metrics, schedule, comm, graphs: tuple[bool, bool],
            eval_matrices=()) -> str | None:
    """Why rounds of this job cannot be captured, or None where they can; ``graphs``: the
    settings' (one rank, several ranks) switches (``_settings.cuda_graphs``); ``eval_matrices``:
    the eval sets' compressed matrices."""
    from .data.pages import PagedMatrix
    from .tree.depthwise import DepthwiseGrower

    device = _why_not_device(xp, comm, graphs)
    if device is not None:
        return device
    if not isinstance(grower, DepthwiseGrower) or isinstance(grower.matrix, PagedMatrix):
        return "the growth policy reads the host between steps (lossguide, pages)"
    if any(isinstance(matrix, PagedMatrix) for matrix in eval_matrices):
        return "an eval set's matrix is paged (its pages are copied from the host)"
    if sampler.method == "goss":
        return "GOSS's first rounds take every row, the later ones a sample"
    growth = _why_not_growth(grower, schedule)
    if growth is not None:
        return growth
    if not objective.replayable:
        return f"objective {objective.name!r} reads the host or keeps state between rounds"
    for metric in metrics:
        if not metric.replayable:
            return f"metric {metric.name!r} reads the host"
    return None


def why_not_trees(xp, grower, schedule, comm, graphs: tuple[bool, bool]) -> str | None:
    """Why a paged grower's trees grown from a gathered sample (tree/grower.py PagedGrower's
    page), and the draws before them, cannot be replayed from graphs of their own, or None
    where they can: a sampler that guesses the next tree's rows (uniform or gradient-based),
    a rank that decides as its peers do (``PagedGrower.together``: their trees from the page,
    and so their graphs' launches, are the same), and the growth's conditions of ``why_not``."""
    from .tree.depthwise import DepthwiseGrower
    from .tree.grower import PagedGrower

    if not isinstance(grower, PagedGrower) or grower.sampler is None or grower.sampler.likely_never:
        return "not a paged grower of a row sample guessed ahead"
    if not grower.together:
        return "a peer's rows are in core, or not gathered ahead"
    device = _why_not_device(xp, comm, graphs)
    if device is not None:
        return device
    if not isinstance(grower.grower, DepthwiseGrower):
        return "the growth policy reads the host between steps (lossguide)"
    return _why_not_growth(grower.grower, schedule)


def _why_not_device(xp, comm, graphs: tuple[bool, bool]) -> str | None:
    """Why nothing of this job can be captured on its device (rounds or trees), or None: the
    host, the settings' switches, another allocator."""
    if xp.__name__ != "cupy":
        return "on the host"
    if not graphs[0]:
        return "dgboost.cuda-graphs is False"
    if comm.world_size > 1 and not graphs[1]:
        return "a job of several GPUs and dgboost.cuda-graphs-across-gpus is False"
    if xp.cuda.memory.get_allocator() != xp.get_default_memory_pool().malloc:
        return "another allocator than cupy's default pool (RMM, say), which the rounds' own pool would bypass"
    return None


def _why_not_growth(grower, schedule) -> str | None:
    """Why a depthwise (or symmetric) grower's trees differ in launches or arguments from one
    tree to the next, or None where they do not."""
    if grower.reads_host():
        return "a level's histograms exceed the grower's upper-bound budget"
    if grower.columns.active:
        return "column sampling draws on the host each tree"
    if schedule is not None:
        return "a learning-rate schedule changes eta each round"
    if grower.categories is not None:
        return "categorical splits"
    return None


def why_not_anywhere(xp, comm, graphs: tuple[bool, bool], reason: str | None) -> str | None:
    """This rank's ``reason`` (``why_not``'s) or, where a peer's rounds cannot be captured, that.

    The ranks of a job run their rounds all captured or all as calls: a captured round replays
    its collectives and none of the host's messages, which a peer running its round as calls
    would wait for. Some reasons are a rank's own (its shard paged, its allocator), so where
    the job's settings let it capture across GPUs, the ranks show theirs (one host gather)
    before the first round, and again once each has tried to capture (``RoundGraph``)."""
    if xp.__name__ != "cupy" or not all(graphs) or comm.world_size == 1:
        return reason  # the same on every rank, as the settings and the device are
    missing = _ranks_without(comm, reason is None)
    return reason if reason is not None or not missing else f"rank(s) {missing} cannot capture their rounds"


def _ranks_without(comm, ready: bool) -> list[int]:
    """The ranks that are not ``ready``, where each rank says whether it is (a host gather)."""
    shown = comm.allgather(np.array([ready], dtype=np.uint8))  # a host array: through the host
    return [rank for rank, theirs in enumerate(shown) if not theirs[0]]


class _HostCopy(RuntimeError):
    """A copy from host memory was started inside a capture."""


@contextlib.contextmanager
def _no_host_copies(cupy):
    """cupy copies host arrays to the device through page-locked staging buffers; refuse
    them to this thread while it captures (other threads go on as before)."""
    thread = threading.get_ident()
    pool = cupy.get_default_pinned_memory_pool()

    def allocate(size):
        if threading.get_ident() == thread:
            raise _HostCopy("a copy from host memory inside a captured round")
        return pool.malloc(size)

    cupy.cuda.set_pinned_memory_allocator(allocate)
    try:
        yield
    finally:
        cupy.cuda.set_pinned_memory_allocator(pool.malloc)


@dataclasses.dataclass
class _Lane:
    """A device's stream and memory pools for captured rounds; one job holds it at a time. Each
    part of a RoundGraph allocates from a pool of its own: a block freed within one part's
    capture is still the graph's, and must not be handed to another part's arrays."""

    stream: object
    pools: dict  # a RoundGraph part's name: its cupy MemoryPool
    lock: threading.Lock

    def pool(self, cupy, part: str):
        if part not in self.pools:
            self.pools[part] = cupy.cuda.MemoryPool()
        return self.pools[part]


_lanes: dict = {}
_lanes_lock = threading.Lock()


def _lane(cupy) -> _Lane:
    device = cupy.cuda.Device().id
    with _lanes_lock:
        if device not in _lanes:
            _lanes[device] = _Lane(cupy.cuda.Stream(non_blocking=True), {}, threading.Lock())
        return _lanes[device]


def _release_cached(cupy) -> None:
    """Give the device the blocks cupy's default pool holds unused (the set-up's temporaries),
    which the rounds, in a pool of their own, cannot reuse: the job's peak memory stays what it
    was with rounds queued as calls. (``why_not`` admits no job under another allocator.)"""
    cupy.get_default_memory_pool().free_all_blocks()


@dataclasses.dataclass
class _Part:
    """One sequence of a RoundGraph's work, queued the same way each time it runs."""

    runs: int = 0
    graph: object = None  # the CUDA graph, once captured (its second run)
    captured: object = None  # queue()'s result at capture
    traffic: tuple = (0, 0)  # its collectives' calls and bytes a run


class RoundGraph:
    """A job's rounds, run through CUDA graphs once the second is captured.

    ``run(queue)`` queues a round (``queue()`` makes its device arrays and returns what
    the caller needs of them) and returns ``queue()``'s result: from the round itself,
    then from the capture, whose arrays each replay overwrites in place. Work queued
    on the caller's stream before ``run`` comes before the round, and work queued after
    it comes after. ``close`` gives the lane back.

    A round may also be queued in parts, run in turn with the host's work between them
    (out of core: a tree's draw, then its tree from the gathered page): ``run(queue, part)``,
    each part captured at its own second run into a graph of its own, its arrays in a pool
    of their own. The ranks agree on each part's capture; a capture that fails, or a peer's,
    leaves every part uncaptured from then on.
    """

    def __init__(self, comm):
        import cupy

        self._cupy = cupy
        self._comm = comm
        lane = _lane(cupy)
        self._lane = lane if lane.lock.acquire(blocking=False) else None
        self._parts: dict[str, _Part] = {}
        self.failed: str | None = None if self._lane is not None else "another job holds this device's lane"

    def run(self, queue, part: str = "round"):
        state = self._parts.setdefault(part, _Part())
        state.runs += 1
        if self._lane is None or self.failed is not None:
            if state.runs == 2:
                self._agree(captured=False)
            return queue()
        cupy, stream = self._cupy, self._lane.stream
        caller = cupy.cuda.get_current_stream()
        stream.wait_event(caller.record())
        pool = self._lane.pool(cupy, part)
        if state.runs == 1:  # the first run warms the pool: capture allocates nothing new
            _release_cached(cupy)
        elif state.graph is None:
            self._capture(queue, state, pool)  # a failure leaves the graph None: this run is uncaptured
            if self._agree(captured=state.graph is not None):
                _captures[part] += int(state.graph is not None)
            else:  # a peer runs its rounds as calls: so does this rank
                state.graph = state.captured = None
        if state.graph is None:
            with stream, cupy.cuda.using_allocator(pool.malloc):
                result = queue()
        else:
            result = state.captured
            del state  # no frame of a refused launch may hold the graph: see _replay's docstring
            self._replay(part)
        caller.wait_event(stream.record())
        return result

    def _agree(self, captured: bool) -> bool:
        """Whether every rank captured its second round (see ``why_not_anywhere``)."""
        if self._comm.world_size == 1:
            return captured
        missing = _ranks_without(self._comm, captured)
        if missing and self.failed is None:
            self.failed = f"rank(s) {missing} did not capture their rounds"
            logger.info("rank %d: rounds not captured as a CUDA graph (%s); they run uncaptured",
                        self._comm.rank, self.failed)
        return not missing

    def _capture(self, queue, state: _Part, pool) -> None:
        """Capture ``queue()`` into ``state``'s graph, or, where capture fails, leave it None and
        say why (``failed``: no part is captured from then on)."""
        cupy, stream, traffic = self._cupy, self._lane.stream, self._comm.traffic
        before = (traffic.calls, traffic.bytes_sent)
        try:
            with stream, cupy.cuda.using_allocator(pool.malloc), _no_host_copies(cupy):
                stream.begin_capture()
                try:
                    captured = queue()
                finally:
                    graph = stream.end_capture()
        except Exception as error:  # noqa: BLE001 - any failure leaves the rounds uncaptured
            self.failed = f"{type(error).__name__}: {error}"
            logger.info("rank %d: rounds not captured as a CUDA graph (%s); they run uncaptured",
                        self._comm.rank, self.failed)
            traffic.calls, traffic.bytes_sent = before
            return
        state.traffic = (traffic.calls - before[0], traffic.bytes_sent - before[1])
        traffic.calls, traffic.bytes_sent = before
        state.graph, state.captured = graph, captured

    def _replay(self, part: str) -> None:
        """One launch of ``part``'s graph. NCCL's abort waits until every graph that captured
        the communicator's calls is destroyed (NCCL >= 2.26), so nothing may hold a graph once
        ``close`` drops it: a refused launch's traceback keeps the frames it went through,
        and a frame given ``graph.launch`` would keep the graph, and the abort that the failed
        job's rank runs next would wait for ever."""
        stream, traffic = self._lane.stream, self._comm.traffic
        launch = getattr(self._comm, "launch", None)  # NCCL's: watched, and refused once it failed
        if launch is None:
            self._parts[part].graph.launch(stream)
        else:  # the graph is read through self, not held in a local: see _replay's docstring
            with stream:
                launch(f"{part} (CUDA graph)", lambda on: self._parts[part].graph.launch(on))
        calls, sent = self._parts[part].traffic
        traffic.calls += calls
        traffic.bytes_sent += sent
        _replays[part] += 1

    def close(self, failed: bool = False) -> None:
        """Give the lane back; the graphs go with this object. Work queued after this on the
        caller's stream comes after the lane's (an event: the host does not wait).

        A job that ended well waits for its lane (a dropped round may still run on the pools'
        memory; a fault there is raised); ``trim`` frees the pools' unused blocks once the
        job's arrays are gone. A job that ``failed`` waits for nothing: a
        round may be held in a collective for a peer that died, until the rank's NCCL
        communicator is aborted, which its caller does after this returns. A stream that
        cannot even record an event (a failed device) keeps the lane: later jobs on the device
        run uncaptured rather than on memory still in use."""
        if self._lane is None:
            return
        lane, self._lane = self._lane, None
        self._parts = {}
        try:
            self._cupy.cuda.get_current_stream().wait_event(lane.stream.record())
            if not failed:
                lane.stream.synchronize()
        except Exception:  # a failed device: the lane stays held
            if not failed:
                raise  # a dropped round's fault, say: the job did not end well
            logger.debug("rank %d: the rounds' stream failed; its lane stays held", self._comm.rank, exc_info=True)
            return
        lane.lock.release()


def trim(xp) -> None:
    """Free the unused blocks of the lanes no job holds: what a job's rounds kept in their pool
    (its sampler's row indices, a dropped round) once the job is gone. Called after a job that
    ended well (``training.boost``); cudaFree waits for the device, which a failed job's round
    might still hold in a collective until NCCL's abort."""
    if xp.__name__ != "cupy":
        return
    with _lanes_lock:
        lanes = list(_lanes.values())
    for lane in lanes:
        if lane.lock.acquire(blocking=False):
            try:
                for pool in lane.pools.values():
                    pool.free_all_blocks()
            finally:
                lane.lock.release()
