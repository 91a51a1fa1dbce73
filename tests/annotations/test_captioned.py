"""YouCook2 and MSR-VTT readers (small fixtures in the public formats) and their clips."""

import json

import numpy as np
import pytest

from jaxsvr.annotations import msrvtt, youcook2
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions
from jaxsvr.relevance import caption_classes, proxies

YOUCOOK2 = {
    "database": {
        "vidA": {
            "subset": "training",
            "duration": 200.0,
            "recipe_type": "113",
            "annotations": [
                {"id": 1, "segment": [40, 55], "sentence": "Stir the sauce in the pan."},
                {"id": 0, "segment": [10, 30], "sentence": "chop the onions and garlic"},
                {"id": 2, "segment": [60, 80], "sentence": "add the onions to the pan"},
            ],
        },
        "vidB": {
            "subset": "validation",
            "duration": 90.0,
            "recipe_type": "201",
            "annotations": [{"id": 0, "segment": [5, 9], "sentence": "boil water in a pot"}],
        },
    }
}
MSRVTT = {
    "videos": [
        {"video_id": "video0", "split": "train", "start time": 1.5, "end time": 9.0},
        {"video_id": "video1", "split": "validate", "start time": 0.0, "end time": 4.0},
    ],
    "sentences": [
        {"video_id": "video0", "caption": "a man cuts an onion", "sen_id": 0},
        {"video_id": "video1", "caption": "a dog runs", "sen_id": 1},
        {"video_id": "video0", "caption": "a person slices onions", "sen_id": 2},
        {"video_id": "video0", "caption": "someone cuts vegetables with a knife", "sen_id": 3},
        {"video_id": "video0", "caption": "a man cuts an onion on a board", "sen_id": 4},
    ],
}


def _write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def test_youcook2_rows_in_segment_order(tmp_path):
    rows = youcook2.read(_write(tmp_path, "yc2.json", YOUCOOK2))
    assert rows.clip_id == ["vidA_0", "vidA_1", "vidA_2", "vidB_0"]
    assert rows.caption[1] == "Stir the sauce in the pan."
    assert rows.split == ["train", "train", "train", "test"]
    np.testing.assert_array_equal(rows.order, [0, 1, 2, 0])
    np.testing.assert_array_equal(rows.start_s, [10, 40, 60, 5])
    assert youcook2.read(tmp_path / "yc2.json", val_as_test=False).split[3] == "val"
    assert len(rows.select("train")) == 3


def test_msrvtt_rows_per_sentence(tmp_path):
    rows = msrvtt.read(_write(tmp_path, "msrvtt.json", MSRVTT))
    assert len(rows) == 5 and rows.clip_id == rows.video_id
    assert rows.split == ["train", "val", "train", "train", "train"]
    names, groups = rows.clip_groups()
    assert names == ["video0", "video1"] and groups.tolist() == [0, 1, 0, 0, 0]
    assert rows.start_s[0] == 1.5


@pytest.mark.parametrize(
    "reader,obj,match",
    [
        (youcook2.read, {"videos": {}}, "no 'database' object"),
        (youcook2.read, {"database": {"v": {"subset": "train"}}}, "video v: 'subset' is 'train'"),
        (
            youcook2.read,
            {
                "database": {
                    "v": {
                        "subset": "training",
                        "annotations": [{"id": 0, "segment": [3], "sentence": "x"}],
                    }
                }
            },
            r"video v annotation 0: 'segment' is \[3\]",
        ),
        (
            youcook2.read,
            {
                "database": {
                    "v": {
                        "subset": "training",
                        "annotations": [{"id": 0, "segment": [3, 4], "sentence": " "}],
                    }
                }
            },
            "video v annotation 0: 'sentence' is ' '",
        ),
        (
            msrvtt.read,
            {"videos": [], "sentences": [{"video_id": "v9", "caption": "x"}]},
            "video_id 'v9' is not",
        ),
        (
            msrvtt.read,
            {"videos": [{"video_id": "v", "split": "train"}], "sentences": []},
            "video v has no sentences",
        ),
        (
            msrvtt.read,
            {"videos": [{"video_id": "v", "split": "dev"}], "sentences": []},
            "'split' is 'dev'",
        ),
        (
            youcook2.read,
            {
                "database": {
                    "v": {
                        "subset": "training",
                        "annotations": [
                            {"id": 0, "segment": [0, 1], "sentence": "a"},
                            {"id": 0, "segment": [1, 2], "sentence": "b"},
                        ],
                    }
                }
            },
            "video v: two annotations have id 0",
        ),
        (
            msrvtt.read,
            {"videos": [{"video_id": "v", "split": "train", "start time": None}], "sentences": []},
            "must be numbers",
        ),
        (
            msrvtt.read,
            {
                "videos": [{"video_id": "v", "split": "train"}],
                "sentences": [{"video_id": [1], "caption": "x"}],
            },
            r"video_id \[1\] is not",
        ),
    ],
)
def test_bad_files_raise_one_line(tmp_path, reader, obj, match):
    with pytest.raises(InputError, match=match):
        reader(_write(tmp_path, "bad.json", obj))


def test_msrvtt_one_file_keeps_its_labels(tmp_path):
    """Given alone, a file's split labels are all there is: even under a release name a
    "train" video is a train video (in the folder it contradicts its file: an error)."""
    obj = {
        "videos": [
            {"video_id": "v0", "split": "train"},
            {"video_id": "v1", "split": "test"},
        ],
        "sentences": [
            {"video_id": "v0", "caption": "a dog runs", "sen_id": 0},
            {"video_id": "v1", "caption": "a cat sleeps", "sen_id": 1},
        ],
    }
    rows = msrvtt.read(_write(tmp_path, msrvtt.FILES[1], obj))
    assert rows.split == ["train", "test"]


def test_invalid_json_and_missing_file(tmp_path):
    (tmp_path / "x.json").write_text('{"database": ')
    with pytest.raises(InputError, match=r"x.json:1: not valid JSON"):
        youcook2.read(tmp_path / "x.json")
    with pytest.raises(InputError, match="not found"):
        msrvtt.read(tmp_path / "none.json")


def test_youcook2_clips_with_word_classes(tmp_path):
    rows = youcook2.read(_write(tmp_path, "yc2.json", YOUCOOK2))
    ids = {}
    clips = caption_classes.to_clips(rows.select("train"), proxies.ClassMap({}, {}), class_ids=ids)
    assert clips.narration_id == ["vidA_0", "vidA_1", "vidA_2"]
    assert clips.verb == ["chop", "stir", "add"]
    assert clips.nouns[0] == ("onion", "garlic")
    assert clips.noun_classes[0] == (ids["noun"]["word:onion"], ids["noun"]["word:garlic"])
    assert clips.noun_classes[2] == tuple(
        sorted((ids["noun"]["word:onion"], ids["noun"]["word:pan"]))
    )
    assert [r.tolist() for r in clips.video_clips().values()] == [[0, 1, 2]]
    test = caption_classes.to_clips(rows.select("test"), proxies.ClassMap({}, {}), class_ids=ids)
    assert test.verb == ["boil"] and ids["verb"]["word:boil"] == 3  # ids shared across splits


def test_msrvtt_clips_aggregate_captions(tmp_path):
    rows = msrvtt.read(_write(tmp_path, "msrvtt.json", MSRVTT)).select("train")
    ids = {}
    clips = caption_classes.to_clips(rows, proxies.ClassMap({}, {}), class_ids=ids)
    assert len(clips) == 1 and clips.narration == ["a man cuts an onion"]
    assert clips.verb == ["cut"]  # 3 of 4 captions
    nouns = {k for k, i in ids["noun"].items() if i in clips.noun_classes[0]}
    # in >= 25% of the 4 captions (1 caption suffices): every noun mentioned (spaCy's small
    # pipeline also tags "slices" in "a person slices onions" as a noun)
    assert nouns >= {"word:man", "word:onion", "word:person", "word:vegetable", "word:knife"}
    strict_ids = {}
    strict = caption_classes.to_clips(rows, proxies.ClassMap({}, {}), class_ids=strict_ids, rho=0.5)
    assert strict.noun_classes.sizes.tolist() == [2]  # man and onion: 2 of 4 captions each
    # verbs aggregate too: the main verb is the most frequent, the set adds verbs named in
    # >= rho of the captions (at 0.5 only "cut"; at 0.25 any verb another caption names)
    assert clips.verb_class.tolist() == [ids["verb"]["word:cut"]]
    assert list(strict.verb_classes[0]) == [strict_ids["verb"]["word:cut"]]
    verbs = {k for k, i in ids["verb"].items() if i in clips.verb_classes[0]}
    named = {f"word:{v}" for caption in rows.caption for v in captions.parse([caption]).verbs[0]}
    assert verbs == named and "word:cut" in verbs


def test_msrvtt_folder_of_the_public_release(tmp_path):
    """train_val_videodatainfo.json and test_videodatainfo.json read together."""
    test = {
        "videos": [{"video_id": "video9", "split": "test", "start time": 0, "end time": 3}],
        "sentences": [
            {"video_id": "video9", "caption": "a cat sleeps", "sen_id": 0},
            {"video_id": "video9", "caption": "a cat naps on a sofa", "sen_id": 1},
        ],
    }
    _write(tmp_path, msrvtt.FILES[0], MSRVTT)
    with pytest.raises(InputError, match="has no test_videodatainfo.json"):
        msrvtt.read(tmp_path)
    _write(tmp_path, msrvtt.FILES[1], test)
    rows = msrvtt.read(tmp_path)
    one = msrvtt.read(tmp_path / msrvtt.FILES[0])
    assert rows.caption == one.caption + ["a cat sleeps", "a cat naps on a sofa"]
    assert rows.split == one.split + ["test", "test"]
    assert rows.video_id[-2:] == ["video9", "video9"] and rows.order.shape == (len(rows),)
    test["videos"].append({"video_id": "video1", "split": "test"})
    test["sentences"].append({"video_id": "video1", "caption": "a dog", "sen_id": 2})
    _write(tmp_path, msrvtt.FILES[1], test)
    with pytest.raises(InputError, match="video video1 is in both"):
        msrvtt.read(tmp_path)
