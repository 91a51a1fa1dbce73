"""How hard synthetic features are: a linear-probe ceiling on the EK-100 retrieval test set.

  python benchmarks/synthetic_difficulty.py [--epic ../shared/data/epic100] [--seed 0]
      [--lam 1] [--set signal=0.05 --set "noun_strength=(1,0.5,0.2)" ...] [--segments 4]
      [--no-reference] [--json out.json]

`jaxsvr.inputs.synthetic` stands in for EPIC's TBN features; its defaults are calibrated so
that a trained retrieval model lands clearly between random and perfect. The proxy for
"a trained model" is `linear_probe`: ridge regression (closed form, with intercept) from
L2-normalised features of the 16115 EPIC train clips to verb one-hot and noun multi-hot
targets; each test clip is embedded as [relu(verb scores) ; relu(noun scores)], each test
sentence as [verb one-hot ; noun multi-hot], and
S = 1/2 cos(verb parts) + 1/2 cos(noun parts), scored by `jaxsvr.evaluation.evaluate`
against the class relevance of the 9668 test clips x 3842 sentences. "verb" / "noun" rows
keep one half of S (the other set to 0): what each part of speech alone is worth. Exact
ties are broken by a tiny deterministic jitter, so a part-only S gets the expected value of
random tie order rather than the pessimistic one.

Measured with the default spec, seed 0, lambda 1 (2-core CPU, ~20 s in all):

  | hide_noun | similarity  | nDCG  | mAP   |
  |-----------|-------------|-------|-------|
  | 0.15      | full        | 0.592 | 0.471 |
  | 0.15      | verb        | 0.541 | 0.315 |
  | 0.15      | noun        | 0.269 | 0.282 |
  | 0         | full        | 0.612 | 0.513 |
  | 0         | verb        | 0.547 | 0.318 |
  | 0         | noun        | 0.293 | 0.332 |
  | -         | oracle full | 1.000 | 1.000 |
  | -         | oracle verb | 0.816 | 0.544 |
  | -         | oracle noun | 0.403 | 0.722 |
  | -         | random      | 0.109 | 0.056 |
  generation of the train table (16115 x 3072): 0.6-1.2 s
  --seed 1: full 0.615 / 0.488; --segments 4: full 0.591 / 0.469; lambda 3: 0.568 / 0.444.
"oracle" rows embed test clips by their true classes (the best any similarity can do with
that half alone).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere, package not installed

from jaxsvr.annotations import epic100  # noqa: E402
from jaxsvr.annotations.class_sets import ClassSets  # noqa: E402
from jaxsvr.evaluation import evaluate  # noqa: E402
from jaxsvr.inputs.synthetic import SyntheticSpec, clip_features  # noqa: E402
from jaxsvr.relevance import class_relevance  # noqa: E402
from jaxsvr.runtime import cli  # noqa: E402

DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"


def multi_hot(sets: ClassSets, num_classes: int) -> np.ndarray:
    """[n, num_classes] float32 with 1 at each set's classes."""
    out = np.zeros((len(sets), num_classes), np.float32)
    out[sets.rows, sets.indices] = 1.0
    return out


def ridge(x: np.ndarray, y: np.ndarray, lam: float):
    """Closed-form ridge regression with an (unpenalised) intercept.

    Args:
      x: [n, d] inputs; y: [n, k] targets; lam: L2 penalty.

    Returns:
      (w [d, k], b [k]) with predictions x @ w + b.
    """
    mx, my = x.mean(0), y.mean(0)
    xc = x - mx
    gram = (xc.T @ xc).astype(np.float64)
    gram[np.diag_indices_from(gram)] += lam
    w = np.linalg.solve(gram, (xc.T @ (y - my)).astype(np.float64)).astype(np.float32)
    return w, my - mx @ w


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-8)


def linear_probe(
    train_x: np.ndarray,
    train_clips: epic100.Clips,
    test_x: np.ndarray,
    test_clips: epic100.Clips,
    sentences: epic100.Sentences,
    num_verbs: int,
    num_nouns: int,
    *,
    lam: float = 1.0,
    rel: np.ndarray | None = None,
) -> dict[str, dict]:
    """nDCG/mAP of the ridge-probe similarity (module docstring) and its verb/noun halves.

    Args:
      train_x: [n_train, d] clip features; test_x: [n_test, d].
      train_clips, test_clips: their annotations; sentences: the test captions.
      num_verbs, num_nouns: class counts.
      lam: ridge penalty.
      rel: [n_test, n_sentences] class relevance, computed when None.

    Returns:
      {"full" | "verb" | "noun": evaluate(...) result}.
    """
    targets = np.concatenate(
        [
            multi_hot(train_clips.verb_classes, num_verbs),
            multi_hot(train_clips.noun_classes, num_nouns),
        ],
        axis=1,
    )
    w, b = ridge(_unit(train_x), targets, lam)
    scores = np.maximum(_unit(test_x) @ w + b, 0.0)
    return class_similarity_metrics(
        scores[:, :num_verbs], scores[:, num_verbs:], test_clips, sentences, rel=rel
    )


def class_similarity_metrics(
    clip_verbs: np.ndarray,
    clip_nouns: np.ndarray,
    test_clips: epic100.Clips,
    sentences: epic100.Sentences,
    *,
    rel: np.ndarray | None = None,
) -> dict[str, dict]:
    """Metrics of S = 1/2 cos(verb parts) + 1/2 cos(noun parts) and of each half alone.

    Args:
      clip_verbs: [n_test, num_verbs] non-negative verb scores of the test clips.
      clip_nouns: [n_test, num_nouns] noun scores.
      test_clips, sentences: the test annotations; sentences are embedded as one-hots.
      rel: [n_test, n_sentences] class relevance, computed when None.

    Returns:
      {"full" | "verb" | "noun": evaluate(...) result}.
    """
    sent_v = _unit(multi_hot(sentences.verb_classes, clip_verbs.shape[1]))
    sent_n = _unit(multi_hot(sentences.noun_classes, clip_nouns.shape[1]))
    if rel is None:
        rel = class_relevance(
            test_clips.verb_classes,
            test_clips.noun_classes,
            sentences.verb_classes,
            sentences.noun_classes,
        )
    cos_v = 0.5 * (_unit(clip_verbs) @ sent_v.T)
    cos_n = 0.5 * (_unit(clip_nouns) @ sent_n.T)
    jitter = np.random.default_rng(0).random(rel.shape, dtype=np.float32) * np.float32(1e-5)
    return {
        "full": evaluate(cos_v + cos_n + jitter, rel),
        "verb": evaluate(cos_v + jitter, rel),
        "noun": evaluate(cos_n + jitter, rel),
    }


def difficulty(
    epic: Path,
    spec: SyntheticSpec,
    *,
    seed: int = 0,
    lam: float = 1.0,
    segments: int = 0,
    rel: np.ndarray | None = None,
) -> dict:
    """Generates EPIC train/test features with `spec` and runs `linear_probe`.

    Args:
      epic: folder of the EPIC-KITCHENS-100 CSVs.
      spec, seed: as for `clip_features`.
      lam: ridge penalty.
      segments: 0 for clip features, S > 0 to probe the mean of S segment features.
      rel: the test class relevance, computed when None.

    Returns:
      {"generate_train_s": seconds, "full" | "verb" | "noun": metrics}.
    """
    train = epic100.read_clips(epic / epic100.TRAIN_CLIPS)
    test = epic100.read_clips(epic / epic100.TEST_CLIPS)
    sentences = epic100.read_sentences(epic / epic100.TEST_SENTENCES, test)
    nv = len(epic100.read_classes(epic / epic100.VERB_CLASSES))
    nn = len(epic100.read_classes(epic / epic100.NOUN_CLASSES))

    def features(clips, split):
        x = clip_features(clips, nv, nn, seed=seed, split=split, spec=spec, segments=segments)
        return x.mean(1) if segments else x

    start = time.perf_counter()
    train_x = features(train, "train")
    seconds = time.perf_counter() - start
    test_x = features(test, "test")
    out = linear_probe(train_x, train, test_x, test, sentences, nv, nn, lam=lam, rel=rel)
    return {"generate_train_s": seconds, **out}


def _override(spec: SyntheticSpec, assignments: list[str]) -> SyntheticSpec:
    """SyntheticSpec with FIELD=VALUE changes; VALUE is JSON or a tuple like (1,0.5,0.2)."""
    names = {f.name for f in dataclasses.fields(SyntheticSpec)}
    changes = {}
    for item in assignments:
        name, _, value = item.partition("=")
        if name not in names:
            raise SystemExit(f"--set {item}: SyntheticSpec has no field {name!r}")
        parsed = json.loads(f"[{value[1:-1]}]" if value.startswith("(") else value)
        changes[name] = tuple(parsed) if isinstance(parsed, list) else parsed
    return dataclasses.replace(spec, **changes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    parser.add_argument("--seed", type=cli.number(int, 0, 2**32 - 1), default=0)
    parser.add_argument("--lam", type=cli.number(float, 0, above=True), default=1.0)
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument(
        "--segments", type=cli.number(int, 0), default=0, help="probe the segment mean"
    )
    parser.add_argument("--no-reference", action="store_true", help="skip oracle/random rows")
    parser.add_argument("--json", type=Path, help="also write all metrics here")
    args = parser.parse_args()

    spec = _override(SyntheticSpec(), args.set)
    test = epic100.read_clips(args.epic / epic100.TEST_CLIPS)
    sentences = epic100.read_sentences(args.epic / epic100.TEST_SENTENCES, test)
    rel = class_relevance(
        test.verb_classes, test.noun_classes, sentences.verb_classes, sentences.noun_classes
    )
    rows: dict[str, dict] = {}
    seconds = 0.0
    for hide in dict.fromkeys([spec.hide_noun, 0.0]):
        res = difficulty(
            args.epic,
            dataclasses.replace(spec, hide_noun=hide),
            seed=args.seed,
            lam=args.lam,
            segments=args.segments,
            rel=rel,
        )
        generated = res.pop("generate_train_s")
        seconds = seconds or generated
        rows.update({f"{hide:g} | {part}": m for part, m in res.items()})
    if not args.no_reference:
        nv = len(epic100.read_classes(args.epic / epic100.VERB_CLASSES))
        nn = len(epic100.read_classes(args.epic / epic100.NOUN_CLASSES))
        oracle = class_similarity_metrics(
            multi_hot(test.verb_classes, nv), multi_hot(test.noun_classes, nn), test, sentences
        )
        rows.update({f"- | oracle {part}": m for part, m in oracle.items()})
        sim = np.random.default_rng(args.seed).random(rel.shape, dtype=np.float32)
        rows["- | random"] = evaluate(sim, rel)
    print(f"spec: {spec}, seed {args.seed}, lambda {args.lam}, segments {args.segments}")
    print("| hide_noun | similarity  | nDCG  | mAP   |")
    print("|-----------|-------------|-------|-------|")
    for name, m in rows.items():
        hide, part = name.split(" | ")
        print(f"| {hide:<9} | {part:<11} | {m['ndcg_avg']:.3f} | {m['map_avg']:.3f} |")
    print(f"generation of the train table ({spec.dim}-d): {seconds:.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"generate_train_s": seconds, **rows}, indent=1))


if __name__ == "__main__":
    main()
