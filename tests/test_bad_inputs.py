"""Bad input, table-driven: every case must end in one `error: ...` line and exit code 2,
with no traceback, no output file, no temporary file and no workdir change left behind.

Cases cover the three classes of issue 14 across the command lines (run as subprocesses,
as a user runs them) and the readers (in-process, `InputError` with a one-line message):

- arrays (`jaxsvr.files.arrays`): empty files, /dev/null, non-real dtypes, forged headers,
  .npz under a .npy name, values beyond the float32 range, truncated or corrupt files;
- tables (`jaxsvr.files.tables`): non-UTF-8 bytes, oversized fields, unclosed quotes,
  class ids out of range, header-only files, repeated ids, bad JSON;
- the proxy CLI: `--weights` that are NaN, negative, all zero or sum above 1;
- usage errors (argparse's, extra arguments), config files that fail to load, and a
  workdir whose own entries (`checkpoints`, `metrics.jsonl`, ...) are of the wrong kind.

Each case names the text its error line must contain (file, row, column where there is
one), so a case cannot pass by failing for another reason.
"""

from __future__ import annotations

import dataclasses
import io
import pickle
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from train_runs import ROOT, cpu_env

from jaxsvr import cli
from jaxsvr.annotations import caption_table, epic100, msrvtt, youcook2
from jaxsvr.errors import InputError
from jaxsvr.inputs import features, text
from jaxsvr.relevance import __main__ as relevance_cli

DIR = object()  # a `files` value: make a folder there

# --- file builders -------------------------------------------------------------------------


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=True)
    return buf.getvalue()


def forged(shape, descr="<f4", data=b"\0" * 16) -> bytes:
    """A .npy header claiming `shape` followed by `data`."""
    buf = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(buf, header)
    return buf.getvalue() + data


def npz(**members: bytes | np.ndarray) -> bytes:
    """An .npz archive; a bytes member is stored as is (forged or corrupt members)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, value in members.items():
            z.writestr(f"{name}.npy", value if isinstance(value, bytes) else npy(value))
    return buf.getvalue()


REL = npy(np.array([[1.0, 0.0], [0.5, 1.0]], np.float32))
SIM = npy(np.array([[0.9, 0.1], [0.2, 0.8]], np.float32))
CLIP_HEADER = (
    "narration_id,participant_id,video_id,narration_timestamp,start_timestamp,stop_timestamp,"
    "start_frame,stop_frame,narration,verb,verb_class,noun,noun_class,all_nouns,all_noun_classes\n"
)


def clip(i, verb_class="0", noun_class="2", nouns="[2]", narration="take plate", start="00.00"):
    return (
        f"P01_11_{i},P01,P01_11,00:00:00.560,00:00:{start},00:00:09.89,1,113,{narration},"
        f"take,{verb_class},plate,{noun_class},['plate'],{nouns}\n"
    )


CLIPS = CLIP_HEADER + clip(0) + clip(1, verb_class="1", narration="put down plate")
SENTS = "narration_id,narration\nP01_11_0,take plate\nP01_11_1,put down plate\n"
CAPS = "video_id,caption\nv0,stir the soup\nv1,cut the onion\n"
LONG = "x" * 200_000  # beyond the csv module's 131072-character field limit
VERBS = "id,key,instances,category\n0,take,\"['take']\",retrieve\n1,put,\"['put']\",leave\n"
NOUNS = "id,key,instances,category\n0,tap,\"['tap']\",appliances\n"
NOUNS3 = NOUNS + "1,spoon,\"['spoon']\",cutlery\n2,plate,\"['plate']\",crockery\n"


def epic_folder(train=CLIPS, test=CLIPS, sents=SENTS, verbs=None, nouns=None) -> dict:
    """An EPIC-100 annotation folder `epic/` (only the files the trainer reads)."""
    files = {
        f"epic/{epic100.TRAIN_CLIPS}": train,
        f"epic/{epic100.TEST_CLIPS}": test,
        f"epic/{epic100.TEST_SENTENCES}": sents,
    }
    if verbs is not None:
        files[f"epic/{epic100.VERB_CLASSES}"] = verbs
    if nouns is not None:
        files[f"epic/{epic100.NOUN_CLASSES}"] = nouns
    return files


# Built-in runlocal data (annotations ""): 120 train clips, 60 test clips.
TRAIN_FEATS = npy(np.zeros((120, 8), np.float32))


# --- cases ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    command: str  # evaluate | epic100 | proxy | main
    args: tuple[str, ...]  # "{d}" is the case's folder
    files: dict  # path under {d} -> str | bytes | DIR
    says: tuple[str, ...]  # substrings of the error line ("{d}" allowed)


def ev(cid, files, says, sim="sim.npy", rel="rel.npy", more=()):
    sim = sim if sim.startswith("/") else f"{{d}}/{sim}"
    args = ("--similarity", sim, *more, "--relevance", f"{{d}}/{rel}")
    return Case(cid, "evaluate", args, {"sim.npy": SIM, "rel.npy": REL, **files}, says)


def ep(cid, files, says, clips="clips.csv", sents=None, more=(), out="out/rel.npy"):
    clips = clips if clips.startswith("/") else f"{{d}}/{clips}"
    args = ["--clips", clips] + (["--sentences", f"{{d}}/{sents}"] if sents else [])
    args += [*more, "--out", f"{{d}}/{out}"]
    return Case(cid, "epic100", tuple(args), {"out": DIR, **files}, says)


def px(cid, files, says, more=(), proxy="pos", caps="caps.csv"):
    args = ("--proxy", proxy, "--captions", f"{{d}}/{caps}", *more, "--out", "{d}/out/rel.npy")
    return Case(cid, "proxy", args, {"out": DIR, "caps.csv": CAPS, **files}, says)


def mn(cid, files, says, *flags, workdir_exists=False):
    files = {**files, **({"work/keep.txt": "keep"} if workdir_exists else {})}
    return Case(cid, "main", ("--workdir={d}/work", *flags), files, says)


FEATS = "--config.data.features={d}/feats"
EPIC = "--config.data.annotations={d}/epic"

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
    px("proxy-weights-nan", {}, ("--weights nan",), more=("--weights", "nan", "0.5")),
    px("proxy-weights-negative", {}, ("--weights -0.5",), more=("--weights", "-0.5", "1")),
    px("proxy-weights-zero", {}, ("--weights 0 0", "positive"), more=("--weights", "0", "0")),
    px("proxy-weights-inf", {}, ("--weights inf",), more=("--weights", "inf", "0")),
    px("proxy-weights-sum-above-1", {}, ("sum to 1.6",), more=("--weights", "0.8", "0.8")),
    px(
        "proxy-weights-syn-negative",
        {},
        ("--weights",),
        proxy="syn",
        more=("--weights", "1", "-1"),
    ),
    px("proxy-workers-zero", {}, ("--workers 0",), proxy="met", more=("--workers", "0")),
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
    mn("main-workdir-unusable-file", {"work/unusable": "x"}, ("unusable is a file",)),
    mn("main-workdir-metrics-folder", {"work/metrics.jsonl": DIR}, ("metrics.jsonl is a folder",)),
]


def _materialise(root: Path, files: dict) -> None:
    for rel, content in files.items():
        path = root / rel
        if content is DIR:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)


def _tree(root: Path) -> dict[str, tuple]:
    """Every path under root with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    }


COMMANDS = {
    "evaluate": ["-m", "jaxsvr.evaluate"],
    "epic100": ["-m", "jaxsvr.relevance", "epic100"],
    "proxy": ["-m", "jaxsvr.relevance", "proxy"],
    "main": ["-m", "jaxsvr.main", "--config=configs/epic_jpose.py:runlocal"],
    "main_bare": ["-m", "jaxsvr.main"],
}


def test_enough_cases():
    assert len(CASES) + len(READER_CASES) >= 45
    assert len({c.id for c in CASES} | {c[0] for c in READER_CASES}) == len(CASES) + len(
        READER_CASES
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_bad_input(case: Case, tmp_path):
    _materialise(tmp_path, case.files)
    before = _tree(tmp_path)
    args = [a.replace("{d}", str(tmp_path)) for a in case.args]
    r = subprocess.run(
        [sys.executable, *COMMANDS[case.command], *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=cpu_env(),
    )
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(errors) == 1, r.stderr[-3000:]
    for want in case.says:
        assert want.replace("{d}", str(tmp_path)) in errors[0], errors[0]
    if not case.command.startswith("main"):  # absl logs to stderr; the CLIs print nothing else
        assert r.stderr.strip() == errors[0], r.stderr
        assert r.stdout == ""
    assert _tree(tmp_path) == before  # no output, no temporary file, no workdir change


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
    _materialise(tmp_path, files)
    before = _tree(tmp_path)
    with pytest.raises(InputError) as info:
        call(tmp_path)
    message = str(info.value)
    assert message and "\n" not in message, message
    for want in says:
        assert want in message, message
    assert _tree(tmp_path) == before
