"""A cache of named arrays: an .npz and a JSON manifest beside it, used only when they agree.

`write(folder, name, key, meta, arrays)` writes `NAME.npz` (`np.savez`, no pickle) and then
`NAME.json`, the manifest: {"key": key, "arrays": {name: {"shape": [...], "dtype": ...}},
"meta": meta}. The manifest is removed first and written last (both whole, through
`jaxsvr.runtime.workdir.atomic_write`), so a manifest naming a key means the arrays beside it were
written for that key.

`read(folder, name, key, check)` returns (meta, arrays), or None when the caller must
rebuild:

- silently when there is no manifest or it names another key (a stale cache, e.g. a
  newer checkpoint: the caller rebuilds and writes it again);
- with one warning naming the file and what is wrong when the files are damaged or not
  this module's: a manifest that is not UTF-8 JSON of the layout above; an .npz that is
  missing, empty, truncated, not a zip or fails its CRC (`arrays.NpzArchive`, which also
  refuses string, object and other non-numeric dtypes), lacks an array of the manifest or
  holds others, or holds one of another shape or dtype; a float array with NaN or inf;
  or whatever `check(meta, arrays)` says (the caller's own consistency: row counts
  against its tables). A cache is never trusted blindly: wrong rows would mean wrong
  answers with exit code 0.

A folder the user may read but not write (a shared run) is one warning and no cache.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import arrays as array_files
from jaxsvr.runtime.workdir import atomic_write, write_text

Check = Callable[[dict, dict[str, np.ndarray]], "str | None"]


def read(
    folder, name: str, key: str, check: Check | None = None, *, what: str = "cache"
) -> tuple[dict, dict[str, np.ndarray]] | None:
    """The cache `name` in `folder` if it was written for `key` and is whole (module
    docstring); None (after one warning when it is damaged) when it must be rebuilt."""
    manifest_path, arrays_path = folder / f"{name}.json", folder / f"{name}.npz"
    try:
        if not manifest_path.is_file():
            return None
        manifest = _manifest(manifest_path.read_bytes())
        if manifest["key"] != key:
            logging.info(
                "%s %s is of %s, not %s: rebuilding it", what, folder, manifest["key"], key
            )
            return None
        stored = _arrays(arrays_path, manifest["arrays"])
        problem = check(manifest["meta"], stored) if check else None
        if problem:
            raise InputError(problem)
    # ValueError: not UTF-8, not JSON; RecursionError: JSON nested beyond Python's stack
    except (InputError, OSError, ValueError, RecursionError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        logging.warning(
            "%s %s (%s.npz, %s.json) is unusable (%s): rebuilding it",
            what,
            folder,
            name,
            name,
            reason,
        )
        return None
    logging.info("%s: read %s", what, arrays_path)
    return manifest["meta"], stored


def write(folder, name: str, key: str, meta: dict, arrays: dict[str, np.ndarray], *, what="cache"):
    """Caches `arrays` and `meta` (JSON-able, finite) under `key` (module docstring)."""
    manifest = {
        "key": key,
        "arrays": {k: {"shape": list(a.shape), "dtype": a.dtype.name} for k, a in arrays.items()},
        "meta": meta,
    }
    manifest_path = folder / f"{name}.json"
    try:
        text = json.dumps(manifest, allow_nan=False)
        folder.mkdir(parents=True, exist_ok=True)
        manifest_path.unlink(missing_ok=True)
        atomic_write(folder / f"{name}.npz", lambda f: np.savez(f, **arrays))
        write_text(manifest_path, text)
    except (OSError, ValueError) as e:  # a run folder this user may read but not write
        logging.warning("%s: cannot write %s (%s): rebuilding it each time", what, folder, e)
        return
    logging.info("%s: wrote %s", what, folder / f"{name}.npz")


def _manifest(raw: bytes) -> dict:
    manifest = json.loads(raw.decode("utf-8"))
    if not isinstance(manifest, dict) or set(manifest) != {"key", "arrays", "meta"}:
        raise InputError("the manifest is not an object of key, arrays and meta")
    if not isinstance(manifest["key"], str) or not isinstance(manifest["meta"], dict):
        raise InputError("the manifest's key is not a string or its meta not an object")
    specs = manifest["arrays"]
    if not isinstance(specs, dict) or not all(_is_spec(s) for s in specs.values()):
        raise InputError("the manifest's arrays are not {name: {shape, dtype}}")
    return manifest


def _is_spec(spec: Any) -> bool:
    return (
        isinstance(spec, dict)
        and set(spec) == {"shape", "dtype"}
        and isinstance(spec["shape"], list)
        and all(type(n) is int and n >= 0 for n in spec["shape"])
        and isinstance(spec["dtype"], str)
    )


def _arrays(path, specs: dict[str, dict]) -> dict[str, np.ndarray]:
    """The arrays of the .npz at `path`, each as `specs` describes it, floats finite."""
    try:
        return _checked(path, specs)
    except InputError as e:  # without the "save it again with np.savez": it is rebuilt
        raise InputError(str(e).split(": save it ")[0]) from None


def _checked(path, specs: dict[str, dict]) -> dict[str, np.ndarray]:
    with array_files.NpzArchive(path, what="cache") as npz:
        if sorted(npz.names) != sorted(specs):
            raise InputError(f"{path} holds arrays {sorted(npz.names)}, not {sorted(specs)}")
        out = {}
        for name, spec in specs.items():
            array = npz.load(name)
            want = (tuple(spec["shape"]), spec["dtype"])
            if (array.shape, array.dtype.name) != want:
                raise InputError(
                    f"{path}: array '{name}' is {array.dtype.name}{list(array.shape)}, the "
                    f"manifest says {spec['dtype']}{spec['shape']}"
                )
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                raise InputError(f"{path}: array '{name}' holds NaN or inf")
            out[name] = array
    return out
