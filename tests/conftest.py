"""Shared fixtures; GPU tests skip cleanly where no CUDA device is found."""

import numpy as np
import pytest

from dgboost.backend import cuda_device_count


def pytest_collection_modifyitems(config, items):
    if cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU with cupy (none found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def binary_data(rng):
    """A small binary task with signal in the first features and some missing values."""
    X = rng.standard_normal((600, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * rng.standard_normal(600) > 0).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


class _Terminal:
    """A stdout that says it is a terminal, keeping what is written (``.text``)."""

    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return True


@pytest.fixture
def terminal(monkeypatch):
    """A fake terminal as the stdout dgboost's progress output sees (its ``sys``, not the
    interpreter's: pytest's output capture resets sys.stdout after fixtures run)."""
    import types

    import dgboost.callback

    fake = _Terminal()
    monkeypatch.setattr(dgboost.callback, "sys", types.SimpleNamespace(stdout=fake))
    return fake


@pytest.fixture
def another_client():
    """Connects a second client to a cluster's scheduler, ``another_client(address)``, closed after
    the test. distributed's connect asserts that the scheduler's first message comes alone, which
    a broadcast to every client (another client's cancels, say) can break: it tries again then."""
    pytest.importorskip("distributed")
    from dgboost.jobs import client_at

    made = []

    def connect(address):
        made.append(client_at(address, timeout=30))
        return made[-1]

    yield connect
    for client in made:
        client.close()
