"""Files for the bad-input tests: .npy/.npz builders (well-formed, forged, corrupt), small
EPIC-100 annotation tables, a tmp folder's materialisation and snapshot (so a test can
check that a failing command left nothing behind), and the command-line cases' builders
(`Case`; `ev`, `ep`, `px`, `mn` for the evaluate, epic100, proxy and main commands)."""

from __future__ import annotations

import dataclasses
import io
import zipfile
from pathlib import Path

import numpy as np

from jaxsvr.annotations import epic100

DIR = object()  # a `files` value: make a folder there


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


def materialise(root: Path, files: dict) -> None:
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


def tree(root: Path) -> dict[str, tuple]:
    """Every path under root with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.is_dir(), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    }


# --- command-line cases ----------------------------------------------------------------


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
ANET = '{"v_%s": {"duration": 9, "timestamps": %s, "sentences": ["a"]}}'  # ActivityNet
