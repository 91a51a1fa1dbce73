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
    forged,
    materialise,
    npy,
    npz,
    tree,
)

from jaxsvr import cli
from jaxsvr.annotations import caption_table, epic100, msrvtt, youcook2
from jaxsvr.errors import InputError
from jaxsvr.inputs import features, text
from jaxsvr.relevance import __main__ as relevance_cli

# --- reader cases (in-process): each call must raise a one-line InputError ---------------


def _load_feats(name, rows=2, **kw):
    return lambda d: features.load_features(d / name, rows=rows, **kw)


def _yc2(d):
    return youcook2.read(d / "a.json")


def _msr(d):
    return msrvtt.read(d / "a.json")


VOCAB = text.Vocabulary.build([["knife", "plate"]])
MSR_OK = '{"videos": [{"video_id": "v0", "split": "train"}], "sentences": [%s]}'
YC2 = '{"database": {"v": {"subset": "training", "annotations": [{"id": 0, "segment": %s, "sentence": "a"}]}}}'  # noqa: E501

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
