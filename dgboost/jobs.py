"""What ``dgboost train``, ``predict`` and ``evaluate`` do: config files, tables, a cluster.

A config file is TOML; command-line ``key=value`` pairs override its keys
(values parse as TOML: ``max_depth=8``, ``eta=0.05``, ``device="cuda"``). Tables
are CSV or Parquet files (or directories of Parquet parts), local paths or
fsspec URLs, read with dask.dataframe; or libsvm (svmlight) text files, told by
their extension or ``format = "libsvm"``, read whole by scikit-learn's reader into
a sparse matrix that becomes a dask array of CSR chunks.

Each job checks all of its input (the config's keys, the model file, the tables'
first rows, that the outputs can be written) before it calls ``connect``, the
function that opens its Dask client, so bad input fails at once, with a
ValueError naming the argument, and not after a cluster has started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import time

#: Config keys that are not training parameters.
JOB_KEYS = ("train", "evals", "label_column", "weight_column", "qid_column", "feature_columns", "categorical_columns",
            "model",
            "num_boost_round", "early_stopping_rounds", "verbose_eval", "format")

_TABLE_FIX = "give the path of a .csv or .parquet table (or a directory of Parquet parts)"
_MODEL_FIX = "give a model file written by dgboost train or Booster.save_model"


def load_config(path, overrides) -> dict:
    """The config file's keys, then each ``key=value`` override; ValueError names a bad one."""
    toml = _toml()
    try:
        config = toml.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"config file {path} {_os_problem(error)}: give the path of a TOML file") from None
    except UnicodeDecodeError:
        raise ValueError(f"config file {path} is not TOML: it is not UTF-8 text") from None
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


def _os_problem(error: OSError) -> str:
    """What an OSError says about a user's path, for a message: ``does not exist``,
    ``cannot be read (permission denied)``, ``cannot be read (is a directory)``..."""
    if isinstance(error, FileNotFoundError):
        return "does not exist"
    return f"cannot be read ({(error.strerror or str(error)).lower()})"


def _reason(error: Exception) -> str:
    """An error's message on one line, without the "An error occurred while calling
    read_csv ..." that dask wraps around a reader's own error."""
    cause = error.__cause__ or error
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror.lower()
    return " ".join(str(cause).split())


def load_model(path: str, argument: str):
    """The Booster in a user's model file; ValueError names ``argument`` whatever is wrong."""
    from .booster import Booster

    try:
        return Booster.load_model(path)
    except OSError as error:
        raise ValueError(f"{argument} {path} {_os_problem(error)}: {_MODEL_FIX}") from None
    except ValueError as error:  # Booster's messages start with the path
        raise ValueError(f"{argument} {error}") from None


def read_table(path: str, argument: str):
    """A dask DataFrame from a CSV or Parquet path or URL; ValueError names ``argument``.

    dask reads a CSV's first rows and a Parquet file's footer here, so a missing,
    unreadable or foreign file fails now; a CSV damaged further on fails when the
    job computes (``_parsing``).
    """
    try:
        import dask.dataframe as dd
    except ImportError as error:
        raise ValueError(f"reading {path} needs dask.dataframe, which needs pandas and pyarrow: "
                         f"pip install 'dgboost[dataframe]' ({error})") from None

    local = "://" not in str(path)
    if local and not os.path.exists(path):
        raise ValueError(f"{argument} {path} does not exist: {_TABLE_FIX}")
    lowered = str(path).lower()
    if (local and os.path.isdir(path)) or lowered.endswith((".parquet", ".pq")):
        read, kind = dd.read_parquet, "Parquet"
    elif lowered.endswith((".csv", ".csv.gz", ".txt")):
        read, kind = dd.read_csv, "CSV"
    else:
        raise ValueError(f"{argument} {path} is neither CSV nor Parquet: {_TABLE_FIX}")
    try:
        return read(path)
    except (OSError, ValueError) as error:  # pandas' and pyarrow's parse errors are ValueErrors
        raise ValueError(f"{argument} {path} cannot be read as {kind} ({_reason(error)}): {_TABLE_FIX}") from None


#: The extensions of libsvm (svmlight) text files, read as XGBoost's command line read them.
LIBSVM_SUFFIXES = (".svm", ".libsvm", ".svmlight")

#: Entries of a libsvm file's matrix a dask chunk holds (about): its rows cut by them.
_LIBSVM_CHUNK_ENTRIES = 1 << 24


def is_libsvm(path: str, config: dict) -> bool:
    """Whether ``path`` is read as libsvm text: ``format = "libsvm"``, or its extension."""
    fmt = config.get("format")
    if fmt not in (None, "libsvm", "table"):
        raise ValueError(f"format={fmt!r} must be \"libsvm\" (a libsvm text file) or \"table\" (CSV or Parquet), "
                         "or left out: the path's extension tells")
    return fmt == "libsvm" or (fmt is None and str(path).lower().endswith(LIBSVM_SUFFIXES))


def read_libsvm(path: str, argument: str, n_features: int | None = None):
    """``(X, y, qid)`` of a libsvm text file (``label [qid:q] index:value ...`` a line): X a dask
    array of scipy CSR chunks, an absent entry missing, y float32, qid the lines' query ids (a
    dask array) where they give them, else None. Feature indices are taken as the
    file gives them, from 0 (as XGBoost reads them: a file numbered from 1 has an empty
    feature 0). ``n_features``: the columns X must have (a model's); the file may use fewer
    but not more. Read whole, into the client's memory, by scikit-learn's reader."""
    import dask.array as da
    import numpy as np

    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise ValueError(f"reading the libsvm file {argument} {path} needs scikit-learn: "
                         "pip install 'dgboost[sklearn]'") from None
    if "://" not in str(path) and not os.path.exists(path):
        raise ValueError(f"{argument} {path} does not exist: give the path of a libsvm text file")
    try:
        X, y, qid = load_svmlight_file(path, n_features=n_features, dtype=np.float32, zero_based=True, query_id=True)
    except OSError as error:
        raise ValueError(f"{argument} {path} {_os_problem(error)}: give the path of a libsvm text file") from None
    except ValueError as error:
        fix = (f"the model was trained on {n_features} features (indices 0 to {n_features - 1})"
               if n_features is not None and "n_features" in str(error) else "give lines of `label index:value ...`")
        raise ValueError(f"{argument} {path} cannot be read as libsvm ({_reason(error)}): {fix}") from None
    if 0 < len(qid) < X.shape[0]:
        raise ValueError(f"{argument} {path} gives qid:q on {len(qid)} of its {X.shape[0]} lines: give every line "
                         "its query (label qid:q index:value ...), or none")
    X = X.tocsr()
    stride = int(np.diff(X.indptr).max()) if X.shape[0] else 1
    rows = max(1, _LIBSVM_CHUNK_ENTRIES // max(stride, 1))
    return (da.from_array(X, chunks=(rows, X.shape[1]), asarray=False),
            da.from_array(y.astype(np.float32), chunks=(rows,)),
            da.from_array(qid, chunks=(rows,)) if len(qid) == X.shape[0] and X.shape[0] else None)


@contextlib.contextmanager
def _parsing(tables: dict):
    """Name the table when a CSV row past its first block fails to parse: dask reads those
    rows only when the job computes. ``tables``: argument -> path."""
    import pandas as pd

    try:
        yield
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        named = ", ".join(f"{argument} {path}" for argument, path in tables.items())
        which = named if len(tables) == 1 else f"one of {named}"
        raise ValueError(f"{which}: a row cannot be parsed as CSV ({_reason(error)}): fix the file, "
                         "e.g. give every row as many fields as the header") from None


def check_output(path: str, argument: str, directory: bool = False) -> None:
    """ValueError unless a local ``path`` can be written, checked before the work that
    makes the output; URLs are left to their writer.

    ``directory``: the output is a directory of parts (Parquet). A missing parent
    directory is fine (the writers make it) when the nearest existing one is writable.
    """
    if "://" in path:
        return
    target = pathlib.Path(path).absolute()
    if target.exists() and target.is_dir() != directory:
        raise ValueError(f"{argument} {path} is {'a file' if directory else 'a directory'}: "
                         "give a new path, or remove it")
    if directory and target.is_dir() and any(target.iterdir()):  # its parts would mix with the new ones
        raise ValueError(f"{argument} {path} is a directory that holds files already (the parts written would mix "
                         "with them): give a new path, or remove it")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{argument} {path}: {parent} is not a directory you can write to: "
                         "give a path in a writable directory")


def columns(frame, config: dict, where: str, need_label: bool = True):
    """(X, y, weight, qid) of a table by the config's column keys."""
    label = config.get("label_column")
    if need_label and not label:
        raise ValueError("label_column is required: the name of the column holding the labels")
    weight, qid = config.get("weight_column"), config.get("qid_column")
    for name, column in (("label_column", label), ("weight_column", weight), ("qid_column", qid)):
        if column and column not in frame.columns:
            raise ValueError(f"{name}={column!r} is not a column of {where} (columns: {list(frame.columns)[:20]})")
    roles: dict = {}  # each column a role names: the role
    for name, column in (("label_column", label), ("weight_column", weight), ("qid_column", qid)):
        if column in roles:
            raise ValueError(f"{roles[column]} and {name} both name column {column!r}: give each its own column")
        if column:
            roles[column] = name
    features = config.get("feature_columns")
    if features is None:
        features = [c for c in frame.columns if c not in (label, weight, qid)]
    missing = [c for c in features if c not in frame.columns]
    if missing:
        raise ValueError(f"feature_columns {missing} are not columns of {where}")
    for column, name in roles.items():
        if column in features:
            raise ValueError(f"feature_columns holds {column!r}, which {name} names: a model must not read its "
                             f"{name.split('_')[0]}s as a feature (drop it from feature_columns, or name another "
                             f"{name})")
    y = frame[label] if label and label in frame.columns else None
    return (as_categories(frame[list(features)], config, where), y, (frame[weight] if weight else None),
            (frame[qid] if qid else None))


def as_categories(X, config: dict, where: str, model_categories=None):
    """A dask frame's categorical columns as ``category`` columns of known categories: those
    ``categorical_columns`` names (text or numbers: their categories found in one pass,
    ``categorize``), those a Parquet file holds as categories unknown to dask (the same), or,
    with ``model_categories`` (a model's, by column), the model's own categories (no pass)."""
    import pandas as pd

    if model_categories is not None:
        known = {column: pd.CategoricalDtype(list(values)) for column, values in zip(X.columns, model_categories)
                 if values is not None}
        return X.astype(known) if known else X
    names = list(config.get("categorical_columns") or [])
    absent = [c for c in names if c not in X.columns]
    if absent:
        raise ValueError(f"categorical_columns {absent} are not feature columns of {where}")
    unknown = [c for c in X.columns if isinstance(X[c].dtype, pd.CategoricalDtype)
               and (X[c].dtype.categories is None or "__UNKNOWN_CATEGORIES__" in list(X[c].dtype.categories))]
    names += [c for c in unknown if c not in names]
    if not names:
        return X
    return X.astype({c: "category" for c in names}).categorize(columns=names)


@contextlib.contextmanager
def client_for(scheduler: str | None, scheduler_file: str | None, device: str, n_workers: int | None = None):
    """A Client of the given scheduler, or of a local cluster made for ``device`` (``n_workers``:
    local_cluster's default when None)."""
    import distributed

    from .dask import local_cluster

    if scheduler or scheduler_file:
        with scheduler_client(scheduler, scheduler_file) as client:
            yield client
        return
    # Its workers' failed tasks are the job's error, which the command prints as one line.
    with local_cluster("cuda" if device.startswith(("cuda", "gpu")) else "cpu", n_workers,
                       silence_logs=logging.CRITICAL) as cluster, \
            distributed.Client(cluster) as client:
        yield client
        # The workers end with the cluster: the CPU kernels' drivers they were compiling in the
        # background (a cold numba cache) are finished first, so the next run finds them cached.
        client.run(_drivers_cached)


def _drivers_cached() -> bool:
    from .kernels.drivers import background_compiles_done

    return background_compiles_done(timeout=120)


def client_at(address: str, timeout: float, tries: int = 3):
    """``distributed.Client(address)``, tried again (half a second apart) where distributed's connect
    asserts that the scheduler's first message came alone: a broadcast to every client (another
    client's cancels, say) can come between."""
    import time

    import distributed

    for attempt in range(tries):
        try:
            return distributed.Client(address, timeout=timeout)
        except AssertionError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


def scheduler_client(scheduler: str | None, scheduler_file: str | None):
    """A Client of a running scheduler, given its address or its scheduler file.

    ValueError names the argument when no scheduler answers within distributed's
    connect timeout (``distributed.comm.timeouts.connect``, 30 s by default).
    """
    import dask

    timeout = dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"))
    given = f"--scheduler {scheduler}" if scheduler else f"--scheduler-file {scheduler_file}"
    address = scheduler or _scheduler_address(scheduler_file, timeout)
    try:
        return client_at(address, timeout)
    except ValueError as error:  # distributed's parse of the address
        raise ValueError(f"{given}: {error}: give an address such as tcp://10.0.0.5:8786") from None
    except OSError as error:
        raise ValueError(f"{given}: no Dask scheduler answered at {address} within {timeout:g} s ({error}): "
                         "check that the scheduler runs and this machine can reach it (deploy/README.md "
                         "starts one)") from None


def _scheduler_address(path: str, timeout: float) -> str:
    """The address in a scheduler file, waiting up to ``timeout`` seconds for a scheduler
    that is starting to write it (distributed's Client would wait forever)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, encoding="utf-8") as stream:
                return json.load(stream)["address"]
        except FileNotFoundError:
            problem = "does not exist"
        except OSError as error:
            raise ValueError(f"--scheduler-file {path} {_os_problem(error)}: give the file that "
                             "`dask scheduler --scheduler-file FILE` writes") from None
        except (ValueError, KeyError, TypeError):  # not (yet) the JSON a scheduler writes
            problem = "is not a Dask scheduler file (JSON with the scheduler's \"address\")"
        if time.monotonic() > deadline:
            raise ValueError(f"--scheduler-file {path} {problem} (waited {timeout:g} s): give the file that "
                             "`dask scheduler --scheduler-file FILE` writes, once the scheduler runs")
        time.sleep(0.1)


def _train_options(config: dict) -> tuple[dict, dict]:
    """(params, dgboost.dask.train's other options) of a config, every job key's type checked."""
    from .training import Options

    for key, what, example in (("train", "the training table's path", "train.csv"),
                               ("model", "where to write the model", "model.json")):
        if key not in config:
            raise ValueError(f"the config needs {key}: {what}, e.g. {key} = \"{example}\"")
        if not isinstance(config[key], str) or not config[key]:
            raise ValueError(f"{key}={config[key]!r} must be a string: {what}, e.g. {key} = \"{example}\"")
    for key, example in (("label_column", "label"), ("weight_column", "weight"), ("qid_column", "query")):
        if not isinstance(config.get(key, ""), str):
            raise TypeError(f"{key}={config[key]!r} must be a column's name, e.g. {key} = \"{example}\"")
    features = config.get("feature_columns", [])
    if not isinstance(features, list) or not all(isinstance(c, str) for c in features):
        raise TypeError(f"feature_columns={features!r} must be a list of column names, "
                        "e.g. feature_columns = [\"a\", \"b\"]")
    categorical = config.get("categorical_columns", [])
    if not isinstance(categorical, list) or not all(isinstance(c, str) for c in categorical):
        raise TypeError(f"categorical_columns={categorical!r} must be a list of column names, "
                        "e.g. categorical_columns = [\"carrier\", \"origin\"]")
    evals = config.get("evals", {})
    if not isinstance(evals, dict) or not all(isinstance(p, str) for p in evals.values()):
        raise TypeError(f"evals={evals!r} must be a table of name = path, e.g. [evals] valid = \"valid.csv\"")
    if config.get("early_stopping_rounds") is not None and not evals:  # Options.check would say evals=[...]
        raise ValueError(f"early_stopping_rounds={config['early_stopping_rounds']!r} needs an eval set to watch: "
                         "give the config an [evals] table, e.g. [evals] valid = \"valid.csv\"")
    params = {k: v for k, v in config.items() if k not in JOB_KEYS}
    if categorical:
        params.setdefault("enable_categorical", True)
    options = {"num_boost_round": config.get("num_boost_round", 100),
               "early_stopping_rounds": config.get("early_stopping_rounds"),
               "verbose_eval": config.get("verbose_eval", False)}
    Options.check(params, options["num_boost_round"], options["early_stopping_rounds"], None,
                  options["verbose_eval"], has_evals=bool(evals))
    return params, options


def train_job(config: dict, connect) -> dict:
    """Train as the config says; write the model and its evaluation JSON. Returns the summary.

    ``connect()`` gives a context manager of the Client to train on; it is called
    once the config, its tables and the model's path are checked.
    """
    from . import dask as dgb_dask

    params, options = _train_options(config)
    model = config["model"]
    check_output(model, "model")
    check_output(evaluation_path(model), "model's evaluation file")
    eval_paths = config.get("evals", {})
    tables = {"train": config["train"]} | {f"evals.{name}": path for name, path in eval_paths.items()}
    if is_libsvm(config["train"], config):
        if config.get("weight_column"):
            raise ValueError(f"weight_column={config['weight_column']!r}: a libsvm file has no columns; "
                             "leave weight_column out")
        X, y, qid = read_libsvm(config["train"], "train")
        ranking = str(params.get("objective", "")).startswith("rank:")  # others leave a file's qid: fields be
        weight, evals, eval_qid = None, [], []
        for name, path in eval_paths.items():
            eval_X, eval_y, qids = read_libsvm(path, f"evals.{name}", X.shape[1])
            if ranking and qids is None:
                raise ValueError(f"evals.{name} {path} has no qid:q fields: a ranking job scores each eval set by "
                                 "query, so give its lines their queries (label qid:q index:value ...)")
            evals.append((eval_X, eval_y, name))
            eval_qid.append(qids)
        if ranking and qid is None:
            raise ValueError(f"train {config['train']} has no qid:q fields: objective={params['objective']!r} ranks "
                             "the rows of each query, so give its lines their queries (label qid:q index:value ...)")
        if ranking:  # the lines' qid: fields
            options = {**options, "qid": qid, "eval_qid": eval_qid}
    else:
        X, y, weight, qid = columns(read_table(config["train"], "train"), config, config["train"])
        evals, eval_qid = [], []
        for name, path in eval_paths.items():
            eval_X, eval_y, _, qids = columns(read_table(path, f"evals.{name}"), config, path)
            evals.append((eval_X, eval_y, name))
            eval_qid.append(qids)
        if qid is not None:  # ranking's queries (qid_column)
            options = {**options, "qid": qid, "eval_qid": eval_qid}
    with connect() as client, _parsing(tables):
        job = dgb_dask.submit(client, params, X, y, sample_weight=weight, evals=evals,
                              name=f"dgboost train {pathlib.Path(model).name}", **options)
        booster = job.wait()
        booster.save_model(model)
        job.record_model(str(pathlib.Path(model).resolve()))
    summary = {"model": model, "rounds": booster.num_boosted_rounds(), "best_iteration": booster.best_iteration,
               "best_score": booster.best_score, "evals_result": booster.evals_result(),
               "params": params}
    _write_json(evaluation_path(model), summary)
    return summary


def evaluation_path(model: str) -> str:
    """``model.json`` -> ``model.eval.json``, beside the model."""
    path = pathlib.Path(model)
    return str(path.with_name(path.stem + ".eval.json"))


def predict_job(model: str, data: str, out: str, connect, config: dict) -> int:
    """Write predictions of every row of ``data`` to ``out`` (CSV or Parquet), in order.

    ``connect()`` gives a context manager of the Client to predict on; it is called
    once the model, the table and ``out`` are checked.
    """
    import dask

    from . import dask as dgb_dask

    lowered = out.lower()
    if not lowered.endswith((".csv", ".parquet", ".pq")):
        raise ValueError(f"--out {out}: give a .csv or .parquet path")
    check_output(out, "--out", directory=not lowered.endswith(".csv"))
    booster = load_model(model, "--model")
    if is_libsvm(data, config):
        frame, _, _ = read_libsvm(data, "--data", booster.num_features)
    else:
        frame = read_table(data, "--data")
        features = config.get("feature_columns") or list(booster.feature_names or [])
        if features:
            missing = [c for c in features if c not in frame.columns]
            if missing:
                raise ValueError(f"--data {data} lacks the model's feature columns {missing}: give a table with "
                                 "the columns the model was trained on")
            frame = frame[list(features)]
        if booster.categories is not None:
            frame = as_categories(frame, config, data, booster.categories.values[:booster.categories.n_inputs])
    predicted = dgb_dask.predict(None, booster, frame)  # lazy: checked now, computed by the client below
    if not hasattr(predicted, "columns") and not hasattr(predicted, "to_frame"):  # a dask array
        import dask.dataframe as dd

        predicted = dd.from_dask_array(predicted)
    table = predicted.to_frame() if hasattr(predicted, "to_frame") else predicted
    table.columns = [str(c) for c in table.columns]
    if lowered.endswith(".csv"):
        write = table.to_csv(out, single_file=True, index=False, compute=False)
    else:
        write = table.to_parquet(out, write_index=False, compute=False)
    with connect(), _parsing({"--data": data}):
        _, lengths = dask.compute(write, table.map_partitions(len))  # one pass: the table is read once
    return int(sum(lengths))


def evaluate_job(model: str, data: str, connect, config: dict) -> dict:
    """The model's metrics (its eval_metric, or the objective's default) on a labelled table.

    ``connect()`` gives a context manager of the Client to compute on; it is called
    once the model and the table are checked.
    """
    import numpy as np

    from . import dask as dgb_dask
    from .collective import LocalCommunicator
    from .data.inputs import query_groups
    from .objectives.metrics import make_metric
    from .objectives import make_objective

    booster = load_model(model, "--model")
    if is_libsvm(data, config):
        (X, y, qid), weight = read_libsvm(data, "--data", booster.num_features), None
    else:
        frame = read_table(data, "--data")
        config = dict(config)
        if config.get("feature_columns") is None and booster.feature_names:
            config["feature_columns"] = list(booster.feature_names)
        X, y, weight, qid = columns(frame, {k: v for k, v in config.items() if k != "categorical_columns"}, data)
        if booster.categories is not None:
            X = as_categories(X, config, data, booster.categories.values[:booster.categories.n_inputs])
    if booster.params.objective.startswith("rank:") and qid is None:
        raise ValueError("a ranking model is scored by query: give --qid-column, the column of the query ids "
                         "(a libsvm file's lines give them as qid:q)")
    margins = dgb_dask.predict(None, booster, X, output_margin=True)  # lazy: checked now
    extra = [c for c in (weight, qid if booster.params.objective.startswith("rank:") else None) if c is not None]
    with connect() as client, _parsing({"--data": data}):  # one pass: the table is read once
        margins, labels, *rest = client.compute([margins, y] + extra, sync=True)
    weights = np.asarray(rest.pop(0), dtype=np.float32) if weight is not None else None
    group = query_groups(np.asarray(rest[0]), None, len(labels)) if rest else None
    margins = np.asarray(margins, dtype=np.float32).reshape(len(labels), -1)
    objective = make_objective(booster.params)
    labels = np.asarray(labels, dtype=np.float32)
    _check_scored(booster, objective, labels, weights)
    predictions = objective.eval_transform(margins)  # as training evaluates
    results = {name: make_metric(name, booster.params)(labels, predictions, weights, LocalCommunicator(), group)
               for name in booster.params.metrics}
    return {"model": model, "data": data, "rows": int(len(labels)), "metrics": results}


def _check_scored(booster, objective, labels, weights) -> None:
    """The labels and weights a model is scored on, checked as training checks an eval set's:
    a NaN label, one outside the objective's range or a negative weight would give metrics
    that mean nothing."""
    from .data.inputs import _check_finite, _check_weights
    from .training import check_metric_labels

    name = "--data's labels"
    _check_finite(labels, name)
    objective.check_labels(labels, name)
    check_metric_labels(booster.params, labels, name, evaluated=True)
    if weights is not None:
        _check_finite(weights, "--data's weights")
        _check_weights(weights, "--data's weights")


def _write_json(path: str, document: dict) -> None:
    from ._files import write_atomically

    write_atomically(path, json.dumps(document, indent=2, allow_nan=True).encode())
