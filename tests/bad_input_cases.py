"""The bad-input cases of the command lines, table-driven (`tests/test_bad_inputs.py` runs
them): each names its command, the files it writes (`bad_input_files`), its arguments and
the text its one error line must contain."""

from __future__ import annotations

import numpy as np
from bad_input_files import (
    ANET,
    CLIP_HEADER,
    CLIPS,
    DIR,
    EPIC,
    FEATS,
    LONG,
    NOUNS,
    NOUNS3,
    SENTS,
    SIM,
    TRAIN_FEATS,
    VERBS,
    Case,
    clip,
    ep,
    epic_folder,
    ev,
    forged,
    mn,
    npy,
    npz,
    px,
)

from jaxsvr.annotations import epic100

# --- cases ---------------------------------------------------------------------------------


CASES = [
    # A. arrays: the evaluation CLI
    ev("eval-empty-file", {"sim.npy": b""}, ("sim.npy", "empty")),
    ev("eval-dev-null", {}, ("/dev/null", "empty or not a regular file"), sim="/dev/null"),
    ev("eval-string-dtype", {"sim.npy": npy(np.array([["a", "b"]]))}, ("sim.npy", "string dtype")),
    ev("eval-bytes-dtype", {"sim.npy": npy(np.array([[b"a"]]))}, ("sim.npy", "bytes dtype")),
    ev(
        "eval-structured-dtype",
        {"sim.npy": npy(np.zeros((2, 2), [("a", "f4"), ("b", "i4")]))},
        ("sim.npy", "structured dtype"),
    ),
    ev(
        "eval-datetime-dtype",
        {"sim.npy": npy(np.zeros((2, 2), "datetime64[D]"))},
        ("sim.npy", "datetime dtype"),
    ),
    ev(
        "eval-timedelta-dtype",
        {"rel.npy": npy(np.zeros((2, 2), "timedelta64[s]"))},
        ("rel.npy", "timedelta dtype"),
    ),
    ev("eval-complex-dtype", {"sim.npy": npy(np.ones((2, 2), complex))}, ("sim.npy", "complex")),
    ev(
        "eval-complex-relevance",
        {"rel.npy": npy(np.eye(2, dtype=np.complex64))},
        ("rel.npy", "complex"),
    ),
    ev(
        "eval-object-dtype",
        {"sim.npy": npy(np.array([[{}, {}], [{}, {}]], object))},
        ("sim.npy", "object"),
    ),
    ev(
        "eval-enormous-header",
        {"rel.npy": forged((10**6, 10**6))},
        ("rel.npy", "(1000000, 1000000)", "truncated or corrupt"),
    ),
    ev(
        "eval-enormous-header-int64",
        {"sim.npy": forged((2**40, 2**20), "<i8")},
        ("sim.npy", "truncated or corrupt"),
    ),
    ev("eval-truncated", {"sim.npy": SIM[:-3]}, ("sim.npy", "truncated")),
    ev("eval-trailing-bytes", {"sim.npy": SIM + b"\0" * 8}, ("sim.npy", "corrupt")),
    ev("eval-npz-as-npy", {"sim.npy": npz(a=np.zeros((2, 2)))}, ("sim.npy", ".npz archive")),
    ev("eval-text-as-npy", {"rel.npy": "1,0\n0,1\n"}, ("rel.npy", "not a .npy file")),
    ev(
        "eval-corrupt-header",
        {"sim.npy": SIM.replace(b"'descr'", b"'dscr' ")},
        ("sim.npy", "corrupt .npy header"),
    ),
    ev(
        "eval-beyond-float32-similarity",
        {"sim.npy": npy(np.array([[1e39, 0.0], [0.0, 1.0]]))},
        ("sim.npy", "row 0", "float32 range"),
    ),
    ev(
        "eval-beyond-float32-relevance",
        {"rel.npy": npy(np.array([[1.0, 0.0], [0.0, -1e300]]))},
        ("rel.npy", "row 1", "float32 range"),
    ),
    ev(
        "eval-nan-relevance",
        {"rel.npy": npy(np.array([[1.0, np.nan], [0.0, 1.0]], np.float32))},
        ("rel.npy", "row 0", "NaN"),
    ),
    ev("eval-folder", {"sim.npy": DIR}, ("sim.npy", "folder")),
    ev("eval-1d-similarity", {"sim.npy": npy(np.zeros(2, np.float32))}, ("sim.npy", "1-D [2]")),
    ev("eval-0-d-array", {"sim.npy": npy(np.float32(1)), "rel.npy": npy(np.float32(1))}, ("2-D",)),
    ev(
        "eval-ensemble-second-bad",
        {"s2.npy": npy(np.ones((2, 2), np.complex128))},
        ("s2.npy", "complex"),
        more=("--similarity", "{d}/s2.npy"),
    ),
    # B. tables: the EPIC relevance CLI
    ep(
        "epic-non-utf8",
        {"clips.csv": (CLIPS + clip(2, narration="caf\xe9")).encode("latin-1")},
        ("clips.csv:4", "0xe9", "not UTF-8"),
    ),
    ep(
        "epic-utf16",
        {"clips.csv": CLIPS.encode("utf-16")},
        ("clips.csv:1", "not UTF-8"),
    ),
    ep(
        "epic-nul-byte",
        {"clips.csv": CLIPS + "P01_11_2,\0\n"},
        ("clips.csv:4", "NUL"),
    ),
    ep(
        "epic-field-over-csv-limit",
        {"clips.csv": CLIPS + clip(2, narration=LONG)},
        ("clips.csv:4", "longer than"),
    ),
    ep(
        "epic-negative-verb-class",
        {"clips.csv": CLIPS + clip(2, verb_class="-3")},
        ("clips.csv:4", "'verb_class'", "-3"),
    ),
    ep(
        "epic-huge-verb-class",
        {"clips.csv": CLIPS + clip(2, verb_class="99999999999")},
        ("clips.csv:4", "'verb_class'", "99999999999"),
    ),
    ep(
        "epic-huge-noun-list",
        {"clips.csv": CLIPS + clip(2, nouns='"[2, 100000000000000000000000000000]"')},
        ("clips.csv:4", "'all_noun_classes'"),
    ),
    ep(
        "epic-negative-noun-list",
        {"clips.csv": CLIPS + clip(2, nouns='"[2, -1]"')},
        ("clips.csv:4", "'all_noun_classes'", "-1"),
    ),
    ep(
        "epic-float-class",
        {"clips.csv": CLIPS + clip(2, noun_class="2.0")},
        ("clips.csv:4", "'noun_class'", "integer"),
    ),
    ep(
        "epic-class-beyond-table",
        {"clips.csv": CLIPS + clip(2, verb_class="5"), "v.csv": VERBS, "n.csv": NOUNS3},
        ("clips.csv:4", "'verb_class'", "2 classes"),
        more=("--verb-classes", "{d}/v.csv", "--noun-classes", "{d}/n.csv"),
    ),
    ep("epic-header-only-clips", {"clips.csv": CLIP_HEADER}, ("clips.csv", "no data rows")),
    ep(
        "epic-header-only-sentences",
        {"clips.csv": CLIPS, "s.csv": "narration_id,narration\n"},
        ("s.csv", "no data rows"),
        sents="s.csv",
    ),
    ep(
        "epic-duplicate-narration-id",
        {"clips.csv": CLIPS + clip(0)},
        ("clips.csv:4", "'narration_id'", "line 2"),
    ),
    ep(
        "epic-duplicate-sentence-id",
        {"clips.csv": CLIPS, "s.csv": SENTS + "P01_11_0,take plate\n"},
        ("s.csv:4", "line 2"),
        sents="s.csv",
    ),
    ep(
        "epic-unclosed-quote-swallows-file",
        {"clips.csv": CLIP_HEADER + clip(0, narration='"take plate') + clip(1) + clip(2)},
        ("clips.csv:2", "never closed"),
    ),
    ep(
        "epic-unclosed-quote-at-end",
        {"clips.csv": CLIPS + clip(2, narration='"take plate')},
        ("clips.csv:4", "never closed"),
    ),
    ep(
        "epic-unclosed-quote-over-limit",
        {"clips.csv": CLIP_HEADER + clip(0, narration='"take') + (clip(1) * 3000)},
        ("clips.csv:2", "unclosed"),
    ),
    ep(
        "epic-nan-timestamp",
        {"clips.csv": CLIPS + clip(2, start="nan")},
        ("clips.csv:4", "'start_timestamp'"),
    ),
    ep(
        "epic-repeated-header-column",
        {"clips.csv": CLIPS.replace("participant_id", "video_id", 1)},
        ("clips.csv:1", "video_id"),
    ),
    ep("epic-empty-file", {"clips.csv": ""}, ("clips.csv", "empty")),
    ep("epic-dev-null", {}, ("/dev/null", "not a regular file"), clips="/dev/null"),
    ep("epic-output-is-folder", {"clips.csv": CLIPS, "out/rel.npy": DIR}, ("is a folder",)),
    ep("epic-clips-is-folder", {"clips.csv": DIR}, ("clips.csv", "folder")),
    ep(
        "epic-missing-output-folder",
        {"clips.csv": CLIPS},
        ("does not exist",),
        out="absent/rel.npy",
    ),
    # B. tables and C. weights: the proxy CLI
    px("proxy-weights-nan", {}, ("--weights", "'nan'"), more=("--weights", "nan", "0.5")),
    px("proxy-weights-negative", {}, ("--weights", "'-0.5'"), more=("--weights", "-0.5", "1")),
    px("proxy-weights-zero", {}, ("--weights 0 0", "positive"), more=("--weights", "0", "0")),
    px("proxy-weights-inf", {}, ("--weights", "'inf'"), more=("--weights", "inf", "0")),
    px("proxy-weights-sum-above-1", {}, ("sum to 1.6",), more=("--weights", "0.8", "0.8")),
    px(
        "proxy-weights-syn-negative",
        {},
        ("--weights",),
        proxy="syn",
        more=("--weights", "1", "-1"),
    ),
    px("proxy-workers-zero", {}, ("--workers", "'0'"), proxy="met", more=("--workers", "0")),
    px("proxy-non-utf8", {"caps.csv": b"video_id,caption\nv0,caf\xe9\n"}, ("caps.csv:2", "UTF-8")),
    px("proxy-header-only", {"caps.csv": "video_id,caption\n"}, ("caps.csv", "no data rows")),
    px(
        "proxy-header-only-columns",
        {"cols.csv": "caption\n"},
        ("cols.csv", "no data rows"),
        more=("--columns", "{d}/cols.csv"),
    ),
    px(
        "proxy-unclosed-quote",
        {"caps.csv": 'video_id,caption\nv0,"stir the soup\nv1,cut the onion\n'},
        ("caps.csv:2", "never closed"),
    ),
    px(
        "proxy-field-over-limit",
        {"caps.csv": f"video_id,caption\nv0,{LONG}\n"},
        ("caps.csv:2", "longer than"),
    ),
    px(
        "proxy-class-table-non-utf8",
        {"v.csv": VERBS.encode() + b"2,s\xffx,\"['s']\",x\n", "n.csv": NOUNS},
        ("v.csv:4", "UTF-8"),
        proxy="syn",
        more=("--verb-classes", "{d}/v.csv", "--noun-classes", "{d}/n.csv"),
    ),
    px(
        "proxy-class-table-huge-id",
        {"v.csv": VERBS + "99999999999999999999,x,\"['x']\",x\n", "n.csv": NOUNS},
        ("v.csv:4", "'id'"),
        proxy="syn",
        more=("--verb-classes", "{d}/v.csv", "--noun-classes", "{d}/n.csv"),
    ),
    # A and B through the trainer: bad data inputs, nothing may appear in the workdir
    mn("main-features-empty", {"feats/train.npy": b""}, ("train.npy", "empty"), FEATS),
    mn(
        "main-features-complex",
        {"feats/train.npy": npy(np.ones((120, 8), np.complex64))},
        ("train.npy", "complex"),
        FEATS,
        workdir_exists=True,
    ),
    mn(
        "main-features-npz-as-npy",
        {"feats/train.npy": npz(features=np.zeros((120, 8), np.float32))},
        ("train.npy", ".npz archive"),
        FEATS,
    ),
    mn(
        "main-features-enormous-header",
        {"feats/train.npy": forged((10**7, 10**6))},
        ("train.npy", "truncated or corrupt"),
        FEATS,
        workdir_exists=True,
    ),
    mn(
        "main-features-beyond-float32",
        {"feats/train.npy": npy(np.full((120, 8), 1e39))},
        ("train.npy", "row 0", "float32 range"),
        FEATS,
    ),
    mn(
        "main-features-npz-member-forged",
        {"feats/train.npy": TRAIN_FEATS, "feats/test.npz": npz(features=forged((10**9, 64)))},
        ("test.npz", "'features'", "truncated or corrupt"),
        FEATS,
    ),
    mn(
        "main-annotations-non-utf8",
        epic_folder(train=(CLIPS + clip(2, narration="caf\xe9")).encode("latin-1")),
        (epic100.TRAIN_CLIPS + ":4", "UTF-8"),
        EPIC,
    ),
    mn(
        "main-annotations-duplicate-id",
        epic_folder(test=CLIPS + clip(1)),
        (epic100.TEST_CLIPS + ":4", "narration_id"),
        EPIC,
        workdir_exists=True,
    ),
    mn(
        "main-annotations-class-beyond-table",
        epic_folder(train=CLIPS + clip(2, nouns='"[2, 7]"'), verbs=VERBS, nouns=NOUNS3),
        (epic100.TRAIN_CLIPS + ":4", "'all_noun_classes'", "3 classes"),
        EPIC,
    ),
    mn(
        "main-annotations-header-only-sentences",
        epic_folder(sents="narration_id,narration\n"),
        (epic100.TEST_SENTENCES, "no data rows"),
        EPIC,
    ),
    mn(
        "main-activitynet-start-beyond-duration",
        {
            "anet/train.json": ANET % ("a", "[[10, 12]]"),
            "anet/val_1.json": ANET % ("b", "[[1, 2]]"),
        },
        ("train.json", "video v_a timestamp 0", "after the video's end"),
        "--config.data.format=activitynet",
        "--config.data.annotations={d}/anet",
    ),
    mn(
        "main-youcook2-nan",
        {
            "yc2.json": '{"database": {"v": {"subset": "training", "annotations": '
            '[{"id": 0, "segment": [NaN, 1], "sentence": "a"}]}}}'
        },
        ("yc2.json", "NaN"),
        "--config.data.format=youcook2",
        "--config.data.annotations={d}/yc2.json",
    ),
    # usage errors: one line, not argparse's usage block
    ev("eval-threshold-not-a-number", {}, ("--threshold", "'abc'"), more=("--threshold", "abc")),
    px("proxy-weights-one-value", {}, ("--weights", "expected 2"), more=("--weights", "0.5")),
    Case("epic100-no-clips", "epic100", ("--out", "{d}/out/rel.npy"), {"out": DIR}, ("--clips",)),
    mn("main-extra-argument", {}, ("unexpected arguments", "'extra'"), "extra"),
    # config files that fail when loaded
    Case(
        "main-config-syntax-error",
        "main_bare",
        ("--config={d}/c.py", "--workdir={d}/work"),
        {"c.py": "this is not python(\n"},
        ("c.py", "SyntaxError"),
    ),
    Case(
        "main-config-raises-on-import",
        "main_bare",
        ("--config={d}/c.py", "--workdir={d}/work"),
        {"c.py": "raise RuntimeError('boom')\n"},
        ("c.py", "RuntimeError: boom"),
    ),
    Case(
        "main-config-get-config-raises",
        "main_bare",
        ("--config={d}/c.py:x", "--workdir={d}/work"),
        {"c.py": "def get_config(arg=None):\n    return 1 / 0\n"},
        ("c.py", "ZeroDivisionError"),
    ),
    # a run's own workdir entries of the wrong kind (found before anything is written)
    mn("main-workdir-checkpoints-file", {"work/checkpoints": "x"}, ("checkpoints is a file",)),
    mn("main-workdir-best-file", {"work/best": "x"}, ("best is a file",)),
    mn(  # the similarity's shape is logged: a 1-D one used to crash that line
        "main-eval-job-1d-similarity",
        {"s.npy": npy(np.zeros(3, np.float32))},
        ("config.eval.rescore.similarity", "s.npy is 1-D [3]", "expected a 2-D array"),
        "--config.job=rescore",
        "--config.eval.rescore.similarity={d}/s.npy",
    ),
    mn("main-workdir-unusable-file", {"work/unusable": "x"}, ("unusable is a file",)),
    mn("main-workdir-metrics-folder", {"work/metrics.jsonl": DIR}, ("metrics.jsonl is a folder",)),
]


COMMANDS = {
    "evaluate": ["-m", "jaxsvr.evaluate"],
    "epic100": ["-m", "jaxsvr.relevance", "epic100"],
    "proxy": ["-m", "jaxsvr.relevance", "proxy"],
    "main": ["-m", "jaxsvr.main", "--config=configs/epic_jpose.py:runlocal"],
    "main_bare": ["-m", "jaxsvr.main"],
}
