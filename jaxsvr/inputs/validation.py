"""A validation split carved from the training videos, for model selection without the test.

`carve(splits, videos=, fraction=, seed=, spec=)` moves whole training videos (every clip,
or every caption row, of a `video_id`) out of the train split into `Splits.val`, a
`TestSplit` scored like the test split:

- which videos: `videos` of them, or `fraction` of the distinct training videos (rounded,
  at least 1), drawn with NumPy's generator seeded by `seed`; at least one video stays in
  training. The same settings give the same videos on every machine.
- the val clips keep their rows' inputs as they were built for training (features,
  token ids, role graphs, caption features): carving happens after the inputs stage, so
  the vocabulary is still the one of all training captions (no labels leak: the words of
  a caption, not its classes; it keeps the model's shapes those of a run without a
  validation split).
- sentences: EPIC (`spec.own_is_relevant`): each distinct narration of the val clips once,
  as EK-100's test sentence file; other datasets: each val row's caption (a multi-caption
  video's captions each, with their own classes).
- relevance: `split_relevance.test_relevance` under the run's `spec` (class relevance or
  a proxy with S = 1 on own captions), as the test split's.

The train split keeps the other rows in their order; a multi-caption video's feature rows
are re-indexed (`TrainSplit.video_rows`).
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from jaxsvr.annotations.epic100 import Clips, Sentences
from jaxsvr.errors import InputError
from jaxsvr.inputs.splits import Splits, TestSplit, TrainSplit
from jaxsvr.relevance import split_relevance
from jaxsvr.relevance.split_relevance import RelevanceSpec


def carve(
    splits: Splits, *, videos: int = 0, fraction: float = 0.0, seed: int = 0, spec: RelevanceSpec
) -> Splits:
    """`splits` with `Splits.val` carved from its training videos (module docstring);
    unchanged when `videos` and `fraction` are both 0."""
    if not videos and not fraction:
        return splits
    train = splits.train
    chosen = choose_videos(train.clips.video_id, videos=videos, fraction=fraction, seed=seed)
    held = np.isin(np.asarray(train.clips.video_id, dtype=object), list(chosen))
    val_rows, keep_rows = np.flatnonzero(held), np.flatnonzero(~held)
    val = _val_split(train, val_rows, spec)
    kept = _take_train(train, keep_rows)
    logging.info(
        "data: validation %d of %d training videos (seed %d): %d clips x %d sentences "
        "(relevance mean %.4f); training keeps %d rows",
        len(chosen),
        len(set(train.clips.video_id)),
        seed,
        val.relevance.shape[0],
        val.relevance.shape[1],
        val.relevance.mean(dtype=np.float64),
        len(keep_rows),
    )
    return dataclasses.replace(splits, train=kept, val=val)


def choose_videos(video_ids, *, videos: int = 0, fraction: float = 0.0, seed: int = 0) -> set:
    """The held-out video ids: `videos` of them, or (`videos` = 0) `fraction` of the
    distinct ones (`jaxsvr.train.checks` refuses a config giving both)."""
    distinct = list(dict.fromkeys(video_ids))  # first-occurrence order: the file's
    n = videos if videos else max(1, round(fraction * len(distinct)))
    if not 0 < n < len(distinct):
        raise InputError(
            f"a validation split of {n} videos leaves no training video of {len(distinct)}: "
            "lower config.data.val_videos or config.data.val_fraction"
        )
    picks = np.random.default_rng(seed).choice(len(distinct), n, replace=False)
    return {distinct[i] for i in picks}


def _val_split(train: TrainSplit, rows: np.ndarray, spec: RelevanceSpec) -> TestSplit:
    """The held-out `rows` of `train` as a test-like split."""
    clips_by_row = train.clips.take(rows)
    if train.video_rows is None:  # one row per clip
        clip_of_row = np.arange(rows.size)
        clip_rows = rows
        video = np.asarray(train.video[rows])
        clip_texts = None
    else:  # rows are captions of multi-caption videos: one clip per video
        videos, first, clip_of_row = np.unique(
            train.video_rows[rows], return_index=True, return_inverse=True
        )
        clip_rows = rows[first]
        video = np.asarray(train.video[videos])
        clip_texts = (list(clips_by_row.narration), clip_of_row)
    clips = train.clips.take(clip_rows)
    if spec.own_is_relevant:  # EPIC: each distinct narration once, from its first clip
        _, first_of_text = np.unique(np.asarray(clips.narration, dtype=object), return_index=True)
        sent_clips = np.sort(first_of_text)
        sent_rows_global = clip_rows[sent_clips]
        sentence_rows = sent_clips
        sents = _sentences(clips.take(sent_clips), None)
    else:  # every row's caption, with its own classes where rows are captions
        sent_rows_global = rows
        sentence_rows = clip_of_row
        sents = _sentences(clips_by_row, _take_classes(train.caption_classes, rows))
    relevance = split_relevance.test_relevance(spec, clips, sents, sentence_rows, clip_texts)
    text = {f: np.asarray(v[sent_rows_global]) for f, v in train.text.items()}
    clip_captions = np.asarray(train.text["caption"][clip_rows])
    return TestSplit(video, text, relevance, clips, sentence_rows, clip_captions)


def _sentences(clips: Clips, classes: tuple | None) -> Sentences:
    verbs, nouns = classes if classes is not None else (clips.verb_classes, clips.noun_classes)
    return Sentences(list(clips.narration_id), list(clips.narration), verbs, nouns)


def _take_classes(classes: tuple | None, rows: np.ndarray) -> tuple | None:
    return None if classes is None else tuple(c.take(rows) for c in classes)


def _take_train(train: TrainSplit, rows: np.ndarray) -> TrainSplit:
    """The train split's `rows`, in order; shared video rows re-indexed."""
    text = {f: np.asarray(v[rows]) for f, v in train.text.items()}
    if train.video_rows is None:
        video, video_rows = np.asarray(train.video[rows]), None
    else:
        videos, video_rows = np.unique(train.video_rows[rows], return_inverse=True)
        video, video_rows = np.asarray(train.video[videos]), video_rows.astype(np.int32)
    return TrainSplit(
        train.clips.take(rows),
        video,
        text,
        video_rows,
        _take_classes(train.caption_classes, rows),
    )
