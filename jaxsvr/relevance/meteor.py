"""METEOR between every pair of captions, equal to NLTK's `meteor_score`, many times faster.

NLTK's `nltk.translate.meteor_score.single_meteor_score(reference, hypothesis)` aligns
the two token lists in three stages (exact words, Porter stems, WordNet synonyms), then
scores precision P and recall R of the alignment:
  fmean = P R / (alpha P + (1 - alpha) R),  penalty = gamma (chunks / matches)^beta,
  score = (1 - penalty) fmean                (alpha 0.9, beta 3, gamma 0.5; 0 if no match)
Per pair that is slow, mostly re-stemming and re-querying WordNet
(docs/benchmarks.md#caption-proxies). `meteor_matrix` gives the same numbers (tests
compare to NLTK to 1e-9; the arithmetic is the same Python floats) by:

1. preparing each distinct caption once: its lowercased words, their stems (NLTK's
   `PorterStemmer()`), and for each stem its WordNet synonym set (lemma names without
   "_" of `wordnet.synsets(stem)`, plus the stem itself), each word's work cached;
2. skipping pairs that cannot align at all (score 0) with one sparse product: a pair
   has a match iff some hypothesis key {word} | {synonyms of its stem} meets a reference
   key {word} | {stem} (every stage's match is one of these, and a potential match is only
   lost to another match);
3. aligning the remaining pairs with the stages written over small tuples, in worker
   processes (`workers`, default 2, 'spawn'), each with the prepared captions only.

The alignment mirrors NLTK 3.10 (`_enum_align_words`) exactly: each stage walks the
still-unmatched hypothesis words from last to first and takes the highest-position
unmatched reference word that matches; the synonym stage compares the synonyms of the
hypothesis *stems* with the reference *stems*, since NLTK hands the stemmed leftovers of
stage 2 to stage 3. Scores are those of the NLTK version `nltk_version()` reports (METEOR
changed across releases: docs/proxies.md#meteor-exact-and-fast).

Tokens: a caption given as a str is tokenised by `captions.tokenize` (spaCy's tokenizer,
lowercased, punctuation and whitespace tokens dropped), which is what the CLI and the
trainer pass, so `meteor_matrix(texts, texts)` equals their matrices; a caption given as
a sequence of str is the caller's tokenisation, only lowercased (NLTK's `preprocess`).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Sequence

import numpy as np

ALPHA, BETA, GAMMA = 0.9, 3.0, 0.5


def nltk_version() -> str:
    import nltk

    return nltk.__version__


@dataclasses.dataclass(frozen=True)
class Prepared:
    """One caption, ready to align: lowercased words, their stems, and per stem its
    WordNet synonym set (including the stem)."""

    words: tuple[str, ...]
    stems: tuple[str, ...]
    synonyms: tuple[frozenset[str], ...]


def prepare(captions: Sequence[Sequence[str]], wordnet) -> list[Prepared]:
    """Prepared captions, each word stemmed and looked up in WordNet once."""
    from nltk.stem.porter import PorterStemmer

    stemmer = PorterStemmer()
    stem_of: dict[str, str] = {}
    syn_of: dict[str, frozenset[str]] = {}

    def synonyms(stem: str) -> frozenset[str]:
        if stem not in syn_of:
            names = {
                lemma.name()
                for synset in wordnet.synsets(stem)
                for lemma in synset.lemmas()
                if "_" not in lemma.name()
            }
            syn_of[stem] = frozenset(names | {stem})
        return syn_of[stem]

    def stem(word: str) -> str:
        if word not in stem_of:
            stem_of[word] = stemmer.stem(word)
        return stem_of[word]

    out = []
    for tokens in captions:
        words = tuple(t.lower() for t in tokens)  # NLTK's default preprocess, str.lower
        stems = tuple(stem(w) for w in words)
        out.append(Prepared(words, stems, tuple(synonyms(s) for s in stems)))
    return out


def single(reference: Prepared, hypothesis: Prepared) -> float:
    """NLTK's `single_meteor_score(reference, hypothesis)` on prepared captions."""
    h_words, r_words = hypothesis.words, reference.words
    nh, nr = len(h_words), len(r_words)
    if nh == 0 or nr == 0:
        return 0.0
    ref_of = [-1] * nh  # matched reference position of each hypothesis word
    free_r = [True] * nr
    for h_keys, r_keys, by_set in (
        (h_words, r_words, False),
        (hypothesis.stems, reference.stems, False),
        (hypothesis.synonyms, reference.stems, True),
    ):
        for i in range(nh - 1, -1, -1):
            if ref_of[i] >= 0:
                continue
            key = h_keys[i]
            for j in range(nr - 1, -1, -1):
                if free_r[j] and ((r_keys[j] in key) if by_set else (r_keys[j] == key)):
                    ref_of[i] = j
                    free_r[j] = False
                    break
    pairs = [(i, j) for i, j in enumerate(ref_of) if j >= 0]
    matches = len(pairs)
    if matches == 0:
        return 0.0
    chunks = 1
    for (i0, j0), (i1, j1) in zip(pairs, pairs[1:]):
        if not (i1 == i0 + 1 and j1 == j0 + 1):
            chunks += 1
    precision = float(matches) / nh
    recall = float(matches) / nr
    fmean = (precision * recall) / (ALPHA * precision + (1 - ALPHA) * recall)
    frag_frac = float(chunks) / matches
    penalty = GAMMA * frag_frac**BETA
    return (1 - penalty) * fmean


def meteor_matrix(
    references: Sequence[str | Sequence[str]],
    hypotheses: Sequence[str | Sequence[str]],
    *,
    wordnet,
    ref_groups: Sequence[int] | np.ndarray | None = None,
    workers: int = 2,
    pipeline: str | None = None,
) -> np.ndarray:
    """METEOR of every (reference, hypothesis) pair of captions.

    Args:
      references, hypotheses: captions, each a str (tokenised by `captions.tokenize`: the
        CLI's rule, punctuation dropped) or a sequence of str tokens (used as given,
        lowercased).
      wordnet: NLTK WordNet reader (`jaxsvr.nlp.wordnet.load()`).
      ref_groups: optional group (video) index per reference: the result then has one row
        per group, the max over its references (NLTK's multi-reference `meteor_score`).
      workers: processes for the alignments (1: in this process).
      pipeline: spaCy pipeline that tokenises str captions (default: `captions`').

    Returns:
      float64 [len(references) or groups, len(hypotheses)].
    """
    references = _tokens(references, pipeline)
    hypotheses = _tokens(hypotheses, pipeline)
    ref_keys, ref_inv = _distinct(references)
    hyp_keys, hyp_inv = _distinct(hypotheses)
    prepared = prepare(ref_keys + hyp_keys, wordnet)
    refs, hyps = prepared[: len(ref_keys)], prepared[len(ref_keys) :]
    cand_ptr, cand_idx = _candidates(refs, hyps)
    small = np.zeros((len(refs), len(hyps)), np.float64)
    chunks = _row_chunks(cand_ptr, max(1, workers) * 4)
    if workers <= 1 or len(chunks) <= 1:
        for lo, hi in chunks:
            small[lo:hi] = _score_rows(refs, hyps, cand_ptr, cand_idx, lo, hi)
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(
            min(workers, os.cpu_count() or 1), _init_worker, (refs, hyps, cand_ptr, cand_idx)
        ) as pool:
            for (lo, hi), rows in zip(chunks, pool.map(_worker_rows, chunks)):
                small[lo:hi] = rows
    if ref_groups is None:
        return small[ref_inv][:, hyp_inv]
    groups = np.asarray(ref_groups).reshape(-1)
    if groups.size != ref_inv.size or (groups.size and not np.issubdtype(groups.dtype, np.integer)):
        raise ValueError(f"ref_groups must hold one integer per reference ({ref_inv.size})")
    if groups.size and groups.min() < 0:
        raise ValueError("ref_groups must be non-negative group indices")
    out = np.zeros((int(groups.max()) + 1 if groups.size else 0, len(hyps)), np.float64)
    for start in range(0, groups.size, 1024):  # bounded memory: 1024 reference rows at a time
        part = slice(start, start + 1024)
        np.maximum.at(out, groups[part], small[ref_inv[part]])
    return out[:, hyp_inv]


def _tokens(captions, pipeline: str | None) -> list[Sequence[str]]:
    """Captions with every str replaced by its tokens (`captions.tokenize`)."""
    captions = list(captions)  # may be an iterator: read it once
    texts = [c for c in captions if isinstance(c, str)]
    if not texts:
        return captions
    from jaxsvr.nlp import captions as captions_lib

    pipeline = pipeline or captions_lib.DEFAULT_PIPELINE
    tokens = dict(zip(texts, captions_lib.tokenize(texts, pipeline)))
    return [tokens[c] if isinstance(c, str) else c for c in captions]


def _distinct(captions: Sequence[Sequence[str]]) -> tuple[list[tuple[str, ...]], np.ndarray]:
    """Distinct lowercased token tuples and each caption's index among them."""
    index: dict[tuple[str, ...], int] = {}
    inverse = [index.setdefault(tuple(t.lower() for t in c), len(index)) for c in captions]
    return list(index), np.asarray(inverse, np.int64)


def _candidates(refs: list[Prepared], hyps: list[Prepared]) -> tuple[np.ndarray, np.ndarray]:
    """CSR (indptr over refs, hyp indices) of the pairs that have at least one match."""
    from scipy import sparse

    key_id: dict[str, int] = {}

    def incidence(keys_per_caption) -> sparse.csr_matrix:
        cols = [[key_id.setdefault(k, len(key_id)) for k in keys] for keys in keys_per_caption]
        indptr = np.cumsum([0] + [len(c) for c in cols])
        flat = np.fromiter((k for c in cols for k in c), np.int64, int(indptr[-1]))
        return indptr, flat

    # Exact stage: words meet words; stem and synonym stages: synonyms of stems meet stems.
    ref_keys = [{"w" + w for w in p.words} | {"s" + s for s in p.stems} for p in refs]
    hyp_keys = [
        {"w" + w for w in p.words} | {"s" + s for syn in p.synonyms for s in syn} for p in hyps
    ]
    r_ptr, r_idx = incidence(ref_keys)
    h_ptr, h_idx = incidence(hyp_keys)
    k = len(key_id)
    r = sparse.csr_matrix((np.ones(r_idx.size, np.float32), r_idx, r_ptr), (len(refs), k))
    h = sparse.csr_matrix((np.ones(h_idx.size, np.float32), h_idx, h_ptr), (len(hyps), k))
    pairs = (r @ h.T).tocsr()
    pairs.sort_indices()
    return pairs.indptr.astype(np.int64), pairs.indices.astype(np.int64)


def _row_chunks(indptr: np.ndarray, n_chunks: int) -> list[tuple[int, int]]:
    """Row ranges with about equal numbers of candidate pairs."""
    n = indptr.size - 1
    if n == 0:
        return []
    bounds = np.searchsorted(indptr, np.linspace(0, indptr[-1], n_chunks + 1)[1:-1])
    edges = np.unique(np.concatenate([[0], np.clip(bounds, 0, n), [n]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


def _score_rows(refs, hyps, cand_ptr, cand_idx, lo: int, hi: int) -> np.ndarray:
    out = np.zeros((hi - lo, len(hyps)), np.float64)
    for r in range(lo, hi):
        ref, row = refs[r], out[r - lo]
        for h in cand_idx[cand_ptr[r] : cand_ptr[r + 1]].tolist():
            row[h] = single(ref, hyps[h])
    return out


_WORKER: tuple = ()


def _init_worker(refs, hyps, cand_ptr, cand_idx) -> None:
    global _WORKER
    _WORKER = (refs, hyps, cand_ptr, cand_idx)


def _worker_rows(bounds: tuple[int, int]) -> np.ndarray:
    return _score_rows(*_WORKER, *bounds)
