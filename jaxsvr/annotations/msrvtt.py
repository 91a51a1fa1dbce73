"""Reader for MSR-VTT annotations (`train_val_videodatainfo.json`, `test_videodatainfo.json`:
one of them, or a folder holding both).

Format (Xu et al., CVPR 2016; the public release):
  {"videos": [{"video_id": "video0", "split": "train" | "validate" | "test",
               "start time": s, "end time": s, "category": 9, ...}, ...],
   "sentences": [{"video_id": "video0", "caption": "...", "sen_id": 0}, ...]}
One row per sentence (20 per video); the clip is the video itself (`clip_id` =
`video_id`, order 0). Splits map to `train` / `val` / `test`. Sentences keep file order;
a sentence of an unknown video, a repeated `sen_id`, an empty or whitespace-only
caption, a video without sentences, a file without videos, or a key written twice in
one object (`captioned.load_json`) raises `InputError` naming the file, the entry and
the field.

Splits come from the videos' "split" labels. In a folder of the public release the file
is the split too: `train_val_videodatainfo.json` holds the train and validate videos,
`test_videodatainfo.json` the test videos, so a label that contradicts its file (a
"train" video in the test file would be trained on and left out of the test) raises
`InputError` naming the file, the video and 'split'. A single file given alone has only
its labels, which are used as they are. Which split a run evaluates is decided by the
pipeline (`jaxsvr.train.pipeline`): the test videos, or the validate videos where the
annotations hold no test videos, said in the log.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxsvr.annotations.captioned import CaptionedVideos, load_json
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate

SPLITS = {"train": "train", "validate": "val", "val": "val", "test": "test"}
LABELS = {"train": "train", "val": "validate", "test": "test"}  # the release's label of each


FILES = ("train_val_videodatainfo.json", "test_videodatainfo.json")  # the public release
FILE_SPLITS = (("train", "val"), ("test",))  # the splits each file of FILES holds


def read(path: str | Path) -> CaptionedVideos:
    """Every sentence of the file with its video's split and times; for a folder, of its
    two files of the public release (`FILES`: train/validate videos, then test videos)."""
    path = locate(path)
    if not path.is_dir():
        return parse(load_json(path), path)
    missing = [name for name in FILES if not (path / name).is_file()]
    if missing:
        raise InputError(
            f"MSR-VTT folder {path} has no {missing[0]}: it must hold {' and '.join(FILES)} "
            "(or point config.data.annotations at one videodatainfo JSON file)"
        )
    parts = [
        parse(load_json(path / name), path / name, splits)
        for name, splits in zip(FILES, FILE_SPLITS)
    ]
    both = set(parts[0].video_id) & set(parts[1].video_id)
    if both:
        raise InputError(
            f"{path}: video {sorted(both)[0]} is in both {FILES[0]} and {FILES[1]} "
            f"({len(both)} such videos): a video belongs to one split"
        )
    return CaptionedVideos.concat(parts)


def parse(
    data, path: str | Path, splits: tuple[str, ...] = ("train", "val", "test")
) -> CaptionedVideos:
    """`read` on one already loaded videodatainfo JSON object (`path` names it in errors);
    a video whose split is not in `splits` raises (the file is that split)."""
    if not isinstance(data, dict) or not isinstance(data.get("videos"), list):
        raise InputError(f"{path}: no 'videos' list: expected MSR-VTT's videodatainfo JSON")
    if not isinstance(data.get("sentences"), list):
        raise InputError(f"{path}: no 'sentences' list: expected MSR-VTT's videodatainfo JSON")
    videos = {}
    for k, v in enumerate(data["videos"]):
        where = f"{path}: videos[{k}]"
        if not isinstance(v, dict) or not isinstance(v.get("video_id"), str):
            raise InputError(f"{where}: expected an object with a string 'video_id'")
        split = SPLITS.get(v["split"]) if isinstance(v.get("split"), str) else None
        if split is None:
            raise InputError(
                f"{where}: 'split' is {v.get('split')!r}, expected one of {sorted(SPLITS)}"
            )
        if split not in splits:
            raise InputError(
                f"{where} (video {v['video_id']}): 'split' is {v['split']!r} but "
                f"{Path(str(path)).name} holds the {' and '.join(LABELS[s] for s in splits)} "
                "videos of the public release: fix the label, or move the video and its "
                "sentences to the file of its split"
            )
        times = [v.get(k, 0.0) for k in ("start time", "end time")]
        if not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in times
        ):
            raise InputError(f"{where}: 'start time' / 'end time' must be numbers, got {times}")
        if v["video_id"] in videos:
            raise InputError(f"{where}: video_id {v['video_id']!r} appears twice")
        videos[v["video_id"]] = (split, float(times[0]), float(times[1]))
    rows = {k: [] for k in ("video", "caption", "split", "start", "stop")}
    captioned = set()
    sen_ids: dict[object, int] = {}
    for k, s in enumerate(data["sentences"]):
        where = f"{path}: sentences[{k}]"
        if not isinstance(s, dict) or not isinstance(s.get("caption"), str):
            raise InputError(f"{where}: expected an object with a string 'caption'")
        if isinstance(s.get("sen_id"), (int, str)):
            first = sen_ids.setdefault(s["sen_id"], k)
            if first != k:
                raise InputError(
                    f"{where}: sen_id {s['sen_id']!r} repeats sentences[{first}]: "
                    "sentence ids must be unique"
                )
        vid = s.get("video_id")
        if not isinstance(vid, str) or vid not in videos:
            raise InputError(f"{where}: video_id {vid!r} is not in 'videos'")
        if not s["caption"].strip():
            raise InputError(
                f"{where} (video {vid}): 'caption' is {s['caption']!r}: expected non-empty "
                "text; write the caption or remove the sentence"
            )
        split, start, stop = videos[vid]
        captioned.add(vid)
        for key, value in zip(rows, (vid, s["caption"].strip(), split, start, stop)):
            rows[key].append(value)
    if not videos:
        raise InputError(
            f"{path}: 'videos' is empty: the file holds no videos; give MSR-VTT's "
            "videodatainfo JSON with its videos and sentences"
        )
    missing = [v for v in videos if v not in captioned]
    if missing:
        raise InputError(
            f"{path}: video {missing[0]} has no sentences ({len(missing)} such videos)"
        )
    return CaptionedVideos(
        clip_id=list(rows["video"]),
        video_id=list(rows["video"]),
        caption=rows["caption"],
        split=rows["split"],
        start_s=np.asarray(rows["start"], np.float64),
        stop_s=np.asarray(rows["stop"], np.float64),
        order=np.zeros(len(rows["video"]), np.int64),
    )
