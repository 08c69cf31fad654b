"""Writing files so that no reader ever sees half of one."""

from __future__ import annotations

import os
import tempfile


def write_atomically(path, data: bytes) -> None:
    """Write ``data`` to a local path or an fsspec URL (``s3://...``), all or nothing.

    A local file is written beside the target and renamed over it; an object
    store receives the whole file in one put.
    """
    path = os.fspath(path)
    if "://" in path and not path.startswith("file://"):
        import fsspec

        filesystem, target = fsspec.core.url_to_fs(path)
        filesystem.pipe_file(target, data)  # one put: the object appears whole or not at all
        return
    path = path.removeprefix("file://")
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".dgboost-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
