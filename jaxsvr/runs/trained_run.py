"""A trained run read back: its config.json, vocab.json and one checkpoint's parameters.

`TrainedRun.load(workdir, checkpoint)` reads `config.json`, `vocab.json` and one orbax
checkpoint's parameters: "best" (`best/<step>`), "latest" (the newest `checkpoints/<step>`),
a step number (found in either), or "auto" (best if the run has one, else latest). The
parameters are restored without the run's data (orbax's raw tree, `params` only). Its
users: `jaxsvr.runs.gallery` (queries, the rescore job, the analyses), and the warm start
(`find_checkpoint` and `restore_params` for `config.train.init_from`).

What the run wrote is checked as it is read, since a damaged or foreign file would
otherwise be a traceback deep in JAX, or wrong answers with exit code 0: config.json must
be UTF-8 JSON holding the sections `model` (a known `name`), `data` and `eval`; vocab.json
a vocabulary (`Vocabulary.from_json`); the checkpoint's parameters a tree of finite
arrays. Whether they are the parameters of the model config.json builds is checked once
the model is built (`jaxsvr.runs.gallery.rebuild`, the warm start: `jaxsvr.models.param_trees`).

Errors name the flag or config key that chose the checkpoint (`flag`: `--checkpoint`,
`config.eval.rescore.checkpoint`, `config.train.init_from`), with the choices where it
chooses among a run's checkpoints.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import jax
import ml_collections
import numpy as np

from jaxsvr import models
from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.inputs.text import Vocabulary
from jaxsvr.models import param_trees

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


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedRun:
    workdir: Any
    config: ml_collections.ConfigDict
    vocab: Vocabulary
    checkpoint: Checkpoint
    params: Any
    files: str = ""  # digest of config.json and vocab.json: the cache is theirs too

    @classmethod
    def load(cls, workdir, checkpoint: str = "auto", *, flag: str = "--checkpoint") -> TrainedRun:
        """The run in `workdir` with the parameters of `checkpoint` (module docstring).

        Args:
          flag: the flag or config key that chose `checkpoint`, named in errors.

        Raises:
          InputError: not a run's workdir, damaged run files, no such checkpoint, or an
            unreadable one.
        """
        workdir = locations.locate(workdir)
        config_text = _read_text(workdir / "config.json", workdir)
        config = ml_collections.ConfigDict(_config(config_text, workdir / "config.json"))
        vocab_path = workdir / "vocab.json"
        vocab_text = _read_text(vocab_path, workdir)
        vocab = Vocabulary.from_json(vocab_text, source=str(vocab_path))
        found = find_checkpoint(workdir, checkpoint, flag=flag)
        logging.info("retrieval: %s, checkpoint %s/%d", workdir, found.kind, found.step)
        files = hashlib.sha256(f"{config_text}\0{vocab_text}".encode()).hexdigest()[:16]
        return cls(workdir, config, vocab, found, restore_params(found, flag), files)


def find_checkpoint(workdir, which: str = "auto", *, flag: str = "--checkpoint") -> Checkpoint:
    """The checkpoint `which` names in `workdir` (see the module docstring); `flag` is the
    flag or config key that chose it, named in errors."""
    steps = {kind: _steps(workdir / kind) for kind in ("best", "checkpoints")}
    if not any(steps.values()):
        raise InputError(
            f"{workdir} has no checkpoint (no step in best/ or checkpoints/): train the run "
            f"first, or pick another {_choices(flag)}"
        )
    if which == "auto":
        which = "best" if steps["best"] else "latest"
    if which in ("best", "latest"):
        kind = "best" if which == "best" else "checkpoints"
        if not steps[kind]:
            raise InputError(
                f"{workdir} has no {which} checkpoint (no step in {kind}/): pick another "
                f"{_choices(flag)}"
            )
        step = max(steps[kind])
    else:
        try:
            step = int(which)
        except ValueError:
            raise InputError(f"{_setting(flag, which)}: use {CHECKPOINT_CHOICES}") from None
        kind = next((k for k in ("best", "checkpoints") if step in steps[k]), None)
        if kind is None:
            have = sorted({s for v in steps.values() for s in v})
            raise InputError(
                f"{_setting(flag, which)}: {workdir} has no checkpoint of step {step} (it has "
                f"steps {have})"
            )
    path = workdir / kind / str(step)
    try:
        stamp = str(
            json.loads((path / "_CHECKPOINT_METADATA").read_text())["commit_timestamp_nsecs"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        stamp = "unknown"
    return Checkpoint(kind, step, path, stamp)


def _choices(flag: str) -> str:
    """`flag`, with the checkpoint choices when it chooses among a run's checkpoints."""
    return f"{flag} ({CHECKPOINT_CHOICES})" if flag.endswith("checkpoint") else flag


def _setting(flag: str, value: str) -> str:
    """How the user set `flag`: "--checkpoint 'x'" or "config.eval.rescore.checkpoint = 'x'"."""
    return f"{flag} {value!r}" if flag.startswith("-") else f"{flag} = {value!r}"


def _steps(folder) -> list[int]:
    if not folder.is_dir():
        return []
    return [
        int(p.name)
        for p in folder.iterdir()
        if p.name.isascii() and p.name.isdigit() and p.is_dir()
    ]


def restore_params(found: Checkpoint, flag: str = "--checkpoint") -> Any:
    """The parameters (host arrays) of checkpoint `found`, checked finite.

    Args:
      flag: the flag or config key that chose the checkpoint, named in errors.

    Raises:
      InputError: the checkpoint cannot be read, holds no parameters or non-finite ones.
    """
    import orbax.checkpoint as ocp

    from jaxsvr.checkpoints.reads import reads_that_finish

    try:
        with reads_that_finish():  # a failed read leaves no abandoned reads to report
            tree = ocp.StandardCheckpointer().restore(locations.for_orbax(found.path / "default"))
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


def _read_text(path, workdir) -> str:
    if not path.is_file():
        raise InputError(f"{workdir} has no {path.name}: is it the workdir of a training run?")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"{path} is not UTF-8 text (byte {e.start}): the run's files are damaged; restore "
            f"the {path.name} the run wrote"
        ) from None


def _config(text: str, path) -> dict:
    """config.json's object, with the sections and model name the reader needs."""
    fix = "restore the config.json the run wrote"
    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{path}: not valid JSON ({_line(e)}): {fix}") from None
    if not isinstance(config, dict):
        raise InputError(f"{path} holds {_kind(config)}, not the object of a run's config: {fix}")
    for section in ("model", "data", "eval"):
        if not isinstance(config.get(section), dict):
            raise InputError(
                f"{path}: '{section}' is {_kind(config.get(section))}, not an object: {fix}"
            )
    name = config["model"].get("name")
    if name not in models.NAMES:
        raise InputError(f"{path}: model.name {name!r} is not one of {models.NAMES}: {fix}")
    return config


def _kind(value) -> str:
    """What a JSON value is, for messages: "a JSON list", "nothing", ..."""
    if value is None:
        return "nothing (missing or null)"
    names = {dict: "object", list: "list", str: "string", bool: "boolean"}
    return f"a JSON {names.get(type(value), 'number')}"


def _line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
