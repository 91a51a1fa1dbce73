"""Reader for MSR-VTT annotations (`train_val_videodatainfo.json`, `test_videodatainfo.json`:
one of them, or a folder holding both).

Format (Xu et al., CVPR 2016; the public release):
  {"videos": [{"video_id": "video0", "split": "train" | "validate" | "test",
               "start time": s, "end time": s, "category": 9, ...}, ...],
   "sentences": [{"video_id": "video0", "caption": "...", "sen_id": 0}, ...]}
One row per sentence (20 per video); the clip is the video itself (`clip_id` =
`video_id`, order 0). Splits map to `train` / `val` / `test`. Sentences keep file order;
a sentence of an unknown video, a repeated `sen_id`, or a video without sentences raises
`InputError`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from jaxsvr.annotations.captioned import CaptionedVideos, load_json
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate

SPLITS = {"train": "train", "validate": "val", "val": "val", "test": "test"}


FILES = ("train_val_videodatainfo.json", "test_videodatainfo.json")  # the public release


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
    parts = [parse(load_json(path / name), path / name) for name in FILES]
    both = set(parts[0].video_id) & set(parts[1].video_id)
    if both:
        raise InputError(
            f"{path}: video {sorted(both)[0]} is in both {FILES[0]} and {FILES[1]} "
            f"({len(both)} such videos): a video belongs to one split"
        )
    return CaptionedVideos.concat(parts)


def parse(data, path: str | Path) -> CaptionedVideos:
    """`read` on one already loaded videodatainfo JSON object (`path` names it in errors)."""
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
        split, start, stop = videos[vid]
        captioned.add(vid)
        for key, value in zip(rows, (vid, s["caption"].strip(), split, start, stop)):
            rows[key].append(value)
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
