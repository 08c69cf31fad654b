"""NcclCommunicator's abort on the host (dgboost/collective/nccl.py), NCCL stood in for: a failing
rank waits for its kernels to return, not for NCCL's teardown after them, and never for ever."""

import collections
import threading
import time
from types import SimpleNamespace

import pytest

from dgboost.collective import nccl
from dgboost.collective.base import CollectiveError


class _Event:
    """A watched collective's event: done once the abort has released the kernels."""

    def __init__(self, released: threading.Event):
        self.released = released

    @property
    def done(self):
        return self.released.is_set()


class _Nccl:
    """ncclCommAbort: the kernels return at once (or never, ``kernels_return=False``), then the
    teardown takes ``teardown`` seconds."""

    def __init__(self, teardown: float, kernels_return: bool = True):
        self.released, self.torn_down = threading.Event(), threading.Event()
        self.teardown, self.kernels_return = teardown, kernels_return

    def abort(self):
        if self.kernels_return:
            self.released.set()
        time.sleep(self.teardown)
        self.torn_down.set()


def _communicator(nccl_comm, pending: int):
    comm = nccl.NcclCommunicator.__new__(nccl.NcclCommunicator)  # no cupy: the fields _fail reads
    host = SimpleNamespace(rank=1, addresses=["a", "b"], aborted=lambda: None)
    comm.host, comm._comm, comm._lock, comm._failure = host, nccl_comm, threading.Lock(), None
    comm._failing, comm._calling, comm.timeout = threading.Lock(), None, 0.2
    stream = SimpleNamespace(ptr=0, is_capturing=lambda: False)
    comm._cupy = SimpleNamespace(cuda=SimpleNamespace(get_current_stream=lambda: stream,
                                                      Event=lambda disable_timing: SimpleNamespace(
                                                          record=lambda stream: None, done=True)))
    comm._pending = collections.deque((_Event(nccl_comm.released), time.monotonic(), "allreduce")
                                      for _ in range(pending))
    return comm


@pytest.mark.parametrize("pending", [0, 2])
def test_a_failing_rank_waits_for_its_kernels_not_for_nccls_teardown(pending):
    comm = _communicator(_Nccl(teardown=1.5), pending)
    comm.check()  # nothing has failed
    began = time.monotonic()
    comm._fail("rank 0 died")
    assert time.monotonic() - began < 0.75  # the teardown's 1.5 s go on in the background
    assert comm._kernels_returned() and not comm._comm.torn_down.is_set()
    with pytest.raises(CollectiveError, match="rank 0 died"):
        comm.launch("round", lambda stream: None)  # refused from then on
    with pytest.raises(CollectiveError, match="rank 0 died"):
        comm.check()  # what the aborted kernels left is not to be read
    assert comm._comm.torn_down.wait(5)


def test_kernels_that_never_return_are_waited_for_a_bounded_time(monkeypatch, caplog):
    monkeypatch.setattr(nccl, "_ABORT_SECONDS", 0.3)
    comm = _communicator(_Nccl(teardown=0.0, kernels_return=False), pending=1)
    comm._comm.abort = lambda: time.sleep(3)  # a broken device's abort: it does not return
    began = time.monotonic()
    with caplog.at_level("WARNING", logger="dgboost"):
        comm._fail("rank 0 died")
    assert 0.3 <= time.monotonic() - began < 2
    assert "did not return in 0.3 s" in caplog.text


def test_a_call_blocked_in_nccl_is_overdue_and_the_abort_releases_it():
    """NCCL's enqueue can block (its queue full behind kernels waiting on a dead peer), holding
    the lock calls take: the watchdog still sees it overdue, and the abort, which takes no
    lock a call holds, releases it; the call's caller then sees the failure."""
    nccl_comm = _Nccl(teardown=0.0)
    comm = _communicator(nccl_comm, pending=0)
    comm.timeout = 1.0
    outcome = {}

    def blocked_call():
        try:
            comm._enqueue("allreduce", lambda stream: nccl_comm.released.wait(10))
            comm._enqueue("allreduce", lambda stream: None)
        except CollectiveError as error:
            outcome["error"] = error

    caller = threading.Thread(target=blocked_call)
    caller.start()
    time.sleep(0.05)
    assert comm._overdue() is None  # blocked (the look waits 0.25 s on the lock), not yet for 1 s
    time.sleep(1.0)
    reason = comm._overdue()
    assert reason is not None and "an NCCL allreduce did not finish in 1 s" in reason
    began = time.monotonic()
    comm._fail(reason)
    assert time.monotonic() - began < 1
    caller.join(5)
    assert not caller.is_alive() and "did not finish" in str(outcome["error"])


def test_a_device_that_cannot_answer_is_a_reason_to_abort():
    class Broken:
        @property
        def done(self):
            raise RuntimeError("cudaErrorIllegalAddress")

    comm = _communicator(_Nccl(teardown=0.0), pending=0)
    comm._pending.append((Broken(), time.monotonic(), "allreduce"))
    assert "its device failed: RuntimeError: cudaErrorIllegalAddress" in comm._overdue()
    assert comm._kernels_returned()  # nothing of a failed device runs: the abort is not waited on
