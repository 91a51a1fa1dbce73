"""Bad input to the readers, in-process: each call must raise an `InputError` with a
one-line message naming what is wrong, and leave the folder as it was (the command-line
cases: `test_bad_inputs.py`)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from bad_input_files import (
    CLIP_HEADER,
    clip,
    forged,
    materialise,
    npy,
    npz,
    tree,
)

from jaxsvr.annotations import activitynet, caption_table, epic100, msrvtt, youcook2
from jaxsvr.errors import InputError
from jaxsvr.inputs import features, text
from jaxsvr.relevance import __main__ as relevance_cli
from jaxsvr.runtime import cli

# --- reader cases (in-process): each call must raise a one-line InputError ---------------


def _load_feats(name, rows=2, **kw):
    return lambda d: features.load_features(d / name, rows=rows, **kw)


def _yc2(d):
    return youcook2.read(d / "a.json")


def _msr(d):
    return msrvtt.read(d / "a.json")


def _msr_folder(d):
    return msrvtt.read(d)


def _anet(d):
    return activitynet.read(d)


VOCAB = text.Vocabulary.build([["knife", "plate"]])
MSR_OK = '{"videos": [{"video_id": "v0", "split": "train"}], "sentences": [%s]}'
YC2 = '{"database": {"v": {"subset": "training", "annotations": [{"id": 0, "segment": %s, "sentence": "a"}]}}}'  # noqa: E501
YC2_SENTENCE = YC2.replace('"sentence": "a"', '"sentence": %s') % ("[0, 1]", "%s")


def _msr_file(split: str, vid: str = "v0", caption: str = "a") -> str:
    """A videodatainfo file of one video with one sentence."""
    return (
        f'{{"videos": [{{"video_id": "{vid}", "split": "{split}"}}], '
        f'"sentences": [{{"video_id": "{vid}", "caption": "{caption}", "sen_id": 0}}]}}'
    )


def _msr_release(train_val: str, test: str) -> dict[str, str]:
    """A folder of the public release's two files."""
    return dict(zip(msrvtt.FILES, (train_val, test)))


ANET_VIDEO = '{"duration": 10, "timestamps": %s, "sentences": %s}'
ANET_TEST = '{"v_t": %s}' % (ANET_VIDEO % ("[[0, 1]]", '["b"]'))


def _anet_files(train_videos: str, test: str = ANET_TEST) -> dict[str, str]:
    """train.json holding `train_videos` (the text inside its braces) and val_1.json."""
    return {"train.json": "{" + train_videos + "}", "val_1.json": test}


def _anet_stamp(stamps: str, sentences: str = '["a"]') -> dict[str, str]:
    """A folder whose train.json has one 10 s video v_a with these timestamps."""
    return _anet_files('"v_a": ' + ANET_VIDEO % (stamps, sentences))


READER_CASES: list[tuple[str, Callable[[Path], object], dict, tuple[str, ...]]] = [
    (
        "features-npz-forged-member",
        _load_feats("f.npz"),
        {"f.npz": npz(features=forged((10**9, 9)))},
        ("f.npz", "truncated or corrupt"),
    ),
    (
        "features-npz-string-member",
        _load_feats("f.npz"),
        {"f.npz": npz(features=np.array([["a"], ["b"]]))},
        ("f.npz", "string dtype"),
    ),
    (
        "features-npz-truncated-member",
        _load_feats("f.npz"),
        {"f.npz": npz(features=npy(np.zeros((2, 3), np.float32))[:-5])},
        ("f.npz", "truncated"),
    ),
    (
        "features-npy-as-npz",
        _load_feats("f.npz"),
        {"f.npz": npy(np.zeros((2, 2)))},
        ("f.npz", "single .npy"),
    ),
    (
        "features-npz-garbage",
        _load_feats("f.npz"),
        {"f.npz": b"PK\x03\x04garbage"},
        ("f.npz", "not a readable .npz"),
    ),
    (
        "features-npy-0-rows-forged",
        _load_feats("f.npy"),
        {"f.npy": forged((2, -5))},
        ("f.npy", "corrupt"),
    ),
    (
        "features-pickle-complex",
        _load_feats("f.pkl", allow_pickle=True),
        {"f.pkl": pickle.dumps(np.ones((2, 2), complex))},
        ("f.pkl", "dtype"),
    ),
    (
        "cli-load-npy-beyond-float32",
        lambda d: cli.load_npy(d / "a.npy", "similarity", float32=True),
        {"a.npy": npy(np.array([[3.0e38], [-4e38]], np.float64))},
        ("a.npy", "row 1", "float32"),
    ),
    ("youcook2-non-utf8", _yc2, {"a.json": b'{"database": {"v\xff": {}}}'}, ("a.json:1", "UTF-8")),
    ("youcook2-infinite-segment", _yc2, {"a.json": YC2 % "[0, 1e400]"}, ("a.json", "segment")),
    ("youcook2-negative-segment", _yc2, {"a.json": YC2 % "[-5, 1]"}, ("a.json", "segment")),
    (
        "youcook2-subset-not-a-string",
        _yc2,
        {"a.json": '{"database": {"v": {"subset": ["training"], "annotations": []}}}'},
        ("a.json: video v", "'subset'"),
    ),
    (
        "msrvtt-split-not-a-string",
        _msr,
        {"a.json": '{"videos": [{"video_id": "v0", "split": {}}], "sentences": []}'},
        ("a.json: videos[0]", "'split'"),
    ),
    (
        "youcook2-deep-nesting",
        _yc2,
        {"a.json": "[" * 100_000 + "]" * 100_000},
        ("a.json", "not valid JSON"),
    ),
    ("youcook2-not-an-object", _yc2, {"a.json": "[1, 2]"}, ("a.json", "database")),
    (
        "msrvtt-invalid-json",
        _msr,
        {"a.json": '{"videos": [\n  {"video_id": }]}'},
        ("a.json:2", "column"),
    ),
    (
        "msrvtt-duplicate-sen-id",
        _msr,
        {
            "a.json": MSR_OK
            % (
                '{"video_id": "v0", "caption": "a", "sen_id": 7}, '
                '{"video_id": "v0", "caption": "b", "sen_id": 7}'
            )
        },
        ("a.json", "sentences[1]", "sentences[0]"),
    ),
    ("msrvtt-huge-int", _msr, {"a.json": "1" * 5000}, ("a.json", "not valid JSON")),
    # A key written twice in one JSON object: json keeps the last and data vanishes.
    (
        "activitynet-video-key-twice",
        _anet,
        _anet_files('"v_a": %s, "v_a": %s' % ((ANET_VIDEO % ("[[0, 1]]", '["a"]'),) * 2)),
        ("train.json", "top-level object", '"v_a" twice'),
    ),
    (
        "activitynet-sentences-key-twice",
        _anet,
        _anet_files(
            '"v_a": {"duration": 10, "timestamps": [[0, 1]], "sentences": ["a"], '
            '"sentences": ["b"]}'
        ),
        ("train.json", '["v_a"]', '"sentences" twice'),
    ),
    (
        "activitynet-video-key-twice-in-test-file",
        _anet,
        _anet_files(
            '"v_a": ' + ANET_VIDEO % ("[[0, 1]]", '["a"]'),
            test='{"v_t": %s, "v_t": %s}' % ((ANET_VIDEO % ("[[0, 1]]", '["b"]'),) * 2),
        ),
        ("val_1.json", '"v_t" twice'),
    ),
    (
        "youcook2-video-key-twice",
        _yc2,
        {
            "a.json": '{"database": {"v": {"subset": "training", "annotations": []}, '
            '"v": {"subset": "validation", "annotations": []}}}'
        },
        ("a.json", '["database"]', '"v" twice'),
    ),
    (
        "youcook2-sentence-key-twice",
        _yc2,
        {"a.json": YC2.replace('"sentence": "a"', '"sentence": "a", "sentence": "b"') % "[0, 1]"},
        ("a.json", '["database"]["v"]["annotations"][0]', '"sentence" twice'),
    ),
    (
        "youcook2-database-key-twice",
        _yc2,
        {"a.json": '{"database": {}, "database": {}}'},
        ("a.json", "top-level object", '"database" twice'),
    ),
    (
        "msrvtt-split-key-twice",
        _msr,
        {"a.json": MSR_OK.replace('"split": "train"', '"split": "test", "split": "train"') % ""},
        ("a.json", '["videos"][0]', '"split" twice'),
    ),
    (
        "msrvtt-caption-key-twice",
        _msr,
        {"a.json": MSR_OK % '{"video_id": "v0", "caption": "a", "caption": "b", "sen_id": 0}'},
        ("a.json", '["sentences"][0]', '"caption" twice'),
    ),
    (
        "msrvtt-sentences-key-twice",
        _msr,
        {"a.json": '{"videos": [], "sentences": [], "sentences": []}'},
        ("a.json", "top-level object", '"sentences" twice'),
    ),
    # Empty and whitespace-only captions: a training pair with no text.
    (
        "msrvtt-empty-caption",
        _msr,
        {"a.json": _msr_file("train", caption="")},
        ("a.json: sentences[0] (video v0)", "'caption' is ''"),
    ),
    (
        "msrvtt-blank-caption",
        _msr,
        {"a.json": _msr_file("train", caption=" \\t ")},
        ("a.json: sentences[0] (video v0)", "'caption' is ' \\t '"),
    ),
    (
        "msrvtt-empty-caption-in-test-file",
        _msr_folder,
        _msr_release(_msr_file("train"), _msr_file("test", "v9", caption="  ")),
        ("test_videodatainfo.json: sentences[0] (video v9)", "'caption' is '  '"),
    ),
    (
        "youcook2-empty-sentence",
        _yc2,
        {"a.json": YC2_SENTENCE % '""'},
        ("a.json: video v annotation 0", "'sentence' is ''"),
    ),
    (
        "youcook2-blank-sentence",
        _yc2,
        {"a.json": YC2_SENTENCE % '"   "'},
        ("a.json: video v annotation 0", "'sentence' is '   '"),
    ),
    (
        "youcook2-missing-sentence",
        _yc2,
        {"a.json": YC2.replace(', "sentence": "a"', "") % "[0, 1]"},
        ("a.json: video v annotation 0", "'sentence' is None"),
    ),
    (
        "activitynet-empty-sentence",
        _anet,
        _anet_stamp("[[0, 1]]", '[""]'),
        ("train.json: video v_a timestamp 0", "'sentences'[0] is ''"),
    ),
    (
        "activitynet-blank-sentence",
        _anet,
        _anet_stamp("[[0, 1]]", '["\\n "]'),
        ("train.json: video v_a timestamp 0", "'sentences'[0] is '\\n '"),
    ),
    (
        "captions-blank-caption",
        lambda d: caption_table.read_csv(d / "c.csv"),
        {"c.csv": "video_id,caption\nv,a cat\nv,   \n"},
        ("c.csv:3", "column 'caption'", "is empty"),
    ),
    (
        "captions-empty-narration",
        lambda d: caption_table.read_csv(d / "c.csv"),
        {"c.csv": 'narration_id,narration\na,""\n'},
        ("c.csv:2", "column 'narration'", "is empty"),
    ),
    # Split labels that contradict the file of the public release holding them.
    (
        "msrvtt-train-label-in-test-file",
        _msr_folder,
        _msr_release(_msr_file("train"), _msr_file("train", "v9")),
        ("test_videodatainfo.json: videos[0] (video v9)", "'split' is 'train'", "test videos"),
    ),
    (
        "msrvtt-validate-label-in-test-file",
        _msr_folder,
        _msr_release(_msr_file("train"), _msr_file("validate", "v9")),
        ("test_videodatainfo.json: videos[0] (video v9)", "'split' is 'validate'"),
    ),
    (
        "msrvtt-test-label-in-train-val-file",
        _msr_folder,
        _msr_release(_msr_file("test"), _msr_file("test", "v9")),
        (
            "train_val_videodatainfo.json: videos[0] (video v0)",
            "'split' is 'test'",
            "train and validate videos",
        ),
    ),
    (
        "msrvtt-empty-test-file",
        _msr_folder,
        _msr_release(_msr_file("train"), '{"videos": [], "sentences": []}'),
        ("test_videodatainfo.json", "'videos' is empty"),
    ),
    # ActivityNet timestamps no loader can mend (ends beyond the duration are clamped and
    # reversed ones swapped: tests/annotations/test_activitynet.py).
    (
        "activitynet-negative-start",
        _anet,
        _anet_stamp("[[-1, 2]]"),
        ("train.json: video v_a timestamp 0", "negative time"),
    ),
    (
        "activitynet-negative-end",
        _anet,
        _anet_stamp("[[2, -0.5]]"),
        ("train.json: video v_a timestamp 0", "negative time"),
    ),
    (
        "activitynet-start-beyond-duration",
        _anet,
        _anet_stamp("[[10.5, 12]]"),
        ("train.json: video v_a timestamp 0", "starts at 10.5 s, after the video's end"),
    ),
    (
        "activitynet-reversed-beyond-duration",
        _anet,
        _anet_stamp("[[12, 10.5]]"),
        ("train.json: video v_a timestamp 0", "starts at 10.5 s, after the video's end"),
    ),
    (
        "word-vectors-beyond-float32",
        lambda d: text.load_word_vectors(d / "v.txt", VOCAB),
        {"v.txt": "plate 1 2\nknife 1e39 0\n"},
        ("v.txt:2", "'knife'", "float32"),
    ),
    (
        "word-vectors-corrupt-gzip",
        lambda d: text.load_word_vectors(d / "v.txt.gz", VOCAB),
        {"v.txt.gz": b"\x1f\x8b\x08\x00garbage"},
        ("v.txt.gz",),
    ),
    (
        "captions-header-only",
        lambda d: caption_table.read_csv(d / "c.csv"),
        {"c.csv": "caption\n"},
        ("c.csv", "no data rows"),
    ),
    (
        "classes-negative-id",
        lambda d: epic100.read_classes(d / "v.csv"),
        {"v.csv": "id,key,instances\n-1,take,['take']\n"},
        ("v.csv:2", "'id'"),
    ),
    (
        "sentences-negative-noun-class",
        lambda d: epic100.read_sentences(d / "s.csv"),
        {"s.csv": 'narration_id,narration,verb_class,noun_classes\na,b,0,"[1, -2]"\n'},
        ("s.csv:2", "'noun_classes'", "-2"),
    ),
    (
        "clips-empty-narration",
        lambda d: epic100.read_clips(d / "c.csv"),
        {"c.csv": CLIP_HEADER + clip(0) + clip(1, narration="")},
        ("c.csv:3", "'narration'", "empty"),
    ),
    (
        "clips-blank-narration",
        lambda d: epic100.read_clips(d / "c.csv"),
        {"c.csv": CLIP_HEADER + clip(0, narration="   ")},
        ("c.csv:2", "'narration'", "empty"),
    ),
    (
        "sentences-empty-narration",
        lambda d: epic100.read_sentences(d / "s.csv"),
        {"s.csv": "narration_id,narration,verb_class,noun_classes\na,,0,[1]\n"},
        ("s.csv:2", "'narration'", "empty"),
    ),
    (
        "sentences-blank-narration",
        lambda d: epic100.read_sentences(d / "s.csv", clips=None),
        {"s.csv": 'narration_id,narration,verb_class,noun_classes\na,"  ",0,[1]\n'},
        ("s.csv:2", "'narration'", "empty"),
    ),
    (
        "sentences-verb-beyond-table",
        lambda d: epic100.read_sentences(d / "s.csv", num_verbs=2, num_nouns=3),
        {"s.csv": "narration_id,narration,verb_class,noun_classes\na,b,2,[1]\n"},
        ("s.csv:2", "'verb_class'", "2 classes"),
    ),
    (
        "relevance-out-of-unit-interval",
        lambda d: relevance_cli._check_relevance(np.array([[1.5, 0.2]], np.float32), "pos proxy"),
        {},
        ("outside [0, 1]", "not written"),
    ),
    (
        "relevance-nan-matrix",
        lambda d: relevance_cli._check_relevance(np.array([[np.nan]], np.float32), "relevance"),
        {},
        ("outside [0, 1]",),
    ),
    (
        "relevance-empty-matrix",
        lambda d: relevance_cli._check_relevance(np.zeros((0, 3), np.float32), "relevance"),
        {},
        ("(0, 3)",),
    ),
]


@pytest.mark.parametrize("cid, call, files, says", READER_CASES, ids=[c[0] for c in READER_CASES])
def test_reader_bad_input(cid, call, files, says, tmp_path):
    materialise(tmp_path, files)
    before = tree(tmp_path)
    with pytest.raises(InputError) as info:
        call(tmp_path)
    message = str(info.value)
    assert message and "\n" not in message, message
    for want in says:
        assert want in message, message
    assert tree(tmp_path) == before
