"""The built-in kitchen annotations written as EPIC-KITCHENS-100 CSV files, for tests that
read them back through the readers and the command lines."""

from __future__ import annotations

from pathlib import Path

from jaxsvr.annotations import epic100, kitchen


def write_epic_folder(folder: Path, *, train_videos=6, test_videos=3, clips=20, seed=0):
    """`folder`/{train clips, test clips, test sentences} CSVs of the built-in data the
    runlocal configs generate (6 train videos, 3 test videos, 20 clips each, seed 0)."""
    folder.mkdir(parents=True, exist_ok=True)
    train, _ = kitchen.generate(train_videos, clips, seed, split="train")
    test, sents = kitchen.generate(test_videos, clips, seed, split="test")
    (folder / epic100.TRAIN_CLIPS).write_text(clips_csv(train))
    (folder / epic100.TEST_CLIPS).write_text(clips_csv(test))
    rows = zip(sents.narration_id, sents.narration, strict=True)
    text = "narration_id,narration\n" + "".join(f"{n},{s}\n" for n, s in rows)
    (folder / epic100.TEST_SENTENCES).write_text(text)
    return train, test, sents


def clips_csv(clips) -> str:
    """An EPIC clip CSV of `clips` (the columns the reader needs, with timestamps)."""
    lines = [",".join((*epic100.CLIP_COLUMNS, "start_timestamp", "stop_timestamp"))]
    for i in range(len(clips)):
        nouns = clips.noun_classes[i]
        lines.append(
            ",".join(
                (
                    clips.narration_id[i],
                    clips.video_id[i],
                    clips.narration[i],
                    clips.verb[i],
                    str(clips.verb_classes[i][0]),
                    clips.nouns[i][0],
                    str(nouns[0]),
                    '"' + str(list(clips.nouns[i])) + '"',
                    '"' + str(list(nouns)) + '"',
                    _timestamp(clips.start_s[i]),
                    _timestamp(clips.stop_s[i]),
                )
            )
        )
    return "\n".join(lines) + "\n"


def _timestamp(seconds: float) -> str:
    return f"{int(seconds // 3600):02d}:{int(seconds % 3600 // 60):02d}:{seconds % 60:05.2f}"
