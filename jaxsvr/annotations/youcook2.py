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
Any malformed entry raises `InputError` naming the file, video and annotation: an empty
or whitespace-only sentence too, and a video id or annotation key written twice in one
object (`captioned.load_json`; `json` would keep the last and one video would vanish).
The split is each video's "subset", in the one file: no file can contradict it.

`from_clips` writes EPIC-style clip tables in this format ("YouCook2-style" data with
real captions: the EPIC annotations, or the built-in kitchen data the trainer uses when
`config.data.annotations` is empty):
  python -m jaxsvr.annotations.youcook2 --epic ../shared/data/epic100 --out /tmp/epic_yc2.json
"""

from __future__ import annotations

import json
from pathlib import Path

from jaxsvr.annotations.captioned import CaptionedVideos, finite_number, load_json, rows_of
from jaxsvr.annotations.epic100 import Clips
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate
from jaxsvr.runtime.workdir import write_text

SUBSETS = {"training": "train", "validation": "val", "testing": "test"}


def read(path: str | Path, val_as_test: bool = True) -> CaptionedVideos:
    """All annotated segments of the file, videos in file order, segments by start time."""
    path = locate(path)
    return parse(load_json(path), path, val_as_test)


def parse(data, path: str | Path = "<annotations>", val_as_test: bool = True) -> CaptionedVideos:
    """`read` on an already loaded JSON object (`path` names it in errors)."""
    database = data.get("database") if isinstance(data, dict) else None
    if not isinstance(database, dict):
        raise InputError(f"{path}: no 'database' object: expected YouCook2's annotation JSON")
    videos = []
    for vid, entry in database.items():
        where = f"{path}: video {vid}"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected an object")
        subset = entry.get("subset")
        if not isinstance(subset, str) or subset not in SUBSETS:
            raise InputError(f"{where}: 'subset' is {subset!r}, expected one of {sorted(SUBSETS)}")
        split = SUBSETS[subset]
        if split == "val" and val_as_test:
            split = "test"
        anns = entry.get("annotations", [])
        if not isinstance(anns, list):
            raise InputError(f"{where}: 'annotations' must be a list")
        segments = [_segment(a, f"{where} annotation {k}") for k, a in enumerate(anns)]
        ids = [seg[2] for seg in segments]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None:
            raise InputError(f"{where}: two annotations have id {dup}: ids must be unique")
        videos.append((vid, split, segments))
    if not any(segments for _, _, segments in videos):
        raise InputError(f"{path}: no annotated segments")
    return rows_of(videos)


def rows_from_clips(train: Clips, test: Clips) -> CaptionedVideos:
    """The rows `parse(from_clips(train, test))` gives, built directly: the built-in
    kitchen data in YouCook2 form (test videos are "validation", read as the test split)."""
    videos = []
    for split, subset, clips in (("train", "training", train), ("test", "validation", test)):
        for vid, rows in clips.video_clips().items():
            segments = []
            for k, r in enumerate(rows.tolist()):
                start = float(clips.start_s[r])
                sentence = clips.narration[r].strip()
                if not sentence:
                    raise InputError(f"clip {clips.narration_id[r]}: empty narration")
                segments.append((start, float(max(clips.stop_s[r], start)), k, sentence))
            videos.append((f"{subset}-{vid}", split, segments))
    return rows_of(videos)


def _segment(ann, where: str) -> tuple[float, float, int, str]:
    if not isinstance(ann, dict):
        raise InputError(f"{where}: expected an object")
    seg, sentence = ann.get("segment"), ann.get("sentence")
    if not (
        isinstance(seg, list) and len(seg) == 2 and all(finite_number(x) and x >= 0 for x in seg)
    ):
        raise InputError(
            f"{where}: 'segment' is {seg!r}, expected [start, end] in seconds (finite, >= 0)"
        )
    if seg[1] < seg[0]:
        raise InputError(f"{where}: segment {seg} ends before it starts")
    if not isinstance(sentence, str) or not sentence.strip():
        raise InputError(
            f"{where}: 'sentence' is {sentence!r}: expected non-empty text; write the sentence "
            "or remove the annotation"
        )
    ann_id = ann.get("id", None)
    if not isinstance(ann_id, int) or isinstance(ann_id, bool):
        raise InputError(f"{where}: 'id' is {ann_id!r}, expected an integer")
    return float(seg[0]), float(seg[1]), ann_id, sentence.strip()


def from_clips(train: Clips, test: Clips) -> dict:
    """YouCook2-format annotations from EPIC-style clip tables (e.g. the EPIC CSVs or the
    built-in kitchen data): each video's clips in narration order become its segments,
    the narrations its sentences; `train` videos are "training", `test` ones
    "validation" (YouCook2's usual test set). Video ids are prefixed by the split."""
    database = {}
    for subset, clips in (("training", train), ("validation", test)):
        for vid, rows in clips.video_clips().items():
            anns = [
                {
                    "id": k,
                    "segment": [
                        float(clips.start_s[r]),
                        float(max(clips.stop_s[r], clips.start_s[r])),
                    ],
                    "sentence": clips.narration[r],
                }
                for k, r in enumerate(rows.tolist())
            ]
            database[f"{subset}-{vid}"] = {"subset": subset, "annotations": anns}
    return {"database": database}


def write(obj: dict, path: str | Path) -> None:
    """Writes annotations as JSON whole (`jaxsvr.runtime.workdir.write_text`)."""
    write_text(path, json.dumps(obj))


def main(argv: list[str] | None = None) -> int:
    from jaxsvr.annotations import epic100
    from jaxsvr.runtime import cli

    p = cli.ArgumentParser(
        prog="python -m jaxsvr.annotations.youcook2", description=from_clips.__doc__.splitlines()[0]
    )
    p.add_argument("--epic", required=True, help="EPIC-KITCHENS-100 annotation folder")
    p.add_argument("--train-clips", default=epic100.TRAIN_CLIPS)
    p.add_argument("--out", required=True, help="output JSON")
    args = p.parse_args(argv)
    root = Path(args.epic)
    obj = from_clips(
        epic100.read_clips(root / args.train_clips), epic100.read_clips(root / epic100.TEST_CLIPS)
    )
    write(obj, args.out)
    n = sum(len(v["annotations"]) for v in obj["database"].values())
    print(f"wrote {args.out}: {len(obj['database'])} videos, {n} segments")
    return 0


if __name__ == "__main__":
    from jaxsvr.runtime import cli

    raise SystemExit(cli.run(main))
