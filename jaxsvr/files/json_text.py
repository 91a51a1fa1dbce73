"""JSON text that every JSON parser reads: the one way jaxsvr writes JSON.

Python's `json.dumps` writes NaN and infinities as the bare words `NaN` and `Infinity`,
which are not JSON (strict parsers, `jq` and JavaScript refuse the whole file). jaxsvr's
outputs (metrics.jsonl, metrics.json, rescore.json, the CLIs' `--json`) hold numbers
where a non-finite value means "no value": an undefined metric is already None. So
`dumps` writes every non-finite float as null, the same as an undefined metric, and
refuses to write anything else that is not JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, **kwargs)` with non-finite floats (Python or NumPy) as null and
    NumPy scalars as Python numbers."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float inside dicts, lists and tuples replaced by None
    and NumPy scalars by Python numbers."""
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj
