"""A built-in kitchen vocabulary and annotation generator: EPIC-style data, no downloads.

`generate(num_videos, clips_per_video, seed)` returns `Clips` and `Sentences` shaped like
the EPIC-KITCHENS-100 retrieval annotations (`jaxsvr.annotations.epic100`): videos are ordered
sequences of clips, each clip has one verb class and one to three noun classes, its
narration is written with randomly chosen synonyms ("grab the knife and board"), and the
sentences are the distinct narrations, as in EPIC's test sentence file. Class frequencies
are long-tailed (Zipf), like EPIC's. Deterministic by seed.

`captioned(num_videos, seed, split)` writes MSR-VTT-style videos instead: one action each,
described by 20 captions that differ as annotators do (the built-in data of
`config.data.format = "msrvtt"`).

The trainer's synthetic video features are built on top of these class labels.
"""

from __future__ import annotations

import zlib

import numpy as np

from jaxsvr.annotations.captioned import CaptionedVideos
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import ClassVocab, Clips, Sentences

# class key: synonyms (the key itself is used too)
VERBS = {
    "take": ("grab", "pick-up", "get"),
    "put": ("place", "put-down", "leave"),
    "open": ("unscrew",),
    "close": ("shut", "screw"),
    "wash": ("rinse", "clean"),
    "cut": ("slice", "chop"),
    "mix": ("stir", "whisk"),
    "pour": ("drizzle",),
    "turn-on": ("switch-on", "start"),
    "turn-off": ("switch-off", "stop"),
    "dry": ("wipe",),
    "peel": ("skin",),
    "squeeze": ("press",),
    "throw": ("discard",),
}
NOUNS = {
    "knife": ("blade",),
    "board": ("chopping-board",),
    "pan": ("frying-pan", "skillet"),
    "plate": ("dish",),
    "bowl": ("basin",),
    "spoon": ("teaspoon", "ladle"),
    "tap": ("faucet",),
    "cup": ("mug", "glass"),
    "onion": ("shallot",),
    "tomato": ("cherry-tomato",),
    "carrot": (),
    "potato": ("spud",),
    "egg": (),
    "cheese": ("cheddar",),
    "oil": ("olive-oil",),
    "water": (),
    "lid": ("cover",),
    "fridge": ("refrigerator",),
    "drawer": (),
    "sponge": (),
    "bread": ("loaf",),
    "butter": (),
    "salt": (),
    "hob": ("cooker", "stove"),
}


def vocab(words: dict[str, tuple[str, ...]]) -> ClassVocab:
    """A ClassVocab from {key: synonyms}."""
    return ClassVocab(list(words), [(k, *v) for k, v in words.items()], [""] * len(words))


def generate(
    num_videos: int = 20, clips_per_video: int = 40, seed: int = 0, split: str = "test"
) -> tuple[Clips, Sentences]:
    """Synthetic EPIC-style clips and their distinct-narration sentences.

    Args:
      num_videos: videos, each an ordered sequence of clips.
      clips_per_video: clips per video.
      seed: everything is a pure function of the arguments; the class frequencies depend
        on the seed only, so the splits of one seed share them.
      split: names the split ("train", "test"): it seeds the clips and prefixes the video
        ids (TR00, TE00, ...), so splits of one seed are disjoint draws.

    Returns:
      (clips, sentences); sentence classes are those of the clips they narrate.
    """
    prior = np.random.default_rng(seed)
    verbs, nouns = list(VERBS.items()), list(NOUNS.items())
    p_verb = _zipf(len(verbs), prior)
    p_noun = _zipf(len(nouns), prior)
    rng = np.random.default_rng([seed, zlib.crc32(split.encode())])
    prefix = split[:2].upper()
    ids, video_ids, texts, verb_words, noun_words, verb_cls, noun_cls = ([] for _ in range(7))
    for v in range(num_videos):
        for c in range(clips_per_video):
            verb = int(rng.choice(len(verbs), p=p_verb))
            k = int(rng.choice(3, p=[0.8, 0.17, 0.03])) + 1  # EPIC: 83% of clips have 1 noun
            objs = [int(i) for i in rng.choice(len(nouns), size=k, replace=False, p=p_noun)]
            vword = _word(verbs[verb], rng)
            nword = [_word(nouns[n], rng) for n in objs]
            ids.append(f"{prefix}{v:02d}_{c}")
            video_ids.append(f"{prefix}{v:02d}")
            texts.append(" ".join([vword.replace("-", " "), *_join(nword)]))
            verb_words.append(vword)
            noun_words.append(tuple(nword))
            verb_cls.append(verb)
            noun_cls.append(objs)
    n = len(ids)
    clips = Clips(
        ids,
        video_ids,
        texts,
        np.arange(n) * 2.0,
        np.arange(n) * 2.0 + 1.5,
        verb_words,
        noun_words,
        ClassSets.from_labels(verb_cls),
        ClassSets.from_lists(noun_cls),
        np.array([objs[0] for objs in noun_cls], np.int32),
    )
    first = {}
    for i, t in enumerate(texts):
        first.setdefault(t, i)
    keep = np.array(list(first.values()))
    sentences = Sentences(
        [ids[i] for i in keep],
        [texts[i] for i in keep],
        clips.verb_classes.take(keep),
        clips.noun_classes.take(keep),
    )
    return clips, sentences


CAPTIONS_PER_VIDEO = 20  # MSR-VTT's


def captioned(
    num_videos: int, seed: int = 0, split: str = "test", captions: int = CAPTIONS_PER_VIDEO
) -> CaptionedVideos:
    """Synthetic MSR-VTT-style videos: each shows one action (a verb and one to three
    nouns, drawn as in `generate`) and has `captions` captions by different "annotators":
    each writes its own synonyms, mentions each noun with probability 0.8 (at least one)
    and names another verb with probability 0.15, so a video's classes are those most of
    its captions agree on (the rho aggregation). Video ids are prefixed by the split
    ("MTR00", "MTE00", ...); one row per caption, `clip_id` = `video_id`.
    """
    prior = np.random.default_rng(seed)
    verbs, nouns = list(VERBS.items()), list(NOUNS.items())
    p_verb = _zipf(len(verbs), prior)
    p_noun = _zipf(len(nouns), prior)
    rng = np.random.default_rng([seed, zlib.crc32(f"captioned-{split}".encode())])
    video_ids, texts = [], []
    for v in range(num_videos):
        verb = int(rng.choice(len(verbs), p=p_verb))
        k = int(rng.choice(3, p=[0.6, 0.3, 0.1])) + 1
        objs = [int(i) for i in rng.choice(len(nouns), size=k, replace=False, p=p_noun)]
        for _ in range(captions):
            said = int(rng.choice(len(verbs), p=p_verb)) if rng.random() < 0.15 else verb
            named = [n for n in objs if rng.random() < 0.8] or [objs[0]]
            words = [_word(verbs[said], rng), *(_word(nouns[n], rng) for n in named)]
            video_ids.append(f"M{split[:2].upper()}{v:02d}")
            texts.append(" ".join([words[0].replace("-", " "), *_join(words[1:])]))
    n = len(texts)
    return CaptionedVideos(
        clip_id=list(video_ids),
        video_id=video_ids,
        caption=texts,
        split=[split] * n,
        start_s=np.zeros(n),
        stop_s=np.full(n, 10.0),
        order=np.zeros(n, np.int64),
    )


def _zipf(n: int, rng: np.random.Generator) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** 1.1
    return rng.permutation(p / p.sum())


def _word(entry: tuple[str, tuple[str, ...]], rng: np.random.Generator) -> str:
    key, syn = entry
    return key if not syn or rng.random() < 0.5 else str(rng.choice(syn))


def _join(words: list[str]) -> list[str]:
    words = [w.replace("-", " ") for w in words]
    return [words[0]] if len(words) == 1 else [*words[:-1], "and", words[-1]]
