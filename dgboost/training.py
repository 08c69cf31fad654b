"""The boosting loop, the same for every rank and device, and ``dgboost.train``.

``train`` validates everything a user gives, then calls ``boost`` with a
world-of-one Communicator. A distributed job calls ``boost`` on every worker
with its own shard and a real Communicator; nothing below knows the difference.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import numbers
import os
from typing import Sequence

import numpy as np

from ._dtypes import BIN_OFFSET_DTYPE, CUT_DTYPE, MARGIN_DTYPE
from .backend import HostRead, asarray, cuda_device_count, get_xp, start_read, to_numpy, xp_for_device
from .booster import Booster
from .callback import (CallbackContainer, EarlyStopping, EvaluationMonitor, EvalsLog, LearningRateScheduler,
                       ProgressBar, TrainingCallback, count, on_terminal)
from .collective import LocalCommunicator
from .data.inputs import Dataset, RowBlocks, RowSpans, as_array, check_feature_names, check_numeric_dtype, \
    is_dataframe, make_dataset, refuse_category_columns
from .data.ellpack import EllpackMatrix
from .data import sparse
from .data.pages import (PackedRows, PageBuffers, PagedMatrix, buffer_bytes, build_matrix, device_budget,
                         stays_on_host)
from .tree import make_grower
from .tree.constraints import FeatureRules
from .tree.grower import Grower, agree_on_pages
from .kernels import add_leaf_values
from .kernels.loops import using_threads
from .objectives.metrics import make_metric
from .objectives import Objective, make_objective
from .objectives.base import raise_for_first
from .objectives.ranking import MAX_EXP_RELEVANCE, not_exp_relevance
from .params import RANKING, TrainParams
from . import replay
from ._settings import cuda_graphs
from .reduce import global_count
from .tree.sampling import RowSampler
from .data.categories import (Categories, agree_counts, choose_combinations, known_codes,
                              resolve as resolve_categories, target_statistics)
from .data.sketch import Cuts, Sample, compute_cuts, draw_sample
from .tree.tree import Tree

logger = logging.getLogger("dgboost")
_LOG_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


@dataclasses.dataclass(frozen=True)
class Options:
    """The checked training options besides the data, as ``train`` and ``dgboost.dask.train`` take them."""

    params: TrainParams
    num_boost_round: int
    early_stopping_rounds: int | None
    callbacks: tuple
    period: int  # print the metrics every `period` rounds; 0: never
    init_model: Booster | None = None  # training continues from its trees

    @classmethod
    def check(cls, params, num_boost_round, early_stopping_rounds, callbacks, verbose_eval, *,
              has_evals: bool, init_model=None, evals=None) -> "Options":
        """Validate everything but the data; raises ValueError/TypeError naming the argument.
        ``evals``: train's, whose names an EarlyStopping's ``data_name`` must be one of."""
        params = TrainParams.from_dict(params)
        _configure_logging(params.verbosity)
        num_boost_round = count("num_boost_round", num_boost_round, minimum=0)
        if early_stopping_rounds is not None:
            early_stopping_rounds = count("early_stopping_rounds", early_stopping_rounds, minimum=1)
            if not has_evals:
                raise ValueError("early_stopping_rounds needs an eval set to watch: pass evals=[(X_valid, "
                                 "y_valid, 'valid')] (to a scikit-learn estimator's fit: eval_set=[(X_valid, "
                                 "y_valid)])")
            if not params.metrics:
                raise ValueError("early_stopping_rounds needs a metric, but disable_default_eval_metric "
                                 "is set and no eval_metric is given")
        callbacks, init_model = tuple(_callbacks(callbacks)), _init_model(init_model, params)
        if early_stopping_rounds is None and all(c.never_stops for c in callbacks):  # else it may end sooner
            _check_rates(callbacks, num_boost_round + (0 if init_model is None else init_model.num_boosted_rounds()))
        _check_watched(callbacks, params, evals)
        return cls(params, num_boost_round, early_stopping_rounds, callbacks, _period(verbose_eval), init_model)

    def all_callbacks(self, progress_file=None) -> list:
        """The user's callbacks, then early stopping and progress where asked for: a bar on
        a terminal, else lines (written to ``progress_file``, default stdout)."""
        callbacks = list(self.callbacks)
        if self.early_stopping_rounds is not None:
            callbacks.append(EarlyStopping(self.early_stopping_rounds))
        if self.period and progress_file is None and on_terminal():
            callbacks.append(ProgressBar(self.num_boost_round))
        elif self.period:
            callbacks.append(EvaluationMonitor(self.period, file=progress_file))
        return callbacks


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a restarted run picks up (dgboost.dask's restart after a lost worker): its
    ``init_model`` is the model of the rounds already finished, with their best round, ranking
    state and metrics (``evals_result``); ``started`` the callbacks as they stood after the last
    of them, already started (their ``before_training`` is not run again, so early stopping and
    checkpoints go on counting); ``cuts`` the cuts the interrupted run agreed, or None. The same
    rows give the same cuts, so a restart bins its shards with them and draws no sample. The
    rounds that follow are those an uninterrupted run makes."""

    started: tuple = ()
    cuts: Cuts | None = None


@dataclasses.dataclass
class EvalSet:
    """One named eval set of a rank. ``is_training`` marks the training data passed
    again as an eval set: it reuses the training matrix and margins."""

    name: str
    data: Dataset
    is_training: bool = False


def train(params, X, y, *, num_boost_round: int = 100, evals: Sequence = (), sample_weight=None,
          base_margin=None, early_stopping_rounds: int | None = None, callbacks=None,
          verbose_eval: bool | int = False, init_model=None, feature_weights=None, qid=None, group=None,
          eval_qid=None, eval_group=None, label_lower_bound=None, label_upper_bound=None) -> Booster:
    """Train a gradient-boosted tree model in this process.

    Parameters
    ----------
    params : dict
        Training parameters under XGBoost's names (docs/parameters.md).
    X : numpy or cupy array (n_rows, n_features), or a pandas DataFrame of numbers
        NaN (or ``params["missing"]``) marks a missing value.
    y : array (n_rows,)
    num_boost_round : int
        Boosting rounds (one tree per round, or num_class trees for multiclass).
    evals : sequence of (X, y, name)
        Eval sets, binned with the training cuts; metrics are reported for each.
    sample_weight, base_margin : arrays (n_rows,) / (n_rows, n_outputs), optional
    early_stopping_rounds : int, optional
        Stop when the last metric on the last eval set has not improved for this many rounds.
    callbacks : list of dgboost.callback.TrainingCallback, optional
    verbose_eval : bool or int
        Print the metrics every round (True) or every ``verbose_eval`` rounds.
    init_model : Booster or path, optional
        Continue training: its trees come first, rows start from its margins,
        and rounds are numbered on from its last.
    feature_weights : array (n_features,), optional
        Column sampling's weights (``colsample_*``): a feature is drawn as XGBoost draws
        it, more often the larger its weight; finite and >= 0.
    qid, group : array (n_rows,) of query ids / array (n_groups,) of query sizes, optional
        Ranking's queries (one of them, required by rank:*): XGBoost's. Each query's rows are
        contiguous, its ids ascending; a sample_weight is then one a query (or one a row,
        equal within each query).
    eval_qid, eval_group : lists, one entry an eval set, optional
        The eval sets' queries, as ``qid`` and ``group``.
    label_lower_bound, label_upper_bound : arrays (n_rows,), optional
        survival:aft's bounds of each row's event time (XGBoost's names), in place of ``y`` (pass None);
        ``y`` of shape (n_rows, 2) holds them as its columns too.

    Returns
    -------
    Booster
    """
    options = Options.check(params, num_boost_round, early_stopping_rounds, callbacks, verbose_eval,
                            has_evals=isinstance(evals, (list, tuple)) and len(evals) > 0,
                            init_model=init_model, evals=evals)
    params = options.params
    bounds = check_bounds(y, label_lower_bound, label_upper_bound, params)
    if bounds:
        y = np.stack([_bound(bound, name, X) for bound, name in zip(bounds, BOUND_NAMES)], axis=1)
    if y is None:
        raise ValueError("y is required: pass the labels, one per row of X")
    params = params.with_targets(target_columns(y, params))
    options = dataclasses.replace(options, params=params)
    if options.init_model is not None:
        check_continues_outputs(options.init_model, params)
    objective = make_objective(params)
    training = checked_dataset(X, y, params, objective, weight=sample_weight, base_margin=base_margin, qid=qid,
                               group=group, label_name=BOUNDS if bounds else "y")
    init = options.init_model
    if training.feature_names is None and init is not None and init.feature_names is not None \
            and init.num_features == training.n_features:  # continued on an array: the model's names, eval frames too
        training = dataclasses.replace(training, feature_names=init.feature_names)
    resolve_categories(params, training.n_features, training.frame_categories, feature_names=training.feature_names)
    features = FeatureRules.resolve(params, training.n_features, training.feature_names, feature_weights)
    eval_sets = _eval_sets(evals, X, y, training, params, objective, aligned_list(eval_qid, evals, "eval_qid"),
                           aligned_list(eval_group, evals, "eval_group"))
    xp = device_module(params.device)
    training = to_device(training, xp, params)
    for eval_set in eval_sets:
        eval_set.data = to_device(eval_set.data, xp, params)
    return boost(params, objective, training, eval_sets, LocalCommunicator(),
                 num_boost_round=options.num_boost_round, callbacks=options.all_callbacks(),
                 rows=RowSpans.contiguous(0, training.n_rows), init_model=options.init_model, features=features)


def to_device(data: Dataset, xp, params: TrainParams) -> Dataset:
    """``data`` on ``xp``'s device, but for an X that would not fit the device's budget beside
    its compressed matrix: that X stays where it is, its matrix (paged, or in core) built from
    it a chunk at a time; and rows packed where they were read (PackedRows), whose pages make
    the matrix. (Not an X of categorical features, whose codes and statistics are made beside
    the labels on the device: it moves, and its matrix may still be paged.)"""
    categorical = data.frame_categories is not None or "c" in (params.feature_types or ())
    keep = isinstance(data.X, (RowBlocks, PackedRows)) or (not categorical and stays_on_host(
        *data.X.shape, sparse.nbytes(data.X), device_budget(params, xp), params.max_bin))
    return data.to(xp, move_X=not keep)


class _Matrices:
    """The compressed matrices of one run (its rows', its eval sets'): in core, or paged where
    one exceeds the device budget (data/pages.py), the paged ones of a GPU sharing one set of
    device buffers. Leaving the ``with`` releases the pages and their files, however the run
    ends."""

    def __init__(self, params: TrainParams, xp):
        self.params, self.xp = params, xp
        self.paged: list[PagedMatrix] = []
        self.buffers: PageBuffers | None = None
        self._automatic: int | None = None

    def __enter__(self) -> "_Matrices":
        return self

    def __exit__(self, *exc) -> None:
        for matrix in self.paged:
            matrix.close()
        if self.buffers is not None:
            self.buffers.close()

    def build(self, data: Dataset, cuts: Cuts, name: str = "X"):
        budget = self._budget(data)
        if budget and self.xp is not np and self.buffers is None:
            self.buffers = PageBuffers(buffer_bytes(data.X, budget))
        matrix = build_matrix(data.X, cuts, self.xp, budget, name=name,
                              automatic=not self.params.max_device_matrix_bytes, buffers=self.buffers)
        if isinstance(matrix, PagedMatrix):
            self.paged.append(matrix)
            logger.warning("%s%s", "" if name == "X" else f"{name}: ", matrix.describe())
        elif name == "X":
            logger.info(matrix.describe())
        return matrix

    def _budget(self, data: Dataset) -> int:
        """Rows packed where they were read: the budget their pages were cut for. Else
        max_device_matrix_bytes if given; else, for an X that to_device left on the host (its
        matrix might not fit), the device's (pages.device_budget, taken once a run); else none
        (X was moved to the device: its matrix fits beside it)."""
        if isinstance(data.X, PackedRows):  # the budget its pages were cut for, taken once on its worker
            return data.X.budget
        if self.params.max_device_matrix_bytes:
            return self.params.max_device_matrix_bytes
        if sparse.array_module(data.X) is self.xp:
            return 0
        if self._automatic is None:
            self._automatic = device_budget(self.params, self.xp)
        return self._automatic


def boost(params: TrainParams, objective: Objective, training: Dataset, eval_sets: list[EvalSet], comm,
          *, num_boost_round: int, callbacks: Sequence[TrainingCallback], rows: RowSpans,
          init_model: Booster | None = None, features: FeatureRules, resume: Resume | None = None,
          graphs: tuple[bool, bool] | None = None) -> Booster:
    """The boosting loop on one rank's rows (all of them in a single process).

    Every rank calls this with its shard; ``rows`` holds the global indices of
    the shard's rows. Every rank grows the same trees. The callbacks run on the
    coordinator (rank 0), which alone sees every metric (AUC is finished there),
    and its decision to stop reaches every rank. Rank 0's Booster is the model.
    ``resume`` continues an interrupted run from its ``init_model`` (see Resume). ``graphs``:
    where a GPU round may run from a CUDA graph (``_settings.cuda_graphs``, read here if None).
    """
    graphs = cuda_graphs() if graphs is None else graphs
    if training.xp is np:
        from .kernels import warming

        warming.start()  # a cold numba cache: other processes compile the loops beside this one
    with using_threads(params.nthread), _Matrices(params, training.xp) as matrices:
        booster = _boost(params, objective, training, eval_sets, comm, num_boost_round, callbacks, rows, init_model,
                         features, matrices, resume, graphs)
    replay.trim(training.xp)  # the job's arrays are gone: its rounds' pool gives back what they kept
    return booster


def _boost(params, objective, training, eval_sets, comm, num_boost_round, callbacks, rows, init_model,
           features, matrices: _Matrices, resume: Resume | None, graphs: tuple[bool, bool]) -> Booster:
    xp = training.xp
    n_total = global_count(training.n_rows, comm, xp)
    categories = agree_counts(resolve_categories(params, training.n_features, training.frame_categories,
                                                 feature_names=training.feature_names),
                              training.X, comm, feature_names=training.feature_names)
    categories = _check_continues_categories(init_model, categories, params)
    coded = training  # its categorical features as codes, as init_model predicts them
    if categories is not None and params.cat_encoding == "target_statistics":  # numeric features from here
        if init_model is not None and init_model.categories is not None:  # its trees split on its pairs
            categories = categories.with_combinations(init_model.categories.combinations)
        elif params.max_cat_combinations and params.interaction_constraints is None:
            categories = categories.with_combinations(choose_combinations(
                training.X, training.label, n_total, categories, params.max_cat_combinations, comm))
        features = features.with_combinations(categories.combinations)
        X, categories = target_statistics(categories.expand(training.X), training.label, rows.global_index(xp),
                                          n_total, categories, params.seed, comm)
        training = dataclasses.replace(training, X=X)
        if init_model is not None and not _same_statistics(init_model.categories, categories):
            raise ValueError("init_model's target statistics differ from these rows' (other rows, labels or seed): "
                             "its trees would read other statistics; continue it on the rows and seed it was "
                             "trained on, or train a new model")
    given = None if resume is None else resume.cuts  # a restart's: its first attempt's, from the journal
    if isinstance(training.X, PackedRows):  # packed where its rows were read, by the cuts agreed before
        given = training.X.cuts
    agreed = given if given is not None else agree_cuts(training, rows, n_total, params.seed, params.max_bin, comm)
    cuts = agreed
    if categories is not None:
        if not categories.by_statistics:
            cuts = categories.cuts(cuts)
        for eval_set in eval_sets:
            if not eval_set.is_training:
                X = known_codes(eval_set.data.X, categories, f"evals {eval_set.name!r} X", training.feature_names)
                eval_set.data = dataclasses.replace(eval_set.data, X=X)
    matrix = matrices.build(training, cuts)
    objective.prepare(training, rows, comm)
    if init_model is not None:
        objective.resume(init_model)
    if init_model is None:
        base_margin = objective.base_margin(training.label, training.weight, comm)
    else:
        base_margin = init_model.base_margin
        check_continues_features(init_model, coded.n_features, coded.feature_names)
    # A model continued on an array keeps its names (checked against a frame's in check_continues_features)
    names = coded.feature_names if coded.feature_names is not None or init_model is None else init_model.feature_names
    booster = Booster(params, coded.n_features, names, base_margin, categories)
    if init_model is not None:
        for tree, output in zip(init_model.trees, init_model.tree_outputs):
            booster.append(tree, output)
    margins = _start_margins(training, base_margin, xp, init_model)
    evals = [(_EvalState(e.name, matrix, training, margins) if e.is_training
              else _EvalState(e.name, matrices.build(e.data, cuts, f"evals {e.name!r} X"), e.data,
                              _start_margins(e.data, base_margin, xp, init_model))) for e in eval_sets]
    metrics = [make_metric(name, params) for name in params.metrics]
    sampler = RowSampler(params, n_total, objective.n_outputs, rows, comm)
    grower = make_grower(matrix, params, n_total, comm, features,
                         None if categories is None or categories.by_statistics else categories, sampler)
    agree_on_pages(grower, sampler, comm)
    evals_log: EvalsLog = {}
    if resume is not None:  # the interrupted run's standing after its last finished round
        evals_log = init_model.evals_result()  # a copy: this run appends to it
        booster.best_iteration, booster.best_score = init_model.best_iteration, init_model.best_score
        booster.position_bias = init_model.position_bias
        booster.record_evals(evals_log)
    # The user's callbacks run on the coordinator; dgboost's own that say so, on every rank.
    container = CallbackContainer(callbacks if comm.rank == 0 else
                                  [c for c in callbacks if getattr(c, "every_rank", False)])
    # Every rank is given the same list: if no callback may stop, no round asks the coordinator.
    may_stop = any(not callback.never_stops for callback in callbacks)
    schedule = next((c for c in reversed(callbacks) if isinstance(c, LearningRateScheduler)), None)
    work = _RoundWork(params, objective, training, evals, metrics, grower, sampler, schedule, comm, margins)
    with _replayed(work, xp, graphs):
        if isinstance(matrix, PagedMatrix):
            container.note(matrix.summary())
        if given is None:  # the journal holds a restart's already
            container.cuts_agreed(agreed)
        booster = container.before_training(booster, started=() if resume is None else resume.started)
        epochs = range(booster.num_boosted_rounds(), booster.num_boosted_rounds() + num_boost_round)
        lookahead = _lookahead(xp)
        in_flight, queued = collections.deque(), epochs.start
        if not epochs or _agree(comm, container.before_iteration(booster, epochs.start, evals_log), may_stop):
            return container.after_training(booster)
        for epoch in epochs:
            while queued <= epoch + lookahead and queued in epochs:
                in_flight.append(work.start(queued))
                queued += 1
            finished = in_flight.popleft()
            trees, metric_values = finished.finish(comm)
            for output, tree in enumerate(trees):
                booster.append(Tree.from_record(tree, cuts), output)
            if finished.state is not None:  # the objective's state after this round (ranking's position bias)
                booster.position_bias = tuple(to_numpy(part).tolist() for part in finished.state)
            for (name, metric_name), value in metric_values:
                evals_log.setdefault(name, {}).setdefault(metric_name, []).append(value)
            booster.record_evals(evals_log)
            stop = _agree(comm, container.after_iteration(booster, epoch, evals_log), may_stop)
            last = stop or epoch + 1 not in epochs or _agree(
                comm, container.before_iteration(booster, epoch + 1, evals_log), may_stop)
            container.round_finished(booster, epoch, last)
            if last:
                break
        return container.after_training(booster)


@contextlib.contextmanager
def _replayed(work: "_RoundWork", xp, graphs: tuple[bool, bool]):
    """Within it, ``work``'s rounds run from a CUDA graph where they can (dgboost/replay.py);
    else, out of core, the trees a paged grower grows from its sample page and the sampler's
    draws, each from a part of the graph, where they can."""
    not_replayed = replay.why_not(xp, work.grower, work.sampler, work.objective, work.metrics, work.schedule,
                                  work.comm, graphs, [state.matrix for state in work.evals])
    not_replayed = replay.why_not_anywhere(xp, work.comm, graphs, not_replayed)
    if not_replayed is not None:
        if xp is not np:
            logger.debug("rounds not captured as a CUDA graph: %s", not_replayed)
        not_trees = replay.why_not_trees(xp, work.grower, work.schedule, work.comm, graphs)
        if replay.why_not_anywhere(xp, work.comm, graphs, not_trees) is not None:
            yield
            return
        holders = (work.grower, work.sampler)  # a paged grower's trees grown from its sample page, and the draws
    else:
        holders = (work,)
    graph = replay.RoundGraph(work.comm)
    for holder in holders:
        holder.graph = graph
    try:
        yield
    except BaseException:
        graph.close(failed=True)  # waits for nothing: a round may wait on a dead peer until NCCL's abort
        raise
    finally:
        for holder in holders:
            holder.graph = None
    graph.close()


@dataclasses.dataclass
class _RoundWork:
    """What a round computes, queued on the device by ``start`` and collected by the
    returned _Round's ``finish``: its trees and every eval metric, in one read."""

    params: TrainParams
    objective: Objective
    training: Dataset
    evals: list
    metrics: list
    grower: Grower
    sampler: RowSampler
    schedule: LearningRateScheduler | None
    comm: object
    margins: object  # (n_rows, n_outputs) float32: the training rows', updated in place

    graph: replay.RoundGraph | None = None  # on a GPU, the rounds' CUDA graph (dgboost/replay.py)

    def start(self, epoch: int) -> "_Round":
        if self.schedule is not None:  # every rank asks it: the rate depends on the round alone
            self.grower.eta = self.schedule.rate(epoch)
        queued = self._queue(epoch) if self.graph is None else self.graph.run(lambda: self._queue(epoch))
        arrays, n_trees, names, objective_state = queued
        return _Round(start_read(arrays), n_trees, names, objective_state)

    def _queue(self, epoch: int) -> tuple:
        """The round's work queued on the device: (the arrays to read, how many of them are trees'
        records, the metrics' names and parts, the objective's state)."""
        objective, training = self.objective, self.training
        margins = self.margins
        gpair = objective.training_gradients(margins, training.label, training.weight, epoch)
        objective_state = objective.state()
        records = []
        for output in range(objective.n_outputs):
            tree_index = epoch * objective.n_outputs + output
            gpair_output, drawn = self.sampler.draw(gpair[:, output], tree_index)
            grown = self.grower.grow(gpair_output, tree_index, drawn)
            records.append(grown.record)
            add_leaf_values(margins, output, grown.leaf_value, grown.positions)
            for state in self.evals:
                if state.margins is not margins:
                    add_leaf_values(state.margins, output, grown.leaf_value, grown.route(state.matrix))
            del grown  # its row-sized arrays go before the next tree's are made
        names, parts = [], []
        for state in self.evals:
            predictions = objective.eval_transform(state.margins)
            for metric in self.metrics:
                partial = metric.partial(state.data.label, predictions, state.data.weight, self.comm, state.data.group)
                names.append(((state.name, metric.name), metric, len(partial)))
                parts += partial
        return records + parts, len(records), names, objective_state


@dataclasses.dataclass
class _Round:
    """A round queued on the device; ``finish`` reads its trees' records and metric values."""

    read: HostRead
    n_trees: int
    metrics: list  # ((eval name, metric name), Metric, number of its parts), in read order
    state: object = None  # the objective's state after the round (Objective.state), or None

    def finish(self, comm):
        host = self.read.result()
        comm.check()  # a round a failure cut short is not read as trees or metric values
        trees, rest = host[:self.n_trees], iter(host[self.n_trees:])
        values = [(key, metric.finish([next(rest) for _ in range(n_parts)]))
                  for key, metric, n_parts in self.metrics]
        return trees, values


def _lookahead(xp) -> int:
    """Rounds queued beyond the one being finished. On a GPU the next round is queued
    before this one's trees are read, so the device never waits for the host between
    rounds; a round queued past a stop is dropped. The callbacks still see every
    round in order, finished. On the host queueing is computing: no lookahead."""
    return 0 if xp is np else 1


def _agree(comm, stop: bool, may_stop: bool = True) -> bool:
    """The coordinator's decision to stop, on every rank (a host array: no device work).
    Without a callback that may stop, every rank knows the answer already: no message."""
    if comm.world_size == 1 or not may_stop:
        return stop
    return bool(comm.broadcast(np.array([stop], dtype=bool), root=0)[0])


@dataclasses.dataclass
class _EvalState:
    name: str
    matrix: EllpackMatrix
    data: Dataset
    margins: object


def agree_cuts(training: Dataset, rows: RowSpans, n_total: int, seed: int, max_bin: int, comm) -> Cuts:
    """Cuts every rank agrees on: rank 0 computes them from the gathered sample and broadcasts.

    The sample stays on the data's device until the cuts, which are small, come
    back to the host. Three collectives: the sample (each rank's rows packed as
    bytes), the cut offsets (their last entry sizes the values), the values.
    """
    xp = training.xp
    n_features = training.n_features
    sample = draw_sample(training.X, training.weight, rows.global_index(xp), n_total, seed)
    parts = comm.allgather(sample.to_bytes())
    cuts = None
    if comm.rank == 0:
        cuts = compute_cuts(Sample.merge([Sample.from_bytes(part, n_features) for part in parts]), max_bin)
    device = lambda a: asarray(xp, a)  # noqa: E731
    offsets = device(cuts.offsets) if cuts else xp.empty(n_features + 1, dtype=BIN_OFFSET_DTYPE)
    offsets = to_numpy(comm.broadcast(offsets))
    comm.check()
    values = device(cuts.values) if cuts else xp.empty(int(offsets[-1]), dtype=CUT_DTYPE)
    values = to_numpy(comm.broadcast(values))
    comm.check()
    return Cuts(values, offsets)


def _start_margins(data: Dataset, base_margin: np.ndarray, xp, init_model: Booster | None = None):
    """Each row's starting margins: its own base_margin if given, else the model's; then
    the trees of ``init_model``, if any. With categorical features ``data.X`` holds the rows as
    the trees read them (codes, or target statistics: the training rows' ordered ones, which the
    first run's trees were grown and added on)."""
    if init_model is not None and isinstance(data.X, PackedRows):  # made where its rows were read
        if not data.X.with_model:
            raise ValueError("rows packed without init_model's margins cannot continue init_model")
        return xp.ascontiguousarray(asarray(xp, data.base_margin).reshape(data.n_rows, -1), dtype=MARGIN_DTYPE)
    if init_model is not None and data.n_rows:  # on X's device (the host, for an X kept there for its pages)
        base = None if data.base_margin is None else asarray(sparse.array_module(data.X), data.base_margin)
        predict = init_model.tree_margins if init_model.categories is not None else \
            functools.partial(init_model.predict, output_margin=True)
        if isinstance(data.X, RowBlocks):  # a block at a time
            blocks = zip(data.X.blocks, data.X.starts)
            margins = np.concatenate([predict(block, base_margin=None if base is None else base[start:start + len(block)])
                                      .reshape(len(block), -1) for block, start in blocks])
        else:
            margins = predict(data.X, base_margin=base)
        return xp.ascontiguousarray(asarray(xp, margins).reshape(data.n_rows, -1), dtype=MARGIN_DTYPE)
    if data.base_margin is not None:
        return data.base_margin.astype(MARGIN_DTYPE, copy=True)
    return xp.tile(asarray(xp, base_margin), (data.n_rows, 1))  # also a rank's share of no rows


# What continuing init_model asks of the data. Each check needs only what a dask collection's
# metadata says, so that dgboost.dask makes them on the client before any rank starts.

def check_continues_outputs(init_model: Booster, params: TrainParams) -> None:
    """``init_model``'s outputs against y's targets (``params.n_outputs``)."""
    if init_model.n_outputs != params.n_outputs:
        raise ValueError(f"init_model has {init_model.n_outputs} outputs but y has {params.n_outputs} "
                         "targets: continue it on labels of as many columns")


def check_continues_features(init_model: Booster, n_features: int, feature_names) -> None:
    """``init_model``'s features against X's ``n_features`` and, where both have them, names."""
    if init_model.num_features != n_features:
        raise ValueError(f"init_model was trained on {init_model.num_features} features but X has {n_features}")
    check_feature_names(init_model.feature_names, feature_names, "X (for init_model)")


def check_continues_categories(init_model: Booster, categories: Categories | None, params: TrainParams) -> None:
    """``init_model``'s categorical features against X's (``resolve_categories``'), which must
    be the same features, coded alike (a frame's categories), by the same encoding."""
    if categories is None and init_model.categories is None:
        return
    theirs = init_model.categories
    n = None if theirs is None else theirs.n_inputs
    if theirs is None or categories is None or theirs.categorical[:n] != categories.categorical \
            or theirs.values[:n] != categories.values:
        raise ValueError("init_model was trained with other categorical features or categories than X's: "
                         "continue it on data with the same category columns and categories")
    if theirs.by_statistics != (params.cat_encoding == "target_statistics"):
        used = "target_statistics" if theirs.by_statistics else "partition"
        raise ValueError(f"init_model encodes its categorical features by cat_encoding={used!r}: continue it with "
                         f"cat_encoding={used!r}")


def _check_continues_categories(init_model: Booster | None, categories: Categories | None,
                                params: TrainParams) -> Categories | None:
    """``categories`` for a model continued on categorical features (``check_continues_categories``):
    each feature's count at least init_model's, whose trees may send its codes right (its
    combinations, if any, are taken again with its trees)."""
    if init_model is None:
        return categories
    check_continues_categories(init_model, categories, params)
    if categories is None:
        return None
    theirs = init_model.categories
    return categories.with_counts(max(mine, old)
                                  for mine, old in zip(categories.counts, theirs.counts[:theirs.n_inputs]))


def _same_statistics(theirs: Categories, mine: Categories) -> bool:
    return theirs.by_statistics and theirs.prior == mine.prior and all(
        (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
        for a, b in zip(theirs.statistics, mine.statistics))


def _init_model(init_model, params: TrainParams) -> Booster | None:
    """``init_model`` as a Booster (loaded from its path), checked against ``params``."""
    if init_model is None:
        return None
    if isinstance(init_model, (str, os.PathLike)):
        init_model = Booster.load_model(init_model)
    if not isinstance(init_model, Booster):
        raise TypeError(f"init_model must be a dgboost.Booster or a model file's path, got "
                        f"{type(init_model).__name__}")
    outputs = make_objective(params).n_outputs
    if params.num_target is None and init_model.params.num_target:  # y's columns set it: train checks them
        outputs = init_model.n_outputs
    if (init_model.params.objective, init_model.n_outputs) != (params.objective, outputs):
        raise ValueError(f"init_model was trained with objective={init_model.params.objective!r} and "
                         f"{init_model.n_outputs} outputs; continue it with the same objective (and num_class)")
    if params.base_score is not None and params.base_score != init_model.params.base_score:
        raise ValueError(f"base_score={params.base_score!r}, but a continued model keeps init_model's intercept "
                         f"(its base_score={init_model.params.base_score!r}): drop base_score, or train a new model")
    return init_model


def eval_entries(evals):
    """``(where, X, y, name)`` of each entry of ``evals``, its shape and unique names checked."""
    if not isinstance(evals, (list, tuple)):
        raise TypeError(f"evals must be a list of (X, y, name) tuples, got {type(evals).__name__}")
    names = set()
    for index, entry in enumerate(evals):
        where = f"evals[{index}]"
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or not isinstance(entry[2], str):
            raise TypeError(f"{where} must be a tuple (X, y, name) with a string name, got {entry!r:.80}")
        if entry[2] in names:
            raise ValueError(f"{where} repeats the eval set name {entry[2]!r}: give each a unique name")
        if entry[1] is None:
            raise ValueError(f"{where} has no labels (y is None): an eval set is scored against its y, so give "
                             "(X, y, name)")
        names.add(entry[2])
        yield (where, *entry)


def checked_dataset(X, y, params: TrainParams, objective: Objective, *, weight=None, base_margin=None,
                    where: str = "", label_name: str = "y", **kwargs) -> Dataset:
    """The checks every training input passes, here and on a Dask worker for its partition:
    ``data.make_dataset`` (``kwargs``: its ``allow_empty``, ``shard``), then the objective's
    rule for labels. ``label_name``: what errors call ``y`` (``BOUNDS`` where the user gave them)."""
    data = make_dataset(X, y, weight=weight, base_margin=base_margin, missing=params.missing,
                        enable_categorical=params.enable_categorical, n_outputs=objective.n_outputs,
                        label_columns=objective.label_columns, label_bounds=objective.label_bounds, where=where,
                        label_name=label_name, **kwargs)
    if data.label is not None:
        objective.check_labels(data.label, f"{where}{label_name}")
    check_groups(params, data.group is not None, where)
    if data.label is not None:  # an eval set's (where it is named) are scored
        check_metric_labels(params, data.label, f"{where}{label_name}", evaluated=bool(where))
    return data


#: survival:aft's bounds as XGBoost names them, and what errors call them given in place of y.
BOUND_NAMES = ("label_lower_bound", "label_upper_bound")
BOUNDS = "/".join(BOUND_NAMES)


def _bound(values, name: str, X) -> np.ndarray:
    """One of survival:aft's bounds, a value a row of X, on the host (the bounds' checks are y's)."""
    values = to_numpy(as_array(values, name))
    check_numeric_dtype(values.dtype, name)  # strings of numbers were parsed, others failed in numpy
    values = values.astype(np.float64)
    n_rows = getattr(X, "shape", (None,))[0]
    if values.ndim != 1 or (n_rows is not None and values.shape[0] != n_rows):
        raise ValueError(f"{name} must be 1-D with one bound a row of X ({n_rows}), got shape {values.shape}")
    return values


def check_bounds(y, label_lower_bound, label_upper_bound, params: TrainParams) -> tuple:
    """survival:aft's bounds given in place of ``y`` (XGBoost's names): ``(lower, upper)``, or
    ``()`` where none is given. Raises where only one is, or ``y`` too, or another objective."""
    if label_lower_bound is None and label_upper_bound is None:
        return ()
    if label_lower_bound is None or label_upper_bound is None:
        given, missing = BOUND_NAMES if label_upper_bound is None else BOUND_NAMES[::-1]
        raise ValueError(f"{given} was given without {missing}: pass both (an upper bound of inf for a "
                         "right-censored row, a lower bound of 0 for a left-censored one)")
    if y is not None:
        raise ValueError(f"pass y or {BOUNDS}, not both: y=None with the bounds (or y of two columns, "
                         "[lower, upper], without them)")
    if params.objective != "survival:aft":
        raise ValueError(f"{BOUNDS} are survival:aft's labels; objective={params.objective!r} takes y")
    return label_lower_bound, label_upper_bound


def check_metric_labels(params: TrainParams, label, name: str, evaluated: bool = False) -> None:
    """map and pre count relevant documents: their labels must be 0 or 1 (XGBoost's rule).
    ``evaluated``: the labels of an eval set, whose ndcg is scored (``check_graded_labels``)."""
    binary = [m for m in params.metrics if m.split("@")[0].rstrip("-") in ("map", "pre")]
    if binary:
        raise_for_first((label != 0) & (label != 1), label, name, f"eval_metric {binary[0]!r} needs labels 0 or 1 "
                        "(relevant or not); use ndcg for graded relevance", get_xp(label))
    if evaluated:
        check_graded_labels(params, label, name)


def check_graded_labels(params: TrainParams, label, name: str) -> None:
    """An eval set's ndcg (named, or the objective's default) with ndcg_exp_gain scores 2**label - 1:
    its labels must be integers in [0, 31], which XGBoost refuses otherwise (rank:ndcg checks its
    training labels alike; rank:pairwise takes any)."""
    graded = [m for m in params.metrics if m.split("@")[0].rstrip("-") == "ndcg"]
    if graded and params.ndcg_exp_gain and label is not None:
        raise_for_first(not_exp_relevance(label), label, name, f"eval_metric {graded[0]!r} with ndcg_exp_gain (gain "
                        f"2**label - 1) needs integer labels in [0, {MAX_EXP_RELEVANCE}]; set ndcg_exp_gain=False for "
                        "other labels", get_xp(label))


def target_columns(y, params: TrainParams) -> int:
    """The targets ``y`` holds: its columns where it is 2-D (but survival:aft's two bounds), else 1."""
    shape = np.shape(y) if isinstance(y, (list, tuple)) else getattr(y, "shape", None)  # a list of rows too
    if shape is None or len(shape) != 2 or params.objective == "survival:aft":
        return 1
    return int(shape[1])


def check_groups(params: TrainParams, has_groups: bool, where: str = "") -> None:
    """Ranking objectives need query groups; others take none."""
    if params.objective in RANKING and not has_groups:
        if where:  # an eval set's are arguments of their own, an entry an eval set
            raise ValueError(f"objective={params.objective!r} ranks the rows of each query: pass {where.strip()}'s "
                             "query ids in eval_qid=[...] (or their sizes in eval_group=[...]), an entry an eval set")
        raise ValueError(f"objective={params.objective!r} ranks the rows of each query: pass qid (a query id "
                         "a row) or group (the queries' sizes)")
    if params.objective not in RANKING and has_groups:
        raise ValueError(f"{where}qid/group give query groups, which only ranking objectives (rank:ndcg, rank:pairwise, "
                         f"rank:map) use; objective={params.objective!r} takes none: remove them")


def aligned_list(values, evals, name: str) -> list:
    """``values`` (eval_qid or eval_group), one an eval set, or Nones."""
    n = len(evals) if isinstance(evals, (list, tuple)) else 0
    if values is None:
        return [None] * n
    if not isinstance(values, (list, tuple)) or len(values) != n:
        raise ValueError(f"{name} must be a list with one entry an eval set ({n}), got "
                         f"{type(values).__name__} of {len(values) if hasattr(values, '__len__') else '?'}")
    return list(values)


def _eval_sets(evals, X, y, training: Dataset, params: TrainParams, objective: Objective, qids, groups):
    eval_sets = []
    for (where, eval_X, eval_y, name), qid, group in zip(eval_entries(evals), qids, groups):
        if eval_X is X and eval_y is y and qid is None and group is None:
            check_graded_labels(params, training.label, f"{where} y")
            eval_sets.append(EvalSet(name, training, is_training=True))
            continue
        if is_dataframe(eval_X):  # names before codes, as Booster.predict checks them
            check_feature_names(training.feature_names, tuple(str(c) for c in eval_X.columns), f"{where} X")
            if training.frame_categories is None:  # coded by its own categories, its metrics would be wrong
                refuse_category_columns(eval_X, f"{where} X")
        data = checked_dataset(eval_X, eval_y, params, objective, where=f"{where} ",
                               categories=training.frame_categories, qid=qid, group=group)
        if data.n_features != training.n_features:
            raise ValueError(f"{where} X has {data.n_features} features but the training X has "
                             f"{training.n_features}")
        check_feature_names(training.feature_names, data.feature_names, f"{where} X")
        eval_sets.append(EvalSet(name, data))
    return eval_sets


def _configure_logging(verbosity: int) -> None:
    """The 'dgboost' logger at the level ``verbosity`` names; shown on stderr when the
    application has configured no logging of its own (as XGBoost prints its messages)."""
    logger.setLevel(_LOG_LEVELS[verbosity])
    if verbosity >= 2 and not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[dgboost] %(message)s"))
        logger.addHandler(handler)


def device_module(device: str):
    """The array module of ``device`` ('cpu', 'cuda', 'cuda:N'), made current; a clear error without one."""
    if device != "cpu":
        ordinal = int(device.partition(":")[2] or 0)
        if cuda_device_count() <= ordinal:
            raise ValueError(f"device={device!r} needs cupy and a CUDA GPU (found "
                             f"{cuda_device_count()} devices): install dgboost[cuda12] or "
                             "dgboost[cuda13] on a GPU machine, or use device='cpu'")
    return xp_for_device(device)


def _period(verbose_eval) -> int:
    if isinstance(verbose_eval, bool):
        return 1 if verbose_eval else 0
    if verbose_eval is None or (isinstance(verbose_eval, numbers.Integral) and verbose_eval == 0):
        return 0  # silent, as XGBoost takes them (scikit-learn's verbose=0 comes here)
    return count("verbose_eval", verbose_eval, minimum=1)


def _check_rates(callbacks, end: int) -> None:
    """A LearningRateScheduler's list holds a rate for each round before ``end`` (rounds count
    from init_model's): found short now, not at the round it runs out."""
    for index, callback in enumerate(callbacks):
        rates = callback.learning_rates if isinstance(callback, LearningRateScheduler) else None
        if isinstance(rates, (list, tuple)) and len(rates) < end:
            raise ValueError(f"callbacks[{index}]: LearningRateScheduler has {len(rates)} rates but training "
                             f"runs to round {end - 1} (rounds count from init_model's): give one rate per round")


def _check_watched(callbacks, params: TrainParams, evals) -> None:
    """Each EarlyStopping's ``data_name`` among the eval sets and ``metric_name`` among the
    metrics a round reports: a name mistyped is said before the first round, not after it."""
    names = None
    if isinstance(evals, (list, tuple)):
        names = [entry[2] for entry in evals if isinstance(entry, (list, tuple)) and len(entry) == 3]
    for index, callback in enumerate(callbacks):
        if not isinstance(callback, EarlyStopping):
            continue
        if names is not None and callback.data_name is not None and callback.data_name not in names:
            raise ValueError(f"callbacks[{index}]: EarlyStopping data_name={callback.data_name!r} is not an eval "
                             f"set; the eval sets are {names}")
        if callback.metric_name is not None and params.metrics and callback.metric_name not in params.metrics:
            raise ValueError(f"callbacks[{index}]: EarlyStopping metric_name={callback.metric_name!r} is not "
                             f"reported; the metrics are {list(params.metrics)}")


def _callbacks(callbacks) -> list:
    if isinstance(callbacks, TrainingCallback):
        raise TypeError(f"callbacks must be a list of callbacks, got one {type(callbacks).__name__}: pass "
                        "callbacks=[...]")
    callbacks = list(callbacks or ())
    for index, callback in enumerate(callbacks):
        if not isinstance(callback, TrainingCallback):
            raise TypeError(f"callbacks[{index}] is a {type(callback).__name__}, not a "
                            "dgboost.callback.TrainingCallback")
    return callbacks
