"""The ``dgboost`` command line. Thin: the Python API is primary.

Exit codes: 0 done, 2 bad usage or bad input (a message, no traceback),
1 any other failure.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

from ._version import __version__

_DEMO_EXAMPLE = """example:
  dgboost demo                      # 100k rows, 100 rounds, one Dask worker per GPU (else 2 CPU workers)
  dgboost demo --rows 1000000 --rounds 500 --device cuda --workers 2
"""


def main(argv=None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and getattr(args, "overrides", None) is not None and all("=" in e and not e.startswith("-") for e in extra):
        args.overrides += extra  # key=value after an option: argparse ends the positionals at the option
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except (ValueError, TypeError) as error:
        print(f"dgboost {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: a line, and the shell's status for it
        if args.debug:
            raise
        print(f"dgboost {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - reported, with the traceback under --debug
        if args.debug:
            raise
        print(f"dgboost {args.command} failed: {type(error).__name__}: {error} (--debug shows the traceback)",
              file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dgboost", description="Gradient-boosted decision trees on GPUs through Dask.")
    parser.add_argument("--version", action="version", version=f"dgboost {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="train on a generated Higgs-like data set and report test AUC",
        description="Train on generated Higgs-like data through dgboost.dask on a local Dask "
                    "cluster (dask-cuda's LocalCUDACluster, one worker per GPU, when GPUs exist; "
                    "else a LocalCluster of CPU worker processes) and report the test AUC, with "
                    "progress as it trains.",
        epilog=_DEMO_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--rows", type=_positive, default=100_000, help="training rows (default 100000)")
    demo.add_argument("--test-rows", type=_positive, default=50_000, help="test rows (default 50000)")
    demo.add_argument("--rounds", type=_positive, default=100, help="boosting rounds (default 100)")
    demo.add_argument("--max-depth", type=_positive, default=6, help="tree depth (default 6)")
    demo.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                      help="where to train; auto picks a CUDA GPU when one is found")
    demo.add_argument("--workers", type=_positive, default=None,
                      help="Dask workers (default: one per GPU on cuda, else 2)")
    demo.add_argument("--quiet", action="store_true", help="print only the final result")
    demo.set_defaults(run=_demo)
    info = commands.add_parser(
        "info", help="versions, GPUs and (with --scheduler) a cluster's workers",
        description="Print dgboost's version and its dependencies', the CUDA GPUs cupy finds, and the "
                    "workers of a Dask cluster when given its scheduler.",
        epilog="example:\n  dgboost info\n  dgboost info --scheduler tcp://10.0.0.5:8786\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    info.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler's address")
    info.set_defaults(run=_info)

    train = _command(commands, "train", "train on a table as a TOML config says",
                     "Train through dgboost.dask on the tables a TOML config names; key=value pairs "
                     "override the config's keys. Writes the model and, beside it, an evaluation JSON "
                     "(NAME.eval.json). Config keys: train, evals (a table of name = path), label_column, "
                     "weight_column, qid_column (ranking's query ids), feature_columns, model, num_boost_round, early_stopping_rounds, "
                     "verbose_eval, format (\"libsvm\" for libsvm text files; .svm, .libsvm and .svmlight "
                     "files are read so anyway), and any training parameter by its XGBoost name.",
                     "  dgboost train job.toml\n  dgboost train job.toml max_depth=8 eta=0.05 device=cuda "
                     "--scheduler tcp://10.0.0.5:8786\n")
    train.add_argument("config", help="the TOML config file")
    train.add_argument("overrides", nargs="*", metavar="key=value", help="config keys to override")
    train.add_argument("--quiet", action="store_true", help="no progress (verbose_eval=false), only the last line")
    train.add_argument("--plot", metavar="FILE", help="also write the learning curves of every eval set (PNG, "
                       "SVG or PDF; needs matplotlib)")
    train.set_defaults(run=_train)

    predict = _command(commands, "predict", "write a model's predictions for a table",
                       "Predict every row of a CSV or Parquet table (or a libsvm text file) with a saved "
                       "model and write the predictions, in row order, to a CSV or Parquet file (one "
                       "column, or one a class).",
                       "  dgboost predict --model model.json --data test.parquet --out predictions.csv\n")
    predict.add_argument("--model", required=True, help="a model file written by dgboost train or save_model")
    predict.add_argument("--data", required=True, help="the table to predict (CSV or Parquet path or URL, or a "
                         "libsvm file)")
    predict.add_argument("--out", required=True, help="where to write the predictions (.csv or .parquet)")
    _format_argument(predict)
    predict.set_defaults(run=_predict)

    evaluate = _command(commands, "evaluate", "a model's metrics on a labelled table",
                        "Print, as JSON, the model's metrics (its eval_metric, else the objective's "
                        "default) on a labelled CSV or Parquet table, or a libsvm text file (its labels "
                        "first on each line).",
                        "  dgboost evaluate --model model.json --data valid.csv --label-column label\n")
    evaluate.add_argument("--model", required=True, help="a model file")
    evaluate.add_argument("--data", required=True, help="the labelled table")
    evaluate.add_argument("--label-column", help="the labels' column (a table's; required there)")
    evaluate.add_argument("--weight-column", help="the weights' column, if any")
    evaluate.add_argument("--qid-column", help="the query ids' column (a ranking model's; required for it)")
    _format_argument(evaluate)
    evaluate.set_defaults(run=_evaluate)

    jobs = commands.add_parser(
        "jobs", help="a cluster's dgboost jobs: list them, show one's learning curves, cancel one",
        description="The dgboost jobs every client submitted to a Dask cluster (dgboost.dask.submit, "
                    "dgboost train): id, name, user, status, round of rounds, latest metric, start, time "
                    "left. 'show ID' adds the job's learning curves, drawn in the terminal; 'cancel ID' "
                    "stops it. An id's first characters will do where they are unique.",
        epilog="example:\n  dgboost jobs --scheduler tcp://10.0.0.5:8786\n"
               "  dgboost jobs show 3f2a --scheduler-file scheduler.json\n"
               "  dgboost jobs cancel 3f2a --scheduler tcp://10.0.0.5:8786\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    jobs.add_argument("action", nargs="?", choices=("list", "show", "cancel"), default="list")
    jobs.add_argument("id", nargs="?", help="the job (show, cancel)")
    where = jobs.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler's address")
    where.add_argument("--scheduler-file", metavar="FILE", help="a Dask scheduler file")
    jobs.set_defaults(run=_jobs)
    return parser


def _jobs(args) -> int:
    from . import dask as dgb_dask
    from .jobs import scheduler_client

    if args.action != "list" and not args.id:
        raise ValueError(f"jobs {args.action} needs the job's id: dgboost jobs {args.action} ID (dgboost jobs lists them)")
    with scheduler_client(args.scheduler, args.scheduler_file) as client:
        try:
            if args.action == "list":
                print(_job_table(dgb_dask.jobs(client)))
            elif args.action == "show":
                job = dgb_dask.job_info(client, args.id)
                print(_job_table([job]))
                if job.get("error"):
                    print(f"error: {job['error']}")
                if job.get("model"):
                    print(f"model: {job['model']}")
                for name, metrics in job["curves"].items():
                    for metric, values in metrics.items():
                        print(f"\n{name}-{metric}, rounds 1 to {len(values)}:")
                        print("\n".join(_terminal_curve(values)))
            else:
                from .dask._registry import ACTIVE

                before = dgb_dask.cancel(client, args.id)
                print(f"dgboost job {args.id}: {before}, now cancelled" if before in ACTIVE
                      else f"dgboost job {args.id} had already ended ({before})")
        except KeyError as error:
            raise ValueError(error.args[0]) from None
    return 0


def _job_table(jobs: list[dict]) -> str:
    if not jobs:
        return "no dgboost jobs on this cluster"
    rows = [("ID", "NAME", "USER", "STATUS", "ROUND", "LATEST", "STARTED", "LEFT")]
    for job in jobs:
        latest = next((f"{name}-{metric} {value:.5f}" for name, metrics in (job["metrics"] or {}).items()
                       for metric, value in metrics.items()), "")
        started = time.strftime("%H:%M:%S", time.localtime(job["started"])) if job["started"] else ""
        left = "" if job.get("eta") is None else f"{job['eta']:.0f} s"
        rows.append((job["id"][:8], job["name"], job.get("user") or "", job["status"],
                     f"{job['rounds_done']}/{job['rounds']}", latest, started, left))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows)


def _terminal_curve(values: list, width: int = 60, height: int = 10) -> list[str]:
    """``values`` drawn with '*' on a ``height`` x ``width`` grid, its range on the left."""
    finite = [v for v in values if v is not None and v == v and abs(v) != float("inf")]
    if not finite:
        return ["(no finite values)"]
    low, high = min(finite), max(finite)
    span = (high - low) or 1.0
    grid = [[" "] * min(width, len(values)) for _ in range(height)]
    columns = len(grid[0])
    for column in range(columns):
        value = values[min(len(values) - 1, round(column * (len(values) - 1) / max(1, columns - 1)))]
        if value in finite:
            grid[height - 1 - round((value - low) / span * (height - 1))][column] = "*"
    labels = [f"{high:.4g}"] + [""] * (height - 2) + [f"{low:.4g}"]
    pad = max(len(label) for label in labels)
    return [f"{label.rjust(pad)} |{''.join(row)}" for label, row in zip(labels, grid)]


def _format_argument(parser) -> None:
    parser.add_argument("--format", choices=("table", "libsvm"), help="how to read --data (default: by its "
                        "extension: .svm, .libsvm and .svmlight are libsvm text, others CSV or Parquet)")


def _command(commands, name: str, summary: str, description: str, example: str):
    parser = commands.add_parser(name, help=summary, description=description, epilog=f"example:\n{example}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDRESS", help="a Dask scheduler's address (else a local cluster)")
    where.add_argument("--scheduler-file", metavar="FILE", help="a Dask scheduler file")
    return parser


def _train(args) -> int:
    from .jobs import client_for, evaluation_path, load_config, train_job

    config = load_config(args.config, args.overrides)
    if args.quiet:
        config["verbose_eval"] = False
    if args.plot:
        _check_plot(args.plot, config)
    connect = functools.partial(client_for, args.scheduler, args.scheduler_file, str(config.get("device", "cpu")))
    summary = train_job(config, connect)
    print(f"trained {summary['rounds']} rounds; model written to {summary['model']}, evaluation to "
          f"{evaluation_path(summary['model'])}")
    if args.plot:
        _plot_curves(summary["evals_result"], args.plot)
        print(f"learning curves written to {args.plot}")
    return 0


def _check_plot(path: str, config: dict) -> None:
    """What would stop ``--plot``, found before training rather than after it."""
    from .jobs import check_output

    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'dgboost[plot]'") from None
    if not config.get("evals"):
        raise ValueError("--plot needs eval sets: give the config an [evals] table")
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix and suffix not in FigureCanvasBase.get_supported_filetypes():
        raise ValueError(f"--plot {path}: matplotlib cannot write .{suffix} files: give a .png, .svg or .pdf path")
    check_output(path, "--plot")


def _plot_curves(evals_result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import plot_metric

    metrics = list(dict.fromkeys(m for curves in evals_result.values() for m in curves))
    if not metrics:  # disable_default_eval_metric without an eval_metric
        raise ValueError("--plot has no metric to draw: give the config an eval_metric")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)  # as the model's directory is made
    figure, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        plot_metric(evals_result, metric, ax=ax)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _predict(args) -> int:
    from .jobs import client_for, predict_job

    rows = predict_job(args.model, args.data, args.out,
                       functools.partial(client_for, args.scheduler, args.scheduler_file, "cpu"),
                       {"format": args.format} if args.format else {})
    print(f"wrote {rows} predictions to {args.out}")
    return 0


def _evaluate(args) -> int:
    import json

    from .jobs import client_for, evaluate_job

    config = {"label_column": args.label_column, "weight_column": args.weight_column, "qid_column": args.qid_column}
    if args.format:
        config["format"] = args.format
    result = evaluate_job(args.model, args.data,
                          functools.partial(client_for, args.scheduler, args.scheduler_file, "cpu"), config)
    print(json.dumps(result, indent=2))
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _demo(args) -> int:
    import math

    from .backend import cuda_device_count
    from .datasets import make_higgs_like

    device = args.device
    if device == "auto":
        device = "cuda" if cuda_device_count() else "cpu"
    if device == "cuda":
        _check_gpus(args.workers)
    workers = args.workers or (cuda_device_count() if device == "cuda" else 2)
    say = (lambda *a: None) if args.quiet else print
    say(f"dgboost {__version__} demo: higgs-like data, {args.rows} training and {args.test_rows} "
        f"test rows, 28 features, on {device}, {workers} Dask workers")
    X, y = make_higgs_like(args.rows, seed=0)
    X_test, y_test = make_higgs_like(args.test_rows, seed=1)
    params = {"objective": "binary:logistic", "eval_metric": ["logloss", "auc"], "eta": 0.1,
              "max_depth": args.max_depth, "device": device, "verbosity": 1 if args.quiet else 2}
    from .jobs import client_for

    with client_for(None, None, device, workers) as client:
        import dask.array as da

        from . import dask as dgb_dask

        def collection(values, rows):
            chunks = max(1, math.ceil(rows / (2 * workers)))  # two partitions a worker
            return da.from_array(values, chunks=(chunks,) + values.shape[1:])

        dX, dy = collection(X, args.rows), collection(y, args.rows)
        test = (collection(X_test, args.test_rows), collection(y_test, args.test_rows), "test")
        started = time.perf_counter()
        booster = dgb_dask.train(client, params, dX, dy, num_boost_round=args.rounds, evals=[test],
                                 verbose_eval=False if args.quiet else max(1, args.rounds // 10))
        seconds = time.perf_counter() - started
    result = booster.evals_result()["test"]
    print(f"trained {booster.num_boosted_rounds()} rounds in {seconds:.1f} s; "
          f"test AUC {result['auc'][-1]:.4f}, logloss {result['logloss'][-1]:.4f}")
    return 0


def _check_gpus(workers: int | None) -> None:
    """``--device cuda`` needs a GPU, and one for each of ``--workers``."""
    from .backend import cuda_device_count

    found = cuda_device_count()
    if not found:
        raise ValueError("--device cuda: no CUDA GPU found: use --device cpu (or auto)")
    if workers and workers > found:
        raise ValueError(f"--workers {workers}: --device cuda runs a worker per GPU and {found} were found: "
                         f"give --workers {found} or fewer")


def _info(args) -> int:
    import importlib
    import platform

    from .backend import cuda_device_count

    print(f"dgboost {__version__} (python {platform.python_version()}, {platform.machine()})")
    for module in ("numpy", "dask", "distributed", "cupy", "dask_cuda", "sklearn", "xgboost", "pandas"):
        try:
            version = importlib.import_module(module).__version__
        except ImportError:
            version = "not installed"
        print(f"  {module}: {version}")
    gpus = cuda_device_count()
    print(f"CUDA GPUs: {gpus}")
    if gpus:
        import cupy

        for index in range(gpus):
            properties = cupy.cuda.runtime.getDeviceProperties(index)
            name = properties["name"].decode() if isinstance(properties["name"], bytes) else properties["name"]
            print(f"  {index}: {name}, {properties['totalGlobalMem'] / 2**30:.0f} GiB")
    if args.scheduler:
        from .dask import worker_info
        from .jobs import scheduler_client

        with scheduler_client(args.scheduler, None) as client:
            workers = worker_info(client)
            print(f"cluster {args.scheduler}: {len(workers)} workers")
            for address, worker in sorted(workers.items()):
                print(f"  {address}: {worker.get('nthreads', '?')} threads, "
                      f"{worker.get('memory_limit', 0) / 2**30:.1f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
