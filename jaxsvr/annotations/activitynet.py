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
`config.data.format = "activitynet"`); `read_split(path, split)` one file. A malformed
entry — timestamps and sentences of different lengths, a start after its end, times
outside [0, duration], an empty sentence, a video in both files — raises `InputError`
naming the file, the video and the index.
"""

from __future__ import annotations

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
    """Videos of an already loaded file as (video id, split, [(start, end, k, sentence)])."""
    if not isinstance(data, dict) or not data:
        raise InputError(
            f"{path}: expected ActivityNet Captions' JSON object of videos "
            '({"v_...": {"duration", "timestamps", "sentences"}}) with at least one video'
        )
    return [_video(vid, entry, f"{path}: video {vid}", split) for vid, entry in data.items()]


def _video(vid: str, entry, where: str, split: str) -> tuple[str, str, list]:
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
        if start > end:
            raise InputError(f"{at}: starts at {start} s after its end {end} s")
        if start < 0 or end > duration:
            raise InputError(f"{at}: [{start}, {end}] lies outside the video's [0, {duration}] s")
        if not isinstance(sentence, str) or not sentence.strip():
            raise InputError(f"{at}: its sentence is {sentence!r}: expected non-empty text")
        segments.append((start, end, k, sentence.strip()))
    return vid, split, segments
