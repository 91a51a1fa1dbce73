"""Reader for the EPIC-KITCHENS-100 multi-instance retrieval annotations.

Files (official, see ../shared/data/epic100/README.md for the copy used by the tests):
- clips: `EPIC_100_retrieval_test.csv`, `EPIC_100_uda_source_train.csv`, ... with
  narration_id, video_id, timestamps, frames, narration, verb, verb_class, noun,
  noun_class, all_nouns, all_noun_classes;
- sentences: `EPIC_100_retrieval_{train,test}_sentence.csv` with narration_id, narration,
  and (train) verb_class, noun_classes; a sentence without class columns takes the classes
  of the clip with the same narration_id;
- vocabularies: `EPIC_100_{verb,noun}_classes.csv` with id, key, instances (synonyms).

Rows keep CSV order (relevance rows/columns follow the files). The files are sorted by
narration_id as text (P01_11_109 before P01_11_11), so `Clips.video_clips()` gives each
video's clips in narration order (the numeric suffix), the temporal order that context
models need. List columns are parsed strictly (`jaxsvr.files.literals`), files are opened by
`jaxsvr.files.tables` (UTF-8, strict quoting, at least one row), and any bad row raises
`InputError` naming file, line and column: class ids must be integers in the range of
the class table when one is given (else 0..`tables.MAX_CLASS_ID`), narration_ids unique,
narrations not empty.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.files.literals import parse_int_list, parse_str_list
from jaxsvr.files.tables import Row, csv_rows

TEST_CLIPS = "EPIC_100_retrieval_test.csv"
TEST_SENTENCES = "EPIC_100_retrieval_test_sentence.csv"
TRAIN_CLIPS = "EPIC_100_uda_source_train.csv"  # in ../shared/data/epic100: the default
# The train split the published EK-100 retrieval results (and the public features' rows)
# use; not in ../shared/data/epic100 (config.data.train_clips names it where it is).
RETRIEVAL_TRAIN_CLIPS = "EPIC_100_retrieval_train.csv"
RETRIEVAL_TRAIN_SIZE = 67217
TRAIN_SENTENCES = "EPIC_100_retrieval_train_sentence.csv"
VERB_CLASSES = "EPIC_100_verb_classes.csv"
NOUN_CLASSES = "EPIC_100_noun_classes.csv"

CLIP_COLUMNS = (
    "narration_id",
    "video_id",
    "narration",
    "verb",
    "verb_class",
    "noun",
    "noun_class",
    "all_nouns",
    "all_noun_classes",
)


@dataclasses.dataclass(frozen=True, eq=False)
class Clips:
    """Annotated clips, one entry per CSV row, in CSV order."""

    narration_id: list[str]
    video_id: list[str]
    narration: list[str]
    start_s: np.ndarray  # [n] float64 seconds (0 where the CSV has no timestamps)
    stop_s: np.ndarray  # [n] float64 seconds
    verb: list[str]
    nouns: list[tuple[str, ...]]  # all_nouns
    verb_classes: ClassSets  # singleton verb_class (captioned clips: their verb set)
    noun_classes: ClassSets  # all_noun_classes
    noun_class: np.ndarray | None = None  # [n] int32 main noun (noun_class), for actions
    # [n] int32 main verb where a clip has several verb classes (a multi-caption clip's most
    # frequent); None: each clip's single verb class
    verb_class: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.narration_id)

    def take(self, rows) -> Clips:
        """The clips at `rows` (indices), in that order."""
        rows = np.asarray(rows, np.int64)
        pick = rows.tolist()
        optional = {
            f: None if getattr(self, f) is None else getattr(self, f)[rows]
            for f in ("noun_class", "verb_class")
        }
        return Clips(
            narration_id=[self.narration_id[i] for i in pick],
            video_id=[self.video_id[i] for i in pick],
            narration=[self.narration[i] for i in pick],
            start_s=self.start_s[rows],
            stop_s=self.stop_s[rows],
            verb=[self.verb[i] for i in pick],
            nouns=[self.nouns[i] for i in pick],
            verb_classes=self.verb_classes.take(rows),
            noun_classes=self.noun_classes.take(rows),
            **optional,
        )

    def video_clips(self) -> dict[str, np.ndarray]:
        """Row indices of each video's clips in narration order, videos in CSV order."""
        order: dict[str, list[int]] = {}
        for row, vid in enumerate(self.video_id):
            order.setdefault(vid, []).append(row)
        return {
            vid: np.array(sorted(rows, key=lambda r: _narration_index(self.narration_id[r])))
            for vid, rows in order.items()
        }


@dataclasses.dataclass(frozen=True, eq=False)
class Sentences:
    """Captions with their classes, in CSV order."""

    narration_id: list[str]
    narration: list[str]
    verb_classes: ClassSets
    noun_classes: ClassSets

    def __len__(self) -> int:
        return len(self.narration_id)


@dataclasses.dataclass(frozen=True, eq=False)
class ClassVocab:
    """A class vocabulary: id -> key, and the synonyms (`instances`) that map to it."""

    key: list[str]
    instances: list[tuple[str, ...]]
    category: list[str]

    def __len__(self) -> int:
        return len(self.key)

    def synonyms(self) -> dict[str, int]:
        """Every instance (and key) -> class id."""
        out = {}
        for cid, (key, inst) in enumerate(zip(self.key, self.instances)):
            for word in (key, *inst):
                out.setdefault(word, cid)
        return out


def read_clips(
    path: str | Path, *, num_verbs: int | None = None, num_nouns: int | None = None
) -> Clips:
    """Reads a clip CSV (test or train split format).

    Args:
      path: the CSV.
      num_verbs, num_nouns: sizes of the class tables (`read_classes`) the ids must index;
        None: ids only need to lie in 0..`tables.MAX_CLASS_ID`.
    """
    cols: dict[str, list] = {c: [] for c in (*CLIP_COLUMNS, "start", "stop")}
    seen: dict[str, int] = {}
    for row in csv_rows(path, CLIP_COLUMNS):
        _check_unique(row, seen)
        for c in ("narration_id", "video_id", "verb"):
            cols[c].append(row[c])
        cols["narration"].append(_narration(row))
        cols["verb_class"].append(row.class_id("verb_class", num_verbs))
        cols["noun_class"].append(row.class_id("noun_class", num_nouns))
        cols["all_nouns"].append(tuple(row.parse("all_nouns", parse_str_list)))
        cols["all_noun_classes"].append(
            row.class_ids("all_noun_classes", parse_int_list, num_nouns)
        )
        cols["start"].append(row.seconds("start_timestamp"))
        cols["stop"].append(row.seconds("stop_timestamp"))
    return Clips(
        narration_id=cols["narration_id"],
        video_id=cols["video_id"],
        narration=cols["narration"],
        start_s=np.array(cols["start"], np.float64),
        stop_s=np.array(cols["stop"], np.float64),
        verb=cols["verb"],
        nouns=cols["all_nouns"],
        verb_classes=ClassSets.from_labels(cols["verb_class"]),
        noun_classes=ClassSets.from_lists(cols["all_noun_classes"]),
        noun_class=np.array(cols["noun_class"], np.int32),
    )


def read_sentences(
    path: str | Path,
    clips: Clips | None = None,
    *,
    num_verbs: int | None = None,
    num_nouns: int | None = None,
) -> Sentences:
    """Reads a sentence CSV; classes from its own columns or from the matching clips.

    Args:
      path: CSV with narration_id, narration and optionally verb_class, noun_classes.
      clips: used when the CSV has no class columns (the official test sentences): each
        sentence takes the classes of the clip with the same narration_id.
      num_verbs, num_nouns: class table sizes the ids of the class columns must index.
    """
    ids, text, verbs, nouns = [], [], [], []
    lookup = None
    seen: dict[str, int] = {}
    for row in csv_rows(path, ("narration_id", "narration")):
        _check_unique(row, seen)
        if lookup is None:
            has_classes = {"verb_class", "noun_classes"} <= row.columns
            if not has_classes and clips is None:
                raise InputError(
                    f"{path}: no verb_class/noun_classes columns; pass the clip "
                    "CSV (--clips) so sentences take the classes of their clips"
                )
            lookup = None if has_classes else {n: i for i, n in enumerate(clips.narration_id)}
        ids.append(row["narration_id"])
        text.append(_narration(row))
        if lookup is None:
            verbs.append([row.class_id("verb_class", num_verbs)])
            nouns.append(row.class_ids("noun_classes", parse_int_list, num_nouns))
        else:
            clip = lookup.get(row["narration_id"])
            if clip is None:
                raise row.error(
                    "narration_id", "has no clip with this narration_id in the clip CSV"
                )
            verbs.append(clips.verb_classes[clip])
            nouns.append(clips.noun_classes[clip])
    return Sentences(ids, text, ClassSets.from_lists(verbs), ClassSets.from_lists(nouns))


def read_classes(path: str | Path) -> ClassVocab:
    """Reads EPIC_100_{verb,noun}_classes.csv; ids must be 0..n-1 in order."""
    key, inst, cat = [], [], []
    for row in csv_rows(path, ("id", "key", "instances")):
        if row.int("id") != len(key):
            raise row.error("id", f"expected id {len(key)} (ids must be 0..n-1 in order)")
        key.append(row["key"])
        inst.append(tuple(row.parse("instances", parse_str_list)))
        cat.append(row.get("category", ""))
    return ClassVocab(key, inst, cat)


def _narration(row) -> str:
    """The row's narration; an empty one is an InputError (it would train and score as a
    caption without words)."""
    if not row["narration"].strip():
        raise row.error(
            "narration", "is empty: every row needs its narration; write it or remove the row"
        )
    return row["narration"]


def _check_unique(row: Row, seen: dict[str, int]) -> None:
    """Raises on a narration_id already seen (naming both lines); records it otherwise."""
    nid = row["narration_id"]
    first = seen.setdefault(nid, row.line)
    if first != row.line:
        raise row.error(
            "narration_id", f"repeats {nid!r} of line {first}: narration_ids must be unique"
        )


def _narration_index(narration_id: str) -> tuple[int, str]:
    head, _, tail = narration_id.rpartition("_")
    return (int(tail), head) if tail.isdigit() else (-1, narration_id)


def text_ids(narrations: list[str]) -> np.ndarray:
    """[N] int64: equal ids for equal narration strings."""
    _, ids = np.unique(np.asarray(narrations, dtype=object).astype(str), return_inverse=True)
    return ids.astype(np.int64)
