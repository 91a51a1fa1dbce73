"""Reader for ActivityNet Captions as clip–sentence pairs (`train.json`, `val_1.json`).

Format (Krishna et al., ICCV 2017; the public release, one file per split):
  {VIDEO_ID: {"duration": seconds,
              "timestamps": [[start, end], ...],
              "sentences": ["...", ...]}, ...}
ActivityNet Clip-Sentence (CS), as ConTra (Fragomeni et al., ACCV 2022) uses it: every
(timestamp, sentence) pair is one clip with its caption. `train.json` is the train split
and `val_1.json` the test split (37,421 and 17,505 clips in the paper's Table 1). Clips are
put in time order within their video (by start; equal starts keep file order), the
sequence the context windows run over; a clip's id is "{video}_{k}", k the pair's index in
the file, so ids trace back to the file whatever the order.

`read(folder)` reads both files of a folder (`config.data.annotations` with
`config.data.format = "activitynet"`); `read_split(path, split)` one file.

The public release holds timestamps no reader should refuse, so none is dropped: an end
beyond the duration is clamped to it (as 2D-TAN's loader does), a start after its end is
swapped with it (as COOT does), and a zero-length timestamp is a clip like any other; each
file that needed a clamp or a swap says so in one log line (counts and the first case;
what the release holds and why: docs/data.md). What no loader can mend is refused with
`InputError` naming the file, the video and the index: timestamps and sentences of
different lengths, a negative time, a start beyond the duration, a time that is not a
number, an empty or whitespace-only sentence, a video in both files, and
(`captioned.load_json`) a video id or entry key written twice.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from jaxsvr.annotations.captioned import CaptionedVideos, finite_number, load_json, rows_of
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate

FILES = {"train": "train.json", "test": "val_1.json"}


def read(folder: str | Path) -> CaptionedVideos:
    """Train and test clips of the ActivityNet Captions files in `folder`, videos in file
    order (train first), each video's clips in time order."""
    folder = locate(folder)
    if not folder.is_dir():
        raise InputError(
            f"ActivityNet Captions folder {folder} "
            f"{'is a file' if folder.exists() else 'not found'}: point "
            f"config.data.annotations at the folder holding {' and '.join(FILES.values())}"
        )
    videos, seen = [], {}
    for split, name in FILES.items():
        path = folder / name
        if not path.is_file():
            raise InputError(
                f"{path} not found: the folder must hold {' and '.join(FILES.values())}"
            )
        for video in parse(load_json(path), path, split):
            if video[0] in seen:
                raise InputError(
                    f"{path}: video {video[0]} is also in {seen[video[0]]}: a video belongs "
                    "to one split"
                )
            seen[video[0]] = path
            videos.append(video)
    return rows_of(videos)


def read_split(path: str | Path, split: str) -> CaptionedVideos:
    """The clips of one file, all given `split` ("train" or "test")."""
    path = locate(path)
    return rows_of(parse(load_json(path), path, split))


def parse(data, path: str | Path, split: str) -> list[tuple[str, str, list]]:
    """Videos of an already loaded file as (video id, split, [(start, end, k, sentence)]),
    ends beyond the duration clamped and reversed timestamps swapped (said in the log)."""
    if not isinstance(data, dict) or not data:
        raise InputError(
            f"{path}: expected ActivityNet Captions' JSON object of videos "
            '({"v_...": {"duration", "timestamps", "sentences"}}) with at least one video'
        )
    mended = _Mended()
    videos = [
        _video(vid, entry, f"{path}: video {vid}", split, mended) for vid, entry in data.items()
    ]
    mended.log(path)
    return videos


@dataclasses.dataclass
class _Mended:
    """The timestamps of one file the reader changed: "video V timestamp k [start, end]"
    of each end clamped to its duration and of each start swapped with its end."""

    clamped: list[str] = dataclasses.field(default_factory=list)
    beyond_s: float = 0.0  # the largest amount an end lay beyond its duration
    swapped: list[str] = dataclasses.field(default_factory=list)

    def log(self, path: str | Path) -> None:
        """One line when anything changed: counts and the first case of each kind."""
        parts = []
        if self.clamped:
            parts.append(
                f"clamped {len(self.clamped)} ends beyond their video's duration to it (by at "
                f"most {self.beyond_s:.3g} s; first: {self.clamped[0]})"
            )
        if self.swapped:
            parts.append(
                f"swapped start and end of {len(self.swapped)} timestamps that started after "
                f"their end (first: {self.swapped[0]})"
            )
        if parts:
            logging.warning("data: %s: %s; every clip is kept", path, "; ".join(parts))


def _video(vid: str, entry, where: str, split: str, mended: _Mended) -> tuple[str, str, list]:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected an object with duration, timestamps, sentences")
    duration, stamps, sentences = (entry.get(k) for k in ("duration", "timestamps", "sentences"))
    if not (finite_number(duration) and duration > 0):
        raise InputError(f"{where}: 'duration' is {duration!r}, expected seconds > 0")
    if not isinstance(stamps, list) or not isinstance(sentences, list):
        raise InputError(f"{where}: 'timestamps' and 'sentences' must be lists")
    if len(stamps) != len(sentences):
        raise InputError(
            f"{where}: {len(stamps)} timestamps but {len(sentences)} sentences: each "
            "timestamp needs its sentence"
        )
    if not stamps:
        raise InputError(f"{where}: no timestamps")
    segments = []
    for k, (stamp, sentence) in enumerate(zip(stamps, sentences)):
        at = f"{where} timestamp {k}"
        if not (
            isinstance(stamp, list) and len(stamp) == 2 and all(finite_number(t) for t in stamp)
        ):
            raise InputError(f"{at}: {stamp!r} is not [start, end] in seconds")
        start, end = float(stamp[0]), float(stamp[1])
        if start < 0 or end < 0:
            raise InputError(f"{at}: [{start}, {end}] has a negative time: times are >= 0 s")
        case = f"video {vid} timestamp {k} {[start, end]}"
        if start > end:  # an annotator's slip: COOT swaps them
            mended.swapped.append(case)
            start, end = end, start
        if start > duration:
            raise InputError(
                f"{at}: starts at {start} s, after the video's end ({duration} s): fix the "
                "timestamp or the duration"
            )
        if end > duration:  # rounding: clamped as 2D-TAN does
            mended.clamped.append(f"{case} > {duration}")
            mended.beyond_s = max(mended.beyond_s, end - duration)
            end = float(duration)
        if not isinstance(sentence, str) or not sentence.strip():
            raise InputError(
                f"{at}: 'sentences'[{k}] is {sentence!r}: expected non-empty text; write the "
                "sentence or remove the timestamp and its sentence"
            )
        segments.append((start, end, k, sentence.strip()))
    return vid, split, segments
