"""Starting a run from another run's parameters: `config.train.init_from`.

The SMS paper's ensemble members start from a trained model's weights; here a new run
starts from another run's parameters (not its optimizer state, which starts fresh, nor
its step: the new run's schedule runs from step 0). `init_from` names:

- a run's workdir: its best checkpoint if it has one, else its latest
  (`jaxsvr.retrieval.find_checkpoint(..., "auto")`);
- or one step folder of a run (`WORKDIR/best/<step>`, `WORKDIR/checkpoints/<step>`).

The parameters must be those of the model this config builds, name for name and shape for
shape: anything else is one error line naming the first difference, found before the run
writes anything. A run that resumes from its own checkpoint ignores `init_from`.
"""

from __future__ import annotations

import logging
from typing import Any

import flax
import numpy as np

from jaxsvr import retrieval
from jaxsvr.errors import InputError
from jaxsvr.files import locations


def load(source: str, template: Any) -> Any:
    """The parameters of the checkpoint `source` names, as host arrays with `template`'s
    structure and dtypes (`template`: the new run's initial parameters)."""
    path = locations.locate(source)
    if (path / "config.json").is_file():
        found = retrieval.find_checkpoint(path, "auto")
    elif (path / "default").is_dir() and path.name.isdigit():
        found = retrieval.Checkpoint(path.parent.name, int(path.name), path, "unknown")
    else:
        raise InputError(
            f"config.train.init_from = {source!r} is neither a run's workdir (with config.json) "
            "nor a checkpoint step folder (WORKDIR/best/<step> or WORKDIR/checkpoints/<step>)"
        )
    params = retrieval.restore_params(found)
    want = flax.traverse_util.flatten_dict(flax.core.unfreeze(template), sep="/")
    got = flax.traverse_util.flatten_dict(flax.core.unfreeze(params), sep="/")
    diffs = [f"{k} is missing" for k in want if k not in got]
    diffs += [f"{k} is not in this config's model" for k in got if k not in want]
    diffs += [
        f"{k} is {list(np.shape(got[k]))} there, {list(np.shape(want[k]))} here"
        for k in want
        if k in got and np.shape(got[k]) != np.shape(want[k])
    ]
    if diffs:
        raise InputError(
            f"config.train.init_from: {found.path} holds another model's parameters "
            f"({diffs[0]}; {len(diffs)} difference(s)): start from a run of the same model"
        )
    out = {k: np.asarray(got[k], dtype=want[k].dtype) for k in want}
    logging.info("init: parameters from %s (step %d)", found.path, found.step)
    return flax.traverse_util.unflatten_dict(out, sep="/")
