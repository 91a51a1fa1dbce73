"""`ModelInputs`: the tables a model reads, their context windows, and how batches gather.

A model reads `video` and its `Model.text_fields`; a context model (ConTra) reads some of
them in a window of neighbouring clips (`Model.windows`: {input: half-width m}), as
[n, 2m + 1, ...] with the item in the centre (`jaxsvr.inputs.windows`). `ModelInputs`
holds, for one split, each input's table [N, ...] and each windowed input's [N, 2m + 1]
window rows, and gathers batches from them in either place:

- on the devices (`config.train.gather = "device"`, default): `device_tables` puts the
  tables and windows on the mesh once and `gather_device`, traced inside the train step,
  takes the rows a batch names;
- on the host (`"host"`, stores too large for device memory): `gather_host` builds the
  same arrays with NumPy (a memory-mapped video store read in ascending row order).

An objective names what it needs as `gathers` = {input name: (table, batch row key)}:
rows `batch[row key]` of table `table` become `inputs[input name]` (e.g. ConTra's
`neighbour_video` is rows `neighbour_rows` of `video`). Either way the model sees each
input flattened to [rows, ...] (plus the window axis).

`test_inputs` gives the evaluator its view of the test split: the test video table with
its windows, and the sentence inputs — for a model with caption context, each sentence in
the window of its clip's neighbours' captions.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxsvr.inputs import windows


@dataclasses.dataclass(frozen=True, eq=False)
class ModelInputs:
    """Tables and windows of one split, for one model.

    tables: {input: [N, ...]}: `video` and the model's text fields.
    windows: {input: [N, 2m + 1] int32} rows of each clip's window, for windowed inputs.
    maps: {input: [N] int32} the table row of each clip row, for a table with fewer rows
      than clips (`video` when a video's captions are separate training rows).
    """

    tables: dict[str, np.ndarray]
    windows: dict[str, np.ndarray]
    maps: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    @classmethod
    def for_model(
        cls,
        model,
        clips,
        video: np.ndarray,
        text: dict[str, np.ndarray],
        video_rows: np.ndarray | None = None,
    ):
        """The inputs `model` reads from a split with these clips and tables (`video_rows`:
        the video table's row of each clip, when clips share videos)."""
        tables = {"video": video, **{f: text[f] for f in model.text_fields}}
        context = dict(getattr(model, "windows", {}))  # input -> window half-width
        maps = {} if video_rows is None else {"video": np.asarray(video_rows, np.int32)}
        return cls(tables, {k: windows.context_windows(clips, m) for k, m in context.items()}, maps)

    def init_batch(self) -> dict[str, np.ndarray]:
        """One zero row (or one window of rows) per input: the shapes `model.init` needs."""
        out = {}
        for key, table in self.tables.items():
            window = self.windows[key].shape[1:] if key in self.windows else ()
            dtype = np.float32 if key == "video" else table.dtype
            out[key] = np.zeros((1, *window, *table.shape[1:]), dtype)
        return out

    def device_tables(self, sharding) -> dict:
        """Tables and windows on the devices (`sharding`), for `gather_device`."""
        return {
            "inputs": {k: jax.device_put(np.asarray(v), sharding) for k, v in self.tables.items()},
            "windows": {k: jax.device_put(w, sharding) for k, w in self.windows.items()},
            "maps": {k: jax.device_put(m, sharding) for k, m in self.maps.items()},
        }

    def gather_host(self, gathers: dict, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """{input name: rows of its table} shaped like their row indices (plus the window
        axis for windowed inputs), gathered with NumPy."""
        out = {}
        for name, (key, row_key) in gathers.items():
            rows = batch[row_key]
            if key in self.windows:  # [*rows, W] window rows
                rows = self.windows[key][rows]
            if key in self.maps:  # clip rows -> table rows
                rows = self.maps[key][rows]
            table = self.tables[key]
            flat = gather_rows(table, rows.reshape(-1)) if key == "video" else table[rows]
            out[name] = flat.reshape(*rows.shape, *table.shape[1:])
        return out


def gather_device(tables: dict, gathers: dict, batch: dict) -> dict:
    """The model inputs of a batch, flattened to [rows, ...] (traced in the train step).

    `tables` are `ModelInputs.device_tables` (the batch holds row indices), or {} when the
    host gathered (the batch holds the inputs themselves, `ModelInputs.gather_host`).
    """
    inputs = {}
    for name, (key, row_key) in gathers.items():
        rows = batch[row_key]
        if tables:
            flat = rows.reshape(-1)
            window = tables["windows"].get(key)
            # The sampler's rows are in range: "clip" clamps indices instead of masking every
            # gathered value ("fill", jnp.take's default: one more pass over the rows).
            index = flat if window is None else jnp.take(window, flat, 0, mode="clip").reshape(-1)
            row_map = tables.get("maps", {}).get(key)
            if row_map is not None:  # clip rows -> table rows
                index = jnp.take(row_map, index, 0, mode="clip")
            x = jnp.take(tables["inputs"][key], index, axis=0, mode="clip")
            inputs[name] = x if window is None else x.reshape(flat.size, -1, *x.shape[1:])
        else:
            inputs[name] = batch[name].reshape(rows.size, *batch[name].shape[rows.ndim :])
    return inputs


def gather_rows(video: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """video[rows] as float32. A memory-mapped store is read in ascending row order (disk
    locality); an in-memory one with one np.take (half the time of the sorted path)."""
    if not isinstance(video, np.memmap):
        return np.take(video, rows, axis=0).astype(np.float32, copy=False)
    order = np.argsort(rows, kind="stable")
    out = np.empty((rows.size, *video.shape[1:]), np.float32)
    out[order] = video[rows[order]]
    return out


def test_inputs(model, test) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray | None]:
    """(video [Nv, ...], sentence inputs {field: [Nt, ...]}, video windows [Nv, W] or None)
    of a test split (`jaxsvr.inputs.splits.TestSplit`) for the evaluator. With caption
    context each sentence is seen in the window of its clip's neighbours' captions."""
    view = ModelInputs.for_model(model, test.clips, test.video, test.text)
    text = {f: view.tables[f] for f in model.text_fields}
    if "caption" in view.windows:
        rows = view.windows["caption"][test.sentence_rows]
        text["caption"] = test.clip_captions[rows]
    return test.video, text, view.windows.get("video")
