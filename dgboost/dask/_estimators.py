"""scikit-learn style estimators over dask collections: ``DaskDGBRegressor``, ``DaskDGBClassifier``,
``DaskDGBRanker``.

They take every constructor argument of ``dgboost.DGBRegressor`` / ``DGBClassifier`` / ``DGBRanker``
plus ``client`` (None: the current client when fitting), train through
``dgboost.dask.train`` and predict lazily through ``dgboost.dask.predict``.
``to_local()`` gives the plain estimator; pickling drops the client.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from ..sklearn import DGBClassifier, DGBRanker, DGBRegressor, _DGBModel, encode_labels, two_columns
from ..objectives.base import _softmax
from . import _shards


class _DaskModel:
    """What the two Dask estimators add to their local twins."""

    _local: type  # the plain estimator class

    def __init__(self, *, client=None, **kwargs):
        super().__init__(**kwargs)
        self.client = client

    @classmethod
    def _get_param_names(cls):
        return sorted(set(_DGBModel._get_param_names()) | {"client"})

    def __getstate__(self):
        state = dict(self.__dict__)
        state["client"] = None  # a Client does not travel; fitting again takes the current one
        return state

    def to_local(self):
        """The plain (in-memory) estimator with this one's parameters and trained model."""
        params = {k: v for k, v in self.get_params().items() if k != "client"}
        local = self._local(**params)
        for name in ("_Booster", "n_features_in_", "feature_names_in_", "classes_", "n_classes_"):
            if hasattr(self, name):
                setattr(local, name, getattr(self, name))
        return local

    def _train(self, X, y, params, sample_weight, base_margin, eval_set, verbose, init_model=None, **queries):
        import functools

        from . import train

        _shards.check_collection(X, "X", features=True, enable_categorical=bool(params.get("enable_categorical")))
        booster = self._run(functools.partial(train, self.client), X, y, params, sample_weight, base_margin,
                            eval_set, verbose, init_model, check_eval_X=lambda eval_X: eval_X, **queries)
        self._Booster = booster
        self.n_features_in_ = booster.num_features
        if booster.feature_names is not None:
            self.feature_names_in_ = np.array(booster.feature_names, dtype=object)

    def _lazy(self, X, output_margin: bool):
        from . import predict

        booster = self.get_booster()
        if booster.best_iteration is not None:
            booster = booster[: booster.best_iteration + 1]
        return predict(self.client, booster, X, output_margin=output_margin)


class DaskDGBRegressor(_DaskModel, DGBRegressor):
    """``dgboost.DGBRegressor`` over dask collections; ``predict`` is lazy."""

    _local = DGBRegressor

    def fit(self, X, y, *, sample_weight=None, base_margin=None, eval_set=None, verbose=False, init_model=None):
        self._train(X, y, self._train_params({}), sample_weight, base_margin, eval_set, verbose, init_model)
        return self

    def predict(self, X, *, output_margin: bool = False):
        return self._lazy(X, output_margin)


class DaskDGBClassifier(_DaskModel, DGBClassifier):
    """``dgboost.DGBClassifier`` over dask collections: labels of any type are found
    (one pass over y), mapped to 0..n-1 lazily, and mapped back by ``predict``."""

    _local = DGBClassifier

    def fit(self, X, y, *, sample_weight=None, base_margin=None, eval_set=None, verbose=False, init_model=None):
        import dask

        _shards.check_collection(y, "y", features=False, like=X, numeric=False)
        y = _one_column(y, "y")
        labelled, eval_set = [], list(eval_set or ())  # (index, y) of the pairs of collections; _train refuses others
        for index, entry in enumerate(eval_set):
            if isinstance(entry, (list, tuple)) and len(entry) == 2 and all(map(_shards.is_collection, entry)):
                _shards.check_collection(entry[1], f"eval_set[{index}] y", features=False, like=entry[0],
                                         numeric=False)
                eval_set[index] = (entry[0], _one_column(entry[1], f"eval_set[{index}] y"))
                labelled.append((index, eval_set[index][1]))
        found = dask.compute(_unique(y), *(_unique(eval_y) for _, eval_y in labelled))  # one pass over them all
        classes = np.unique(np.asarray(found[0]))
        check_classification_targets(classes)  # NaN, or a regression's labels: as DGBClassifier says
        params = self._train_params(self._learn_classes(classes))
        known = set(classes.tolist())
        for (index, _), labels in zip(labelled, found[1:]):
            unknown = [label for label in np.asarray(labels).reshape(-1).tolist() if label not in known]
            if unknown:
                raise ValueError(f"eval_set[{index}] y has labels {unknown[:5]} that are not among the training "
                                 f"classes {classes.tolist()[:10]}: evaluate on the classes y has")
        self._train(X, self._codes(y), params, sample_weight, base_margin, eval_set, verbose, init_model)
        return self

    def _eval_labels(self, y):
        return self._codes(y)

    def _codes(self, y):
        """y's labels as float32 codes 0..n-1, lazily (unknown labels raise when computed)."""
        classes = self.classes_
        if _shards.is_dask_array(y):
            return y.map_blocks(encode_labels, classes, dtype=np.float32)
        return y.map_partitions(_encode_series, classes, meta=(y.name, np.float32))

    def predict_proba(self, X):
        booster = self.get_booster()
        if booster.params.objective == "multi:softmax":  # its predictions are classes: its margins' softmax
            margins = self._lazy(X, True)
            if _shards.is_dask_array(margins):
                return margins.map_blocks(_softmax, dtype=np.float32)
            return margins.map_partitions(_softmax_frame, meta=margins._meta)
        probabilities = self._lazy(X, False)
        if booster.n_outputs > 1:  # a column a class (a multi objective's, two classes too)
            return probabilities
        if _shards.is_dask_array(probabilities):
            return probabilities.map_blocks(two_columns, chunks=(probabilities.chunks[0], (2,)), new_axis=1,
                                            dtype=np.float32)
        return probabilities.map_partitions(_two_columns_frame, meta=_two_columns_frame(probabilities._meta))

    def predict(self, X, *, output_margin: bool = False):
        if output_margin:
            return self._lazy(X, True)
        probabilities = self.predict_proba(X)
        classes = self.classes_
        if _shards.is_dask_array(probabilities):
            return probabilities.map_blocks(_labels_of, classes, drop_axis=1, dtype=classes.dtype)
        return probabilities.map_partitions(_label_series, classes, meta=(None, classes.dtype))


class DaskDGBRanker(_DaskModel, DGBRanker):
    """``dgboost.DGBRanker`` over dask collections: ``qid`` a dask collection with X's
    partitions (a query may span partitions; ids ascend over the whole collection)."""

    _local = DGBRanker

    def fit(self, X, y, *, qid=None, sample_weight=None, base_margin=None, eval_set=None, eval_qid=None,
            verbose=False, init_model=None):
        params = self._train_params({"objective": self.objective or "rank:ndcg"})
        self._train(X, y, params, sample_weight, base_margin, eval_set, verbose, init_model, qid=qid,
                    eval_qid=eval_qid)
        return self

    def predict(self, X, *, output_margin: bool = False):
        return self._lazy(X, output_margin)


def _unique(y):
    if _shards.is_dask_array(y):
        import dask.array as da

        return da.unique(y.reshape(-1) if y.ndim > 1 else y)
    return y.drop_duplicates().values if hasattr(y, "drop_duplicates") else y.unique()


def _one_column(y, name: str):
    """A classifier's labels: a dask DataFrame of one column as that column (scikit-learn takes
    an (n, 1) y as its column); one of more columns refused."""
    if not _shards._is_frame(y):
        return y
    if len(y.columns) != 1:
        raise ValueError(f"{name} has {len(y.columns)} columns ({list(y.columns)[:5]}): a classifier takes one "
                         "column of class labels")
    return y[y.columns[0]]


def _encode_series(series, classes):
    return type(series)(encode_labels(series.to_numpy(), classes), index=series.index, name=series.name)


def _softmax_frame(frame):
    return type(frame)(_softmax(frame.to_numpy()), index=frame.index, columns=frame.columns)


def _two_columns_frame(series):
    frame = series.to_frame(name=1)
    frame.insert(0, 0, (1.0 - series).astype(np.float32))
    return frame


def _labels_of(probabilities, classes):
    from ..backend import to_numpy

    return classes[to_numpy(probabilities).argmax(axis=1)]


def _label_series(frame, classes):
    return type(frame.iloc[:, 0])(classes[frame.to_numpy().argmax(axis=1)], index=frame.index)
