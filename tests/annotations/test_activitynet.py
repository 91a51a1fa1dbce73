"""ActivityNet Captions reader: small files in the public format, clip order, each
malformed case as one InputError line naming file, video and index."""

import copy
import json

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
        (_broken("v_b", timestamps=[[3, 2]]), "video v_b timestamp 0: starts at 3.0 s after"),
        (_broken("v_b", timestamps=[[1, 13]]), "video v_b timestamp 0: [1.0, 13.0] lies outside"),
        (_broken("v_b", timestamps=[[-1, 2]]), "video v_b timestamp 0: [-1.0, 2.0] lies outside"),
        (_broken("v_b", sentences=["  "]), "video v_b timestamp 0: its sentence is '  '"),
        (_broken("v_b", sentences=[None]), "video v_b timestamp 0: its sentence is None"),
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
