"""Command line: learning curves of one or more runs, without TensorBoard or a notebook.

  python -m jaxsvr.plot DIR [DIR ...] --out curves.png [--metric ndcg_avg --metric map_avg]

Draws, against the training step, each run's test metrics (default: nDCG and mAP averaged
over both directions, x100) and its train loss, one panel each, one line per run; the
legend names each run by its model, loss (and margin) and folder. The figure is written
whole (png, pdf or svg by the name of `--out`). A folder without `metrics.jsonl` or
without one usable line in it, an unknown metric, an `--out` that is a folder or lies in
no folder, or a missing matplotlib (`pip install matplotlib`, or the `notebooks` extra) is
one `error:` line naming what the user gave, and exit code 2.

`metrics.jsonl` is read line by line and never trusted blindly: a line that is not UTF-8,
not JSON (a torn last line), not an object or without an integer step >= 0 is skipped,
and so is a plotted value (`train/loss`, `test/*`) that is not a finite number (`1e400`
reads as inf, a string, a list, an object, NaN); each line with something skipped is one
warning naming the file, the line number and why. null is "no value" (how jaxsvr writes an
undefined or non-finite metric: `jaxsvr.files.json_text`), left out without a warning.
Other keys are not read.

`read_curves` and `draw` are the library side, used by the training notebook too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import sys

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.runtime import cli
from jaxsvr.runtime.workdir import atomic_write

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
    """The train loss and test metrics of a run's `metrics.jsonl`, and its label; bad
    lines and values are skipped with a warning (module docstring).

    Raises:
      InputError: the run has no metrics.jsonl, or no usable line in it.
    """
    workdir = locations.locate(workdir)
    path = workdir / "metrics.jsonl"
    if not path.is_file():
        raise InputError(f"{workdir} has no metrics.jsonl: is it the workdir of a training run?")
    train, test = [], []
    lines = path.read_bytes().splitlines()
    for number, raw in enumerate(lines, 1):
        step, values, problem = _parse(raw)
        if problem:
            logging.warning("%s:%d: skipped %s", path, number, problem)
        if step is None:
            continue
        if "train/loss" in values:
            train.append((step, values["train/loss"]))
        metrics = {k[len("test/") :]: v for k, v in values.items() if k.startswith("test/")}
        if metrics:
            test.append((step, metrics))
    if not train and not test:
        raise InputError(
            f"{path} has no usable line (of {len(lines)}): no train loss or test metric with a "
            "step; is the run logging yet?"
        )
    names = sorted(set().union(*(m for _, m in test))) if test else []
    return Curves(
        label=_label(workdir),
        train_steps=np.asarray([s for s, _ in train], np.int64),
        train_loss=np.asarray([v for _, v in train], np.float64),
        test_steps=np.asarray([s for s, _ in test], np.int64),
        test={n: np.asarray([m.get(n, np.nan) for _, m in test], np.float64) for n in names},
    )


def _parse(raw: bytes) -> tuple[int | None, dict[str, float], str | None]:
    """(step or None, the plotted values that are finite numbers, what was skipped or None)
    of one line of metrics.jsonl."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return None, {}, f"the line: not UTF-8 text (byte {e.start})"
    except (ValueError, RecursionError):
        return None, {}, "the line: not JSON (a torn or damaged line)"
    if not isinstance(record, dict):
        return None, {}, "the line: not a JSON object"
    step = record.get("step")
    if type(step) is not int or not 0 <= step < 2**63:
        return None, {}, f"the line: its step {step!r:.40} is not an integer >= 0"
    values, bad = {}, []
    for key, value in record.items():
        if value is not None and (key == "train/loss" or key.startswith("test/")):
            number = _finite(value)
            if number is None:
                bad.append(f"{key} = {value!r:.40}")
            else:
                values[key] = number
    problem = f"{', '.join(bad)}: not a finite number" if bad else None
    return step, values, problem


def _finite(value) -> float | None:
    if type(value) not in (int, float):  # bool, str, list, dict, None
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


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
    cli.log_to_stderr()
    out = locations.locate(args.out)
    kind = out.suffix.lower().lstrip(".")
    if kind not in ("png", "pdf", "svg"):
        raise InputError(f"--out {args.out}: name a .png, .pdf or .svg file")
    if out.is_dir():
        raise InputError(f"--out {args.out} is a folder: name a .png, .pdf or .svg file in it")
    if not out.parent.is_dir():
        state = "is a file" if out.parent.exists() else "does not exist"
        raise InputError(f"--out {args.out}: folder {out.parent} {state}")
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
    try:
        atomic_write(out, lambda f: f.write(buffer.getvalue()))
    except OSError as e:  # named by what the user gave, not by the temporary file
        raise InputError(f"cannot write --out {args.out}: {e.strerror or e}") from None
    print(f"wrote {out} ({len(runs)} run{'s' if len(runs) > 1 else ''})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
