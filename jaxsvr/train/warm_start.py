"""Starting a run from another run's parameters: `config.train.init_from`.

The SMS paper's ensemble members start from a trained model's weights; here a new run
starts from another run's parameters (not its optimizer state, which starts fresh, nor
its step: the new run's schedule runs from step 0). `init_from` names:

- a run's workdir: its best checkpoint if it has one, else its latest
  (`jaxsvr.checkpoints.layout.find_checkpoint(..., "auto")`);
- or one step folder of a run (`WORKDIR/best/<step>`, `WORKDIR/checkpoints/<step>`).

The parameters must be finite and those of the model this config builds, name for name and
shape for shape (`jaxsvr.models.param_trees`, the check `jaxsvr.retrieve` and the rescore job
make against a run's own config.json): anything else is one error line naming
`config.train.init_from` and the first difference, found before the run writes anything. A
run that resumes from its own checkpoint ignores `init_from`.
"""

from __future__ import annotations

import logging
from typing import Any

import flax
import numpy as np

from jaxsvr.checkpoints import layout
from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.models import param_trees

KEY = "config.train.init_from"


def load(source: str, template: Any) -> Any:
    """The parameters of the checkpoint `source` names, as host arrays with `template`'s
    structure and dtypes (`template`: the new run's initial parameters)."""
    path = locations.locate(source)
    found = layout.step_folder(path)
    if (path / "config.json").is_file():
        found = layout.find_checkpoint(path, "auto", flag=KEY)
    elif found is None:
        raise InputError(
            f"{KEY} = {source!r} is neither a run's workdir (with config.json) nor a "
            "checkpoint step folder (WORKDIR/best/<step> or WORKDIR/checkpoints/<step>)"
        )
    params = layout.restore_params(found, flag=KEY)
    diffs = param_trees.differences(template, params)
    if diffs:
        raise InputError(
            f"{KEY}: checkpoint {found.path} holds another model's parameters than this config "
            f"builds ({param_trees.summary(diffs)}): start from a run of the same model"
        )
    want, got = param_trees.flat(template), param_trees.flat(params)
    out = {k: np.asarray(got[k], dtype=want[k].dtype) for k in want}
    logging.info("init: parameters from %s (step %d)", found.path, found.step)
    return flax.traverse_util.unflatten_dict(out, sep="/")
