"""Caption-to-caption relevance proxies (Wray et al., "On Semantic Similarity in Video
Retrieval", CVPR 2021, Sec. 4) for datasets without class annotations.

All four take parsed captions (`captions.parse`) for the rows and, optionally, other
captions for the columns (default: the rows), and return float32 [rows, columns]:

- `bow`: IoU of the sets of non-stop-word lemmas (`Parsed.words`).
- `pos`: sum_p alpha_p IoU(words of the rows tagged p, ... of the columns), over verbs and
  nouns, alpha = (0.5, 0.5) by default (the paper's PoS proxy).
- `syn`: the same over class sets: each verb / noun lemma becomes a class id, either from
  EPIC-style class CSVs (`ClassMap.from_vocabs`; a class's `instances` are synonyms,
  multi-word instances also count by an unambiguous first word that, for nouns, is no
  verb-class word, and words in no class become new singleton classes, as the paper does
  for YouCook2) or from WordNet with the Lesk algorithm (`ClassMap.lesk`: the synset
  NLTK's `lesk` picks in the caption's context; words without a synset stay themselves).
- `met`: METEOR of the two captions' `tokens` (`captions.tokenize`: spaCy tokens,
  lowercased, punctuation dropped; `jaxsvr.relevance.meteor`, equal to NLTK's
  `meteor_score` on those tokens; rows are references, columns hypotheses, so not
  symmetric).

How these depart from the SVR authors' scripts, and what each departure changes:
docs/proxies.md.

IoU follows `classes.iou_table`: two empty sets score 0. BoW, PoS and SYN are symmetric.

Multi-caption videos (MSR-VTT, 20 captions each): pass `row_groups`, the video index of
every row caption; the rows become one per video. For the set proxies a video keeps the
items present in at least `rho` = 25% of its captions (`ClassSets.aggregate`); for METEOR
the video's captions are the references of NLTK's multi-reference score (the max).

`relevance(proxy_matrix, own)` gives the training / evaluation relevance of the paper,
S(x_i, y_j) = 1 where caption j belongs to video i, else the proxy; `own_by_text` the same
where captions are known to be a row's own only by their text (EPIC's clips x distinct
sentences; its pairs: `own_pairs_by_text`). `compute(name, ...)` picks a proxy by name;
`set_terms` gives the class sets whose weighted IoU a set proxy is (streamed evaluation:
`jaxsvr.evaluation.streamed_proxies`); `threshold_pairs` turns a train x train proxy into
the semantic positives (S >= T, CSR, row by row) of thresholded triplets
(`jaxsvr.sampling.triplets`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import ClassVocab
from jaxsvr.errors import InputError
from jaxsvr.nlp.captions import Parsed
from jaxsvr.relevance import meteor as meteor_lib
from jaxsvr.relevance.classes import weighted_iou

NAMES = ("bow", "pos", "syn", "met")
SET_NAMES = ("bow", "pos", "syn")  # weighted IoUs of class sets (`set_terms`)
DEFAULT_RHO = 0.25
DEFAULT_WEIGHTS = (0.5, 0.5)  # alpha for verbs, nouns


def bow(rows: Parsed, cols: Parsed | None = None, *, row_groups=None, rho=DEFAULT_RHO):
    """Bag-of-words IoU of non-stop-word lemmas."""
    return weighted_iou(set_terms("bow", rows, cols, row_groups=row_groups, rho=rho))


def pos(
    rows: Parsed,
    cols: Parsed | None = None,
    *,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    row_groups=None,
    rho=DEFAULT_RHO,
):
    """Part-of-speech IoU: alpha_verb IoU(verbs) + alpha_noun IoU(nouns)."""
    terms = set_terms("pos", rows, cols, weights=weights, row_groups=row_groups, rho=rho)
    return weighted_iou(terms)


def syn(
    rows: Parsed,
    cols: Parsed | None = None,
    *,
    classes: ClassMap,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    row_groups=None,
    rho=DEFAULT_RHO,
):
    """Synset IoU: PoS over class / synset ids instead of words."""
    terms = set_terms(
        "syn", rows, cols, classes=classes, weights=weights, row_groups=row_groups, rho=rho
    )
    return weighted_iou(terms)


def set_terms(
    name: str,
    rows: Parsed,
    cols: Parsed | None = None,
    *,
    classes: ClassMap | None = None,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    row_groups=None,
    rho: float = DEFAULT_RHO,
) -> list[tuple[float, ClassSets, ClassSets]]:
    """(weight, row sets, column sets) per term of the set proxy `name` (SET_NAMES): their
    `weighted_iou` is `bow` / `pos` / `syn`'s matrix, `evaluation.blocks.BlockRelevance`
    its blocks.

    Args:
      name: "bow" (one term of weight 1: `words`), "pos" or "syn" (verbs, nouns).
      rows, cols: parsed captions of the rows and columns (default: the rows).
      classes: syn's class map (default: the words themselves).
      weights: alpha of verbs and nouns (pos, syn).
      row_groups, rho: multi-caption videos, one row set each (module docstring).
    """
    if name not in SET_NAMES:
        raise InputError(f"{name!r} is not a set proxy: use one of {SET_NAMES}")
    keys_of = _identity
    if name == "syn":
        keys_of = (classes or ClassMap({}, {})).map
    fields = [(1.0, "words")] if name == "bow" else [(weights[0], "verbs"), (weights[1], "nouns")]
    cols = rows if cols is None else cols
    terms = []
    for weight, field in fields:
        a, b = _class_sets(keys_of(rows, field), keys_of(cols, field))
        if row_groups is not None:
            a = a.aggregate(np.asarray(row_groups), rho)
        terms.append((weight, a, b))
    return terms


def met(
    rows: Parsed,
    cols: Parsed | None = None,
    *,
    wordnet,
    row_groups=None,
    workers: int = 2,
):
    """METEOR with the row captions as references and the columns as hypotheses."""
    cols = rows if cols is None else cols
    return meteor_lib.meteor_matrix(
        rows.tokens, cols.tokens, wordnet=wordnet, ref_groups=row_groups, workers=workers
    ).astype(np.float32)


def own_by_text(
    proxy: np.ndarray, row_texts: Sequence[str], col_texts: Sequence[str], row_groups=None
) -> np.ndarray:
    """S = 1 where column caption j has the text of a row's own caption, else the proxy.

    For EPIC-KITCHENS-100's clips x sentences, whose sentence file holds each distinct
    narration once: a sentence is the own caption of every clip narrated with it (as
    `jaxsvr.relevance.split_relevance.test_relevance` scores it).

    Args:
      proxy: [rows, columns] proxy scores.
      row_texts: the captions of the rows (with `row_groups`, of the row videos).
      col_texts: [columns] the column captions.
      row_groups: [row captions] the row (video) of each caption, or None (one each).
    """
    rows, cols = own_pairs_by_text(row_texts, col_texts, row_groups)
    out = np.array(proxy, np.float32, copy=True)
    out[rows, cols] = 1.0
    return out


def own_pairs_by_text(
    row_texts: Sequence[str], col_texts: Sequence[str], row_groups=None
) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) pairs `own_by_text` sets to 1: column captions with the text of
    one of the row's (video's) captions.

    Returns:
      (rows, cols), integer arrays of equal length; a pair may repeat (a video with two
      captions of one text).
    """
    ids = epic100.text_ids([*row_texts, *col_texts])
    row_ids, col_ids = ids[: len(row_texts)], ids[len(row_texts) :]
    groups = np.arange(len(row_texts)) if row_groups is None else np.asarray(row_groups)
    order = np.argsort(col_ids, kind="stable")
    sorted_ids = col_ids[order]
    lo = np.searchsorted(sorted_ids, row_ids, side="left")
    count = np.searchsorted(sorted_ids, row_ids, side="right") - lo  # columns per row caption
    rows = np.repeat(groups, count)
    # the sorted positions lo, lo + 1, ... of each row caption's equal-text columns
    offset = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    return rows, order[np.repeat(lo, count) + offset]


def relevance(proxy: np.ndarray, own: Sequence[int] | np.ndarray) -> np.ndarray:
    """S(x_i, y_j) = 1 if caption j describes video i (own[j] == i), else proxy[i, j].

    Args:
      proxy: [videos, captions] proxy scores.
      own: [captions] the video (row) index of each caption.
    """
    own = np.asarray(own, np.int64).reshape(-1)
    if own.size != proxy.shape[1]:
        raise ValueError(f"own has {own.size} entries for {proxy.shape[1]} captions")
    out = np.array(proxy, np.float32, copy=True)
    out[own, np.arange(own.size)] = 1.0
    return out


@dataclasses.dataclass(frozen=True)
class ClassMap:
    """Maps a caption's verb / noun lemmas to class ids (the SYN proxy's synsets).

    `verb` and `noun` map a word to its class; `map(parsed, field)` gives each caption's
    ids, with words outside the map as extra classes keyed by the word itself.
    """

    verb: dict[str, int]
    noun: dict[str, int]
    sense: Callable[[tuple[str, ...], str, str], str | None] | None = None

    @classmethod
    def from_vocabs(cls, verbs: ClassVocab, nouns: ClassVocab) -> ClassMap:
        """Classes from EPIC-style CSVs: every instance (and key) maps to its class id.

        Instances of several words (EPIC's "pick-up", "bone:chicken") also map by their
        first word, the one spaCy's lemma of a caption gives ("pick" -> take, "bone" ->
        chicken), when that word is not an instance or key itself and (the first-word
        rule):

        - it is unambiguous: every instance starting with it belongs to one class
          ("piece" of piece:sponge and piece:chicken maps to none: it stays a word);
        - for nouns, it is not a word the verb classes list (a key or instance): such a
          first word is mostly a verb spaCy mis-tagged as a noun in terse narrations, not
          the rare noun sense the instance meant ("cut" of cut:cold, "turn" of turn:sponge,
          "layer", "sort", "back", "fry", ... stay words, not salami, sponge, onion ...).

        See `first_word_classes` and docs/proxies.md.
        """
        verb_words = frozenset(verbs.synonyms())
        return cls(_word_classes(verbs), _word_classes(nouns, not_first_words=verb_words))

    @classmethod
    def lesk(cls, wordnet) -> ClassMap:
        """WordNet synsets chosen by NLTK's Lesk algorithm in each caption's context."""
        from nltk.wsd import lesk

        def sense(tokens: tuple[str, ...], word: str, pos: str) -> str | None:
            synsets = wordnet.synsets(word, pos=pos)
            if not synsets:
                return None
            return lesk(list(tokens), word, pos=pos, synsets=synsets).name()

        return cls({}, {}, sense)

    def map(self, parsed: Parsed, field: str) -> list[tuple[object, ...]]:
        """Per caption, the class keys of its `field` ("verbs" or "nouns") words."""
        table = self.verb if field == "verbs" else self.noun
        wn_pos = "v" if field == "verbs" else "n"
        out = []
        for tokens, words in zip(parsed.tokens, getattr(parsed, field)):
            keys = []
            for w in words:
                if w in table:
                    keys.append(table[w])
                elif self.sense is not None:
                    keys.append(self.sense(tokens, w, wn_pos) or f"word:{w}")
                else:
                    keys.append(f"word:{w}")  # unseen word: a new singleton class
            out.append(tuple(keys))
        return out


def first_word_classes(
    vocab: ClassVocab, not_first_words: frozenset[str] = frozenset()
) -> dict[str, int]:
    """The first-word rule of `ClassMap.from_vocabs`: first word -> class id.

    Only words that are no key or instance themselves, that start instances of a single
    class, and that are not in `not_first_words` (for nouns: the verb classes' words).
    """
    exact = vocab.synonyms()
    heads: dict[str, set[int]] = {}
    for cid, (key, instances) in enumerate(zip(vocab.key, vocab.instances)):
        for name in (key, *instances):
            heads.setdefault(name.replace(":", "-").split("-")[0], set()).add(cid)
    return {
        head: next(iter(classes))
        for head, classes in heads.items()
        if len(classes) == 1 and head not in exact and head not in not_first_words
    }


def _word_classes(
    vocab: ClassVocab, not_first_words: frozenset[str] = frozenset()
) -> dict[str, int]:
    return {**first_word_classes(vocab, not_first_words), **vocab.synonyms()}


def _identity(parsed: Parsed, field: str) -> list[tuple[str, ...]]:
    return getattr(parsed, field)


def _class_sets(a_keys, b_keys) -> tuple[ClassSets, ClassSets]:
    """Integer ClassSets for two lists of key tuples, with one shared key -> id table."""
    ids: dict[object, int] = {}
    a = ClassSets.from_lists([ids.setdefault(k, len(ids)) for k in keys] for keys in a_keys)
    b = ClassSets.from_lists([ids.setdefault(k, len(ids)) for k in keys] for keys in b_keys)
    return a, b


def check_weights(weights, where: str) -> None:
    """Raises InputError unless `weights` are the alphas of the PoS/SYN proxies: two
    (verbs, nouns), finite, non-negative, not both zero, summing to at most 1 (the paper's
    alphas sum to 1), so the proxy stays in [0, 1].

    Args:
      weights: the alphas, a sequence of numbers.
      where: the flag or config key that set them, named in the message (e.g. `--weights`
        or `config.data.relevance.weights`).
    """
    try:
        w = np.asarray(weights, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InputError(
            f"{where} = {weights!r}: use two numbers (verbs, nouns), e.g. 0.5 0.5"
        ) from None
    shown = " ".join(f"{x:g}" for x in w) or "(none)"
    if w.size != 2 or np.ndim(weights) != 1:
        raise InputError(
            f"{where} {shown}: use two weights (verbs, nouns), e.g. 0.5 0.5, not {w.size}"
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise InputError(f"{where} {shown}: use finite, non-negative weights, e.g. 0.5 0.5")
    if not w.any():
        raise InputError(f"{where} {shown}: at least one weight must be positive, e.g. 0.5 0.5")
    if w.sum() > 1.0 + 1e-6:
        raise InputError(
            f"{where} {shown}: they sum to {w.sum():g} > 1, so relevance could exceed 1; "
            "use weights summing to 1, e.g. 0.5 0.5"
        )


def compute(
    name: str,
    rows: Parsed,
    cols: Parsed | None = None,
    *,
    classes: ClassMap | None = None,
    wordnet=None,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
    row_groups=None,
    rho: float = DEFAULT_RHO,
    workers: int = 2,
) -> np.ndarray:
    """The proxy `name` (one of NAMES) as float32 [rows, columns]; `classes` for syn
    (default: the words themselves), `wordnet` for met."""
    if name not in NAMES:
        raise InputError(f"unknown relevance proxy {name!r}: use one of {NAMES}")
    kw = dict(row_groups=row_groups)
    if name == "bow":
        return bow(rows, cols, rho=rho, **kw)
    if name == "pos":
        return pos(rows, cols, weights=weights, rho=rho, **kw)
    if name == "syn":
        return syn(rows, cols, classes=classes or ClassMap({}, {}), weights=weights, rho=rho, **kw)
    if wordnet is None:
        raise InputError("the met proxy needs WordNet: pass wordnet=jaxsvr.nlp.wordnet.load()")
    return met(rows, cols, wordnet=wordnet, workers=workers, **kw)


def threshold_pairs(
    score_rows: Callable[[np.ndarray], np.ndarray], n: int, threshold: float, chunk: int = 2048
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j) with score >= threshold, plus every (i, i), as CSR over rows.

    Args:
      score_rows: row indices -> their scores against all n columns, [len(rows), n].
      n: items (rows = columns).
      threshold: T; the semantic positives of thresholded triplets are S >= T.
      chunk: rows scored at a time (bounds memory: chunk x n floats).

    Returns:
      (indptr [n + 1] int64, indices int32), each row's columns sorted.
    """
    indptr = np.zeros(n + 1, np.int64)
    parts = []
    for start in range(0, n, chunk):
        idx = np.arange(start, min(start + chunk, n))
        keep = np.asarray(score_rows(idx)) >= threshold
        keep[np.arange(idx.size), idx] = True
        r, c = np.nonzero(keep)
        np.add.at(indptr, idx[r] + 1, 1)
        parts.append(c.astype(np.int32))
    np.cumsum(indptr, out=indptr)
    return indptr, (np.concatenate(parts) if parts else np.zeros(0, np.int32))
