"""Pins the final test metrics (and logged train losses) of every `configs/*.py:runlocal`
run, bit for bit.

A refactor that claims "behaviour unchanged" (issue 15's layout) must leave these numbers
exactly as they were: same batches, same initialisation, same float operations in the same
order. The pinned values live in `tests/pinned/runlocal_metrics.json`, written by

    JAXSVR_WRITE_PINS=1 python -m pytest -q tests/test_runlocal_pinned.py -m 'slow or not slow'

which is only right to run when a change is *meant* to move the numbers (say why in the
commit). The plain `runlocal` of each config file runs in the default suite; the other
variants (losses, margins, proxies) are marked slow.
"""

import json
import os
from pathlib import Path

import pytest
from train_runs import config, train_losses

from jaxsvr import train

PINS = Path(__file__).resolve().parent / "pinned" / "runlocal_metrics.json"
WRITE = os.environ.get("JAXSVR_WRITE_PINS") == "1"
TIMINGS = ("eval_seconds", "host_wait", "steps_per_sec", "train_seconds")  # not pinned

BASE = [
    "epic_jpose",
    "epic_mme",
    "epic_hgr",
    "epic_sms",
    "epic_contra",
    "youcook2_mme",
    "youcook2_contra",
]
VARIANTS = [
    ("epic_jpose", "margin=relevance"),
    ("epic_mme", "margin=relevance"),
    ("epic_hgr", "all"),
    ("epic_hgr", "ran"),
    ("epic_hgr", "ranp"),
    ("epic_hgr", "relmargin"),
    ("epic_sms", "mimm"),
    ("epic_sms", "adaptive"),
    ("youcook2_mme", "proxy=bow"),
    ("youcook2_mme", "proxy=pos"),
    ("youcook2_mme", "proxy=met"),
    ("youcook2_mme", "instance"),
]
CASES = [pytest.param(name, "runlocal", id=f"{name}:runlocal") for name in BASE] + [
    pytest.param(name, f"{v},runlocal", id=f"{name}:{v},runlocal", marks=pytest.mark.slow)
    for name, v in VARIANTS
]


def _pins() -> dict:
    return json.loads(PINS.read_text()) if PINS.is_file() else {}


@pytest.mark.parametrize("name, arg", CASES)
def test_final_metrics_are_pinned(name, arg, tmp_path, wordnet_reader):
    final = train.train_and_evaluate(config(name, arg), tmp_path)
    got = {k: float(v) for k, v in sorted(final.items()) if k not in TIMINGS}
    got["train_losses"] = {str(k): v for k, v in train_losses(tmp_path).items()}
    key = f"{name}:{arg}"
    if WRITE:
        pins = _pins()
        pins[key] = got
        PINS.parent.mkdir(exist_ok=True)
        PINS.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
        return
    want = _pins().get(key)
    assert want is not None, f"no pinned metrics for {key}: write them (see the docstring)"
    # floats round-trip exactly through JSON's repr, so == is bit for bit
    assert got == want
