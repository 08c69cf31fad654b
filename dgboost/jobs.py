"""What ``dgboost train``, ``predict`` and ``evaluate`` do: config files, tables, a cluster.

A config file is TOML; command-line ``key=value`` pairs override its keys
(values parse as TOML: ``max_depth=8``, ``eta=0.05``, ``device="cuda"``). Tables
are CSV or Parquet files (or directories of Parquet parts), local paths or
fsspec URLs, read with dask.dataframe.
"""

from __future__ import annotations

import contextlib
import json
import pathlib

#: Config keys that are not training parameters.
JOB_KEYS = ("train", "evals", "label_column", "weight_column", "feature_columns", "model", "num_boost_round",
            "early_stopping_rounds", "verbose_eval")


def load_config(path, overrides) -> dict:
    """The config file's keys, then each ``key=value`` override; ValueError names a bad one."""
    toml = _toml()
    try:
        config = toml.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist") from None
    except toml.TOMLDecodeError as error:
        raise ValueError(f"config file {path} is not valid TOML: {error}") from None
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r} must be key=value, e.g. max_depth=8 or device=\"cuda\"")
        config[key.strip()] = _value(text.strip(), toml)
    return config


def _toml():
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib


def _value(text: str, toml):
    """A TOML value, or the bare text when it is not one (``device=cuda``)."""
    try:
        return toml.loads(f"v = {text}")["v"]
    except toml.TOMLDecodeError:
        return text


def read_table(path: str):
    """A dask DataFrame from a CSV or Parquet path or URL."""
    try:
        import dask.dataframe as dd
    except ImportError as error:
        raise ValueError(f"reading {path} needs dask.dataframe, which needs pandas and pyarrow: "
                         f"pip install 'dgboost[dataframe]' ({error})") from None

    lowered = str(path).lower()
    if "://" not in str(path) and not pathlib.Path(path).exists():
        raise ValueError(f"{path} does not exist: give the path of a .csv or .parquet table")
    try:
        if lowered.endswith((".csv", ".csv.gz", ".txt")):
            return dd.read_csv(path)
        if lowered.endswith((".parquet", ".pq")) or pathlib.Path(path).is_dir():
            return dd.read_parquet(path)
    except FileNotFoundError as error:
        raise ValueError(f"{path} does not exist ({error})") from None
    raise ValueError(f"{path}: give a .csv or .parquet file (or a directory of Parquet parts)")


def columns(frame, config: dict, where: str, need_label: bool = True):
    """(X, y, weight) of a table by the config's column keys."""
    label = config.get("label_column")
    if need_label and not label:
        raise ValueError("label_column is required: the name of the column holding the labels")
    weight = config.get("weight_column")
    for name, column in (("label_column", label), ("weight_column", weight)):
        if column and column not in frame.columns:
            raise ValueError(f"{name}={column!r} is not a column of {where} (columns: {list(frame.columns)[:20]})")
    features = config.get("feature_columns")
    if features is None:
        features = [c for c in frame.columns if c not in (label, weight)]
    missing = [c for c in features if c not in frame.columns]
    if missing:
        raise ValueError(f"feature_columns {missing} are not columns of {where}")
    y = frame[label] if label and label in frame.columns else None
    return frame[list(features)], y, (frame[weight] if weight else None)


@contextlib.contextmanager
def client_for(scheduler: str | None, scheduler_file: str | None, device: str, n_workers: int | None = None):
    """A Client of the given scheduler, or of a local cluster made for ``device`` (``n_workers``:
    local_cluster's default when None)."""
    import distributed

    from .dask import local_cluster

    if scheduler or scheduler_file:
        try:
            client = distributed.Client(scheduler, scheduler_file=scheduler_file, timeout="30s")
        except (OSError, FileNotFoundError) as error:
            where = scheduler or scheduler_file
            raise ValueError(f"no Dask scheduler answered at {where}: {error}") from None
        with client:
            yield client
        return
    with local_cluster("cuda" if device.startswith("cuda") else "cpu", n_workers) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def train_job(config: dict, client) -> dict:
    """Train as the config says; write the model and its evaluation JSON. Returns the summary."""
    from . import dask as dgb_dask

    params = {k: v for k, v in config.items() if k not in JOB_KEYS}
    for key in ("train", "model"):
        if not config.get(key):
            raise ValueError(f"the config needs {key!r}: " + ("the training table's path" if key == "train"
                                                              else "where to write the model"))
    X, y, weight = columns(read_table(config["train"]), config, config["train"])
    evals_config = config.get("evals", {})
    if not isinstance(evals_config, dict):
        raise ValueError("evals must be a table of name = path, e.g. [evals] valid = \"valid.csv\"")
    evals = []
    for name, path in evals_config.items():
        eval_X, eval_y, _ = columns(read_table(path), config, path)
        evals.append((eval_X, eval_y, name))
    booster = dgb_dask.train(client, params, X, y, sample_weight=weight, evals=evals,
                             num_boost_round=config.get("num_boost_round", 100),
                             early_stopping_rounds=config.get("early_stopping_rounds"),
                             verbose_eval=config.get("verbose_eval", False))
    model = str(config["model"])
    booster.save_model(model)
    summary = {"model": model, "rounds": booster.num_boosted_rounds(), "best_iteration": booster.best_iteration,
               "best_score": booster.best_score, "evals_result": booster.evals_result(),
               "params": params}
    _write_json(evaluation_path(model), summary)
    return summary


def evaluation_path(model: str) -> str:
    """``model.json`` -> ``model.eval.json``, beside the model."""
    path = pathlib.Path(model)
    return str(path.with_name(path.stem + ".eval.json"))


def predict_job(model: str, data: str, out: str, client, config: dict) -> int:
    """Write predictions of every row of ``data`` to ``out`` (CSV or Parquet), in order."""
    from . import dask as dgb_dask
    from .booster import Booster

    booster = Booster.load_model(model)
    frame = read_table(data)
    features = config.get("feature_columns") or list(booster.feature_names or [])
    if features:
        missing = [c for c in features if c not in frame.columns]
        if missing:
            raise ValueError(f"{data} lacks the model's feature columns {missing}")
        frame = frame[list(features)]
    predicted = dgb_dask.predict(client, booster, frame)
    table = predicted.to_frame() if hasattr(predicted, "to_frame") else predicted
    table.columns = [str(c) for c in table.columns]
    if out.lower().endswith(".csv"):
        table.to_csv(out, single_file=True, index=False)
    elif out.lower().endswith((".parquet", ".pq")):
        table.to_parquet(out, write_index=False)
    else:
        raise ValueError(f"--out {out}: give a .csv or .parquet path")
    return int(len(table))


def evaluate_job(model: str, data: str, client, config: dict) -> dict:
    """The model's metrics (its eval_metric, or the objective's default) on a labelled table."""
    import numpy as np

    from . import dask as dgb_dask
    from .booster import Booster
    from .collective import LocalCommunicator
    from .metrics import make_metric
    from .objectives import make_objective

    booster = Booster.load_model(model)
    frame = read_table(data)
    config = dict(config)
    if config.get("feature_columns") is None and booster.feature_names:
        config["feature_columns"] = list(booster.feature_names)
    X, y, weight = columns(frame, config, data)
    margins, labels = client.compute([dgb_dask.predict(client, booster, X, output_margin=True), y], sync=True)
    margins = np.asarray(margins, dtype=np.float32).reshape(len(labels), -1)
    predictions = make_objective(booster.params).eval_transform(margins)  # as training evaluates
    labels = np.asarray(labels, dtype=np.float32)
    weights = None if weight is None else np.asarray(weight.compute(), dtype=np.float32)
    results = {name: make_metric(name, booster.params)(labels, predictions, weights, LocalCommunicator())
               for name in booster.params.metrics}
    return {"model": model, "data": data, "rows": int(len(labels)), "metrics": results}


def _write_json(path: str, document: dict) -> None:
    from ._files import write_atomically

    write_atomically(path, json.dumps(document, indent=2, allow_nan=True).encode())
