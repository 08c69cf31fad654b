"""The trained model: prediction, importance, and a versioned, checksummed JSON file."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import operator
import os

import numpy as np

from ._dtypes import MARGIN_DTYPE
from ._files import write_atomically
from ._version import __version__
from .backend import asarray, get_xp, to_numpy
from .data.categories import Categories, known_codes
from .data.inputs import check_feature_names, features, is_dataframe, margins as margins_argument, \
    refuse_category_columns
from .data.sparse import from_arrays as sparse_from_arrays, is_sparse
from .kernels.loops import using_threads
from .objectives import make_objective
from .params import TrainParams
from .tree.predict import Forest, predict_leaf_ids, predict_margins
from .tree.tree import Tree

#: Settings of a training run, not of the model: left out of the file, so a model
#: trained on a GPU and one trained on the CPU can be byte-identical.
RUN_SETTINGS = ("device", "verbosity", "nthread", "max_device_matrix_bytes")
MODEL_FORMAT = "dgboost-model"
#: The model file's format version: 2 where it holds categorical features (category sets, which
#: a reader of version 1 would take for thresholds), else 1, which every dgboost reads.
MODEL_VERSION = 2
_READABLE_VERSIONS = (1, 2)
IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


class _ClassOrInstanceMethod:
    """``Booster.load_model(path)`` returns a new Booster; ``booster.load_model(path)``
    loads into that booster (XGBoost's spelling) and returns it."""

    def __init__(self, function):
        self.function = function
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner):
        return functools.partial(self.function, owner, instance)


class Booster:
    """A gradient-boosted tree ensemble.

    Made by ``dgboost.train`` or ``Booster.load_model``; ``Booster()`` is an empty
    model to load into, as in XGBoost. ``best_iteration`` and ``best_score`` are set
    by early stopping (None otherwise).
    """

    def __init__(self, params: TrainParams | None = None, n_features: int = 0, feature_names=None,
                 base_margin=None, categories: Categories | None = None):
        if params is not None and not isinstance(params, TrainParams):
            raise TypeError(f"Booster(params) takes dgboost's TrainParams, got {type(params).__name__}: train a model "
                            "with dgboost.train(params, X, y), or read one with dgboost.Booster.load_model(path)")
        params = TrainParams() if params is None else params
        self.categories = categories  # the categorical features and their categories, or None
        self.params = params
        self._objective = make_objective(params)
        self.num_features = int(n_features)
        self.feature_names = None if feature_names is None else tuple(feature_names)
        n_outputs = self._objective.n_outputs
        self.base_margin = (np.zeros(n_outputs, MARGIN_DTYPE) if base_margin is None
                            else np.asarray(base_margin, MARGIN_DTYPE).reshape(n_outputs))
        self.trees: list[Tree] = []
        self.tree_outputs: list[int] = []
        self.best_iteration: int | None = None
        self.best_score: float | None = None
        #: Unbiased ranking's position bias (t+, t-) after the last round: lists, or None.
        self.position_bias: tuple | None = None
        self._evals_result: dict = {}
        self._forests: dict = {}

    # -- growing -----------------------------------------------------------------
    @property
    def feature_labels(self) -> tuple[str, ...]:
        """The training DataFrame's column names, else ``f0, f1, ...`` (XGBoost's names)."""
        self._check_feature_names()
        return self.feature_names or tuple(f"f{i}" for i in range(self.num_features))

    @property
    def split_labels(self) -> tuple[str, ...]:
        """The names of the features the trees split on: ``feature_labels``, then each
        combination of categorical features (target statistics) as "a*b"."""
        labels = self.feature_labels
        return labels if self.categories is None else self.categories.labels(labels)

    @property
    def n_outputs(self) -> int:
        return self._objective.n_outputs

    def append(self, tree: Tree, output: int) -> None:
        """Add a tree predicting margin column ``output``."""
        self.trees.append(tree)
        self.tree_outputs.append(int(output))
        self._forests.clear()

    @property
    def base_score(self) -> float | None:
        """The starting prediction in output space (None for multiclass: see base_margin)."""
        if self.n_outputs > 1:
            return None
        return float(self._objective.transform(self.base_margin[None, :])[0])

    def record_evals(self, evals_log: dict) -> None:
        """Keep the evaluation history that ``evals_result`` returns."""
        self._evals_result = evals_log

    def num_boosted_rounds(self) -> int:
        return len(self.trees) // self.n_outputs

    def evals_result(self) -> dict:
        """{eval set name: {metric: [value per round]}} of the training run."""
        return copy.deepcopy(self._evals_result)

    def __getitem__(self, rounds) -> "Booster":
        """The model made of the given rounds only (``booster[:best_iteration + 1]``), or of one
        round (``booster[3]``); negative bounds count from the last round, as Python's do."""
        n = self.num_boosted_rounds()
        if isinstance(rounds, (int, np.integer)) and not isinstance(rounds, (bool, np.bool_)):
            index = int(rounds) + (n if rounds < 0 else 0)
            if not 0 <= index < n:
                raise IndexError(f"booster[{rounds}]: the model has {n} rounds")
            return self._rounds(index, index + 1)
        text = repr(rounds) if not isinstance(rounds, slice) else ":".join(
            "" if bound is None else str(bound)
            for bound in (rounds.start, rounds.stop) + (() if rounds.step is None else (rounds.step,)))
        try:
            if not isinstance(rounds, slice) or rounds.step not in (None, 1):
                raise TypeError
            begin, end = (operator.index(bound) for bound in (0 if rounds.start is None else rounds.start,
                                                              n if rounds.stop is None else rounds.stop))
        except TypeError:
            raise TypeError(f"booster[{text}]: index a Booster with a round or a slice of rounds (integers, no step), "
                            "such as booster[3] or booster[:10]") from None
        begin, end = (bound + n if bound < 0 else bound for bound in (begin, end))
        if not 0 <= begin < end <= n and (begin, end) != (0, n):
            raise ValueError(f"booster[{text}] takes rounds {begin} to {end} of the model's {n}: a slice needs "
                             f"0 <= begin < end <= {n} (negative bounds count from the end)")
        return self._rounds(begin, end)

    def _rounds(self, begin: int, end: int) -> "Booster":
        """The model of rounds ``[begin, end)`` (``_rounds(0, 0)``: its frame, with no trees)."""
        sliced = copy.copy(self)
        k = self.n_outputs
        sliced.trees = self.trees[begin * k:end * k]
        sliced.tree_outputs = self.tree_outputs[begin * k:end * k]
        sliced._forests = {}
        sliced._evals_result = copy.deepcopy(self._evals_result)
        if self.best_iteration is not None and not begin <= self.best_iteration < end:
            sliced.best_iteration = sliced.best_score = None
        elif self.best_iteration is not None:
            sliced.best_iteration = self.best_iteration - begin
        return sliced

    # -- prediction ----------------------------------------------------------------
    def predict(self, X, *, output_margin: bool = False, iteration_range=None, base_margin=None,
                pred_leaf: bool = False, pred_contribs: bool = False):
        """Predictions for raw features ``X``, in the array family of ``X``.

        Parameters
        ----------
        X : numpy or cupy array (n_rows, n_features), a pandas DataFrame, or a scipy.sparse
            (cupyx.scipy.sparse) matrix, whose absent entries are missing
        output_margin : bool
            Return raw margins instead of the objective's output (probabilities, ...).
        iteration_range : (begin, end), optional
            Use rounds ``[begin, end)`` only; ``end == 0`` means all (XGBoost's rule).
        base_margin : array (n_rows,) or (n_rows, n_outputs), optional
            Starting margins in place of the model's base score.
        pred_leaf : bool
            Each row's leaf id in every tree: int32 (n_rows, n_trees), XGBoost's node ids.
        pred_contribs : bool
            Exact TreeSHAP contributions of every feature, then the bias (the
            model's expected margin): float32 (n_rows, n_features + 1), or
            (n_rows, n_outputs, n_features + 1); they sum to the margin. As XGBoost's
            ``pred_contribs`` (explain.py). Computed on the host.

        Returns
        -------
        array of shape (n_rows,), or (n_rows, num_class) for multi:softprob and for
        multiclass margins; numpy for numpy or pandas input, cupy for cupy input.
        """
        if pred_leaf and pred_contribs:
            raise ValueError("pred_leaf and pred_contribs cannot both be True: ask for one at a time")
        with using_threads(self.params.nthread):
            return self._predict(X, output_margin, iteration_range, base_margin, pred_leaf, pred_contribs)

    def _check_feature_names(self) -> None:
        """``feature_names`` as set by hand: one name a feature, or None."""
        if self.feature_names is not None and len(self.feature_names) != self.num_features:
            raise ValueError(f"feature_names has {len(self.feature_names)} names for the model's {self.num_features} "
                             "features: set one name a feature (or None)")

    def _check_holds_a_model(self, what: str) -> None:
        """Refuse to ``what`` an empty Booster (``Booster()``, nothing loaded into it)."""
        if self.num_features == 0:
            raise ValueError(f"this Booster holds no model to {what}: train one (dgboost.train) or load one "
                             "(dgboost.Booster.load_model(path))")

    def _predict(self, X, output_margin, iteration_range, base_margin, pred_leaf, pred_contribs):
        self._check_holds_a_model("predict with")
        frame_values = None if self.categories is None else self.categories.values[:self.categories.n_inputs]
        if is_dataframe(X):  # names (a frame's alone) before codes: a column out of place is named as such
            check_feature_names(self.feature_names, tuple(str(c) for c in X.columns), "X")
            if frame_values is None or all(values is None for values in frame_values):
                refuse_category_columns(X, "X")
        X, _, _ = features(X, missing=self.params.missing, categories=frame_values)
        if is_sparse(X) and X.shape[1] < self.num_features:  # its last columns have no entries: missing
            X = sparse_from_arrays(X.data, X.indices, X.indptr, self.num_features)
        if X.shape[1] != self.num_features:
            fix = " (a sparse X may have fewer columns: the last ones missing)" if is_sparse(X) else ""
            raise ValueError(f"X has {X.shape[1]} features but the model was trained on "
                             f"{self.num_features}{fix}")
        if self.categories is not None:
            X = known_codes(X, self.categories, "X", self.feature_names)
        xp = get_xp(X)
        begin, end = self._round_range(iteration_range)
        start = self.start_margins(X.shape[0], xp, base_margin)
        if pred_leaf:
            return predict_leaf_ids(self._forest(xp, begin, end), X)
        if pred_contribs:
            host_X = (X if xp is np else X.get()) if is_sparse(X) else to_numpy(X)
            return asarray(xp, self._contributions(host_X, to_numpy(start), begin, end))
        result = predict_margins(self._forest(xp, begin, end), X, start)
        if output_margin:
            return result[:, 0] if self.n_outputs == 1 else result
        return self._objective.transform(result)

    def start_margins(self, n_rows: int, xp, base_margin=None):
        """The margins ``n_rows`` rows start from on ``xp``'s device, (n_rows, n_outputs)
        float32: ``base_margin`` (checked) where given, else the model's (a read-only view)."""
        if base_margin is None:
            return xp.broadcast_to(asarray(xp, self.base_margin), (n_rows, self.n_outputs))
        return margins_argument(base_margin, "base_margin", n_rows, self.n_outputs, xp)

    def tree_margins(self, X, base_margin=None):
        """The margins of rows given as the trees read them (a float32 array of every split
        feature: categorical features already coded, or encoded as target statistics, and
        combinations appended), from ``base_margin`` (n_rows, n_outputs) or the model's: what
        training adds to its rows' margins. Continued training starts its rows from these."""
        xp = get_xp(X)
        if base_margin is None:
            start = xp.broadcast_to(asarray(xp, self.base_margin), (X.shape[0], self.n_outputs))
        else:
            start = base_margin.reshape(X.shape[0], self.n_outputs)
        return predict_margins(self._forest(xp, 0, self.num_boosted_rounds()), X, start)

    def _contributions(self, X: np.ndarray, start: np.ndarray, begin: int, end: int) -> np.ndarray:
        from .explain import contributions

        k = self.n_outputs
        phi = contributions(self.trees[begin * k:end * k], self.tree_outputs[begin * k:end * k], start, X)
        if self.categories is not None:  # a combination's contributions shared by its two features
            phi = self.categories.fold(phi)
        return phi[:, 0, :] if k == 1 else phi

    def _round_range(self, iteration_range):
        rounds = self.num_boosted_rounds()
        if iteration_range is None:
            return 0, rounds
        try:
            begin, end = (operator.index(v) for v in iteration_range)  # integers: 1.7 or "2" is no round
        except (TypeError, ValueError):
            raise TypeError(f"iteration_range={iteration_range!r} must be a pair of integers (begin, end)") from None
        end = rounds if end == 0 else end
        if (begin, end) == (0, 0):  # all the rounds of a model of none: its base margins, as predict(X) gives
            return 0, 0
        if not 0 <= begin < end <= rounds:
            raise ValueError(f"iteration_range={iteration_range!r} must satisfy 0 <= begin < end <= "
                             f"{rounds} (the model's rounds; end=0 means all)")
        return begin, end

    def _forest(self, xp, begin: int, end: int) -> Forest:
        key = (xp.__name__, begin, end)
        if key not in self._forests:
            k = self.n_outputs
            self._forests[key] = Forest.from_trees(self.trees[begin * k:end * k],
                                                   self.tree_outputs[begin * k:end * k], xp)
        return self._forests[key]

    # -- looking inside ------------------------------------------------------------
    def trees_to_dataframe(self):
        """Every node as a row of a pandas DataFrame, with XGBoost's columns (Tree, Node, ID,
        Feature, Split, Yes, No, Missing, Gain (a leaf's value at leaves), Cover, Category)."""
        import pandas as pd

        from .interchange import trees_to_rows

        return pd.DataFrame(trees_to_rows(self), columns=["Tree", "Node", "ID", "Feature", "Split", "Yes", "No",
                                                           "Missing", "Gain", "Cover", "Category"])

    def get_dump(self, with_stats: bool = False) -> list[str]:
        """Each tree as text, XGBoost's dump format (``0:[f1<0.5] yes=1,no=2,missing=1``)."""
        from .interchange import text_dump

        return text_dump(self, with_stats)

    def dump_model(self, path, with_stats: bool = False) -> None:
        """Write ``get_dump`` to a text file, each tree headed ``booster[i]:``."""
        with open(path, "w", encoding="utf-8") as stream:
            for index, text in enumerate(self.get_dump(with_stats)):
                stream.write(f"booster[{index}]:\n{text}")

    # -- importance ------------------------------------------------------------------
    def get_fscore(self) -> dict[str, float]:
        """Each feature's split count: ``get_score("weight")``, as XGBoost's ``get_fscore``."""
        return self.get_score("weight")

    def get_score(self, importance_type: str = "weight") -> dict[str, float]:
        """Feature importance by split count, gain or cover, as XGBoost's ``get_score``.

        Features never used in a split are absent. Names are the training
        DataFrame's columns, else ``f0, f1, ...``.
        """
        if importance_type not in IMPORTANCE_TYPES:
            raise ValueError(f"importance_type={importance_type!r} must be one of {IMPORTANCE_TYPES}")
        names = self.split_labels
        count = np.zeros(len(names))
        gain = np.zeros(len(names))
        cover = np.zeros(len(names))
        for tree in self.trees:
            split = ~tree.is_leaf
            np.add.at(count, tree.feature[split], 1)
            np.add.at(gain, tree.feature[split], tree.gain[split])
            np.add.at(cover, tree.feature[split], tree.cover[split])
        value = {"weight": count, "total_gain": gain, "total_cover": cover,
                 "gain": gain / np.maximum(count, 1), "cover": cover / np.maximum(count, 1)}[importance_type]
        return {names[f]: float(value[f]) for f in np.flatnonzero(count)}

    # -- the model file ------------------------------------------------------------------
    def save_raw(self, format: str = "json") -> bytes:
        """The model file's bytes (what ``save_model`` writes in that format)."""
        self._check_holds_a_model("save")
        self._check_feature_names()
        if format == "json":
            document = _with_checksum(self._document())
        elif format == "xgboost":
            from .interchange import xgboost_document

            document = xgboost_document(self)
        else:
            raise ValueError(f"format={format!r} must be 'json' (dgboost's model file) or 'xgboost' "
                             "(XGBoost's JSON model, for xgboost.Booster().load_model, treelite, Triton FIL)")
        # XGBoost's: its names in UTF-8 as they are (its reader keeps a "\u" escape as text)
        return json.dumps(document, separators=(",", ":"), allow_nan=False,
                          ensure_ascii=format != "xgboost").encode()

    def save_model(self, path, format: str = "json") -> None:
        """Write the model; the file is replaced atomically.

        ``format="json"``: dgboost's versioned JSON (``load_model`` reads it).
        ``format="xgboost"``: XGBoost's JSON model format, whose predictions in
        XGBoost equal dgboost's (to float32 rounding of the intercept).
        """
        path = _model_path(path, "save_model")
        if os.path.isdir(path):
            raise ValueError(f"save_model({path!r}): it is a directory; give the file to write, e.g. "
                             f"{os.path.join(path, 'model.json')!r}")
        if format == "xgboost" and path.lower().endswith(".ubj"):
            raise ValueError(f"save_model({path!r}, format='xgboost') writes XGBoost's JSON model, which "
                             "XGBoost reads as UBJSON by the '.ubj' name and fails on: name the file '.json'")
        write_atomically(path, self.save_raw(format))

    @_ClassOrInstanceMethod
    def load_model(cls, self, path):
        """Read a model written by ``save_model``; a damaged or foreign file raises ValueError."""
        path = _model_path(path, "load_model")
        if os.path.isdir(path):
            raise ValueError(f"{path} cannot be read (is a directory): give a model file that save_model wrote")
        try:
            with open(path, encoding="utf-8") as stream:
                text = stream.read()
        except UnicodeDecodeError:  # a binary file: XGBoost's UBJSON, a pickle, ...
            raise ValueError(f"{path} is not a dgboost model (not JSON text, but binary)") from None
        if text[:1] == "{" and text[1:2] not in ('"', "}", " ", "\n", "\r", "\t"):  # UBJSON: a key's type marker
            raise ValueError(f"{path} is not a dgboost model (not JSON text, but binary: XGBoost's UBJSON, by its "
                             "first bytes)")
        loaded = cls._from_document(_parse(text, path), path)
        if self is None:
            return loaded
        self.__dict__.update(loaded.__dict__)
        return self

    def _document(self) -> dict:
        best_score = self.best_score
        if best_score is not None and not math.isfinite(best_score):
            best_score = None
        return {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION if self.categories is not None else 1,
            "dgboost_version": __version__,
            "learner": {
                "objective": self.params.objective,
                "n_outputs": self.n_outputs,
                "num_feature": self.num_features,
                "feature_names": None if self.feature_names is None else list(self.feature_names),
                "base_margin": self.base_margin.tolist(),
                "base_score": self.base_score,
                "best_iteration": self.best_iteration,
                "best_score": best_score,
                "params": {k: v for k, v in self.params.to_dict().items() if k not in RUN_SETTINGS},
                **({} if self.position_bias is None else
                   {"position_bias": {"t_plus": list(self.position_bias[0]), "t_minus": list(self.position_bias[1])}}),
            },
            **({} if self.categories is None else {"categorical": self.categories.to_dict()}),
            "trees": [tree.to_dict() for tree in self.trees],
            "tree_outputs": list(self.tree_outputs),
        }

    @classmethod
    def _from_document(cls, document: dict, path: str) -> "Booster":
        learner = _field(document, "learner", dict, path)
        raw_params = dict(_field(learner, "params", dict, path))
        for name, value in raw_params.items():  # a non-finite number, as TrainParams.to_dict writes it
            if value in ("nan", "inf", "-inf"):
                raw_params[name] = float(value)
        try:
            params = TrainParams.from_dict(raw_params)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{path}: its parameters are invalid: {error}") from None
        num_feature = _field(learner, "num_feature", int, path)
        n_outputs = _field(learner, "n_outputs", int, path)
        if num_feature < 1 or n_outputs != params.n_outputs:
            raise ValueError(f"{path}: num_feature or n_outputs does not fit its parameters")
        names = learner.get("feature_names")
        if names is not None and (not isinstance(names, list) or len(names) != num_feature
                                  or not all(isinstance(n, str) for n in names)):
            raise ValueError(f"{path}: feature_names must be {num_feature} strings")
        base_margin = _field(learner, "base_margin", list, path)
        if len(base_margin) != n_outputs or not all(_is_finite_number(v) for v in base_margin):
            raise ValueError(f"{path}: base_margin must be {n_outputs} finite numbers")
        categories = None
        if "categorical" in document:
            categories = Categories.from_dict(document["categorical"], num_feature, f"{path}: categorical")
        booster = cls(params, num_feature, names, base_margin, categories)
        trees = _field(document, "trees", list, path)
        outputs = _field(document, "tree_outputs", list, path)
        if len(outputs) != len(trees) or any(o != i % n_outputs for i, o in enumerate(outputs)):
            raise ValueError(f"{path}: tree_outputs must give each tree's output, round by round")
        if len(trees) % n_outputs:
            raise ValueError(f"{path}: {len(trees)} trees is not a whole number of rounds")
        for index, (tree, output) in enumerate(zip(trees, outputs)):
            parsed = Tree.from_dict(tree, num_feature if categories is None else categories.n_features,
                                    f"{path}: trees[{index}]")
            if parsed.categories:
                if categories is None:
                    raise ValueError(f"{path}: trees[{index}] has category sets but the model no categorical features")
                categories.check_sets(parsed, f"{path}: trees[{index}]")
            booster.append(parsed, output)
        best_iteration = learner.get("best_iteration")
        if best_iteration is not None and not (isinstance(best_iteration, int)
                                               and 0 <= best_iteration < booster.num_boosted_rounds()):
            raise ValueError(f"{path}: best_iteration={best_iteration!r} is not a round of the model")
        booster.best_iteration = best_iteration
        booster.best_score = learner.get("best_score")
        bias = learner.get("position_bias")
        if bias is not None:
            parts = [bias.get(key) if isinstance(bias, dict) else None for key in ("t_plus", "t_minus")]
            if not all(isinstance(p, list) and all(_is_finite_number(v) for v in p) for p in parts) \
                    or len(parts[0]) != len(parts[1]):
                raise ValueError(f"{path}: position_bias must hold t_plus and t_minus, lists of as many finite numbers")
            booster.position_bias = (parts[0], parts[1])
        return booster

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_forests"] = {}  # device copies are rebuilt on demand
        return state

    def __repr__(self):
        return (f"Booster(objective={self.params.objective!r}, rounds={self.num_boosted_rounds()}, "
                f"features={self.num_features})")


def _model_path(path, method: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{method}(path={path!r}): path must be a file path (a string or os.PathLike)")
    return os.fspath(path)


def _canonical(document: dict) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _with_checksum(document: dict) -> dict:
    return {**document, "checksum": "sha256:" + hashlib.sha256(_canonical(document)).hexdigest()}


def _parse(text: str, path: str) -> dict:
    """The model document of a file's text, checked for format, version and checksum."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not a complete JSON document ({error.msg} at line {error.lineno}, "
                         f"column {error.colno}); was it truncated? Save the model again.") from None
    if not isinstance(document, dict) or document.get("format") != MODEL_FORMAT:
        foreign = ""
        if isinstance(document, dict) and "learner" in document and "version" in document:
            foreign = " It looks like an XGBoost model, which dgboost does not read."
        raise ValueError(f"{path} is not a dgboost model (no \"format\": \"{MODEL_FORMAT}\").{foreign}")
    version = document.get("version")
    if version not in _READABLE_VERSIONS:
        raise ValueError(f"{path} has model format version {version!r}; this dgboost ({__version__}) "
                         f"reads versions {_READABLE_VERSIONS[0]} to {MODEL_VERSION}. Use the dgboost that wrote "
                         "it, or a newer one.")
    stored = document.pop("checksum", None)
    expected = "sha256:" + hashlib.sha256(_canonical(document)).hexdigest()
    if stored != expected:
        raise ValueError(f"{path} has been modified or damaged: its checksum does not match its "
                         "content. Save the model again from the training run.")
    return document


def _field(container: dict, key: str, kind: type, path: str):
    value = container.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{path}: {key!r} is missing or not a {kind.__name__}")
    return value


def _is_finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
