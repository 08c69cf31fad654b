"""Bad input to dgboost.dask on a CPU LocalCluster: what the collections' metadata tells is
refused on the client before anything is computed; what needs the data is found where each
partition is, before any rank starts, and raised once on the client naming the row's place
in the whole data set. No worker logs a traceback ("Compute Failed") for bad input."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")
distributed = pytest.importorskip("distributed")

import dgboost  # noqa: E402
import dgboost.dask  # noqa: E402

N_ROWS = 1000


@pytest.fixture(scope="module")
def client():
    # Workers log at WARNING, so a failed task's "Compute Failed" (an ERROR) would show.
    with dgboost.dask.local_cluster("cpu", 2, threads_per_worker=1, silence_logs=logging.WARNING) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((N_ROWS, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.float32)
    return X, y


@pytest.fixture
def quiet_workers(client, capfd):
    """Yields; then checks that no worker logged a failed task or a traceback, in its log
    or on the terminal the test runs in."""
    def failures():
        return sum("Compute Failed" in message or "Traceback" in message
                   for logs in client.get_worker_logs().values() for _, message in logs)

    before = failures()
    yield
    assert failures() == before, "a worker logged a failed task"
    captured = capfd.readouterr()
    assert "Compute Failed" not in captured.err + captured.out


def _chunked(values, chunks=250):
    return da.from_array(values, chunks=(chunks,) + values.shape[1:])


def _train(client, X, y, **kwargs):
    params = kwargs.pop("params", {"objective": "binary:logistic"})
    return dgboost.dask.train(client, params, X, y, num_boost_round=2, **kwargs)


# ---- found in the data: one message, the global row, no worker traceback ---------------------------

def _nan_label(X, y):
    y = y.copy()
    y[999] = np.nan
    return {"y": _chunked(y)}


def _bad_class(X, y):
    y = y.copy()
    y[640] = 3.0
    return {"y": _chunked(y)}


def _negative_weight(X, y):
    weight = np.ones(N_ROWS, np.float32)
    weight[510] = -1.0
    return {"sample_weight": _chunked(weight)}


def _infinite_feature(X, y):
    X = X.copy()
    X[777, 2] = np.inf
    return {"X": _chunked(X)}


def _nan_margin(X, y):
    margin = np.zeros(N_ROWS, np.float32)
    margin[260] = np.nan
    return {"base_margin": _chunked(margin)}


def _bad_code(X, y):
    X = X.copy()
    X[:, 1] = np.arange(N_ROWS) % 5
    X[700, 1] = 1.5
    return {"X": _chunked(X), "params": {"objective": "binary:logistic", "feature_types": ["q", "c", "q", "q"],
                                         "enable_categorical": True}}


@pytest.mark.parametrize("damage, message", [
    (_nan_label, "y has a non-finite value (nan) at row 999 (partition 3, its row 249): y must be finite"),
    (_bad_class, "y has 3.0 at row 640 (partition 2, its row 140): labels must be 0 or 1"),
    (_negative_weight, "sample_weight is negative (-1.0) at row 510 (partition 2, its row 10): weights must be >= 0"),
    (_infinite_feature, "X has an infinite value at row 777 (partition 3, its row 27), column 2 (or one beyond "
                        "float32's range, 3.4e38): replace it"),
    (_nan_margin, "base_margin has a non-finite value ([nan]) at row 260 (partition 1, its row 10)"),
    (_bad_code, "X has the value 1.5 in categorical column 1 at row 700 (partition 2, its row 200): category codes "
                "are integers from 0 to"),
], ids=lambda v: getattr(v, "__name__", "")[1:])
def test_bad_values_name_the_global_row_once(client, data, quiet_workers, damage, message):
    X, y = data
    inputs = {"X": _chunked(X), "y": _chunked(y), **damage(X, y)}
    with pytest.raises(ValueError) as raised:
        _train(client, inputs.pop("X"), inputs.pop("y"), **inputs)
    assert str(raised.value).startswith(message)


def test_weights_that_are_zero_everywhere_are_refused_once(client, data, quiet_workers):
    X, y = data
    with pytest.raises(ValueError, match="sample_weight is zero for every row"):
        _train(client, _chunked(X), _chunked(y), sample_weight=_chunked(np.zeros(N_ROWS, np.float32)))


def test_a_frame_filtered_to_no_rows_says_so_even_with_weights(client, data, quiet_workers):
    X, y = data
    frame = pd.DataFrame(X, columns=list("abcd")).assign(label=y, weight=1.0)
    empty = dd.from_pandas(frame, npartitions=4).query("a > 100")  # the frame's length is unknown until computed
    with pytest.raises(ValueError, match="X has no rows"):
        _train(client, empty[list("abcd")], empty["label"], sample_weight=empty["weight"])


@pytest.mark.parametrize("stream", [False, True], ids=["held", "streamed"])
@pytest.mark.parametrize("ranking", [False, True], ids=["regression", "ranking"])
def test_an_eval_set_filtered_to_no_rows_is_refused_before_any_rank(client, data, quiet_workers, stream, ranking):
    """An eval set whose rows are known only once read (a filter's unknown chunks) and turn out
    none is refused as dgboost.train refuses it: a ranking job divided by its zero rows in its
    plan's log line, another trained on with NaN metrics."""
    X, y = data
    keep = _chunked(X)[:, 0] > 100.0
    params = {"objective": "rank:ndcg" if ranking else "reg:squarederror", "max_depth": 2}
    qid = np.repeat(np.arange(N_ROWS // 20), 20)
    queries = {"qid": _chunked(qid), "eval_qid": [_chunked(qid)[keep]]} if ranking else {}
    with dask.config.set({"dgboost.stream-partitions": stream}), \
            pytest.raises(ValueError, match=r"evals\[0\] X has no rows: training and prediction need at least one"):
        dgboost.dask.train(client, params, _chunked(X), _chunked(y), evals=[(_chunked(X)[keep], _chunked(y)[keep], "none")],
                           num_boost_round=1, **queries)


def test_the_first_bad_row_of_the_whole_set_is_named(client, data, quiet_workers):
    """Two partitions with bad labels: the one earlier in the data set is reported."""
    X, y = data
    bad = y.copy()
    bad[[900, 300]] = np.nan
    with pytest.raises(ValueError, match=r"at row 300 \(partition 1, its row 50\)"):
        _train(client, _chunked(X), _chunked(bad))


def test_bad_eval_set_values_name_the_eval_set_and_its_row(client, data, quiet_workers):
    X, y = data
    y_valid = y.copy()
    y_valid[420] = 0.5
    with pytest.raises(ValueError, match=r"evals\[0\] y has 0.5 at row 420 \(partition 1, its row 120\): labels "
                                         "must be 0 or 1"):
        _train(client, _chunked(X), _chunked(y), evals=[(_chunked(X, 300), _chunked(y_valid, 300), "valid")])


def test_bad_eval_set_category_codes_name_the_eval_set_and_its_row(client, data, quiet_workers):
    X, _ = data
    X = X.copy()
    X[:, 1] = np.arange(N_ROWS) % 5
    X_valid = X.copy()
    X_valid[3, 1] = -2.0
    params = {"objective": "binary:logistic", "feature_types": ["q", "c", "q", "q"], "enable_categorical": True}
    with pytest.raises(ValueError, match=r"^evals\[0\] X has the value -2.0 in categorical column 1 at row 3 "
                                         r"\(partition 0, its row 3\)"):
        _train(client, _chunked(X), _chunked(data[1]), params=params, evals=[(_chunked(X_valid), _chunked(data[1]), "v")])


def test_an_init_model_that_does_not_fit_the_data_is_refused_before_anything_is_computed(client, data,
                                                                                         nothing_computed):
    """What continuing a model asks of the data (its features, their names, its outputs, its
    categorical features) is known from a collection's metadata: refused as dgboost.train
    refuses it, before any task."""
    X, y = data
    params = {"objective": "binary:logistic"}
    narrow = dgboost.train(params, X[:, :3], y, num_boost_round=2)
    with pytest.raises(ValueError, match="^init_model was trained on 3 features but X has 4$"):
        _train(client, _chunked(X), _chunked(y), init_model=narrow)
    two = dgboost.train({"objective": "reg:squarederror"}, X, np.stack([y, y], 1), num_boost_round=2)
    with pytest.raises(ValueError, match="^init_model has 2 outputs but y has 3 targets"):
        _train(client, _chunked(X), _chunked(np.stack([y, y, y], 1)), init_model=two,
               params={"objective": "reg:squarederror"})
    named = dgboost.train(params, pd.DataFrame(X, columns=list("abcd")), y, num_boost_round=2)
    other, labels = _frame(X, y)
    with pytest.raises(ValueError, match=r"^X \(for init_model\) columns do not match the training features"):
        _train(client, other.rename(columns={"d": "e"}), labels, init_model=named)
    with pytest.raises(ValueError, match=r"^evals\[0\] X columns do not match the training features"):  # X: an array
        _train(client, _chunked(X), _chunked(y), init_model=named,
               evals=[(other.rename(columns=dict(zip("abcd", "wxyz"))), labels, "v")])
    typed = pd.DataFrame(X, columns=list("abcd")).assign(b=pd.Categorical(np.where(X[:, 1] > 0, "up", "down")))
    typed = dd.from_pandas(typed, npartitions=4)
    with pytest.raises(ValueError, match="^init_model was trained with other categorical features or categories"):
        _train(client, typed, labels, init_model=named, params={**params, "enable_categorical": True})


def test_sparse_chunks_with_categorical_features_are_refused_before_anything_is_computed(client, data,
                                                                                       nothing_computed):
    sparse = pytest.importorskip("scipy.sparse")
    X, y = data
    dX = _chunked(X).map_blocks(sparse.csr_matrix, meta=sparse.csr_matrix((0, 0), dtype=np.float32))
    with pytest.raises(TypeError, match="^X's chunks are sparse: categorical features take dense rows"):
        _train(client, dX, _chunked(y), params={"objective": "binary:logistic", "feature_types": ["q", "c", "q", "q"],
                                                "enable_categorical": True})


def test_a_dask_classifier_refuses_labels_it_cannot_learn_before_any_rank(client, data, quiet_workers):
    pytest.importorskip("sklearn")
    X, y = data
    labels = np.where(y > 0, "yes", "no").astype(object)
    unseen = labels.copy()
    unseen[640] = "may"
    classifier = dgboost.dask.DaskDGBClassifier(n_estimators=2, max_depth=2)
    with pytest.raises(ValueError, match=r"^eval_set\[0\] y has labels \['may'\] that are not among the training "
                                         r"classes \['no', 'yes'\]"):
        classifier.fit(_chunked(X), _chunked(labels), eval_set=[(_chunked(X), _chunked(unseen))])
    missing = y.copy()
    missing[999] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):  # as DGBClassifier says
        classifier.fit(_chunked(X), _chunked(missing))
    # A one-column frame of labels is that column, as scikit-learn takes an (n, 1) y; more are refused.
    dX, labels_frame = _frame(X, y)
    framed = labels_frame.to_frame()
    by_frame = classifier.fit(dX, framed, eval_set=[(dX, framed)]).get_booster()
    by_series = dgboost.dask.DaskDGBClassifier(n_estimators=2, max_depth=2).fit(
        dX, labels_frame, eval_set=[(dX, labels_frame)]).get_booster()
    assert by_frame.save_raw() == by_series.save_raw()
    with pytest.raises(ValueError, match=r"^eval_set\[0\] y has 2 columns \(\['label', 'again'\]\): a classifier"):
        classifier.fit(dX, framed, eval_set=[(dX, framed.assign(again=framed["label"]))])
    # Entries that are no pair of collections are left to the checks every estimator makes.
    with pytest.raises(TypeError, match=r"^eval_set\[0\] must be a pair \(X, y\)"):
        classifier.fit(_chunked(X), _chunked(labels), eval_set=[(_chunked(X), _chunked(labels), "v")])
    with pytest.raises(TypeError, match=r"^evals\[0\] X must be a 2-D dask array or dask DataFrame"):
        classifier.fit(_chunked(X), _chunked(labels), eval_set=[(X, _chunked(labels))])


def test_a_dataframe_partition_of_the_wrong_type_names_its_partition(client, data, quiet_workers):
    """Metadata that says float but a partition that holds text (read_csv infers from a sample)."""
    X, y = data
    frames = [pd.DataFrame(X[i:i + 250], columns=list("abcd")) for i in range(0, N_ROWS, 250)]
    frames[2]["c"] = frames[2]["c"].astype(str)
    meta = frames[0].iloc[:0]
    dX = dd.from_delayed([dask.delayed(lambda f: f)(f) for f in frames], meta=meta, verify_meta=False)
    with pytest.raises(TypeError, match=r"X column 'c' has dtype .*, which is not numeric.*\(partition 2\)"):
        _train(client, dX, dd.from_pandas(pd.Series(y), npartitions=4))


# ---- found in the metadata: refused before anything is computed ----------------------------------

@pytest.fixture
def nothing_computed(client):
    """Yields; then checks that the scheduler ran no task meanwhile."""
    def tasks_run():
        return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)

    deadline = time.monotonic() + 10  # an earlier test's futures may still be being released
    while client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and time.monotonic() < deadline:
        time.sleep(0.05)
    before = tasks_run()
    yield
    assert tasks_run() == before, "tasks ran for input the metadata shows to be bad"


def _frame(X, y):
    frame = pd.DataFrame(X, columns=list("abcd"))
    return dd.from_pandas(frame, npartitions=4), dd.from_pandas(pd.Series(y, name="label"), npartitions=4)


def test_a_string_column_is_refused_on_the_client(client, data, nothing_computed):
    X, y = data
    dX, dy = _frame(X, y)
    dX = dX.assign(b=dX["b"].astype(str))
    with pytest.raises(TypeError, match="X column 'b' has dtype .*not numeric; convert it to numbers or drop it"):
        _train(client, dX, dy)


def test_a_category_column_needs_enable_categorical_or_its_codes(client, data, nothing_computed):
    X, y = data
    dX, dy = _frame(X, y)
    dX = dX.assign(d=(dX["d"] > 0).astype("category"))
    with pytest.raises(TypeError, match=r"column 'd' is categorical.*enable_categorical=True.*X\['d'\].cat.codes"):
        _train(client, dX, dy)


def test_string_labels_are_refused_on_the_client(client, data, nothing_computed):
    X, y = data
    dX, dy = _frame(X, y)
    with pytest.raises(TypeError, match="y has dtype .*not numeric.*DaskDGBClassifier"):
        _train(client, dX, dy.astype(str))


def test_sparse_chunks_other_than_csr_are_refused_on_the_client(client, data, nothing_computed):
    sparse = pytest.importorskip("scipy.sparse")
    X, y = data
    dX = _chunked(X).map_blocks(sparse.csc_matrix, meta=sparse.csc_matrix((0, 0), dtype=np.float32))
    with pytest.raises(TypeError, match="X's chunks are sparse CSC matrices .* dgboost takes CSR chunks"):
        _train(client, dX, _chunked(y))


def _unknown_width(values, chunks=250):
    """``values`` as a dask array whose chunks do not say their columns (nor its shape)."""
    blocks = [da.from_delayed(dask.delayed(lambda start=start: values[start:start + chunks])(),
                              (len(values[start:start + chunks]), np.nan), values.dtype)
              for start in range(0, len(values), chunks)]
    return da.concatenate(blocks, allow_unknown_chunksizes=True)


@pytest.mark.parametrize("stream", [False, True], ids=["held", "streamed"])
def test_features_the_chunks_do_not_say_are_checked_before_any_rank(client, data, quiet_workers, stream):
    """X's features, where its chunks do not say them, are checked from its partitions on the
    client, as known ones are from its shape: no rank starts (a rank's failure logs its task's)."""
    X, y = data
    with dask.config.set({"dgboost.stream-partitions": stream}):
        with pytest.raises(ValueError, match=r"^evals\[0\] X has 3 features but the training X has 4$"):
            _train(client, _unknown_width(X), _chunked(y), evals=[(_unknown_width(X[:, :3]), _chunked(y), "v")])
        with pytest.raises(ValueError, match=r"^evals\[0\] X has 3 features but the training X has 4$"):
            _train(client, _chunked(X), _chunked(y), evals=[(_unknown_width(X[:, :3]), _chunked(y), "v")])
        mixed = da.concatenate([_unknown_width(X[:500]), _unknown_width(X[500:, :3])], allow_unknown_chunksizes=True)
        with pytest.raises(ValueError, match=r"^X's partitions have \[3, 4\] columns \(partition 0 has 4, partition 2 "
                                             r"3; empty ones count too\): every partition needs the same features$"):
            _train(client, mixed, _chunked(y))
        with pytest.raises(ValueError, match="monotone_constraints has 2 values but X has 4 features"):
            _train(client, _unknown_width(X), _chunked(y),
                   params={"objective": "binary:logistic", "monotone_constraints": (1, -1)})
        if not stream:  # categorical features are not streamed
            typed = {"objective": "binary:logistic", "feature_types": ["q", "c", "q", "q"],
                     "enable_categorical": True}
            coded = np.where(np.isnan(X), X, np.abs(np.floor(X)))  # column 1's codes
            with pytest.raises(ValueError, match=r"^evals\[0\] X has 3 features but the training X has 4$"):
                _train(client, _chunked(coded), _chunked(y), params=typed,
                       evals=[(_unknown_width(coded[:, :3]), _chunked(y), "v")])
        narrow = dgboost.train({"objective": "binary:logistic"}, X[:, :3], y, num_boost_round=2)
        with pytest.raises(ValueError, match="^init_model was trained on 3 features but X has 4$"):
            _train(client, _unknown_width(X), _chunked(y), init_model=narrow)
        booster = _train(client, _unknown_width(X), _chunked(y), evals=[(_unknown_width(X), _chunked(y), "v")])
    assert booster.num_features == 4


def test_eval_set_columns_other_than_the_training_ones_are_refused(client, data, nothing_computed):
    X, y = data
    dX, dy = _frame(X, y)
    renamed = dX.rename(columns={"a": "z"})
    with pytest.raises(ValueError, match=r"evals\[0\] X columns do not match the training features"):
        _train(client, dX, dy, evals=[(renamed, dy, "valid")])


def test_predict_refuses_what_the_model_cannot_take(client, data, nothing_computed):
    X, y = data
    frame = pd.DataFrame(X, columns=list("abcd"))
    booster = dgboost.train({"objective": "binary:logistic"}, frame, y, num_boost_round=2)
    dX, _ = _frame(X, y)
    with pytest.raises(ValueError, match="X has 3 features but the model was trained on 4"):
        dgboost.dask.predict(client, booster, _chunked(X[:, :3]))
    with pytest.raises(TypeError, match="X column 'c' has dtype .*not numeric"):
        dgboost.dask.predict(client, booster, dX.assign(c=dX["c"].astype(str)))
    with pytest.raises(ValueError, match=r"missing \['a'\], unexpected \['z'\]"):
        dgboost.dask.predict(client, booster, dX.rename(columns={"a": "z"}))


def test_the_cluster_trains_after_bad_input(client, data, tmp_path):
    """Nothing is left behind by the rejected jobs: no task, no lock."""
    X, y = data
    assert not any(client.processing().values())
    booster = _train(client, _chunked(X), _chunked(y))
    expected = dgboost.train({"objective": "binary:logistic"}, X, y, num_boost_round=2)
    assert booster.save_raw() == expected.save_raw()


def test_an_eval_frame_with_a_category_column_where_training_had_none_is_refused(client, data, nothing_computed):
    """Coded by its own categories, its scores would be of other numbers than the training
    column's (rmse 5.8 where the same rows as numbers score 0.003)."""
    X, y = data
    dX, dy = _frame(X, y)
    frame = pd.DataFrame(X, columns=list("abcd"))
    eval_X = dd.from_pandas(frame.assign(a=pd.Categorical(np.where(frame["a"] > 0, "up", "down"))), npartitions=4)
    with pytest.raises(TypeError, match=r"evals\[0\] X column 'a' is categorical .* training X held no category"):
        dgboost.dask.train(client, {"enable_categorical": True}, dX, dy, num_boost_round=2,
                           evals=[(eval_X, dy, "valid")])
