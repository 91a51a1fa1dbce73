"""Free-form captioned videos (YouCook2, MSR-VTT), and their clips for the trainer.

`CaptionedVideos` holds one row per caption: the clip it describes (a YouCook2 segment, or
a whole MSR-VTT video with its 20 captions), the source video, the split and, for
segments, their times and order in the video. The readers (`jaxsvr.data.youcook2`,
`jaxsvr.data.msrvtt`) return it.

Such datasets have no verb/noun classes. `to_clips` derives them from the captions: spaCy
verbs and nouns (`jaxsvr.relevance.captions`) mapped to classes by a SYN class map
(`jaxsvr.relevance.proxies.ClassMap`: EPIC-style class CSVs, WordNet + Lesk, or the words
themselves), so the trainer's synthetic features (`jaxsvr.data.synthetic`) and class-level
samplers work on them as on EPIC. A caption without a verb gets the verb class "<none>".
Clip rows are numbered `{video}_{k}` by segment order, so `Clips.video_clips()` gives
each video's clips in temporal order (context windows, ConTra).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxsvr.data import tables
from jaxsvr.data.epic100 import Clips
from jaxsvr.relevance import captions as captions_lib
from jaxsvr.relevance.class_sets import ClassSets

NO_VERB = "<none>"
SPLITS = ("train", "val", "test")


@dataclasses.dataclass(frozen=True, eq=False)
class CaptionedVideos:
    """One row per caption, in file order."""

    clip_id: list[str]  # the clip the caption describes (YouCook2 segment, MSR-VTT video)
    video_id: list[str]  # the source video
    caption: list[str]
    split: list[str]  # one of SPLITS
    start_s: np.ndarray  # [n] float64 (0 where the format has no times)
    stop_s: np.ndarray  # [n] float64
    order: np.ndarray  # [n] int64 position of the clip in its video (segment order)

    def __len__(self) -> int:
        return len(self.caption)

    def select(self, split: str) -> CaptionedVideos:
        """The rows of one split."""
        rows = [i for i, s in enumerate(self.split) if s == split]
        return self.take(rows)

    def take(self, rows: Sequence[int]) -> CaptionedVideos:
        rows = list(rows)
        idx = np.asarray(rows, np.int64)
        lists = {
            f: [getattr(self, f)[i] for i in rows]
            for f in ("clip_id", "video_id", "caption", "split")
        }
        return CaptionedVideos(
            **lists, start_s=self.start_s[idx], stop_s=self.stop_s[idx], order=self.order[idx]
        )

    def clip_groups(self) -> tuple[list[str], np.ndarray]:
        """Distinct clip ids (first-occurrence order) and each row's clip index."""
        names, groups = captions_lib.first_occurrence_groups(self.clip_id)
        return names, np.asarray(groups, np.int64)


def to_clips(
    rows: CaptionedVideos,
    class_map,
    parsed: captions_lib.Parsed | None = None,
    pipeline: str = captions_lib.DEFAULT_PIPELINE,
    class_ids: dict[str, dict[object, int]] | None = None,
    rho: float = 0.25,
) -> Clips:
    """One clip per distinct `clip_id`, with verb/noun classes derived from its captions.

    A clip with several captions (MSR-VTT) takes its most frequent verb class (the first
    seen on ties; `verb` is that caption's verb word) and the noun classes present in at
    least `rho` of its captions, the paper's aggregation; its narration is its first
    caption.

    Args:
      rows: captioned rows (one split).
      class_map: a `proxies.ClassMap` (word -> class key).
      parsed: the rows' parse, if already made (else spaCy `pipeline` runs).
      class_ids: class key -> integer id per part of speech ("verb", "noun"), shared
        across splits; new keys are added to it. Default: a fresh table.
      rho: noun aggregation threshold for multi-caption clips.

    Returns:
      `Clips` in first-occurrence order of the clips; narration_id `{video}_{order}`.
    """
    parsed = parsed or captions_lib.parse(rows.caption, pipeline)
    class_ids = class_ids if class_ids is not None else {}
    verbs, nouns = caption_classes(parsed, class_map, class_ids)
    _, groups = rows.clip_groups()
    first = np.unique(groups, return_index=True)[1]  # groups are numbered by first row
    by_group = np.split(np.argsort(groups, kind="stable"), np.cumsum(np.bincount(groups))[:-1])
    clip_verbs, verb_words = [], []
    for members in (m.tolist() for m in by_group):  # one pass, rows in order per clip
        ids = [verbs[i] for i in members]
        chosen = max(ids, key=lambda v: (ids.count(v), -ids.index(v)))
        clip_verbs.append(chosen)
        word = parsed.verbs[members[ids.index(chosen)]]
        verb_words.append(word[0] if word else NO_VERB)
    noun_sets = ClassSets.from_lists(nouns).aggregate(groups, rho)  # 1 caption: all kept
    main = np.asarray([s[0] if s else -1 for s in noun_sets.tolist()], np.int32)
    return Clips(
        narration_id=[f"{rows.video_id[i]}_{rows.order[i]}" for i in first],
        video_id=[rows.video_id[i] for i in first],
        narration=[rows.caption[i] for i in first],
        start_s=rows.start_s[first].copy(),
        stop_s=rows.stop_s[first].copy(),
        verb=verb_words,
        nouns=[tuple(parsed.nouns[i]) for i in first],
        verb_classes=ClassSets.from_labels(clip_verbs),
        noun_classes=noun_sets,
        noun_class=main,
    )


def caption_classes(parsed, class_map, class_ids: dict[str, dict[object, int]]):
    """Per caption, its verb class id (its first verb's; "<none>" without a verb) and noun
    class ids, numbering new class keys in `class_ids` ("verb" / "noun" tables)."""
    verb_ids, noun_ids = class_ids.setdefault("verb", {}), class_ids.setdefault("noun", {})
    verbs = [
        verb_ids.setdefault(k[0] if k else NO_VERB, len(verb_ids))
        for k in class_map.map(parsed, "verbs")
    ]
    nouns = [
        [noun_ids.setdefault(k, len(noun_ids)) for k in keys]
        for keys in class_map.map(parsed, "nouns")
    ]
    return verbs, nouns


def load_json(path: Path):
    """A JSON annotation file; a missing, non-UTF-8 or invalid file is one InputError line
    (`jaxsvr.data.tables.load_json`)."""
    return tables.load_json(path)
