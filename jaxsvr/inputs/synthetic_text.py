"""Deterministic synthetic caption features: a stand-in for a frozen text encoder.

Projection heads (`jaxsvr.models.heads`) are trained over frozen clip and caption
features, the cheap setting in which MI-MM, adaptive MI-MM and SMS are compared. Real
caption features (the outputs of a CLIP-style text encoder) are not available here, so
`caption_features` builds them from what such an encoder captures:

- meaning: the caption's verb-class prototype plus the weighted mean of its noun-class
  prototypes (main noun weighted `main_noun_weight`; prototypes have RMS 1 per
  dimension), scaled by `signal`, in a text space
  of its own (prototypes drawn independently of the video ones), so synonyms ("put",
  "place") land together and captions sharing classes are close;
- wording: `wording` times the mean of one fixed random vector per word, so different
  phrasings of one meaning differ a little;
- noise: `noise` times a Gaussian vector.

A frozen encoder maps equal text to equal features, so the wording and noise terms are
keyed by the words and the caption string (BLAKE2b, `synthetic.stable_key`): clips with the
same narration get the same feature in every split. All strengths are per-dimension RMS.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.inputs.synthetic import stable_key
from jaxsvr.nlp.words import tokenize


@dataclasses.dataclass(frozen=True)
class TextSpec:
    """How synthetic caption features are made.

    Attributes:
      dim: feature width.
      signal: scale of the class meaning (each prototype has RMS 1 per dimension; the verb
        plus the noun mean has RMS about 1.2 to 1.4).
      wording: per-dimension RMS of each word's own vector (their mean is added).
      noise: std of the per-caption Gaussian noise.
      main_noun_weight: weight of the main noun against 1 for the other nouns.
    """

    dim: int = 512
    signal: float = 1.0
    wording: float = 0.5
    noise: float = 0.5
    main_noun_weight: float = 2.0

    def __post_init__(self):
        if self.dim < 1:
            raise ValueError("dim must be positive")
        for name in ("signal", "wording", "noise"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.main_noun_weight <= 0:
            raise ValueError("main_noun_weight must be positive")


def caption_features(
    captions: list[str],
    verbs: ClassSets,
    nouns: ClassSets,
    main_noun: np.ndarray | None,
    num_verbs: int,
    num_nouns: int,
    *,
    seed: int = 0,
    spec: TextSpec = TextSpec(),
) -> np.ndarray:
    """[n, spec.dim] float32 frozen caption features.

    Args:
      captions: the caption texts.
      verbs, nouns: each caption's class sets.
      main_noun: [n] main noun class per caption (-1 or None: nouns weigh equally).
      num_verbs, num_nouns: class counts (the prototype tables' sizes).
      seed: the data seed; prototypes depend on (seed, counts, dim) only.
      spec: strengths.
    """
    n = len(captions)
    if len(verbs) != n or len(nouns) != n:
        raise ValueError("captions and class sets disagree in length")
    verb_table = _prototypes("verb", num_verbs, seed, spec.dim)
    noun_table = _prototypes("noun", num_nouns, seed, spec.dim)
    main = np.full(n, -1) if main_noun is None else np.asarray(main_noun)
    meaning = _set_mean(verb_table, verbs, np.full(n, -1), 1.0)
    meaning += _set_mean(noun_table, nouns, main, spec.main_noun_weight)
    out = spec.signal * meaning
    for i, caption in enumerate(captions):
        words = tokenize(caption)
        if words and spec.wording:
            out[i] += spec.wording * np.mean([_word_vector(w, seed, spec.dim) for w in words], 0)
        if spec.noise:
            rng = np.random.default_rng(stable_key(seed, "caption", caption))
            out[i] += spec.noise * rng.standard_normal(spec.dim, dtype=np.float32)
    return out.astype(np.float32)


def _prototypes(part: str, n: int, seed: int, dim: int) -> np.ndarray:
    """[n, dim] class directions of the text space, RMS 1 per dimension."""
    rng = np.random.default_rng(stable_key(seed, "text", part, n, dim))
    table = rng.standard_normal((n, dim))
    table *= np.sqrt(dim) / np.linalg.norm(table, axis=1, keepdims=True)
    return table.astype(np.float32)


def _set_mean(table: np.ndarray, sets: ClassSets, main: np.ndarray, main_weight: float):
    """[n, dim] weighted mean of each set's prototypes (zeros for an empty set)."""
    rows = sets.rows
    w = np.where(sets.indices == main[rows], main_weight, 1.0)
    total = np.bincount(rows, weights=w, minlength=len(sets))
    w = (w / np.maximum(total[rows], 1e-12)).astype(np.float32)
    out = np.zeros((len(sets), table.shape[1]), np.float32)
    np.add.at(out, rows, table[sets.indices] * w[:, None])
    return out


@functools.lru_cache(maxsize=1 << 16)
def _word_vector(word: str, seed: int, dim: int) -> np.ndarray:
    return np.random.default_rng(stable_key(seed, "word", word)).standard_normal(dim, np.float32)
