"""`Annotations`: what every dataset reader hands on, and the EPIC-style sources.

A run's annotations are one `Annotations`: the train clips, the test clips and the test
sentences (EPIC-KITCHENS-100 tables: `jaxsvr.annotations.epic100`), the sizes of the verb
and noun class sets, and for multi-caption test clips (MSR-VTT) their captions. Sources:
- `epic100_folder`: the EPIC-KITCHENS-100 retrieval CSVs (train: `train_clips`, default
  `EPIC_100_uda_source_train.csv`; test: `EPIC_100_retrieval_test.csv` clips x
  `EPIC_100_retrieval_test_sentence.csv` sentences);
- `builtin`: the built-in synthetic kitchen annotations (`jaxsvr.annotations.kitchen`,
  nothing downloaded);
- captioned datasets (YouCook2, MSR-VTT) are read here as rows
  (`jaxsvr.annotations.captioned`) and get their classes from their captions in the
  relevance stage (`jaxsvr.relevance.caption_classes.annotations`).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from jaxsvr.annotations import epic100, kitchen
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import Clips, Sentences
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate


@dataclasses.dataclass(frozen=True, eq=False)
class Annotations:
    """Train clips, test clips x test sentences, and the class-set sizes.

    clip_texts: (captions, [captions] clip index of each) when test clips have several
      captions (MSR-VTT; relevance then aggregates them), else None (each clip's narration).
    train_video_rows: [train rows] the video (row of the train video features) of each
      train row when several rows share a video (MSR-VTT trained on each of a video's
      captions), else None (one row per video clip).
    """

    train: Clips
    test: Clips
    sentences: Sentences
    num_verbs: int
    num_nouns: int
    clip_texts: tuple[list[str], np.ndarray] | None = None
    train_video_rows: np.ndarray | None = None
    # (verbs, nouns) of each train row's own caption where rows are captions of
    # multi-caption videos (their clips' classes are the videos'), else None
    train_caption_classes: tuple[ClassSets, ClassSets] | None = None

    def sentence_rows(self) -> np.ndarray:
        """[sentences] int64: the test clip each sentence narrates (same narration_id)."""
        row = {nid: i for i, nid in enumerate(self.test.narration_id)}
        missing = [nid for nid in self.sentences.narration_id if nid not in row]
        if missing:
            raise InputError(
                f"test sentence {missing[0]} has no clip with that narration_id "
                f"({len(missing)} such sentences): the sentence and clip files must match"
            )
        return np.asarray([row[nid] for nid in self.sentences.narration_id])


def epic100_folder(root: str | Path, train_clips: str = epic100.TRAIN_CLIPS) -> Annotations:
    """The EPIC-KITCHENS-100 retrieval annotations in folder `root`."""
    root = locate(root)
    if not root.is_dir():
        raise InputError(
            f"annotation folder {root} {'is a file' if root.exists() else 'not found'} "
            "(config.data.annotations): point it at "
            "the EPIC-KITCHENS-100 CSVs, or set it to '' for the built-in synthetic data"
        )
    logging.info("data: EPIC-KITCHENS-100 annotations from %s", root)
    # Class tables first (when present): the clips' class ids must index them.
    sizes = {
        "num_verbs": _table_size(root / epic100.VERB_CLASSES),
        "num_nouns": _table_size(root / epic100.NOUN_CLASSES),
    }
    train = epic100.read_clips(root / train_clips, **sizes)
    test = epic100.read_clips(root / epic100.TEST_CLIPS, **sizes)
    sents = epic100.read_sentences(root / epic100.TEST_SENTENCES, test)
    # Which train table: the published numbers train on the retrieval split, which the
    # shared folder lacks (config.data.train_clips picks it where a folder has it).
    published = ""
    if train_clips != epic100.RETRIEVAL_TRAIN_CLIPS:
        have = (root / epic100.RETRIEVAL_TRAIN_CLIPS).is_file()
        published = (
            f"; the published EK-100 retrieval results train on "
            f"{epic100.RETRIEVAL_TRAIN_CLIPS} ({epic100.RETRIEVAL_TRAIN_SIZE} clips), which "
            + (
                "this folder holds: config.data.train_clips to use it"
                if have
                else "this folder lacks"
            )
        )
    logging.info(
        "data: train clips %s (%d), test %s (%d clips x %d sentences)%s",
        train_clips,
        len(train),
        epic100.TEST_CLIPS,
        len(test),
        len(sents),
        published,
    )
    num_verbs = _num_classes(sizes["num_verbs"], train.verb_classes, test.verb_classes)
    num_nouns = _num_classes(sizes["num_nouns"], train.noun_classes, test.noun_classes)
    return Annotations(train, test, sents, num_verbs, num_nouns)


def builtin(num_videos: int, test_videos: int, clips_per_video: int, seed: int) -> Annotations:
    """The built-in synthetic kitchen annotations (`jaxsvr.annotations.kitchen`)."""
    logging.info(
        "data: built-in synthetic kitchen annotations (train %d videos, test %d videos, "
        "%d clips each; seed %d); nothing is downloaded",
        num_videos,
        test_videos,
        clips_per_video,
        seed,
    )
    train, _ = kitchen.generate(num_videos, clips_per_video, seed, split="train")
    test, sents = kitchen.generate(test_videos, clips_per_video, seed, split="test")
    return Annotations(train, test, sents, len(kitchen.VERBS), len(kitchen.NOUNS))


def _table_size(path: Path) -> int | None:
    """Number of classes in an EPIC class CSV, or None when the folder has none."""
    return len(epic100.read_classes(path)) if path.is_file() else None


def _num_classes(table_size: int | None, *sets: ClassSets) -> int:
    seen = max(int(s.indices.max(initial=-1)) for s in sets) + 1
    return seen if table_size is None else max(table_size, seen)
