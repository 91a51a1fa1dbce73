"""Command line: learning curves of one or more runs, without TensorBoard or a notebook.

  python -m jaxsvr.plot DIR [DIR ...] --out curves.png [--metric ndcg_avg --metric map_avg]

Draws, against the training step, each run's test metrics (default: nDCG and mAP averaged
over both directions, x100) and its train loss, one panel each, one line per run; the
legend names each run by its model, loss (and margin) and folder. The figure is written
whole (png, pdf or svg by the name of `--out`). A folder without `metrics.jsonl`, an
unknown metric or a missing matplotlib (`pip install matplotlib`, or the `notebooks`
extra) is one `error:` line and exit code 2.

`read_curves` and `draw` are the library side, used by the training notebook too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import sys

import numpy as np

from jaxsvr import cli
from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.workdir import atomic_write

DEFAULT_METRICS = ("ndcg_avg", "map_avg")
PERCENT = ("ndcg", "map")  # metrics in [0, 1], drawn x100 like every table of the docs


@dataclasses.dataclass(frozen=True)
class Curves:
    label: str
    train_steps: np.ndarray  # [n] steps of the logged train losses
    train_loss: np.ndarray  # [n]
    test_steps: np.ndarray  # [m] steps of the evaluations
    test: dict[str, np.ndarray]  # metric name (without "test/") -> [m]


def read_curves(workdir) -> Curves:
    """The train loss and test metrics of a run's `metrics.jsonl`, and its label."""
    workdir = locations.locate(workdir)
    path = workdir / "metrics.jsonl"
    if not path.is_file():
        raise InputError(f"{workdir} has no metrics.jsonl: is it the workdir of a training run?")
    train, test = [], []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            record = json.loads(line)
            step = int(record["step"])
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{path}:{number}: not a JSON object with a step") from None
        if "train/loss" in record:
            train.append((step, record["train/loss"]))
        metrics = {k[len("test/") :]: v for k, v in record.items() if k.startswith("test/")}
        if metrics:
            test.append((step, metrics))
    names = sorted(set().union(*(m for _, m in test))) if test else []
    return Curves(
        label=_label(workdir),
        train_steps=np.asarray([s for s, _ in train], np.int64),
        train_loss=np.asarray([v for _, v in train], np.float64),
        test_steps=np.asarray([s for s, _ in test], np.int64),
        test={n: np.asarray([m.get(n, np.nan) for _, m in test], np.float64) for n in names},
    )


def _label(workdir) -> str:
    try:
        config = json.loads((workdir / "config.json").read_text())
        loss = config["loss"]["name"]
        if loss == "triplet":
            loss += f"/{config['loss']['margin']}"
        return f"{config['model']['name']} {loss} ({workdir.name})"
    except (OSError, ValueError, KeyError, TypeError):
        return workdir.name


def draw(runs: list[Curves], metrics=DEFAULT_METRICS):
    """A matplotlib figure: one panel per test metric and one for the train loss."""
    import matplotlib.pyplot as plt  # the caller's backend (inline in a notebook)

    for name in metrics:
        if not any(name in r.test for r in runs):
            have = sorted(set().union(*(r.test for r in runs)))
            raise InputError(f"no run has test metric {name!r} (they have: {', '.join(have)})")
    panels = len(metrics) + 1
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4), squeeze=False)
    for run in runs:
        for ax, name in zip(axes[0], metrics, strict=False):
            if name in run.test:
                scale = 100.0 if name.startswith(PERCENT) else 1.0
                ax.plot(run.test_steps, run.test[name] * scale, marker="o", ms=3, label=run.label)
        axes[0, -1].plot(run.train_steps, run.train_loss, label=run.label)
    for ax, name in zip(axes[0], metrics, strict=False):
        ax.set_title(f"test {name}" + (" (x100)" if name.startswith(PERCENT) else ""))
    axes[0, -1].set_title("train loss")
    for ax in axes[0]:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def _parser() -> cli.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m jaxsvr.plot", description=__doc__.split("\n")[0])
    p.add_argument("workdirs", nargs="+", metavar="DIR", help="training runs' folders")
    p.add_argument("--out", required=True, help="the figure to write (.png, .pdf, .svg)")
    p.add_argument(
        "--metric",
        action="append",
        help=f"a test metric to draw (repeatable; default {' and '.join(DEFAULT_METRICS)})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = locations.locate(args.out)
    kind = out.suffix.lower().lstrip(".")
    if kind not in ("png", "pdf", "svg"):
        raise InputError(f"--out {args.out}: name a .png, .pdf or .svg file")
    if not out.parent.is_dir():
        raise InputError(f"--out {args.out}: folder {out.parent} does not exist")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display needed
    except ImportError:
        raise InputError(
            "python -m jaxsvr.plot needs matplotlib: pip install matplotlib (or the "
            "notebooks extra: pip install -e '.[notebooks]')"
        ) from None
    runs = [read_curves(d) for d in args.workdirs]
    fig = draw(runs, tuple(args.metric or DEFAULT_METRICS))
    buffer = io.BytesIO()
    fig.savefig(buffer, format=kind, dpi=120)
    atomic_write(out, lambda f: f.write(buffer.getvalue()))
    print(f"wrote {out} ({len(runs)} run{'s' if len(runs) > 1 else ''})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
