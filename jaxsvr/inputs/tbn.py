"""TBN per-segment pickles as memory-mapped stores: converted once, read by every run.

The EK-100 multi-instance retrieval release (JPoSE README, features.zip) gives each split
as a pickle, `train.pkl` / `test.pkl`: a dict of `RGB`, `Flow` and `Audio`, each
(n, 25, 1024) float32, rows in the order of `EPIC_100_retrieval_{split}.pkl` (67,217 /
9,668 clips; the train pickle is about 20 GB). Unpickling that on every run would cost
the whole file in RAM and minutes of reading, so it is converted once into two `.npy`
stores that runs open memory-mapped:

- `{stem}.npy`: (n, 25, 3072) float32, the three blocks in RGB | Flow | Audio order;
- `{stem}_mean.npy`: (n, 3072), their temporal mean (the input MME, JPoSE and HGR were
  published with: the release's `EPIC_100_retrieval_{split}_features_mean.pkl`).

Either explicitly, `python -m jaxsvr.features convert train.pkl test.pkl --out DIR
--allow-pickle` (then `--config.data.features=DIR`), or on first use: a run whose features
folder holds `{split}.pkl` converts it into `config.data.feature_cache` (default
`$XDG_CACHE_HOME/jaxsvr/features`, i.e. `~/.cache/jaxsvr/features`), under a folder named
by the pickle's path, size and modification time, and says so in its log; later runs
find it there. A conversion is written into a temporary folder renamed into place, so an
interrupted one leaves nothing a later run could mistake for a store, and two processes
converting at once end with one complete copy.

Peak memory of a conversion is the unpickled dict (the pickle's size), the mean store
(an eighth of it at 25 segments) and one 64 MB chunk of rows in flight
(`benchmarks/tbn_convert.py`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.files import pickles

MODALITIES = ("RGB", "Flow", "Audio")  # the release's keys, in feature order
CACHE_ENV = "XDG_CACHE_HOME"
_CHUNK_BYTES = 64 << 20  # rows written at a time


def store_names(stem: str) -> tuple[str, str]:
    """(segments store, temporal-mean store) file names of a converted `stem`."""
    return f"{stem}.npy", f"{stem}_mean.npy"


def default_cache() -> Path:
    """Where first-use conversions go when `config.data.feature_cache` is empty."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache"
    return Path(root) / "jaxsvr" / "features"


def convert(source: str | os.PathLike, out: str | os.PathLike) -> tuple[Path, Path]:
    """Converts one TBN pickle into `out/{stem}.npy` and `out/{stem}_mean.npy`.

    `source` is unpickled (it runs code: the caller has the user's opt-in). Returns the
    two paths. Existing stores of the same stem in `out` are replaced.
    """
    source, out = Path(source), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = store_names(source.stem)
    work = Path(tempfile.mkdtemp(prefix=f".{source.stem}-", dir=out))
    try:
        _write_stores(source, work / names[0], work / names[1])
        for name in names:
            os.replace(work / name, out / name)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out / names[0], out / names[1]


def cached(source: Path, cache: str | os.PathLike = "") -> tuple[Path, Path]:
    """The converted stores of `source`, converting it into the cache on first use."""
    stat = source.stat()
    key = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    folder = Path(cache or default_cache()) / (
        f"{source.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    )
    paths = tuple(folder / name for name in store_names(source.stem))
    if all(p.is_file() for p in paths):
        logging.info("features: %s read from its converted stores in %s", source, folder)
        return paths
    logging.info(
        "features: converting %s (TBN per-segment pickle, %.1f GB) once into memory-mapped "
        "stores in %s; later runs read those (set config.data.feature_cache to move them)",
        source,
        stat.st_size / 1e9,
        folder,
    )
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    except OSError as e:
        raise InputError(
            f"cannot write the feature cache {folder.parent} ({e.strerror}): set "
            "config.data.feature_cache to a writable folder, or convert once with "
            "python -m jaxsvr.features convert"
        ) from None
    try:
        _write_stores(source, work / paths[0].name, work / paths[1].name)
        try:
            os.rename(work, folder)
        except OSError:  # another process finished first: keep its complete copy
            if not all(p.is_file() for p in paths):
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return paths


def _write_stores(source: Path, segments_path: Path, mean_path: Path) -> None:
    """Both stores of `source`, written a chunk of rows at a time with plain file writes
    (written pages stay out of this process's resident set, unlike a memory map)."""
    blocks = _modalities(pickles.load(source), source)
    n, t, _ = blocks[0].shape
    width = sum(b.shape[-1] for b in blocks)
    step = max(1, _CHUNK_BYTES // (t * width * 4))
    mean = np.empty((n, width), np.float32)
    header = {"descr": "<f4", "fortran_order": False, "shape": (n, t, width)}
    with segments_path.open("wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        for i in range(0, n, step):
            chunk = np.concatenate([b[i : i + step] for b in blocks], axis=-1).astype("<f4")
            f.write(chunk.tobytes())
            mean[i : i + step] = np.mean(chunk, axis=1, dtype=np.float64)
    np.save(mean_path, mean)


def _modalities(obj: object, source: Path) -> list[np.ndarray]:
    """The RGB, Flow and Audio blocks of the release's dict, each [n, T, D]."""
    if not isinstance(obj, Mapping):
        raise InputError(
            f"{source}: holds a {type(obj).__name__}; a TBN per-segment pickle is a dict of "
            f"{'/'.join(MODALITIES)} arrays, each (n, segments, 1024)"
        )
    missing = [m for m in MODALITIES if m not in obj]
    if missing:
        keys = ", ".join(map(str, list(obj)[:10])) or "(none)"
        raise InputError(
            f"{source}: no {'/'.join(missing)} in the pickled dict (keys: {keys}); a TBN "
            f"per-segment pickle holds {'/'.join(MODALITIES)}, each (n, segments, 1024)"
        )
    blocks = [pickles.real_array(obj[m], source, f"'{m}'", 3) for m in MODALITIES]
    heads = {b.shape[:2] for b in blocks}
    if len(heads) != 1:
        shapes = ", ".join(f"{m} {b.shape}" for m, b in zip(MODALITIES, blocks))
        raise InputError(f"{source}: modality shapes disagree ({shapes}): cannot concatenate")
    return blocks
