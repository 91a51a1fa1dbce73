"""Caption proxy speed on the 3842 EK-100 test sentences (3842 x 3842 matrices).

  python benchmarks/proxy_speed.py [--annotations ../shared/data/epic100] [--sample 10000]

Needs spaCy's `en_core_web_sm` (a dependency of jaxsvr) and WordNet 3.0
(`apt-get install wordnet-base wordnet-sense-index`); without them it says so in one line
and exits with code 2.

Times, in one process on this machine: spaCy parsing; BoW, PoS and SYN (EPIC classes)
each including the parse (targets <= 15 s on 2 cores); the full METEOR matrix
(`jaxsvr.relevance.meteor`, 2 workers); and NLTK's `single_meteor_score`, extrapolated to
all 14.8 M pairs. NLTK's time per pair depends on whether the pair aligns at all (shares a
word, stem or synonym: METEOR > 0), and the full set holds far fewer aligning pairs than
a sample drawn to test them, so NLTK is timed on `--sample` / 2 pairs of each class (drawn
at random within the class, timed one by one in a shuffled order) and each class's time
per pair is weighted by its count in the full matrix. Prints the shares, the per-class
times, the max |difference| on the sample (target <= 1e-9) and the speed-up (target
>= 10x), then a markdown table.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from jaxsvr.annotations import caption_table, epic100
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions, wordnet, words
from jaxsvr.relevance import meteor, proxies
from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]


def nltk_seconds(tokens, pairs: np.ndarray, wn) -> tuple[np.ndarray, np.ndarray]:
    """Seconds of NLTK's `single_meteor_score` (rows: references) for each pair, and the
    scores. Each call is timed on its own, so pairs of both classes, shuffled together,
    share whatever load the machine has."""
    from nltk.translate.meteor_score import single_meteor_score

    seconds, scores = np.empty(len(pairs)), np.empty(len(pairs))
    for i, (r, h) in enumerate(pairs):
        start = time.perf_counter()
        scores[i] = single_meteor_score(list(tokens[r]), list(tokens[h]), wordnet=wn)
        seconds[i] = time.perf_counter() - start
    return seconds, scores


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--sample", type=cli.number(int, 1), default=10000, help="pairs timed with NLTK")
    p.add_argument("--workers", type=cli.number(int, 1, 64), default=2)
    args = p.parse_args()
    root = Path(args.annotations)
    rows = []

    def timed(label, fn):
        start = time.perf_counter()
        out = fn()
        rows.append((label, time.perf_counter() - start))
        return out

    try:
        texts = caption_table.read_csv(root / "EPIC_100_retrieval_test_sentence.csv").texts
        classes = proxies.ClassMap.from_vocabs(
            epic100.read_classes(root / "EPIC_100_verb_classes.csv"),
            epic100.read_classes(root / "EPIC_100_noun_classes.csv"),
        )
        wn = wordnet.load()
        parsed = timed("spaCy parse (NER off), first load", lambda: captions.parse(texts))
    except (InputError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    for name, fn in [
        ("bow", lambda p: proxies.bow(p)),
        ("pos", lambda p: proxies.pos(p)),
        ("syn", lambda p: proxies.syn(p, classes=classes)),
    ]:
        words.spacy_pipeline.cache_clear()  # each proxy pays its own parse
        timed(f"{name.upper()} incl. parse", lambda fn=fn: fn(captions.parse(texts)))
    tokens = parsed.tokens
    met = timed(
        f"METEOR, jaxsvr (`meteor_matrix`, {args.workers} workers)",
        lambda: meteor.meteor_matrix(tokens, tokens, wordnet=wn, workers=args.workers),
    )

    # NLTK per class of pair (aligning: METEOR > 0), weighted by the full set's counts.
    rng = np.random.default_rng(0)
    aligning = met > 0
    n_pairs, n_aligning = aligning.size, int(aligning.sum())
    counts = {"aligning": n_aligning, "non-aligning": n_pairs - n_aligning}
    take = {
        name: rng.choice(np.flatnonzero(mask), min(args.sample // 2, int(mask.sum())), False)
        for name, mask in (("aligning", aligning), ("non-aligning", ~aligning))
    }
    flat = np.concatenate(list(take.values()))
    is_aligning = np.repeat([True, False], [len(v) for v in take.values()])
    order = rng.permutation(len(flat))
    flat, is_aligning = flat[order], is_aligning[order]
    pairs = np.stack(np.unravel_index(flat, met.shape), axis=1)
    seconds, want = nltk_seconds(tokens, pairs, wn)
    diff = float(np.max(np.abs(met[pairs[:, 0], pairs[:, 1]] - want)))
    sample_pairs = len(pairs)
    per_class = {  # name: (seconds per pair, pairs in the full set, pairs timed)
        name: (float(seconds[sel].mean()), counts[name], int(sel.sum()))
        for name, sel in (("aligning", is_aligning), ("non-aligning", ~is_aligning))
    }
    print(
        f"NLTK sample: {is_aligning.mean():.1%} aligning; full set: {n_aligning / n_pairs:.1%}",
        file=sys.stderr,
    )
    nltk_total = sum(seconds * count for seconds, count, _ in per_class.values())
    mine = rows[-1][1]

    print(
        f"EK-100 test sentences: {len(texts)} x {len(texts)} = {n_pairs:,} pairs, "
        f"{os.cpu_count()} cores, NLTK {meteor.nltk_version()}, spaCy {captions.DEFAULT_PIPELINE}"
    )
    for name, (seconds, count, sampled) in per_class.items():
        print(
            f"{name}: {count:,} pairs ({count / n_pairs:.1%} of the full set), NLTK "
            f"{seconds * 1e3:.3f} ms per pair on {sampled:,} of them"
        )
    print(
        f"NLTK extrapolated with the full set's shares: {nltk_total:.0f} s "
        f"({nltk_total / n_pairs * 1e3:.3f} ms per pair on average)\n"
    )
    print("| step | seconds |\n|---|---|")
    for label, sec in rows:
        print(f"| {label} | {sec:.2f} |")
    per_pair = nltk_total / n_pairs
    print(
        f"| METEOR, NLTK `single_meteor_score` per pair ({per_pair * 1e3:.3f} ms × "
        f"{n_pairs / 1e6:.1f} M, extrapolated) | {nltk_total:.0f} ({nltk_total / 60:.0f} min) |"
    )
    print(
        f"\nMETEOR speed-up {nltk_total / mine:.0f}x; max |jaxsvr - NLTK| on {sample_pairs:,} "
        f"pairs ({per_class['aligning'][2]:,} aligning, {per_class['non-aligning'][2]:,} not) "
        f"= {diff:.1e}; {n_aligning / n_pairs:.1%} of pairs align at all"
    )


if __name__ == "__main__":
    main()
