"""Parameter trees compared by name and shape: is a checkpoint's tree the one a model builds?

A run's parameters are read back by three callers that each build the model from a config
first: the warm start (`config.train.init_from`, `jaxsvr.train.warm_start`), `jaxsvr.retrieve`
and the rescore job (`jaxsvr.runs.gallery.rebuild`, from the run's own config.json). A tree of
another model (another config.json beside the checkpoints, another run's folder named)
would otherwise fail deep inside flax (`ScopeParamNotFoundError`) or, with equal names
and other shapes, inside XLA. `differences` lists what keeps the trees apart, in a fixed
order (names the checkpoint lacks, names the model lacks, then shapes, each by name), so
every caller names the same first difference; dtypes are not compared (the warm start casts
to the new run's, the readers use the checkpoint's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import flax
import numpy as np


def flat(tree: Any) -> dict[str, Any]:
    """{"params/encoder/kernel": leaf}: the leaves of nested mappings, by '/'-joined path."""
    if not isinstance(tree, Mapping):
        return {"": tree}
    return flax.traverse_util.flatten_dict(flax.core.unfreeze(tree), sep="/")


def differences(model: Any, checkpoint: Any) -> list[str]:
    """What keeps the tree `checkpoint` from being the parameters of `model`.

    Args:
      model: the tree the config's model builds (arrays, or `jax.eval_shape` structs).
      checkpoint: the tree read from a checkpoint.

    Returns:
      One phrase per difference (e.g. "params/words/table/embedding is [40, 32] in the
      checkpoint, [52, 32] in the config's model"); empty when the trees match.
    """
    want, got = flat(model), flat(checkpoint)
    out = [f"{k} is missing from the checkpoint" for k in sorted(want) if k not in got]
    out += [f"{k} is not in the config's model" for k in sorted(got) if k not in want]
    out += [
        f"{k} is {list(np.shape(got[k]))} in the checkpoint, {list(np.shape(want[k]))} in the "
        "config's model"
        for k in sorted(want)
        if k in got and np.shape(got[k]) != np.shape(want[k])
    ]
    return out


def summary(diffs: list[str]) -> str:
    """'first difference; N difference(s)', for one error line."""
    return f"{diffs[0]}; {len(diffs)} difference(s)"
