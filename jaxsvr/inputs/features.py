"""Feature store: precomputed video features aligned with the annotation rows.

A split's features are one array with a row per annotated clip, in CSV order: (N, D) clip
features or (N, T, D) per-segment features. Files, in the order `find_split_features`
looks for them in a features folder (`--config.data.features`):

- `{split}.npy`: opened memory-mapped (`mmap_mode="r"`, never with pickle), so a
  multi-GB store costs no RAM until batches touch its rows (from a URL, `gs://` or
  `file://`, it is streamed into host memory: `jaxsvr.files.locations`);
- `{split}.npz`: the array named `key` (default `features`, or the only array);
- `EPIC_100_retrieval_{split}_features_mean.pkl`: the TBN features published with the
  EPIC-KITCHENS-100 multi-instance retrieval baselines (JPoSE / MMEN). Read only with
  `--config.data.allow_pickle=True`, because unpickling runs code from the file.
- `{split}.pkl`: the TBN per-segment release (RGB / Flow / Audio, each (N, 25, 1024)),
  converted once into memory-mapped stores (`jaxsvr.inputs.tbn`); pickle opt-in likewise.

`temporal="mean"` (the model's input is a clip vector: MME, JPoSE, HGR as published)
looks for `{split}_mean.npy` first and averages per-segment features over T (chunk by
chunk, said in the log); `"segments"` keeps [N, T, D] as stored.

The public pickles: the mean one is a dict whose `features` entry is (N, 3072), the
temporal mean of the TBN RGB | Flow | Audio features, 1024 each, in that order; the
per-segment one a dict of `RGB`, `Flow` and `Audio` arrays, each (N, 25, 1024), joined in
that order into (N, 25, 3072); a pickled plain ndarray is accepted too. Rows follow
`EPIC_100_retrieval_{train,test}.pkl`, the same order as the retrieval CSVs (which public
code reads them how: docs/data.md#the-public-ek-100-files).

Every problem is an `InputError` naming the file: missing, empty or corrupt file (headers
are checked against the file size before anything is read, `jaxsvr.files.arrays`), wrong
row count, rank, dtype, and the first row holding NaN or inf or a value beyond the
float32 range (checked chunk by chunk, so validating a memory-mapped store never loads it
whole).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import arrays, pickles
from jaxsvr.files.locations import locate
from jaxsvr.inputs import tbn

FEATURES_CONFIG_KEY = "--config.data.features"
ALLOW_PICKLE_FLAG = "--config.data.allow_pickle=True"
DEFAULT_NPZ_KEY = "features"
PICKLE_MODALITIES = ("RGB", "Flow", "Audio")  # concatenation order of the public release
_CHECK_CHUNK_BYTES = 4 << 20  # rows per finiteness check: about 4 MB at a time
TEMPORAL = ("mean", "segments")  # what a model reads of per-segment features


def public_pickle_name(split: str) -> str:
    """File name of the public EPIC-100 MIR mean features for `split` (train/test)."""
    return f"EPIC_100_retrieval_{split}_features_mean.pkl"


def load_features(
    path: str | Path,
    *,
    rows: int,
    allow_pickle: bool = False,
    key: str | None = None,
    config_key: str = FEATURES_CONFIG_KEY,
) -> np.ndarray:
    """Loads and validates one split's features.

    Args:
      path: a `.npy` (memory-mapped), `.npz`, or (with `allow_pickle`) `.pkl`/`.pickle` file.
      rows: number of annotation rows (clips) the features must align with.
      allow_pickle: permit unpickling `.pkl`/`.pickle` files; only for trusted files.
      key: array name inside an `.npz` or a pickled dict; default `features`, or the only
        array of an `.npz`.
      config_key: the config flag that points at this file, named when it is missing.

    Returns:
      float32 array [rows, D] or [rows, T, D]. A float32 `.npy` stays memory-mapped;
      other dtypes are converted into memory.
    """
    path = locate(path)
    if not path.is_file():
        raise InputError(f"features file {path} not found: set {config_key} to where it is")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        array = _load_npy(path)
    elif suffix == ".npz":
        array = _load_npz(path, key)
    elif suffix in (".pkl", ".pickle"):
        if not allow_pickle:
            raise InputError(
                f"{path}: refusing to unpickle features, as loading a pickle runs code from "
                f"the file; if the file is trusted set {ALLOW_PICKLE_FLAG}, or save it as .npy"
            )
        array = _from_pickled(pickles.load(path), path, key)
    else:
        raise InputError(
            f"{path}: unsupported features file type '{path.suffix}': use .npy, .npz, or a "
            f"trusted .pkl with {ALLOW_PICKLE_FLAG}"
        )
    return _validate(array, path, rows)


def find_split_features(
    folder: str | Path,
    split: str,
    *,
    rows: int,
    allow_pickle: bool = False,
    config_key: str = FEATURES_CONFIG_KEY,
    temporal: str = "segments",
    cache: str = "",
) -> np.ndarray:
    """Finds and loads the features of `split` in a features folder.

    Looks for (`temporal="mean"`: `{split}_mean.npy`, then) `{split}.npy`, `{split}.npz`,
    the public mean pickle `EPIC_100_retrieval_{split}_features_mean.pkl`, then the TBN
    per-segment pickle `{split}.pkl`, and loads the first that exists.

    Args:
      folder: the features folder.
      split: split name, e.g. `train` or `test`.
      rows: number of annotation rows of the split.
      allow_pickle: permit loading the public pickles (they run code from the file).
      config_key: the config flag that sets `folder`, named in errors.
      temporal: "mean" averages per-segment features over T; "segments" keeps them.
      cache: where a `{split}.pkl` is converted on first use ("" = `tbn.default_cache()`).

    Returns:
      float32 array [rows, D] or [rows, T, D] (see `load_features`).
    """
    if temporal not in TEMPORAL:
        raise ValueError(f"temporal must be one of {TEMPORAL}, got {temporal!r}")
    folder = locate(folder)
    if not folder.is_dir():
        state = "is a file, not a folder" if folder.exists() else "not found"
        raise InputError(f"features folder {folder} {state}: set {config_key} to the folder")
    names = (f"{split}.npy", f"{split}.npz", public_pickle_name(split), f"{split}.pkl")
    if temporal == "mean":
        names = (tbn.store_names(split)[1], *names)
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        if name == f"{split}.pkl":
            if not allow_pickle:
                raise InputError(
                    f"{path}: refusing to unpickle features, as loading a pickle runs code "
                    f"from the file; if the file is trusted set {ALLOW_PICKLE_FLAG}"
                )
            segments, mean = tbn.cached(path, cache)
            path = mean if temporal == "mean" else segments
        array = load_features(path, rows=rows, allow_pickle=allow_pickle, config_key=config_key)
        if temporal == "mean" and array.ndim == 3:
            array = temporal_mean(array, path)
        return array
    raise InputError(
        f"{folder}: no features for split '{split}' (looked for {', '.join(names)}): "
        f"put one there or point {config_key} at the folder that has it"
    )


def temporal_mean(array: np.ndarray, path) -> np.ndarray:
    """[N, T, D] -> [N, D] float32 mean over T, a chunk of rows at a time (a memory-mapped
    store is read once, never whole)."""
    n, t, d = array.shape
    logging.info(
        "features: %s averaged over its %d segments (the model reads clip vectors; "
        "config.data.temporal)",
        path,
        t,
    )
    out = np.empty((n, d), np.float32)
    step = max(1, _CHECK_CHUNK_BYTES // max(1, t * d * 4))
    for i in range(0, n, step):
        out[i : i + step] = np.mean(array[i : i + step], axis=1, dtype=np.float64)
    return out


def _load_npy(path: Path) -> np.ndarray:
    return arrays.load_npy(path, what="features", mmap=True)


def _load_npz(path: Path, key: str | None) -> np.ndarray:
    with arrays.NpzArchive(path, what="features") as archive:
        names = archive.names
        if key is None:
            if DEFAULT_NPZ_KEY in names:
                key = DEFAULT_NPZ_KEY
            elif len(names) == 1:
                key = names[0]
            else:
                raise InputError(
                    f"{path}: holds arrays {names or '(none)'}, none named "
                    f"'{DEFAULT_NPZ_KEY}': name the features array '{DEFAULT_NPZ_KEY}' "
                    "or pass its key"
                )
        return archive.load(key)


def _from_pickled(obj: object, path: Path, key: str | None) -> np.ndarray:
    """The features array of an unpickled object (see the module docstring for layouts)."""
    if isinstance(obj, Mapping):
        name = key or DEFAULT_NPZ_KEY
        if name in obj:
            return _as_array(obj[name], path, f"entry '{name}'")
        if key is not None:
            raise InputError(f"{path}: pickled dict has no key '{key}' (keys: {_keys(obj)})")
        by_lower = {str(k).lower(): k for k in obj}
        found = [by_lower[m.lower()] for m in PICKLE_MODALITIES if m.lower() in by_lower]
        if not found:
            raise InputError(
                f"{path}: pickled dict has keys {_keys(obj)}; expected '{DEFAULT_NPZ_KEY}' or "
                f"{'/'.join(PICKLE_MODALITIES)} (the EPIC-100 MIR layout)"
            )
        if len(found) < len(PICKLE_MODALITIES):
            raise InputError(
                f"{path}: pickled dict has modalities {found} but not all of "
                f"{'/'.join(PICKLE_MODALITIES)}: save the modalities you want as one .npy"
            )
        parts = [_as_array(obj[k], path, f"entry '{k}'") for k in found]
        heads = {p.shape[:-1] for p in parts}
        if len(heads) != 1 or parts[0].ndim == 0:
            shapes = ", ".join(f"{k} {p.shape}" for k, p in zip(found, parts))
            raise InputError(f"{path}: modality shapes disagree ({shapes}): cannot concatenate")
        return np.concatenate(parts, axis=-1)
    if isinstance(obj, np.ndarray):
        return obj
    raise InputError(
        f"{path}: pickle holds a {type(obj).__name__}; expected an ndarray or a dict with "
        f"'{DEFAULT_NPZ_KEY}' or {'/'.join(PICKLE_MODALITIES)} arrays"
    )


def _as_array(value: object, path: Path, what: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except ValueError as e:  # ragged lists of rows
        raise InputError(f"{path}: {what} is not a rectangular array ({_first_line(e)})") from None


def _validate(array: np.ndarray, path: Path, rows: int) -> np.ndarray:
    if array.ndim not in (2, 3):
        raise InputError(
            f"{path}: features have shape {array.shape}; expected (N, D) clip features "
            "or (N, T, D) segment features"
        )
    if array.dtype.kind not in "iuf":
        raise InputError(
            f"{path}: features have dtype {array.dtype}, not a real number type: "
            "save them as float32"
        )
    if array.shape[0] != rows:
        raise InputError(
            f"{path} has {array.shape[0]} rows but the annotations have {rows} clips: "
            "features must be aligned with the annotation rows"
        )
    # Values beyond the float32 range become inf in the cast and are reported as such.
    return arrays.to_float32(array, path, "features", chunk_bytes=_CHECK_CHUNK_BYTES)


def _keys(obj: Mapping) -> str:
    keys = [str(k) for k in obj]
    return ", ".join(keys[:10]) + (", ..." if len(keys) > 10 else "") if keys else "(none)"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


MODALITIES = ("rgb", "flow", "audio")  # TBN's blocks, in feature order (synthetic too)


def modality_names(modalities: str) -> tuple[str, ...]:
    """The blocks `modalities` names ("all", or a comma-separated subset of `MODALITIES`).

    Raises:
      ValueError: neither "all" nor distinct names of `MODALITIES` (`jaxsvr.train.checks`
        says so for `config.data.modalities` before any data is read).
    """
    if modalities == "all":
        return MODALITIES
    names = tuple(m.strip() for m in str(modalities).split(",") if m.strip())
    if not names or set(names) - set(MODALITIES) or len(set(names)) != len(names):
        raise ValueError(
            f"use 'all' or distinct names among {','.join(MODALITIES)}, comma-separated"
        )
    return names


def select_modalities(videos: tuple[np.ndarray, ...], modalities: str) -> tuple[np.ndarray, ...]:
    """The columns of the feature blocks `modalities` names ("all", or a comma-separated
    subset of `MODALITIES`: "rgb", "rgb,flow"), in feature order, from each array of
    `videos` ([n, D] or [n, T, D], D three equal blocks RGB | Flow | Audio as EPIC's TBN
    features and the synthetic ones). The relevance-margin paper's modality ablation."""
    if modalities == "all":
        return videos
    names = modality_names(modalities)
    width = videos[0].shape[-1]
    if width % len(MODALITIES):
        raise InputError(
            f"config.data.modalities = {modalities!r} needs features of 3 equal blocks "
            f"(RGB | Flow | Audio), but they are {width} wide: use 'all'"
        )
    block = width // len(MODALITIES)
    cols = np.concatenate(
        [np.arange(i * block, (i + 1) * block) for i, m in enumerate(MODALITIES) if m in names]
    )
    return tuple(np.ascontiguousarray(np.asarray(v)[..., cols]) for v in videos)
