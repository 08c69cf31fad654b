"""dgboost's settings of a machine rather than of a model, kept in Dask's config (as
``dgboost.timeout`` is), which a single process reads as well as a Dask worker:
set them in a Dask config file, a ``DASK_DGBOOST__...`` environment variable or
``dask.config.set``. Read lazily: importing dgboost imports no dask."""

from __future__ import annotations

import tempfile


def spill_directory() -> str:
    """Where out-of-core pages go on disk: ``dgboost.spill-directory``, else a Dask worker's
    local directory, else the system's temporary directory."""
    import dask

    configured = dask.config.get("dgboost.spill-directory", None)
    if configured is not None:
        return str(configured)
    try:
        from distributed import get_worker

        return get_worker().local_directory
    except (ImportError, ValueError):  # not on a Dask worker
        return tempfile.gettempdir()


def host_page_bytes() -> int | None:
    """The most bytes of out-of-core pages kept in host memory, ``dgboost.host-page-bytes``
    (an int or a string such as "8 GiB"), or None (half the memory available then)."""
    import dask

    configured = dask.config.get("dgboost.host-page-bytes", None)
    if configured is None:
        return None
    return int(dask.utils.parse_bytes(configured) if isinstance(configured, str) else configured)


def cuda_graphs() -> tuple[bool, bool]:
    """Where a GPU job's rounds may run from a CUDA graph (dgboost/replay.py says which rounds
    can): ``dgboost.cuda-graphs`` (default True), in jobs of one rank; and
    ``dgboost.cuda-graphs-across-gpus`` (default True), also in jobs of several GPUs, their
    NCCL calls captured with the round. A Dask job takes the client's settings."""
    import dask

    values = []
    for key, default in (("dgboost.cuda-graphs", True), ("dgboost.cuda-graphs-across-gpus", True)):
        value = dask.config.get(key, default)
        if not isinstance(value, bool):
            raise ValueError(f"dask config {key}={value!r} must be True or False")
        values.append(value)
    return values[0], values[0] and values[1]


def stream_partitions() -> bool | str:
    """Whether a Dask job streams its rows into pages where they are read, never holding its
    float input at once (dgboost/dask/_streamed.py): ``dgboost.stream-partitions``, True,
    False, or "auto" (the default: where X's rows are known before anything is computed and a
    worker's share may not fit its device budget beside its matrix)."""
    import dask

    value = dask.config.get("dgboost.stream-partitions", "auto")
    if value not in (True, False, "auto"):
        raise ValueError(f"dask config dgboost.stream-partitions={value!r} must be True, False or 'auto'")
    return value


def worker_memory_limit() -> int | None:
    """The memory limit of the Dask worker this runs on (bytes), or None: not on a worker, or
    a worker without one."""
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):  # not on a Dask worker
        return None
    return int(limit) if limit else None
