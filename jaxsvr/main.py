"""Entry point: python -m jaxsvr.main --config=configs/epic_jpose.py --workdir=DIR.

The config (a Python file with `get_config(arg)`, locked so a mistyped key fails at once)
names the job; overrides like `--config.data.annotations=../shared/data/epic100` change
it. Jobs: `eval_demo` (relevance + evaluation on reference similarities); the trainer
(`train.train_and_evaluate`) joins with the next milestone.
"""

import logging

from absl import app, flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Experiment config file.", lock_config=True
)
_WORKDIR = flags.DEFINE_string("workdir", None, "Folder for metrics, config.json, checkpoints.")
flags.mark_flags_as_required(["config", "workdir"])

JOBS = ("eval_demo",)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    logging.getLogger().setLevel(logging.INFO)
    config = _CONFIG.value
    if config.job not in JOBS:
        raise app.UsageError(f"unknown job {config.job!r} in the config: use one of {JOBS}")
    from jaxsvr import eval_demo

    eval_demo.run(config, _WORKDIR.value)


if __name__ == "__main__":
    app.run(main)
