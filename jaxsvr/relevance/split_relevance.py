"""A dataset's relevance under a `RelevanceSpec`: test matrices and training positives.

The spec holds the explicit settings (`jaxsvr.train.pipeline` builds it from
`config.data.relevance`, `config.data.syn_classes` and `config.data.spacy_pipeline`), so
nothing below the top level reads a config.

- `syn_class_map(syn_classes)`: the SYN classes ("" words, "wordnet" Lesk synsets, or a
  folder of EPIC-style class CSVs); captioned datasets also take their clip classes from
  it (`jaxsvr.relevance.caption_classes`).
- `test_relevance`: [test clips, sentences] float32, the EPIC class relevance
  (`proxy = "class"`) or a caption proxy (`jaxsvr.relevance.proxies`) with the paper's
  S = 1 on own pairs: a sentence's own clip (`sentence_rows`), and for EPIC, whose sentence
  file holds each distinct narration once, every clip narrated with that sentence, known
  by its text (`proxies.own_by_text`; not by the sentence's narration_id: the last rows of
  the official EK-100 test sentence file repeat narrations under ids of clips narrated
  otherwise, e.g. "wash cooker" as P22_04_144, a "cut slice" clip). A clip with several
  captions (MSR-VTT) aggregates them (`rho`).
- `semantic_positives`: {j : S(i, j) >= T} over the training rows (each row's own caption),
  each clip itself included, as CSR, scored in row chunks (memory chunk x N).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.annotations.epic100 import Clips, Sentences
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions, wordnet
from jaxsvr.relevance import RelevanceIndex, class_relevance, proxies


@dataclasses.dataclass(frozen=True)
class RelevanceSpec:
    """How relevance is scored (the keys of `config.data.relevance` and the two the
    proxies read from `config.data`).

    proxy: "class" (EPIC class IoU) or a caption proxy of `proxies.NAMES`.
    rho: fraction of a multi-caption clip's captions a class must appear in.
    weights: the two weights of a PoS / SYN proxy.
    syn_classes: SYN classes: "" words, "wordnet" or a folder of class CSVs.
    spacy_pipeline: the installed spaCy pipeline that parses captions.
    own_is_relevant: S = 1 for every clip narrated with a sentence (EPIC, whose sentence
      file holds each distinct narration once), not only the sentence's own clip.
    """

    proxy: str = "class"
    rho: float = 0.25
    weights: tuple[float, float] = (0.5, 0.5)
    syn_classes: str = ""
    spacy_pipeline: str = captions.DEFAULT_PIPELINE
    own_is_relevant: bool = False


def syn_class_map(syn_classes: str) -> proxies.ClassMap:
    """The class map of `config.data.syn_classes`: words, WordNet + Lesk, or class CSVs."""
    if not syn_classes:
        return proxies.ClassMap({}, {})
    if syn_classes == "wordnet":
        return proxies.ClassMap.lesk(wordnet.load())
    folder = Path(syn_classes)
    if not folder.is_dir():
        raise InputError(
            f"config.data.syn_classes={syn_classes!r} is not a folder: use '', 'wordnet' "
            f"or a folder with {epic100.VERB_CLASSES} and {epic100.NOUN_CLASSES}"
        )
    return proxies.ClassMap.from_vocabs(
        epic100.read_classes(folder / epic100.VERB_CLASSES),
        epic100.read_classes(folder / epic100.NOUN_CLASSES),
    )


def test_relevance(
    spec: RelevanceSpec, clips: Clips, sents: Sentences, sent_rows, clip_texts
) -> np.ndarray:
    """[clips, sentences] float32: class relevance, or a proxy with S = 1 on own pairs.

    Args:
      spec: how relevance is scored.
      clips, sents: the test clips and sentences.
      sent_rows: [sentences] the clip whose narration each sentence is.
      clip_texts: (captions, clip index of each) when clips have several captions, else
        None (each clip's narration).
    """
    r = spec
    if r.proxy == "class":
        return class_relevance(
            clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
        )
    texts, groups = clip_texts or (clips.narration, None)
    score = _scorer(spec)
    rows = captions.parse(texts, spec.spacy_pipeline)
    cols = captions.parse(sents.narration, spec.spacy_pipeline)
    if spec.own_is_relevant:  # a distinct narration is every clip's it narrates
        rel = proxies.own_by_text(score(rows, cols, groups), texts, sents.narration, groups)
    else:
        rel = proxies.relevance(score(rows, cols, groups), sent_rows)
    logging.info("relevance: proxy %s (rho %.2f), S = 1 on own captions", r.proxy, r.rho)
    return rel


def semantic_positives(
    spec: RelevanceSpec, clips: Clips, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """Thresholded-triplet positives among training clips: CSR of {j : S(i, j) >= T},
    each clip itself included, with S the relevance `spec` scores."""
    n = len(clips)
    if spec.proxy == "class":
        index = RelevanceIndex(clips.verb_classes, clips.noun_classes)
        everyone = np.arange(n)

        def rows_of(idx):
            return index.matrix(idx, everyone)
    else:
        parsed = captions.parse(clips.narration, spec.spacy_pipeline)
        score = _scorer(spec)

        def rows_of(idx):
            return score(parsed.take(idx.tolist()), parsed)

    indptr, indices = proxies.threshold_pairs(rows_of, n, threshold)
    logging.info(
        "sampler: semantic positives S >= %.2f under %s: %.1f per clip on average",
        threshold,
        spec.proxy,
        indices.size / max(n, 1),
    )
    return indptr, indices


def _scorer(spec: RelevanceSpec):
    """(rows, cols, row_groups) -> the configured proxy; class map / WordNet built once."""
    r = spec
    if r.proxy not in proxies.NAMES:
        raise InputError(
            f"unknown config.data.relevance.proxy {r.proxy!r}: use 'class' or one of "
            f"{proxies.NAMES}"
        )
    if not 0.0 < r.rho <= 1.0:
        raise InputError(f"config.data.relevance.rho={r.rho}: use a fraction in (0, 1]")
    classes = syn_class_map(spec.syn_classes) if r.proxy == "syn" else None
    wn = wordnet.load() if r.proxy == "met" else None

    def score(rows, cols, groups=None):
        return proxies.compute(
            r.proxy,
            rows,
            cols,
            classes=classes,
            wordnet=wn,
            weights=tuple(r.weights),
            row_groups=groups,
            rho=r.rho,
        )

    return score
