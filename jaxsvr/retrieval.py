"""A trained run read back, and its test split searched with free-text queries.

`TrainedRun.load(workdir, checkpoint)` reads `config.json`, `vocab.json` and one orbax
checkpoint's parameters: "best" (`best/<step>`), "latest" (the newest `checkpoints/<step>`),
a step number (found in either), or "auto" (best if the run has one, else latest). The
parameters are restored without the run's data (orbax's raw tree, `params` only).

`Gallery.of(run)` holds the run's test clips and sentences, their metadata and their
embeddings. The first call rebuilds the run's test split from its config
(`pipeline.load_splits`: annotations, features) and embeds it as the evaluator does
(`RetrievalEvaluator.video_embeddings` / `text_embeddings`, context windows included);
the result is cached in `WORKDIR/retrieval/<best|checkpoints>.npz` with a `.json` beside
it, keyed by the checkpoint (folder, step and orbax's commit timestamp): a later call with
the same checkpoint reads only the cache, a changed checkpoint rebuilds it.

`Retriever(run, gallery)`: `clips(query, top)` ranks the test clips for a free-text query
(tokenised as training tokenised captions: `jaxsvr.inputs.queries`), `sentences(narration_id,
top)` ranks the test sentences for a test clip. Scores are the model's `action`
similarity (dot products of unit vectors, or HGR's matching), one jitted call per query.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from typing import Any

import jax
import ml_collections
import numpy as np

from jaxsvr import models, parallel
from jaxsvr.errors import InputError
from jaxsvr.files import locations
from jaxsvr.inputs import queries
from jaxsvr.inputs.text import Vocabulary
from jaxsvr.workdir import atomic_write, write_text

CHECKPOINT_CHOICES = "best, latest, auto or a step number"
CACHE = "retrieval"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    kind: str  # "best" or "checkpoints": the folder of the workdir
    step: int
    path: Any  # the step's folder
    stamp: str  # orbax's commit timestamp: a rewritten step gets a new one

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.step}/{self.stamp}"


@dataclasses.dataclass(frozen=True, eq=False)
class TrainedRun:
    workdir: Any
    config: ml_collections.ConfigDict
    vocab: Vocabulary
    checkpoint: Checkpoint
    params: Any

    @classmethod
    def load(cls, workdir, checkpoint: str = "auto") -> TrainedRun:
        """The run in `workdir` with the parameters of `checkpoint` (module docstring).

        Raises:
          InputError: not a run's workdir, no such checkpoint, or an unreadable one.
        """
        workdir = locations.locate(workdir)
        config = ml_collections.ConfigDict(_read_json(workdir / "config.json", workdir))
        vocab_path = workdir / "vocab.json"
        if not vocab_path.is_file():
            raise InputError(f"{workdir} has no vocab.json: is it the workdir of a training run?")
        vocab = Vocabulary.from_json(vocab_path.read_text(), source=str(vocab_path))
        found = find_checkpoint(workdir, checkpoint)
        logging.info("retrieval: %s, checkpoint %s/%d", workdir, found.kind, found.step)
        return cls(workdir, config, vocab, found, restore_params(found))


def find_checkpoint(workdir, which: str = "auto") -> Checkpoint:
    """The checkpoint `which` names in `workdir` (see the module docstring)."""
    steps = {kind: _steps(workdir / kind) for kind in ("best", "checkpoints")}
    if which == "auto":
        which = "best" if steps["best"] else "latest"
    if which in ("best", "latest"):
        kind = "best" if which == "best" else "checkpoints"
        if not steps[kind]:
            raise InputError(
                f"{workdir} has no {'best' if kind == 'best' else ''} checkpoint in {kind}/: "
                f"train the run first, or pick another --checkpoint ({CHECKPOINT_CHOICES})"
            )
        step = max(steps[kind])
    else:
        try:
            step = int(which)
        except ValueError:
            raise InputError(f"--checkpoint {which!r}: use {CHECKPOINT_CHOICES}") from None
        kind = next((k for k in ("best", "checkpoints") if step in steps[k]), None)
        if kind is None:
            have = sorted({s for v in steps.values() for s in v})
            raise InputError(
                f"{workdir} has no checkpoint of step {step} (it has steps {have or 'none'})"
            )
    path = workdir / kind / str(step)
    try:
        stamp = str(
            json.loads((path / "_CHECKPOINT_METADATA").read_text())["commit_timestamp_nsecs"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        stamp = "unknown"
    return Checkpoint(kind, step, path, stamp)


def _steps(folder) -> list[int]:
    if not folder.is_dir():
        return []
    return [int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.is_dir()]


def restore_params(found: Checkpoint) -> Any:
    import orbax.checkpoint as ocp

    try:
        tree = ocp.StandardCheckpointer().restore(locations.for_orbax(found.path / "default"))
    except Exception as e:  # orbax raises many kinds for a damaged checkpoint
        raise InputError(
            f"cannot read checkpoint {found.path} ({type(e).__name__}): pick another "
            f"--checkpoint ({CHECKPOINT_CHOICES})"
        ) from None
    return jax.device_get(tree["params"])


def _read_json(path, workdir) -> dict:
    if not path.is_file():
        raise InputError(f"{workdir} has no {path.name}: is it the workdir of a training run?")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise InputError(f"{path}: not valid JSON ({e}): the run's files are damaged") from None


@dataclasses.dataclass(frozen=True, eq=False)
class Gallery:
    """A run's test clips and sentences: metadata and embeddings (module docstring)."""

    clips: dict[str, list]  # narration_id, video_id, start_s, stop_s, narration
    sentences: dict[str, list]  # narration_id, narration
    video: Any  # [Nv, d] action vectors (dot-product models) or {name: [Nv, ...]}
    text: Any  # the same for the sentences
    dims: dict[str, int]  # video_dim and the data-decided model sizes (models.build)
    pos_words: dict[str, list[str]] | None = None  # training verb / noun words (queries)

    @classmethod
    def of(cls, run: TrainedRun) -> Gallery:
        """The cached gallery of `run`'s checkpoint, or a new one (then cached)."""
        folder = run.workdir / CACHE
        name = run.checkpoint.kind
        meta_path, arrays_path = folder / f"{name}.json", folder / f"{name}.npz"
        try:
            meta = json.loads(meta_path.read_text()) if meta_path.is_file() else None
        except ValueError:
            meta = None
        if meta is not None and meta.get("checkpoint") == run.checkpoint.key:
            try:
                with arrays_path.open("rb") as f:
                    stored = dict(np.load(io.BytesIO(f.read()), allow_pickle=False))
                logging.info("retrieval: embeddings from the cache %s", arrays_path)
                return cls._from_cache(meta, stored)
            except (OSError, ValueError, KeyError):
                logging.warning("retrieval: cache %s unreadable: embedding again", arrays_path)
        gallery = cls._build(run)
        meta = {
            "checkpoint": run.checkpoint.key,
            "clips": gallery.clips,
            "sentences": gallery.sentences,
            "dims": gallery.dims,
            "pos_words": gallery.pos_words,
            "keys": {"video": _tree_keys(gallery.video), "text": _tree_keys(gallery.text)},
        }
        try:  # meta last: a meta that names a checkpoint means the arrays beside it are its
            folder.mkdir(parents=True, exist_ok=True)
            meta_path.unlink(missing_ok=True)
            atomic_write(arrays_path, lambda f: np.savez(f, **gallery._arrays()))
            write_text(meta_path, json.dumps(meta))
            logging.info("retrieval: cached the embeddings in %s", arrays_path)
        except OSError as e:  # a run folder this user may read but not write
            logging.warning("retrieval: cannot cache in %s (%s): embedding each time", folder, e)
        return gallery

    @classmethod
    def _build(cls, run: TrainedRun) -> Gallery:
        logging.info("retrieval: embedding the test split (read back from config.json)")
        splits, model = rebuild(run)
        evaluator = test_evaluator(run, splits, model)
        test = splits.test
        clips = {
            "narration_id": list(test.clips.narration_id),
            "video_id": list(test.clips.video_id),
            "start_s": [float(s) for s in test.clips.start_s],
            "stop_s": [float(s) for s in test.clips.stop_s],
            "narration": list(test.clips.narration),
        }
        rows = test.sentence_rows
        sentences = {
            "narration_id": [test.clips.narration_id[r] for r in rows],
            "narration": [_sentence(splits, i) for i in range(len(rows))],
        }
        return cls(
            clips,
            sentences,
            evaluator.video_embeddings(run.params),
            evaluator.text_embeddings(run.params),
            {"video_dim": splits.video_dim, **splits.dims},
            queries.pos_vocabulary(splits.train.text, splits.vocab),
        )

    def _arrays(self) -> dict[str, np.ndarray]:
        out = {f"video/{k}": v for k, v in _flat(self.video).items()}
        out.update({f"text/{k}": v for k, v in _flat(self.text).items()})
        return out

    @classmethod
    def _from_cache(cls, meta: dict, stored: dict[str, np.ndarray]) -> Gallery:
        def side(prefix):
            keys = meta["keys"][prefix]
            if keys is None:
                return stored[f"{prefix}/"]
            return {k: stored[f"{prefix}/{k}"] for k in keys}

        return cls(
            meta["clips"],
            meta["sentences"],
            side("video"),
            side("text"),
            meta["dims"],
            meta.get("pos_words"),
        )


def rebuild(run: TrainedRun):
    """The run's data splits (`pipeline.load_splits`, from its config.json) and its model.

    Raises:
      InputError: the vocabulary rebuilt from the data differs from the run's vocab.json.
    """
    from jaxsvr import pipeline

    config = run.config
    fields = models.model_class(config.model.name).text_fields
    splits = pipeline.load_splits(config.data, fields)
    model = models.build(config, len(splits.vocab), splits.video_dim, **splits.dims)
    if splits.vocab.words != run.vocab.words:
        raise InputError(
            f"{run.workdir}: the vocabulary rebuilt from config.json differs from "
            "vocab.json: the run's data changed since it trained"
        )
    return splits, model


def test_evaluator(run: TrainedRun, splits, model):
    """The `RetrievalEvaluator` of the run's test split (`rebuild`'s splits and model), as
    the trainer builds it: its config's chunks, context windows, one mesh of every device
    (only the chunk sizes are read: config.json files of older runs lack later eval keys)."""
    from jaxsvr.train_evaluation import split_evaluator

    e = run.config.eval
    return split_evaluator(
        model, splits.test, parallel.make_mesh(), chunk=e.chunk, text_chunk=e.text_chunk
    )


def _sentence(splits, i: int) -> str:
    return splits.test.clips.narration[splits.test.sentence_rows[i]]


def _flat(tree) -> dict[str, np.ndarray]:
    if isinstance(tree, dict):
        return {k: np.asarray(v) for k, v in tree.items()}
    return {"": np.asarray(tree)}


def _tree_keys(tree) -> list[str] | None:
    return sorted(tree) if isinstance(tree, dict) else None


@dataclasses.dataclass(frozen=True)
class Hit:
    rank: int
    score: float
    row: int  # the clip's (or sentence's) row in the test split


class Retriever:
    """Searches a run's gallery (module docstring)."""

    def __init__(self, run: TrainedRun, gallery: Gallery):
        config = run.config
        self.run, self.gallery = run, gallery
        dims = dict(gallery.dims)
        video_dim = dims.pop("video_dim")
        self.model = model = models.build(config, len(run.vocab), video_dim, **dims)
        self.fields = model.text_fields
        self.window = getattr(model, "windows", {}).get("caption")

        def embed_text(params, inputs):
            out = model.apply(params, inputs, method=model.embed_text)
            return out["action"] if model.dot_product else out

        def score(params, video, text):
            if model.dot_product:
                return video @ text.T
            return model.apply(params, video, text, method=model.similarity)["action"]

        self._embed_text = jax.jit(embed_text)
        self._score = jax.jit(score)
        self._embed_video = None

    def encode(self, query: str) -> queries.Query:
        """The query's model inputs and its unknown words (`jaxsvr.inputs.queries`)."""
        return queries.encode(
            query,
            self.run.vocab,
            self.run.config.data,
            self.fields,
            self.window,
            self.gallery.pos_words,
        )

    def clips(self, query: str, top: int = 10) -> tuple[list[Hit], tuple[str, ...]]:
        """The `top` test clips for `query`, best first, and the query's unknown words."""
        q = self.encode(query)
        text = self._embed_text(self.run.params, q.inputs)
        scores = np.asarray(self._score(self.run.params, self.gallery.video, text))[:, 0]
        return _top(scores, top), q.unknown

    def sentences(self, narration_id: str, top: int = 10) -> list[Hit]:
        """The `top` test sentences for the test clip `narration_id`, best first."""
        ids = self.gallery.clips["narration_id"]
        try:
            row = ids.index(narration_id)
        except ValueError:
            raise InputError(
                f"--clip {narration_id!r} is not a test clip of this run ({len(ids)} clips, "
                f"e.g. {', '.join(ids[:3])})"
            ) from None
        video = jax.tree.map(lambda x: x[row : row + 1], self.gallery.video)
        scores = np.asarray(self._score(self.run.params, video, self.gallery.text))[0]
        return _top(scores, top)


def _top(scores: np.ndarray, top: int) -> list[Hit]:
    """The `top` best rows (ties: the lower row first)."""
    top = max(1, min(top, scores.size))
    order = np.lexsort((np.arange(scores.size), -scores))[:top]
    return [Hit(rank + 1, float(scores[r]), int(r)) for rank, r in enumerate(order)]
