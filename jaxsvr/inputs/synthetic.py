"""Deterministic synthetic video features for any clip table, in place of EPIC's TBN features.

EPIC-KITCHENS-100 retrieval models (MME, JPoSE) consume TBN clip features: RGB | Flow |
Audio, 3 x 1024 = 3072-d. They are not redistributable here, so `clip_features` builds
stand-ins for any `Clips` table (the real EPIC CSVs or `kitchen.generate`) that carry the
clips' verb and noun classes with realistic difficulty (`SyntheticSpec` holds every knob):

- class signal: the verb prototype plus the weighted mean of the noun prototypes (the main
  noun weighs `main_noun_weight` times the others), scaled per block: RGB mostly nouns,
  Flow mostly verbs, Audio weak; a log-normal per-clip clarity factor (mean 1) on it;
- confusable class pairs (prototype cosine ~`confusable_cos`), a per-video nuisance
  vector from a `nuisance_rank`-dim subspace, and i.i.d. Gaussian noise (std `noise`);
- hidden nouns: in a fraction `hide_noun` of clips the noun signal moves, at
  `neighbour_leak` strength, to the previous and next clip of the same video (narration
  order), so temporal context models have something to find;
- `segments` = S > 0 gives S features per clip: verb and noun signals follow envelopes
  1 + a cos(2 pi (s + 1/2) / S + phase) (random phases, mean exactly 1 over segments) and
  segment noise has std noise * sqrt(S), so the mean over segments has the clip feature's
  distribution.

Determinism: prototypes and the nuisance subspace depend only on (seed, class counts,
spec), so train and test splits share them; everything per clip is keyed by (seed, split,
narration_id) and per video by (seed, split, video_id) through BLAKE2b (not Python's
salted `hash`), so a clip's features depend neither on row order, chunking, threads nor
process. Two rows with the same narration_id get the same noise.

How hard the default features are (a linear-probe ceiling,
`benchmarks/synthetic_difficulty.py`): docs/data.md#synthetic-features; generation speed:
docs/benchmarks.md#synthetic-features.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import Clips

BLOCKS = ("rgb", "flow", "audio")
_CHUNK_BYTES = 4 << 20  # per chunk temporary: fresh large buffers cost page faults here


@dataclasses.dataclass(frozen=True)
class SyntheticSpec:
    """How synthetic features are made; all strengths are relative to noise std 1.

    Attributes:
      block_dim: width of each block (rgb, flow, audio); features are 3 * block_dim.
      signal: global scale of the class signal (per-dimension amplitude of a prototype).
      verb_strength: per block (rgb, flow, audio) multiplier of the verb prototype.
      noun_strength: per block multiplier of the noun prototypes.
      noise: std of the i.i.d. Gaussian noise per dimension.
      clip_jitter: sigma of the log-normal per-clip factor (mean 1) on the class signal.
      video_nuisance: per-dimension RMS of the per-video nuisance vector.
      nuisance_rank: dimension of the subspace the nuisance vectors live in.
      main_noun_weight: weight of the main noun against 1 for the other nouns of a clip.
      confusable_prob: probability that a class is in a confusable pair.
      confusable_cos: cosine between the prototypes of a confusable pair (per block).
      hide_noun: fraction of clips whose noun signal is removed (moved to neighbours).
      neighbour_leak: strength, relative to a clip's own nouns, of a hidden clip's nouns
        in its previous and next clip.
      segment_envelope: amplitude a of the temporal envelope of per-segment features.
    """

    block_dim: int = 1024
    signal: float = 0.1
    verb_strength: tuple[float, float, float] = (0.4, 0.8, 0.25)
    noun_strength: tuple[float, float, float] = (1.6, 0.45, 0.25)
    noise: float = 1.0
    clip_jitter: float = 0.35
    video_nuisance: float = 1.0
    nuisance_rank: int = 64
    main_noun_weight: float = 2.0
    confusable_prob: float = 0.3
    confusable_cos: float = 0.6
    hide_noun: float = 0.15
    neighbour_leak: float = 0.5
    segment_envelope: float = 0.5

    def __post_init__(self):
        if self.block_dim < 1 or self.nuisance_rank < 1:
            raise ValueError("block_dim and nuisance_rank must be positive")
        if len(self.verb_strength) != len(BLOCKS) or len(self.noun_strength) != len(BLOCKS):
            raise ValueError(f"verb_strength and noun_strength need one value per {BLOCKS}")
        for name in ("signal", "noise", "clip_jitter", "video_nuisance", "neighbour_leak"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("confusable_prob", "hide_noun", "segment_envelope"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if not 0.0 <= self.confusable_cos < 1.0:
            raise ValueError(f"confusable_cos must be in [0, 1), got {self.confusable_cos}")
        if self.main_noun_weight <= 0:
            raise ValueError("main_noun_weight must be positive")

    @property
    def dim(self) -> int:
        """Feature width, 3 * block_dim."""
        return len(BLOCKS) * self.block_dim


@dataclasses.dataclass(frozen=True, eq=False)
class Prototypes:
    """Class directions shared by every split of one seed.

    Attributes:
      verb: [num_verbs, dim] float32; each block of a row has RMS 1 (norm sqrt(block_dim)).
      noun: [num_nouns, dim] float32, likewise.
      verb_partner, noun_partner: [n] int; the confusable partner of a class, -1 for none.
      nuisance_basis: [nuisance_rank, dim] float32, entries N(0, 1 / rank): z @ basis with
        z ~ N(0, I) has per-dimension variance 1.
    """

    verb: np.ndarray
    noun: np.ndarray
    verb_partner: np.ndarray
    noun_partner: np.ndarray
    nuisance_basis: np.ndarray


def prototypes(
    num_verbs: int, num_nouns: int, *, seed: int, spec: SyntheticSpec = SyntheticSpec()
) -> Prototypes:
    """The class prototypes and the nuisance subspace of `seed`, independent of any split.

    Args:
      num_verbs, num_nouns: class counts (97 and 300 for EPIC-KITCHENS-100).
      seed: the data seed.
      spec: only block_dim, confusable_* and nuisance_rank matter.

    Returns:
      Prototypes; the verb table does not depend on num_nouns nor the noun table on
      num_verbs.
    """
    verb, verb_partner = _class_table("verb", num_verbs, seed, spec)
    noun, noun_partner = _class_table("noun", num_nouns, seed, spec)
    rng = np.random.default_rng(stable_key(seed, "nuisance", spec.nuisance_rank, spec.block_dim))
    basis = rng.standard_normal((spec.nuisance_rank, spec.dim), dtype=np.float32)
    basis *= np.float32(1.0 / np.sqrt(spec.nuisance_rank))
    return Prototypes(verb, noun, verb_partner, noun_partner, basis)


def _class_table(part: str, n: int, seed: int, spec: SyntheticSpec):
    rng = np.random.default_rng(
        stable_key(seed, part, n, spec.block_dim, spec.confusable_prob, spec.confusable_cos)
    )
    d = spec.block_dim
    table = rng.standard_normal((n, len(BLOCKS), d))
    # Disjoint random pairs; in a confusable pair (a, b), b leans towards a.
    perm = rng.permutation(n)
    pairs = perm[: n // 2 * 2].reshape(-1, 2)
    pairs = pairs[rng.random(len(pairs)) < spec.confusable_prob]
    table /= np.linalg.norm(table, axis=2, keepdims=True)
    c = spec.confusable_cos
    table[pairs[:, 1]] = c * table[pairs[:, 0]] + np.sqrt(1.0 - c * c) * table[pairs[:, 1]]
    table /= np.linalg.norm(table, axis=2, keepdims=True)
    partner = np.full(n, -1, np.int64)
    partner[pairs[:, 0]], partner[pairs[:, 1]] = pairs[:, 1], pairs[:, 0]
    return (table * np.sqrt(d)).reshape(n, -1).astype(np.float32), partner


def main_nouns(clips: Clips) -> np.ndarray:
    """The main noun class of every clip (the CSV's noun_class), -1 where unknown.

    `Clips` keeps noun classes as sorted sets, so the main noun is recovered from the words:
    a word -> class map learnt from the table's single-noun clips places the first word of
    `all_nouns`, or, failing that, the one class left once the other words are placed.

    Args:
      clips: any clip table.

    Returns:
      [n] int64 class id, or -1 (the clip's nouns then weigh equally).
    """
    sets = clips.noun_classes.tolist()
    word_class: dict[str, int] = {}
    for words, classes in zip(clips.nouns, sets):
        if len(words) == 1 and len(classes) == 1:
            word_class.setdefault(words[0], classes[0])
    out = np.full(len(clips), -1, np.int64)
    for i, (words, classes) in enumerate(zip(clips.nouns, sets)):
        if len(classes) == 1:
            out[i] = classes[0]
        elif classes and words:
            main = word_class.get(words[0])
            if main not in classes:
                rest = set(classes) - {word_class.get(w) for w in words[1:]}
                main = rest.pop() if len(rest) == 1 else -1
            out[i] = main
    return out


def hidden_nouns(
    clips: Clips, *, seed: int, split: str, spec: SyntheticSpec = SyntheticSpec()
) -> np.ndarray:
    """Which clips have their noun signal hidden (moved to their temporal neighbours).

    Args:
      clips: the clip table; seed, split: as for `clip_features`.
      spec: only hide_noun matters.

    Returns:
      [n] bool; only clips with at least one noun class can be hidden.
    """
    u = np.array(
        [stable_key(seed, split, "hide", nid) >> 75 for nid in clips.narration_id], np.float64
    ) * (2.0**-53)
    return (u < spec.hide_noun) & (clips.noun_classes.sizes > 0)


def clip_features(
    clips: Clips,
    num_verbs: int,
    num_nouns: int,
    *,
    seed: int,
    split: str,
    spec: SyntheticSpec = SyntheticSpec(),
    segments: int = 0,
    chunk_rows: int | None = None,
    workers: int | None = None,
) -> np.ndarray:
    """Synthetic RGB | Flow | Audio features of every clip (see the module docstring).

    Args:
      clips: any clip table (EPIC CSVs, `kitchen.generate`).
      num_verbs, num_nouns: class counts; prototypes depend on them, so pass the
        vocabulary sizes (not the classes present) to share prototypes across splits.
      seed: prototypes, nuisance subspace and per-clip draws derive from it.
      split: name keying the per-clip and per-video draws ("train", "test").
      spec: signal, noise and difficulty settings.
      segments: 0 for one feature per clip, S > 0 for S temporal segments per clip.
      chunk_rows: clips generated at a time (default: ~4 MB); does not change the result.
      workers: threads (default: up to 2 CPU cores); does not change the result.

    Returns:
      float32 [n, 3 * block_dim] (segments=0) or [n, segments, 3 * block_dim].
    """
    if segments < 0:
        raise ValueError(f"segments must be >= 0, got {segments}")
    for name, sets, count in (
        ("verb", clips.verb_classes, num_verbs),
        ("noun", clips.noun_classes, num_nouns),
    ):
        if sets.indices.size and sets.indices.max() >= count:
            raise ValueError(f"{name} class {sets.indices.max()} >= num_{name}s={count}")
    protos = prototypes(num_verbs, num_nouns, seed=seed, spec=spec)
    n, dim, s = len(clips), spec.dim, max(segments, 1)
    scale = spec.signal
    verb_table = protos.verb * np.repeat(np.float32(spec.verb_strength), spec.block_dim) * scale
    noun_table = protos.noun * np.repeat(np.float32(spec.noun_strength), spec.block_dim) * scale
    verbs = _mean_entries(clips.verb_classes, np.full(n, -1), 1.0)
    nouns = _noun_entries(clips, hidden_nouns(clips, seed=seed, split=split, spec=spec), spec)

    videos, video_idx = np.unique(np.asarray(clips.video_id, dtype=object), return_inverse=True)
    video_idx = video_idx.reshape(-1)
    nuisance = np.empty((len(videos), dim), np.float32)
    for v, vid in enumerate(videos):
        z = np.random.default_rng(stable_key(seed, split, "video", vid)).standard_normal(
            spec.nuisance_rank, dtype=np.float32
        )
        nuisance[v] = z @ protos.nuisance_basis
    nuisance *= np.float32(spec.video_nuisance)
    row_keys = [stable_key(seed, split, "clip", nid) for nid in clips.narration_id]

    out = np.empty((n, s, dim) if segments else (n, dim), np.float32)
    noise_std = np.float32(spec.noise * np.sqrt(s))
    # Envelope cosines at segment centres; phases are per clip.
    centres = 2 * np.pi * (np.arange(s) + 0.5) / s

    def fill(lo: int, hi: int) -> None:
        draws = np.empty((hi - lo, 3))  # clarity z, verb phase, noun phase (turns)
        for i in range(lo, hi):
            rng = np.random.default_rng(row_keys[i])
            draws[i - lo, 0] = rng.standard_normal()
            draws[i - lo, 1:] = rng.random(2)
            rng.standard_normal(dtype=np.float32, out=out[i])
        part = out[lo:hi]
        part *= noise_std
        nuis = nuisance[video_idx[lo:hi]]
        part += nuis[:, None] if segments else nuis
        j = spec.clip_jitter
        clarity = np.exp(j * draws[:, 0] - 0.5 * j * j).astype(np.float32)
        verb = _gather_sum(verb_table, *verbs, lo, hi)
        noun = _gather_sum(noun_table, *nouns, lo, hi)
        if not segments:
            verb += noun
            verb *= clarity[:, None]
            part += verb
            return
        a = spec.segment_envelope if s > 1 else 0.0
        for k, signal in ((1, verb), (2, noun)):
            env = 1.0 + a * np.cos(centres[None, :] + 2 * np.pi * draws[:, k : k + 1])
            env = (env * clarity[:, None]).astype(np.float32)  # [rows, S]
            part += env[:, :, None] * signal[:, None, :]

    step = chunk_rows or max(1, _CHUNK_BYTES // (s * dim * 4))
    starts = range(0, n, step)
    workers = workers or min(2, os.cpu_count() or 1)
    if workers == 1 or len(starts) == 1:
        for lo in starts:
            fill(lo, min(lo + step, n))
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda lo: fill(lo, min(lo + step, n)), starts))
    return out


def _mean_entries(sets: ClassSets, main: np.ndarray, main_weight: float):
    """CSR (indptr, class, weight) of each set's weighted mean (main class weighted)."""
    rows = sets.rows
    w = np.where(sets.indices == main[rows], main_weight, 1.0)
    total = np.bincount(rows, weights=w, minlength=len(sets))
    return sets.indptr, sets.indices.astype(np.int64), (w / total[rows]).astype(np.float32)


def _noun_entries(clips: Clips, hidden: np.ndarray, spec: SyntheticSpec):
    """CSR noun entries per clip: its own nouns unless hidden, then hidden neighbours' nouns."""
    ptr, cls, w = _mean_entries(clips.noun_classes, main_nouns(clips), spec.main_noun_weight)
    prev = np.full(len(clips), -1, np.int64)
    nxt = np.full(len(clips), -1, np.int64)
    for rows in clips.video_clips().values():
        prev[rows[1:]], nxt[rows[:-1]] = rows[:-1], rows[1:]
    leak = np.float32(spec.neighbour_leak)
    rows_cls, rows_w = [], []
    for i in range(len(clips)):
        own = slice(ptr[i], ptr[i + 1])
        c = [] if hidden[i] else [cls[own]]
        ws = [] if hidden[i] else [w[own]]
        for j in (prev[i], nxt[i]):
            if j >= 0 and hidden[j]:
                c.append(cls[ptr[j] : ptr[j + 1]])
                ws.append(w[ptr[j] : ptr[j + 1]] * leak)
        rows_cls.append(np.concatenate(c) if c else cls[:0])
        rows_w.append(np.concatenate(ws) if ws else w[:0])
    indptr = np.zeros(len(clips) + 1, np.int64)
    np.cumsum([r.size for r in rows_cls], out=indptr[1:])
    return indptr, np.concatenate([cls[:0], *rows_cls]), np.concatenate([w[:0], *rows_w])


def _gather_sum(table, indptr, cls, w, lo: int, hi: int) -> np.ndarray:
    """[hi - lo, dim] sum of w * table[cls] over each row's entries, in entry order.

    Entry k of every row is added in pass k, so a row's sum does not depend on the chunk.
    """
    first, counts = indptr[lo:hi], indptr[lo + 1 : hi + 1] - indptr[lo:hi]
    out = np.zeros((hi - lo, table.shape[1]), np.float32)
    for k in range(int(counts.max(initial=0))):
        rows = np.flatnonzero(counts > k)
        e = first[rows] + k
        term = table[cls[e]]
        term *= w[e, None]
        if rows.size == hi - lo:
            out += term
        else:
            out[rows] += term
    return out


def stable_key(*parts) -> int:
    """A stable 128-bit integer from `parts` (BLAKE2b; Python's `hash` is salted per run)."""
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=16).digest(), "little")
