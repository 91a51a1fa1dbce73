"""Reader for YouCook2 annotations (`youcookii_annotations_trainval.json`).

Format (Zhou et al., AAAI 2018; the public release):
  {"database": {VIDEO_ID: {"subset": "training" | "validation" | "testing",
                           "duration": seconds, "recipe_type": "113",
                           "annotations": [{"id": 0, "segment": [start, end],
                                            "sentence": "..."}, ...]}, ...}}
Each annotation is one clip (a recipe step) with one caption; clips keep their order in
the video (`order` = annotation position after sorting by segment start), so context
models see neighbouring steps. Splits map to `train` / `val` / `test` (YouCook2's
validation set is the usual test set: `read(..., val_as_test=True)`, the default).
Any malformed entry raises `InputError` naming the file, video and annotation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxsvr.data.captioned import CaptionedVideos, load_json
from jaxsvr.errors import InputError

SUBSETS = {"training": "train", "validation": "val", "testing": "test"}


def read(path: str | Path, val_as_test: bool = True) -> CaptionedVideos:
    """All annotated segments of the file, videos in file order, segments by start time."""
    path = Path(path)
    data = load_json(path)
    database = data.get("database") if isinstance(data, dict) else None
    if not isinstance(database, dict):
        raise InputError(f"{path}: no 'database' object: expected YouCook2's annotation JSON")
    cols: dict[str, list] = {
        k: [] for k in ("clip", "video", "caption", "split", "start", "stop", "order")
    }
    for vid, entry in database.items():
        where = f"{path}: video {vid}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        subset = entry.get("subset")
        if subset not in SUBSETS:
            raise InputError(f"{where}: 'subset' is {subset!r}, expected one of {sorted(SUBSETS)}")
        split = SUBSETS[subset]
        if split == "val" and val_as_test:
            split = "test"
        anns = entry.get("annotations", [])
        if not isinstance(anns, list):
            raise InputError(f"{where}: 'annotations' must be a list")
        segments = [_segment(a, f"{where} annotation {k}") for k, a in enumerate(anns)]
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
    if not cols["caption"]:
        raise InputError(f"{path}: no annotated segments")
    return CaptionedVideos(
        clip_id=cols["clip"],
        video_id=cols["video"],
        caption=cols["caption"],
        split=cols["split"],
        start_s=np.asarray(cols["start"], np.float64),
        stop_s=np.asarray(cols["stop"], np.float64),
        order=np.asarray(cols["order"], np.int64),
    )


def _segment(ann, where: str) -> tuple[float, float, int, str]:
    if not isinstance(ann, dict):
        raise InputError(f"{where}: expected an object")
    seg, sentence = ann.get("segment"), ann.get("sentence")
    if not (
        isinstance(seg, list) and len(seg) == 2 and all(isinstance(x, (int, float)) for x in seg)
    ):
        raise InputError(f"{where}: 'segment' is {seg!r}, expected [start, end] in seconds")
    if seg[1] < seg[0]:
        raise InputError(f"{where}: segment {seg} ends before it starts")
    if not isinstance(sentence, str) or not sentence.strip():
        raise InputError(f"{where}: 'sentence' is missing or empty")
    ann_id = ann.get("id", None)
    if not isinstance(ann_id, int):
        raise InputError(f"{where}: 'id' is {ann_id!r}, expected an integer")
    return float(seg[0]), float(seg[1]), ann_id, sentence.strip()
