"""URLs for data and workdir (`jaxsvr.files.locations`): a `file://` URL takes the route of
a bucket (every read and write through epath's fsspec backend, no memory map, no lock), so
a run whose annotations, features and workdir are `file://` URLs must equal the same run on
local paths, leave the same files, and resume from its own checkpoints.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib

import numpy as np
import pytest
from kitchen_files import write_epic_folder
from train_runs import final, jsonl, run_main, train_losses

from jaxsvr.errors import InputError
from jaxsvr.files import arrays, locations
from jaxsvr.inputs import features
from jaxsvr.runtime.workdir import Workdir, check, write_text
from jaxsvr.train.metric_writers import MetricWriter

TIMINGS = {"eval_seconds", "train_seconds", "train_steps", "steps_per_sec", "host_wait"}


def url(path) -> str:
    return "file://" + str(pathlib.Path(path).absolute())


# --- locate -----------------------------------------------------------------------------


def test_plain_paths_stay_local_and_urls_take_the_url_route(tmp_path):
    assert locations.locate(str(tmp_path)) == tmp_path
    assert isinstance(locations.locate(tmp_path), pathlib.Path)
    here = locations.locate(url(tmp_path / "a"))
    assert isinstance(here, locations.FileURL) and str(here) == url(tmp_path / "a")
    assert locations.local_file(here) is None and locations.local_file(tmp_path) == str(tmp_path)
    assert locations.for_orbax(here) == tmp_path / "a"
    child = here / "b" / "c.txt"
    assert isinstance(child, locations.FileURL) and child.name == "c.txt"
    child.parent.mkdir(parents=True)
    child.write_text("hi")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "hi"
    assert child.stat().length == 2 and child.is_file() and here.is_dir()
    assert [p.name for p in here.glob("*")] == ["b"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("file://relative/x", "absolute path"),
        ("nosuch://bucket/x", "unknown URL scheme nosuch://"),
    ],
)
def test_bad_urls_are_one_line(text, says):
    with pytest.raises(InputError, match=says):
        locations.locate(text)


@pytest.mark.skipif(
    any(importlib.util.find_spec(p) for p in ("gcsfs", "tensorflow")),
    reason="a gs:// filesystem is installed",
)
def test_gs_without_its_filesystem_names_the_package():
    with pytest.raises(InputError, match="pip install gcsfs"):
        locations.locate("gs://bucket/run")


# --- readers ------------------------------------------------------------------------------


def test_feature_stores_read_through_urls_equal_local_ones(tmp_path):
    x = np.random.default_rng(0).normal(size=(7, 3, 5)).astype(np.float32)
    np.save(tmp_path / "train.npy", x)
    np.savez(tmp_path / "test.npz", features=x[:4].astype(np.float64))
    local = features.find_split_features(tmp_path, "train", rows=7)
    remote = features.find_split_features(url(tmp_path), "train", rows=7)
    assert isinstance(local, np.memmap) and not isinstance(remote, np.memmap)
    np.testing.assert_array_equal(remote, x)
    np.testing.assert_array_equal(
        features.find_split_features(url(tmp_path), "test", rows=4), x[:4]
    )
    with pytest.raises(InputError, match=r"file://.*/nowhere not found"):
        features.find_split_features(url(tmp_path / "nowhere"), "train", rows=7)
    (tmp_path / "bad.npy").write_bytes(np.lib.format.MAGIC_PREFIX + b"\x01\x00" + b"x" * 20)
    with pytest.raises(InputError, match="corrupt .npy header"):
        arrays.load_npy(url(tmp_path / "bad.npy"))
    with pytest.raises(InputError, match="is a folder"):
        arrays.load_npy(url(tmp_path))


def test_url_workdir_checks_and_writes(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        check(url(tmp_path / "file"))
    (tmp_path / "w" / "checkpoints").mkdir(parents=True)
    (tmp_path / "w" / "metrics.jsonl").mkdir()
    with pytest.raises(InputError, match="metrics.jsonl is a folder"):
        check(url(tmp_path / "w"))
    with Workdir(url(tmp_path / "new")) as run:
        path = run.open()
        write_text(path / "config.json", "{}\n")
        assert not (tmp_path / "new" / ".lock").exists()  # an object store has no locks
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["config.json"]  # no temporaries


def test_metric_writer_stages_and_copies_to_a_url_workdir(tmp_path):
    work = url(tmp_path)
    with MetricWriter(work) as w:
        w.write_scalars(1, {"a": 1.0})
        w.write_scalars(2, {"a": 2.0})
        w.flush()
        assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 2
    with MetricWriter(work, resume_step=1) as w:  # the step-2 line came after the checkpoint
        w.write_scalars(3, {"a": 3.0})
    assert [r["step"] for r in jsonl(tmp_path)] == [1, 3]
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 2


# --- a run on file:// URLs -----------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """An EPIC-100 annotation folder (the built-in kitchen clips as CSVs) and features."""
    root = tmp_path_factory.mktemp("store")
    (root / "epic").mkdir()
    (root / "feats").mkdir()
    train, test, _ = write_epic_folder(root / "epic")
    rng = np.random.default_rng(1)
    np.save(root / "feats" / "train.npy", rng.normal(size=(len(train), 32)).astype(np.float32))
    np.save(root / "feats" / "test.npy", rng.normal(size=(len(test), 32)).astype(np.float32))
    return root


def test_a_run_on_file_urls_equals_the_run_on_local_paths_and_resumes(store, tmp_path):
    def run(workdir, where):
        done = run_main(
            workdir,
            f"--config.data.annotations={where(store / 'epic')}",
            f"--config.data.features={where(store / 'feats')}",
            "--config.eval.export_similarity=True",
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    run(tmp_path / "local", str)
    first = run(url(tmp_path / "url"), url)
    assert "is a URL: it is not locked" in first.stderr
    local, remote = tmp_path / "local", tmp_path / "url"
    assert train_losses(remote) == train_losses(local)
    drop = lambda d: {k: v for k, v in d.items() if k not in TIMINGS}  # noqa: E731
    assert drop(final(remote)) == drop(final(local))
    for name in ("test_similarity.npy", "test_relevance.npy"):
        np.testing.assert_array_equal(np.load(remote / name), np.load(local / name))
    names = {p.name for p in remote.iterdir()}
    assert {"config.json", "vocab.json", "metrics.jsonl", "tensorboard", "checkpoints"} <= names
    assert not [n for n in names if n.endswith(".tmp")] and ".lock" not in names
    assert json.loads((remote / "vocab.json").read_text()) == json.loads(
        (local / "vocab.json").read_text()
    )
    assert sorted(p.name for p in (remote / "checkpoints").iterdir()) == sorted(
        p.name for p in (local / "checkpoints").iterdir()
    )
    before = (remote / "metrics.jsonl").read_text()
    again = run(url(remote), url)  # restores its last checkpoint through the URL route
    assert "checkpoint: resumed from" in again.stderr and "at step 28" in again.stderr
    assert drop(final(remote)) == drop(final(local))
    assert (remote / "metrics.jsonl").read_text() == before
