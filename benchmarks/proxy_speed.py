"""Caption proxy speed on the 3842 EK-100 test sentences (3842 x 3842 matrices).

  python benchmarks/proxy_speed.py [--annotations ../shared/data/epic100] [--sample 10000]

Times, in one process on this machine: spaCy parsing; BoW, PoS and SYN (EPIC classes)
each including the parse (targets <= 15 s on 2 cores); the full METEOR matrix
(`jaxsvr.relevance.meteor`, 2 workers) against NLTK's `single_meteor_score` timed on a
random sample of pairs (half random, half pairs sharing a word) and extrapolated to all
14.8 M pairs, and the max |difference| on that sample (target <= 1e-9, >= 10x faster).
Prints a markdown table.
"""

import argparse
import os
import time
from pathlib import Path

import numpy as np

from jaxsvr.data import epic100, text
from jaxsvr.relevance import captions, meteor, proxies, wordnet

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--sample", type=int, default=10000, help="pairs timed with NLTK")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    root = Path(args.annotations)
    texts = captions.read_csv(root / "EPIC_100_retrieval_test_sentence.csv").texts
    classes = proxies.ClassMap.from_vocabs(
        epic100.read_classes(root / "EPIC_100_verb_classes.csv"),
        epic100.read_classes(root / "EPIC_100_noun_classes.csv"),
    )
    wn = wordnet.load()
    text.spacy_pipeline.cache_clear()
    rows = []

    def timed(label, fn):
        start = time.perf_counter()
        out = fn()
        rows.append((label, time.perf_counter() - start))
        return out

    parsed = timed("spaCy parse (tagger + lemmatizer)", lambda: captions.parse(texts))
    for name, fn in [
        ("bow", lambda p: proxies.bow(p)),
        ("pos", lambda p: proxies.pos(p)),
        ("syn", lambda p: proxies.syn(p, classes=classes)),
    ]:
        text.spacy_pipeline.cache_clear()  # each proxy pays its own parse
        timed(f"{name.upper()} incl. parse", lambda fn=fn: fn(captions.parse(texts)))
    tokens = parsed.tokens
    met = timed(
        f"METEOR, jaxsvr ({args.workers} workers)",
        lambda: meteor.meteor_matrix(tokens, tokens, wordnet=wn, workers=args.workers),
    )
    from nltk.translate.meteor_score import single_meteor_score

    rng = np.random.default_rng(0)
    half = args.sample // 2
    nonzero = np.argwhere(met > 0)
    pairs = np.concatenate(
        [
            rng.integers(0, len(tokens), (half, 2)),
            nonzero[rng.choice(len(nonzero), args.sample - half, replace=False)],
        ]
    )
    start = time.perf_counter()
    want = [single_meteor_score(list(tokens[r]), list(tokens[h]), wordnet=wn) for r, h in pairs]
    per_pair = (time.perf_counter() - start) / len(pairs)
    diff = float(np.max(np.abs(met[pairs[:, 0], pairs[:, 1]] - np.array(want))))
    nltk_total = per_pair * len(tokens) ** 2
    mine = rows[-1][1]
    print(
        f"EK-100 test sentences: {len(texts)} x {len(texts)}, {os.cpu_count()} cores, "
        f"NLTK {meteor.nltk_version()}, spaCy {captions.DEFAULT_PIPELINE}"
    )
    print("| step | seconds |\n|---|---|")
    for label, sec in rows:
        print(f"| {label} | {sec:.2f} |")
    print(
        f"| METEOR, NLTK per pair ({per_pair * 1e3:.3f} ms x {len(tokens) ** 2:,} pairs, "
        f"extrapolated) | {nltk_total:.0f} |"
    )
    print(
        f"\nMETEOR speed-up {nltk_total / mine:.0f}x; max |jaxsvr - NLTK| on {len(pairs):,} "
        f"pairs = {diff:.1e}; {(met > 0).mean():.1%} of pairs align at all"
    )


if __name__ == "__main__":
    main()
