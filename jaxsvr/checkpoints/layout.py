"""What orbax writes in a run folder, known in one place: a run's checkpoints, which of
them are damaged, and the parameters of one.

    WORKDIR/checkpoints/<step>/   the train state every `checkpoint.every_steps` (the newest few)
    WORKDIR/best/<step>/          the state with the best `checkpoint.best_metric` (one)
        _CHECKPOINT_METADATA      orbax's JSON, with the commit timestamp
        default/                  the state: {"step", "params", "opt_state", ...}
        metrics/metrics           best/ only: the metrics it was chosen on (JSON)

`find_checkpoint(workdir, which)` picks one ("best", "latest", "auto" or a step number);
`damage(path, metric)` says why a step folder is unusable; `restore_params(found)` reads
its parameters (screened first, checked finite). The trainer's `manager` saves and resumes
through orbax's manager over these folders; the warm start, the runs read back and the
rescore job read parameters here. Errors name the flag or config key that chose the
checkpoint (`--checkpoint`, `config.eval.rescore.checkpoint`, `config.train.init_from`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.models import param_trees

FOLDERS = ("best", "checkpoints")  # best/ is one step; checkpoints/ the newest few
STATE = "default"  # the step folder's subfolder holding the saved state
STEP_METADATA = "_CHECKPOINT_METADATA"  # orbax's per-step JSON, read when a manager starts
METRICS = ("metrics", "metrics")  # best/<step>/metrics/metrics
CHECKPOINT_CHOICES = "best, latest, auto or a step number"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    kind: str  # "best" or "checkpoints": the folder of the workdir
    step: int
    path: Any  # the step's folder
    stamp: str  # orbax's commit timestamp: a rewritten step gets a new one

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.step}/{self.stamp}"


def steps(folder, *, folders_only: bool = True) -> list[int]:
    """The steps saved in `folder` (`best/` or `checkpoints/`), sorted. `folders_only=False`
    also lists files with a step's name (the screen moves those aside)."""
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in folder.iterdir()
        if p.name.isascii() and p.name.isdigit() and (p.is_dir() or not folders_only)
    )


def find_checkpoint(workdir, which: str = "auto", *, flag: str = "--checkpoint") -> Checkpoint:
    """The checkpoint `which` names in `workdir`: "best" (`best/<step>`), "latest" (the
    newest `checkpoints/<step>`), a step number (found in either) or "auto" (best if the
    run has one, else latest); `flag` chose it and is named in errors."""
    saved = {kind: steps(workdir / kind) for kind in FOLDERS}
    if not any(saved.values()):
        raise InputError(
            f"{workdir} has no checkpoint (no step in best/ or checkpoints/): train the run "
            f"first, or pick another {_choices(flag)}"
        )
    if which == "auto":
        which = "best" if saved["best"] else "latest"
    if which in ("best", "latest"):
        kind = "best" if which == "best" else "checkpoints"
        if not saved[kind]:
            raise InputError(
                f"{workdir} has no {which} checkpoint (no step in {kind}/): pick another "
                f"{_choices(flag)}"
            )
        step = max(saved[kind])
    else:
        try:
            step = int(which)
        except ValueError:
            raise InputError(f"{_setting(flag, which)}: use {CHECKPOINT_CHOICES}") from None
        kind = next((k for k in FOLDERS if step in saved[k]), None)
        if kind is None:
            have = sorted({s for v in saved.values() for s in v})
            raise InputError(
                f"{_setting(flag, which)}: {workdir} has no checkpoint of step {step} (it has "
                f"steps {have})"
            )
    return _checkpoint(kind, step, workdir / kind / str(step))


def step_folder(path) -> Checkpoint | None:
    """`path` as a checkpoint when it is one step folder (`WORKDIR/best/<step>`,
    `WORKDIR/checkpoints/<step>`), else None."""
    if not (path.name.isdigit() and (path / STATE).is_dir()):
        return None
    return _checkpoint(path.parent.name, int(path.name), path)


def _checkpoint(kind: str, step: int, path) -> Checkpoint:
    try:
        stamp = str(json.loads((path / STEP_METADATA).read_text())["commit_timestamp_nsecs"])
    except (OSError, ValueError, KeyError, TypeError):
        stamp = "unknown"
    return Checkpoint(kind, step, path, stamp)


def damage(path: Path, metric: str | None = None) -> str | None:
    """Why the step folder `path` is damaged in a way that would stop an orbax manager (or
    holds no state at all), else None. `metric`: the value best/'s metrics must hold."""
    meta = path / STEP_METADATA
    if meta.exists():  # older orbax versions wrote none
        try:
            readable = isinstance(json.loads(meta.read_bytes()), dict)
        except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError too
            readable = False
        if not readable:
            return f"its {STEP_METADATA} is not a JSON object"
    if not (path / STATE).is_dir():
        return f"it has no {STATE}/ folder, which holds the saved state"
    if metric is not None:
        value = best_metrics(path).get(metric)
        if not (isinstance(value, int | float) and math.isfinite(value)):
            return f"its {'/'.join(METRICS)} file holds no finite {metric!r}"
    return None


def best_metrics(path) -> dict:
    """The metrics best/'s step folder `path` was saved with ({} when unreadable)."""
    try:
        record = json.loads(path.joinpath(*METRICS).read_bytes())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def restore_params(found: Checkpoint, flag: str = "--checkpoint") -> Any:
    """The parameters (host arrays) of checkpoint `found`, checked finite.

    Args:
      flag: the flag or config key that chose the checkpoint, named in errors.

    Raises:
      InputError: the checkpoint is damaged, cannot be read, holds no parameters or
        non-finite ones.
    """
    import orbax.checkpoint as ocp

    from jaxsvr.checkpoints.reads import reads_that_finish

    why = damage(found.path)
    if why is not None:
        raise InputError(
            f"checkpoint {found.path} is unusable ({why}): pick another {_choices(flag)}"
        )
    try:
        with reads_that_finish():  # a failed read leaves no abandoned reads to report
            tree = ocp.StandardCheckpointer().restore(locations.for_orbax(found.path / STATE))
    except Exception as e:  # orbax raises many kinds for a damaged checkpoint
        raise InputError(
            f"cannot read checkpoint {found.path} ({type(e).__name__}): pick another "
            f"{_choices(flag)}"
        ) from None
    params = tree.get("params") if isinstance(tree, Mapping) else None
    if not isinstance(params, Mapping):
        raise InputError(
            f"checkpoint {found.path} holds no model parameters ('params'): pick another "
            f"{_choices(flag)}"
        )
    params = jax.device_get(params)
    for name, leaf in param_trees.flat(params).items():
        leaf = np.asarray(leaf)
        if jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact) and not np.isfinite(leaf).all():
            raise InputError(
                f"checkpoint {found.path} holds non-finite parameters ({name}): pick another "
                f"{_choices(flag)}"
            )
    return params


def _choices(flag: str) -> str:
    """`flag`, with the checkpoint choices when it chooses among a run's checkpoints."""
    return f"{flag} ({CHECKPOINT_CHOICES})" if flag.endswith("checkpoint") else flag


def _setting(flag: str, value: str) -> str:
    """How the user set `flag`: "--checkpoint 'x'" or "config.eval.rescore.checkpoint = 'x'"."""
    return f"{flag} {value!r}" if flag.startswith("-") else f"{flag} = {value!r}"
