"""A trained run read back: its config.json, vocab.json and one checkpoint's parameters.

`TrainedRun.load(workdir, checkpoint)` reads `config.json`, `vocab.json` and the
parameters of the checkpoint `checkpoint` names ("best", "latest", "auto" or a step:
`jaxsvr.checkpoints.layout`), restored without the run's data. Its users:
`jaxsvr.runs.gallery` (queries, the rescore job, the analyses).

What the run wrote is checked as it is read, since a damaged or foreign file would
otherwise be a traceback deep in JAX, or wrong answers with exit code 0: config.json must
be UTF-8 JSON holding the sections `model` (a known `name`), `data` and `eval`; vocab.json
a vocabulary (`Vocabulary.from_json`). Whether the parameters are those of the model
config.json builds is checked once the model is built (`jaxsvr.runs.gallery.rebuild`).
Errors name the flag or config key that chose the checkpoint (`flag`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from typing import Any

import ml_collections

from jaxsvr import models
from jaxsvr.checkpoints.layout import Checkpoint, find_checkpoint, restore_params
from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.inputs.text import Vocabulary


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
