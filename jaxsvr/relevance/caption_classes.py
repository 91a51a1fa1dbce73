"""Verb and noun classes of captioned datasets (YouCook2, MSR-VTT), from their captions.

Those datasets ship captions only; a clip's classes are the SYN classes (a
`proxies.ClassMap`) of its captions' spaCy verbs and nouns, so EPIC-style class relevance,
samplers and synthetic features work on them unchanged. `to_clips` turns captioned rows
(`jaxsvr.annotations.captioned`) into a `Clips` table; `caption_classes` gives the classes
of parsed captions (the test sentences).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from jaxsvr.annotations.captioned import NO_VERB, CaptionedVideos
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import Clips, Sentences
from jaxsvr.annotations.load import Annotations
from jaxsvr.nlp import captions as captions_lib


def to_clips(
    rows: CaptionedVideos,
    class_map,
    parsed: captions_lib.Parsed | None = None,
    pipeline: str = captions_lib.DEFAULT_PIPELINE,
    class_ids: dict[str, dict[object, int]] | None = None,
    rho: float = 0.25,
) -> Clips:
    """One clip per distinct `clip_id`, with verb/noun classes derived from its captions.

    A clip with several captions (MSR-VTT) takes its most frequent verb class (captions'
    first verbs; the first seen on ties; `verb` is that caption's verb word), then the other
    verb classes named in at least `rho` of its captions, and the noun classes present in
    at least `rho` of its captions, the paper's aggregation; its narration is its first
    caption. A clip with one caption keeps its first verb and all its nouns.

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
    # multi-caption clips also keep the other verbs at least rho of their captions name
    # (ids for all verbs are only made then: one-caption datasets keep their numbering)
    popular = None
    if len(by_group) < len(groups):
        popular = ClassSets.from_lists(all_verb_classes(parsed, class_map, class_ids))
        popular = popular.aggregate(groups, rho).tolist()
    clip_verbs, verb_words = [], []
    for g, members in enumerate(m.tolist() for m in by_group):  # rows in order per clip
        ids = [verbs[i] for i in members]
        chosen = max(ids, key=lambda v: (ids.count(v), -ids.index(v)))
        others = [v for v in popular[g] if v != chosen] if len(members) > 1 else []
        clip_verbs.append([chosen, *others])
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
        verb_classes=ClassSets.from_lists(clip_verbs),
        noun_classes=noun_sets,
        noun_class=main,
        verb_class=np.asarray([v[0] for v in clip_verbs], np.int32),
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


def all_verb_classes(parsed, class_map, class_ids: dict[str, dict[object, int]]):
    """Per caption, the class ids of all its verbs (none for a caption without a verb)."""
    verb_ids = class_ids.setdefault("verb", {})
    return [
        [verb_ids.setdefault(k, len(verb_ids)) for k in keys]
        for keys in class_map.map(parsed, "verbs")
    ]


# config.data.train_captions: "all" = every caption of a multi-caption train video a
# training pair (`annotations(every_train_caption=True)`), "first" = its first caption
TRAIN_CAPTIONS = ("all", "first")


def annotations(
    train_rows: CaptionedVideos,
    test_rows: CaptionedVideos,
    class_map,
    pipeline: str,
    *,
    rho: float = 0.25,
    every_train_caption: bool = False,
) -> Annotations:
    """`Annotations` of a captioned dataset: clips classed by their captions' SYN classes
    (`class_map`; multi-caption clips aggregate them with `rho`), test sentences = the test
    captions (a multi-caption clip keeps them all in `clip_texts`); class ids are numbered
    over train and test together. With `every_train_caption`, a multi-caption train clip
    gives one train row per caption (each a training pair, as the papers train on MSR-VTT):
    the row's text is that caption, its classes and video those of its clip
    (`Annotations.train_video_rows`), and the caption's own classes are kept
    (`Annotations.train_caption_classes`: all its verbs, its nouns)."""
    ids: dict[str, dict] = {}
    parsed_train = captions_lib.parse(train_rows.caption, pipeline)
    train = to_clips(train_rows, class_map, parsed_train, class_ids=ids, rho=rho)
    video_rows = own = None
    if every_train_caption and len(train_rows) > len(train):
        train, video_rows = caption_rows(train, train_rows, parsed_train)
        own = (
            ClassSets.from_lists(all_verb_classes(parsed_train, class_map, ids)),
            ClassSets.from_lists(caption_classes(parsed_train, class_map, ids)[1]),
        )
    parsed_test = captions_lib.parse(test_rows.caption, pipeline)
    test = to_clips(test_rows, class_map, parsed_test, class_ids=ids, rho=rho)
    verbs, nouns = caption_classes(parsed_test, class_map, ids)
    _, groups = test_rows.clip_groups()
    sents = Sentences(
        narration_id=[test.narration_id[g] for g in groups],
        narration=list(test_rows.caption),
        verb_classes=ClassSets.from_labels(verbs),
        noun_classes=ClassSets.from_lists(nouns),
    )
    multi = len(groups) > len(test)
    clip_texts = (list(test_rows.caption), groups) if multi else None
    return Annotations(
        train, test, sents, len(ids["verb"]), len(ids["noun"]), clip_texts, video_rows, own
    )


def caption_rows(
    clips: Clips, rows: CaptionedVideos, parsed: captions_lib.Parsed
) -> tuple[Clips, np.ndarray]:
    """One row per caption of `rows`: its clip's classes and times, the caption as its
    narration (verb and nouns from its parse), narration_id "{video}_{k}" for the k-th
    caption of the video; and [captions] int32 the clip (row of `clips`) of each."""
    _, groups = rows.clip_groups()
    out = clips.take(groups)
    seen: dict[str, int] = {}
    ids = []
    for vid in rows.video_id:
        seen[vid] = seen.get(vid, -1) + 1
        ids.append(f"{vid}_{seen[vid]}")
    out = dataclasses.replace(
        out,
        narration_id=ids,
        narration=list(rows.caption),
        verb=[v[0] if v else NO_VERB for v in parsed.verbs],
        nouns=[tuple(n) for n in parsed.nouns],
    )
    return out, groups.astype(np.int32)
