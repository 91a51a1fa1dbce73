"""Pins the final test metrics (and logged train losses) of every `configs/*.py:runlocal`
run, bit for bit.

A refactor that claims "behaviour unchanged" (issue 15's layout) must leave these numbers
exactly as they were: same batches, same initialisation, same float operations in the same
order. The pinned values live in `tests/pinned/runlocal_metrics.json`, written by

    JAXSVR_WRITE_PINS=1 python -m pytest -q -n0 tests/test_runlocal_pinned.py -m 'slow or not slow'

which is only right to run when a change is *meant* to move the numbers (say why in the
commit). The plain `runlocal` of each config file runs in the default suite; the other
variants (losses, margins, proxies) are marked slow.

The runs compile as the rest of the suite does (tests/conftest.py: most XLA optimizations
off, the CPU loop emitters), so they share compiled programs with the other tests of the
same configs and cost a third of optimized compiles (172 -> 71 CPU s for the 9 plain
runs). A user's run, compiled with every optimization, agrees with them within float32
rounding: the pins of the plain runs were written optimized, and the comparison below
holds for them.

Bit for bit holds only on the machine that wrote the pins: XLA compiles for the host
CPU's instruction set (AVX-512 or AVX2 change the float rounding of fused reductions),
each jax / jaxlib release may fuse differently, and two machines with the same releases
and vector extensions still differed in the last bit of one metric (epic_hgr's
`ndcg_exp_v2t`, two AMD EPYC Zen 4 VMs). So each pin records the environment that wrote
it (`_environment`: jax, jaxlib, numpy versions, the CPU's vector extensions, the
session's compile settings, and the kernel's boot id, which names one machine until it
restarts), and the comparison is bit
for bit only in that environment: to check a refactor bit for bit, write the pins at the
commit before it (e.g. in a `git worktree`) and run this test at the refactor, on one
machine. Everywhere else (CI, another session) the runs are compared within float32
rounding: train losses to 1e-5 relative, nDCG and mAP to 2e-3 relative and 1e-3
absolute, query counts exactly. Recalls and ranks are left out there: a near-tie that
flips on another CPU moves one query's rank, i.e. R@K by 100 / queries, which no
tolerance of rounding covers, and nDCG and mAP of the same ranking already catch a change
of behaviour. A pin that fails only on some machines would fail CI by chance.
"""

import json
import os
from pathlib import Path

import jax
import numpy as np
import pytest
from train_runs import config, train_losses

from jaxsvr.train import loop

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
    "activitynet_contra",
    "msrvtt_hgr",
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


def environment() -> dict:
    """What bit-for-bit results depend on besides the code (module docstring)."""
    import jaxlib

    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        flags = []
    vector = sorted(f for f in flags if f.startswith(("avx", "fma", "sse4", "f16c", "amx")))
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "cpu": " ".join(vector),
        "compile": f"{os.environ.get('XLA_FLAGS', '')} most optimizations off: "
        f"{jax.config.read('jax_disable_most_optimizations')}",
        "boot": boot,
    }


@pytest.mark.parametrize("name, arg", CASES)
def test_final_metrics_are_pinned(name, arg, tmp_path, wordnet_reader):
    final = loop.train_and_evaluate(config(name, arg), tmp_path)
    got = {k: float(v) for k, v in sorted(final.items()) if k not in TIMINGS}
    got["train_losses"] = {str(k): v for k, v in train_losses(tmp_path).items()}
    key = f"{name}:{arg}"
    if WRITE:
        pins = _pins()
        pins[key] = {**got, "_environment": environment()}
        PINS.parent.mkdir(exist_ok=True)
        PINS.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
        return
    want = _pins().get(key)
    assert want is not None, f"no pinned metrics for {key}: write them (see the docstring)"
    written = want.pop("_environment")
    if written.get("boot") and written == environment():
        # floats round-trip exactly through JSON's repr, so == is bit for bit
        assert got == want
        return
    assert got.keys() == want.keys()
    losses, pinned = got.pop("train_losses"), want.pop("train_losses")
    assert losses.keys() == pinned.keys()
    np.testing.assert_allclose([losses[s] for s in pinned], list(pinned.values()), rtol=1e-5)
    counts = [k for k in want if k.removeprefix("class_").startswith(("n_queries", "excluded_"))]
    assert {k: got[k] for k in counts} == {k: want[k] for k in counts}
    scores = [k for k in want if k.startswith(("ndcg", "map"))]
    np.testing.assert_allclose([got[k] for k in scores], [want[k] for k in scores], 2e-3, 1e-3)
