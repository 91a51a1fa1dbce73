"""Feature store: .npy memmap, .npz keys, segment features, the public EPIC-100 pickle,
and one-line errors that name the file for every kind of bad store."""

import contextlib
import pickle

import numpy as np
import pytest

from jaxsvr.errors import InputError
from jaxsvr.inputs import features
from jaxsvr.inputs.features import find_split_features, load_features


def _features(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


@contextlib.contextmanager
def _raises(path, *says):
    """Expects a one-line InputError that names `path` and contains each of `says`."""
    with pytest.raises(InputError) as info:
        yield info
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message, message
    for text in says:
        assert text in message, message


def test_npy_is_memory_mapped(tmp_path):
    x = _features((12, 8))
    np.save(tmp_path / "test.npy", x)
    out = load_features(tmp_path / "test.npy", rows=12)
    assert isinstance(out, np.memmap) and out.dtype == np.float32
    np.testing.assert_array_equal(out, x)


def test_npy_other_dtype_is_converted(tmp_path):
    x = _features((5, 3), dtype=np.float16)
    np.save(tmp_path / "f.npy", x)
    out = load_features(tmp_path / "f.npy", rows=5)
    assert out.dtype == np.float32 and not isinstance(out, np.memmap)
    np.testing.assert_array_equal(out, x.astype(np.float32))
    np.save(tmp_path / "i.npy", np.arange(6, dtype=np.int64).reshape(3, 2))
    assert load_features(tmp_path / "i.npy", rows=3).dtype == np.float32


def test_npz_keys(tmp_path):
    x, y = _features((4, 6)), _features((4, 2), seed=1)
    np.savez(tmp_path / "default.npz", features=x, other=y)
    np.testing.assert_array_equal(load_features(tmp_path / "default.npz", rows=4), x)
    np.testing.assert_array_equal(load_features(tmp_path / "default.npz", rows=4, key="other"), y)
    np.savez(tmp_path / "single.npz", video=y)
    np.testing.assert_array_equal(load_features(tmp_path / "single.npz", rows=4), y)
    np.savez(tmp_path / "two.npz", a=x, b=y)
    with _raises(tmp_path / "two.npz", "'features'"):
        load_features(tmp_path / "two.npz", rows=4)
    with _raises(tmp_path / "default.npz", "'missing'", "features, other"):
        load_features(tmp_path / "default.npz", rows=4, key="missing")


def test_segment_features(tmp_path):
    x = _features((7, 25, 4))
    np.save(tmp_path / "seg.npy", x)
    out = load_features(tmp_path / "seg.npy", rows=7)
    assert out.shape == (7, 25, 4)
    np.testing.assert_array_equal(out, x)


def test_public_pickle_needs_opt_in(tmp_path):
    rgb, flow, audio = (_features((5, 1024), seed=s) for s in range(3))
    path = tmp_path / "EPIC_100_retrieval_test_features_mean.pkl"
    with path.open("wb") as f:  # the layout the JPoSE/MMEN baselines read: dict["features"]
        pickle.dump({"features": np.concatenate([rgb, flow, audio], 1)}, f)
    with _raises(path, "--config.data.allow_pickle=True", "runs code"):
        load_features(path, rows=5)
    out = load_features(path, rows=5, allow_pickle=True)
    assert out.shape == (5, 3072)
    np.testing.assert_array_equal(out[:, :1024], rgb)
    np.testing.assert_array_equal(out[:, 2048:], audio)


def test_pickle_modality_dict_and_plain_array(tmp_path):
    rgb, flow, audio = (_features((3, 25, 4), seed=s) for s in range(3))
    path = tmp_path / "raw.pickle"
    with path.open("wb") as f:  # raw TBN release: RGB/Flow/Audio, (N, 25, 1024) each
        pickle.dump({"Audio": audio, "RGB": rgb, "Flow": flow, "narration_id": ["a", "b", "c"]}, f)
    out = load_features(path, rows=3, allow_pickle=True)
    np.testing.assert_array_equal(out, np.concatenate([rgb, flow, audio], -1))
    with (tmp_path / "plain.pkl").open("wb") as f:
        pickle.dump(rgb[:, 0].astype(np.float64), f)
    assert load_features(tmp_path / "plain.pkl", rows=3, allow_pickle=True).dtype == np.float32
    with (tmp_path / "partial.pkl").open("wb") as f:
        pickle.dump({"RGB": rgb}, f)
    with _raises(tmp_path / "partial.pkl", "Flow"):
        load_features(tmp_path / "partial.pkl", rows=3, allow_pickle=True)
    with (tmp_path / "list.pkl").open("wb") as f:
        pickle.dump([1, 2, 3], f)
    with _raises(tmp_path / "list.pkl"):
        load_features(tmp_path / "list.pkl", rows=3, allow_pickle=True)
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with _raises(tmp_path / "junk.pkl", "cannot unpickle"):
        load_features(tmp_path / "junk.pkl", rows=3, allow_pickle=True)


def test_missing_file_names_config_key(tmp_path):
    with _raises(tmp_path / "nope.npy", "--config.data.features"):
        load_features(tmp_path / "nope.npy", rows=3)


def test_row_count_mismatch(tmp_path):
    np.save(tmp_path / "f.npy", _features((100, 2)))
    says = "has 100 rows but the annotations have 120 clips", "aligned with the annotation"
    with _raises(tmp_path / "f.npy", *says):
        load_features(tmp_path / "f.npy", rows=120)


@pytest.mark.parametrize("shape", [(5,), (5, 2, 3, 4)])
def test_bad_rank(tmp_path, shape):
    np.save(tmp_path / "f.npy", np.zeros(shape, np.float32))
    with _raises(tmp_path / "f.npy", str(shape)):
        load_features(tmp_path / "f.npy", rows=5)


def test_non_numeric_dtype(tmp_path):
    np.save(tmp_path / "s.npy", np.array([["a", "b"], ["c", "d"]]))
    with _raises(tmp_path / "s.npy", "dtype"):
        load_features(tmp_path / "s.npy", rows=2)
    np.save(tmp_path / "b.npy", np.ones((2, 2), bool))
    with _raises(tmp_path / "b.npy", "dtype"):
        load_features(tmp_path / "b.npy", rows=2)
    np.save(tmp_path / "o.npy", np.array([[{}], [{}]], dtype=object), allow_pickle=True)
    with _raises(tmp_path / "o.npy"):
        load_features(tmp_path / "o.npy", rows=2)


def test_non_finite_reports_first_bad_row(tmp_path, monkeypatch):
    monkeypatch.setattr(features, "_CHECK_CHUNK_BYTES", 64)  # 4 rows of 4 floats per chunk
    x = _features((20, 4))
    x[13, 2] = np.nan
    x[17, 0] = np.inf
    np.save(tmp_path / "nan.npy", x)
    with _raises(tmp_path / "nan.npy", "row 13"):
        load_features(tmp_path / "nan.npy", rows=20)
    np.save(tmp_path / "big.npy", np.full((3, 2), 1e300))  # finite float64, inf as float32
    with _raises(tmp_path / "big.npy", "row 0"):
        load_features(tmp_path / "big.npy", rows=3)


def test_unsupported_and_corrupt_files(tmp_path):
    (tmp_path / "f.csv").write_text("1,2\n")
    with _raises(tmp_path / "f.csv", ".npy"):
        load_features(tmp_path / "f.csv", rows=1)
    (tmp_path / "bad.npy").write_bytes(b"garbage")
    with _raises(tmp_path / "bad.npy"):
        load_features(tmp_path / "bad.npy", rows=1)
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04garbage")
    with _raises(tmp_path / "bad.npz"):
        load_features(tmp_path / "bad.npz", rows=1)


def test_find_split_features(tmp_path):
    x = _features((6, 3))
    with (tmp_path / "EPIC_100_retrieval_train_features_mean.pkl").open("wb") as f:
        pickle.dump({"features": list(x)}, f)  # a list of rows works like an array
    np.savez(tmp_path / "test.npz", features=x[:4])
    assert find_split_features(tmp_path, "test", rows=4).shape == (4, 3)
    pkl = tmp_path / "EPIC_100_retrieval_train_features_mean.pkl"
    with _raises(pkl, "allow_pickle"):
        find_split_features(tmp_path, "train", rows=6)
    out = find_split_features(tmp_path, "train", rows=6, allow_pickle=True)
    np.testing.assert_array_equal(out, x)
    np.save(tmp_path / "train.npy", x[::-1])  # .npy wins over the pickle
    np.testing.assert_array_equal(find_split_features(tmp_path, "train", rows=6), x[::-1])
    with _raises(tmp_path, "validation.npy", "validation.npz", "features_mean.pkl"):
        find_split_features(tmp_path, "validation", rows=6)
    with _raises(tmp_path / "absent", "--config.data.features"):
        find_split_features(tmp_path / "absent", "test", rows=4)


def test_modalities_select_feature_blocks_in_order():
    from jaxsvr.inputs.features import select_modalities

    train = np.arange(2 * 6, dtype=np.float32).reshape(2, 6)  # blocks of 2: rgb|flow|audio
    test = np.arange(3 * 4 * 6, dtype=np.float32).reshape(3, 4, 6)  # segments too
    assert select_modalities((train, test), "all")[0] is train
    rgb_audio = select_modalities((train, test), "audio,rgb")  # feature order, not named order
    np.testing.assert_array_equal(rgb_audio[0], train[:, [0, 1, 4, 5]])
    np.testing.assert_array_equal(rgb_audio[1], test[..., [0, 1, 4, 5]])
    np.testing.assert_array_equal(select_modalities((train,), "flow")[0], train[:, 2:4])
    for bad in ("depth", "rgb,rgb", ""):  # config.data.modalities: check_train says so
        with pytest.raises(ValueError, match="distinct names"):
            select_modalities((train,), bad)
    with pytest.raises(InputError, match="3 equal blocks"):
        select_modalities((np.zeros((2, 7), np.float32),), "rgb")


def test_a_run_on_rgb_and_flow_only(tmp_path):
    from train_runs import config

    from jaxsvr.train import loop, pipeline

    c = config(data__modalities="rgb,flow", train__max_steps=3)
    run = pipeline.build(c)
    assert run.splits.video_dim == 2 * 64 and run.splits.test.video.shape[-1] == 128
    assert np.isfinite(loop.train_and_evaluate(c, tmp_path)["ndcg_avg"])
