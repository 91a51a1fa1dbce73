"""Free-form captioned videos (YouCook2, MSR-VTT, ActivityNet Captions), and their clips for
the trainer.

`CaptionedVideos` holds one row per caption: the clip it describes (a YouCook2 segment, an
ActivityNet Captions timestamp, or a whole MSR-VTT video with its 20 captions), the source
video, the split and, for segments, their times and order in the video. The readers
(`jaxsvr.annotations.youcook2`, `.msrvtt`, `.activitynet`) return it; `rows_of` builds it
from segment lists for the segment datasets. `load_json` opens their JSON files: invalid JSON,
and an object that repeats a key (json would keep the last and a video would vanish), is
one `InputError` line.

Such datasets have no verb/noun classes. `to_clips` derives them from the captions: spaCy
verbs and nouns (`jaxsvr.nlp.captions`) mapped to classes by a SYN class map
(`jaxsvr.relevance.proxies.ClassMap`: EPIC-style class CSVs, WordNet + Lesk, or the words
themselves), so the trainer's synthetic features (`jaxsvr.inputs.synthetic`) and class-level
samplers work on them as on EPIC. A caption without a verb gets the verb class "<none>".
Clip rows are numbered `{video}_{k}` by segment order, so `Clips.video_clips()` gives
each video's clips in temporal order (context windows, ConTra).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxsvr.annotations.caption_table import first_occurrence_groups
from jaxsvr.files import tables

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

    @classmethod
    def concat(cls, parts: Sequence[CaptionedVideos]) -> CaptionedVideos:
        """The rows of `parts`, one after the other."""
        lists = {
            f: [x for part in parts for x in getattr(part, f)]
            for f in ("clip_id", "video_id", "caption", "split")
        }
        arrays = {
            f: np.concatenate([getattr(part, f) for part in parts])
            for f in ("start_s", "stop_s", "order")
        }
        return cls(**lists, **arrays)

    def clip_groups(self) -> tuple[list[str], np.ndarray]:
        """Distinct clip ids (first-occurrence order) and each row's clip index."""
        names, groups = first_occurrence_groups(self.clip_id)
        return names, np.asarray(groups, np.int64)


def finite_number(x) -> bool:
    """A JSON number that is finite (not a bool, NaN or infinity): times in seconds."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def load_json(path: str | Path):
    """A JSON annotation file; a missing, non-UTF-8 or invalid file, or an object that
    repeats a key, is one InputError line (`jaxsvr.files.tables.load_json`)."""
    return tables.load_json(path)


def rows_of(videos) -> CaptionedVideos:
    """Rows of (video id, split, [(start, stop, id, sentence)]) videos, each video's
    segments by start time, equal starts in the given order (`order` = position after that
    sort; `clip_id` = "{video}_{id}"). The readers of segment datasets share it."""
    cols: dict[str, list] = {
        k: [] for k in ("clip", "video", "caption", "split", "start", "stop", "order")
    }
    for vid, split, segments in videos:
        for order, (start, stop, ann_id, sentence) in enumerate(
            sorted(segments, key=lambda s: s[0])
        ):
            cols["clip"].append(f"{vid}_{ann_id}")
            cols["video"].append(vid)
            cols["caption"].append(sentence)
            cols["split"].append(split)
            cols["start"].append(start)
            cols["stop"].append(stop)
            cols["order"].append(order)
    return CaptionedVideos(
        clip_id=cols["clip"],
        video_id=cols["video"],
        caption=cols["caption"],
        split=cols["split"],
        start_s=np.asarray(cols["start"], np.float64),
        stop_s=np.asarray(cols["stop"], np.float64),
        order=np.asarray(cols["order"], np.int64),
    )
