"""ActivityNet Captions reader: small files in the public format, clip order, the
timestamps it mends (said in one log line per file) and each malformed case as one
InputError line naming file, video and index."""

import copy
import json
import logging

import numpy as np
import pytest

from jaxsvr.annotations import activitynet
from jaxsvr.errors import InputError

TRAIN = {
    "v_a": {
        "duration": 100.0,
        "timestamps": [[40.0, 60.5], [0, 20.0], [40.0, 45.0], [10.0, 100.0]],
        "sentences": [" A man adds salt. ", "He walks in.", "He stirs.", "People watch."],
    },
    "v_b": {"duration": 12.5, "timestamps": [[1, 2]], "sentences": ["A dog runs."]},
}
TEST = {
    "v_c": {
        "duration": 30,
        "timestamps": [[20, 30], [0, 5.5]],
        "sentences": ["She leaves.", "A woman sits."],
    }
}


def _folder(tmp_path, train=TRAIN, test=TEST):
    for name, obj in (("train.json", train), ("val_1.json", test)):
        (tmp_path / name).write_text(json.dumps(obj))
    return tmp_path


def test_clips_in_time_order_with_file_indices(tmp_path):
    rows = activitynet.read(_folder(tmp_path))
    # v_a: starts 0, 10, 40 (file index 0), 40 (file index 2): equal starts keep file order
    assert rows.clip_id == ["v_a_1", "v_a_3", "v_a_0", "v_a_2", "v_b_0", "v_c_1", "v_c_0"]
    assert rows.video_id == ["v_a"] * 4 + ["v_b", "v_c", "v_c"]
    assert rows.caption[2] == "A man adds salt."  # stripped
    assert rows.split == ["train"] * 5 + ["test"] * 2
    np.testing.assert_array_equal(rows.order, [0, 1, 2, 3, 0, 0, 1])
    np.testing.assert_array_equal(rows.start_s, [0, 10, 40, 40, 1, 0, 20])
    np.testing.assert_array_equal(rows.stop_s, [20, 100, 60.5, 45, 2, 5.5, 30])


def test_one_file_as_a_split(tmp_path):
    _folder(tmp_path)
    rows = activitynet.read_split(tmp_path / "val_1.json", "test")
    assert rows.clip_id == ["v_c_1", "v_c_0"] and set(rows.split) == {"test"}


def _broken(video: str, **changes):
    data = copy.deepcopy(TRAIN)
    data[video].update(changes)
    return data


@pytest.mark.parametrize(
    "train, says",
    [
        (_broken("v_a", sentences=["a", "b", "c"]), "video v_a: 4 timestamps but 3 sentences"),
        (_broken("v_b", timestamps=[[13, 14]]), "video v_b timestamp 0: starts at 13.0 s"),
        (_broken("v_b", timestamps=[[-1, 2]]), "video v_b timestamp 0: [-1.0, 2.0] has a neg"),
        (_broken("v_b", sentences=["  "]), "video v_b timestamp 0: 'sentences'[0] is '  '"),
        (_broken("v_b", sentences=[""]), "video v_b timestamp 0: 'sentences'[0] is ''"),
        (_broken("v_b", sentences=[None]), "video v_b timestamp 0: 'sentences'[0] is None"),
        (_broken("v_b", timestamps=[[1]]), "video v_b timestamp 0: [1] is not [start, end]"),
        (_broken("v_b", timestamps=[[1, "2"]]), "timestamp 0: [1, '2'] is not"),
        (_broken("v_b", timestamps=[[1, float("nan")]]), "non-standard constant NaN"),
        (_broken("v_b", duration=0), "video v_b: 'duration' is 0"),
        (_broken("v_b", duration=None), "video v_b: 'duration' is None"),
        (_broken("v_b", timestamps=[], sentences=[]), "video v_b: no timestamps"),
        (_broken("v_b", timestamps={}), "video v_b: 'timestamps' and 'sentences' must be lists"),
        ({"v_a": []}, "video v_a: expected an object"),
        ({}, "with at least one video"),
        ([], "expected ActivityNet Captions' JSON object"),
    ],
)
def test_malformed_entries(tmp_path, train, says):
    _folder(tmp_path, train=train)
    with pytest.raises(InputError) as info:
        activitynet.read(tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert str(tmp_path / "train.json") in message, message
    assert says in message, message


# What the public release holds (train.json: 261 ends beyond the duration by <= 0.01 s,
# 2 reversed and 2 zero-length timestamps; val_1.json: 134 ends beyond): every clip is kept.
# Each row: v_b's timestamps (duration 12.5), the times read, and what the log line says.
MENDED = [
    ("end-beyond-duration", [[1, 12.51]], [(1, 12.5)], ["clamped 1 ends", "by at most 0.01 s"]),
    ("end-far-beyond", [[1, 30]], [(1, 12.5)], ["clamped 1 ends", "by at most 17.5 s"]),
    ("reversed", [[3, 2]], [(2, 3)], ["swapped start and end of 1", "timestamp 0 [3.0, 2.0]"]),
    ("reversed-and-beyond", [[13, 2]], [(2, 12.5)], ["clamped 1 ends", "swapped start and"]),
    ("zero-length", [[2, 2]], [(2, 2)], []),
    ("zero-length-at-the-end", [[12.5, 12.5]], [(12.5, 12.5)], []),
    ("start-at-the-end", [[12.5, 12.6]], [(12.5, 12.5)], ["clamped 1 ends"]),
    (
        "several",
        [[1, 13], [5, 4], [0, 12.6], [4, 3]],
        [(0, 12.5), (1, 12.5), (3, 4), (4, 5)],
        ["clamped 2 ends", "first: video v_b timestamp 0 [1.0, 13.0] > 12.5", "swapped", "of 2"],
    ),
]


@pytest.mark.parametrize("stamps, times, says", [m[1:] for m in MENDED], ids=[m[0] for m in MENDED])
def test_mended_timestamps_keep_every_clip_and_are_logged(tmp_path, caplog, stamps, times, says):
    train = _broken("v_b", timestamps=stamps, sentences=[f"s{k}" for k in range(len(stamps))])
    with caplog.at_level(logging.INFO):
        rows = activitynet.read(_folder(tmp_path, train=train))
    b = [i for i, v in enumerate(rows.video_id) if v == "v_b"]
    assert [(rows.start_s[i], rows.stop_s[i]) for i in b] == times
    assert len(b) == len(stamps)  # no clip is dropped
    lines = [r for r in caplog.records if "train.json" in r.getMessage()]
    if not says:
        assert not lines, [r.getMessage() for r in lines]
        return
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    for want in says:
        assert want in lines[0].getMessage(), lines[0].getMessage()
    assert not [r for r in caplog.records if "val_1.json" in r.getMessage()]


def test_video_in_both_splits(tmp_path):
    _folder(tmp_path, test={"v_b": TRAIN["v_b"]})
    with pytest.raises(InputError, match="val_1.json: video v_b is also in .*train.json"):
        activitynet.read(tmp_path)


def test_missing_folder_or_file(tmp_path):
    with pytest.raises(InputError, match="not found: point config.data.annotations"):
        activitynet.read(tmp_path / "nowhere")
    (tmp_path / "train.json").write_text(json.dumps(TRAIN))
    with pytest.raises(InputError, match="val_1.json not found"):
        activitynet.read(tmp_path)
    with pytest.raises(InputError, match="is a file"):
        activitynet.read(tmp_path / "train.json")
