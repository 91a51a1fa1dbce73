"""A trained run's test split, embedded, cached and searched with free-text queries.

`TrainedRun.load(workdir, checkpoint)` (`jaxsvr.runs.trained_run`, re-exported here)
reads a run's config.json, vocab.json and one checkpoint's parameters, checked as they
are read.

`rebuild(run)` rebuilds the run's test split and model from its config.json and checks
that the checkpoint holds that model's parameters, name for name and shape for shape
(`jaxsvr.models.param_trees`, the check the warm start makes too): a config.json that
names another model is one error line, not flax's `ScopeParamNotFoundError` in the eval
job or a query.

`Gallery.of(run)` holds the run's test clips and sentences, their metadata and their
embeddings. The first call rebuilds the run's test split (`rebuild`) and embeds it as the
evaluator does (`RetrievalEvaluator.video_embeddings` / `text_embeddings`, context windows
included); the result is cached in `WORKDIR/retrieval/<best|checkpoints>.npz` with a
`.json` manifest beside it (`jaxsvr.files.array_cache`), keyed by the checkpoint (folder,
step and orbax's commit timestamp) and the contents of config.json and vocab.json: a later
call with the same checkpoint and run files reads only the cache (which `rebuild` checked
when it was built), a changed checkpoint or run file rebuilds it. A cache is used only
once it agrees with its manifest (members, shapes, dtypes, finite floats) and with the
clips and sentences it lists (typed columns of one length, one array row per clip or
sentence); a damaged one is rebuilt with one warning naming it and what is wrong.

Every program here is traced under the run's `matmul_precision` (from its config.json),
as the trainer traced its evaluation: a run trained under "bfloat16" is re-embedded,
submitted and searched as it was scored.

`Retriever(run, gallery)`: `clips(query, top)` ranks the test clips for a free-text query
(tokenised as training tokenised captions: `jaxsvr.inputs.queries`), `sentences(narration_id,
top)` ranks the test sentences for a test clip. Scores are the model's `action`
similarity (dot products of unit vectors, or HGR's matching), one jitted call per query;
a non-finite score (which finite parameters and a checked cache cannot give) is an error,
never a NaN in the output.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import jax
import numpy as np

from jaxsvr import models
from jaxsvr.errors import InputError
from jaxsvr.files import array_cache
from jaxsvr.inputs import queries
from jaxsvr.inputs.model_inputs import ModelInputs
from jaxsvr.models import param_trees
from jaxsvr.runs.trained_run import TrainedRun
from jaxsvr.runtime import parallel, precision

CACHE = "retrieval"


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
        folder, name = run.workdir / CACHE, run.checkpoint.kind
        key = f"{run.checkpoint.key}/{run.files}"
        cached = array_cache.read(folder, name, key, _cache_problem, what="retrieval: cache")
        if cached is not None:
            return cls._from_cache(*cached)
        gallery = cls._build(run)
        meta = {
            "clips": gallery.clips,
            "sentences": gallery.sentences,
            "dims": gallery.dims,
            "pos_words": gallery.pos_words,
        }
        array_cache.write(folder, name, key, meta, gallery._arrays(), what="retrieval: cache")
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
        with precision.scope(precision.of_run(run.config)):  # as the run embedded
            video = evaluator.video_embeddings(run.params)
            text = evaluator.text_embeddings(run.params)
        return cls(
            clips,
            sentences,
            video,
            text,
            {"video_dim": splits.video_dim, **splits.dims},
            queries.pos_vocabulary(splits.train.text, splits.vocab),
        )

    def _arrays(self) -> dict[str, np.ndarray]:
        out = {f"video/{k}": v for k, v in _flat(self.video).items()}
        out.update({f"text/{k}": v for k, v in _flat(self.text).items()})
        return out

    @classmethod
    def _from_cache(cls, meta: dict, stored: dict[str, np.ndarray]) -> Gallery:
        def side(prefix):  # "video/" alone: a plain array; "video/<name>": a dict
            arrays = {k[len(prefix) :]: v for k, v in stored.items() if k.startswith(prefix)}
            return arrays[""] if "" in arrays else arrays

        return cls(
            meta["clips"],
            meta["sentences"],
            side("video/"),
            side("text/"),
            meta["dims"],
            meta["pos_words"],
        )


# The cache's tables: column -> the type of its values (times are written as floats).
CLIP_TYPES = {
    "narration_id": str,
    "video_id": str,
    "start_s": float,
    "stop_s": float,
    "narration": str,
}
SENTENCE_TYPES = {"narration_id": str, "narration": str}


def _cache_problem(meta: dict, stored: dict[str, np.ndarray]) -> str | None:
    """What keeps a cache's meta and arrays from being a gallery (`array_cache.read`), or
    None: tables of typed columns of one length, one array row per clip and sentence."""
    if set(meta) != {"clips", "sentences", "dims", "pos_words"}:
        return f"its meta holds {sorted(meta)}, not clips, sentences, dims and pos_words"
    rows = {}
    for table, types in (("clips", CLIP_TYPES), ("sentences", SENTENCE_TYPES)):
        problem = _table_problem(meta[table], types)
        if problem:
            return f"its {table} {problem}"
        rows[table] = len(meta[table]["narration_id"])
    if not set(meta["sentences"]["narration_id"]) <= set(meta["clips"]["narration_id"]):
        return "a sentence names a clip that is not in its clips"
    dims = meta["dims"]
    if (
        not isinstance(dims, dict)
        or "video_dim" not in dims
        or not all(type(n) is int and n >= 1 for n in dims.values())
    ):
        return f"its dims {dims!r} are not sizes with video_dim"
    pos = meta["pos_words"]
    if pos is not None and not (
        isinstance(pos, dict)
        and set(pos) == {"verb", "noun"}
        and all(isinstance(w, list) and all(isinstance(x, str) for x in w) for w in pos.values())
    ):
        return "its pos_words are not {verb: [words], noun: [words]}"
    for prefix, table in (("video/", "clips"), ("text/", "sentences")):
        names = [k for k in stored if k.startswith(prefix)]
        if not names or ("" in names and len(names) > 1):
            return f"it holds no {prefix} arrays, or a plain one beside named ones"
        for k in names:
            count = len(stored[k]) if stored[k].ndim else 0
            if count != rows[table] or not stored[k].ndim:
                return f"array {k} has {count} rows for {rows[table]} {table}"
    if set(stored) - {k for k in stored if k.startswith(("video/", "text/"))}:
        return "it holds arrays other than video/ and text/ ones"
    video, text = stored.get("video/"), stored.get("text/")
    if video is not None and text is not None and video.shape[1:] != text.shape[1:]:
        return f"its video and text vectors are {video.shape[1:]} and {text.shape[1:]} wide"
    return None


def _table_problem(table: Any, types: dict[str, type]) -> str | None:
    if not isinstance(table, dict) or set(table) != set(types):
        return f"are not an object of columns {', '.join(types)}"
    lengths = {len(c) if isinstance(c, list) else -1 for c in table.values()}
    if len(lengths) != 1 or -1 in lengths:
        return "columns are not lists of one length"
    for column, kind in types.items():
        if kind is str and not all(isinstance(v, str) for v in table[column]):
            return f"column {column} holds a value that is not a string"
        if kind is float and not all(type(v) is float and math.isfinite(v) for v in table[column]):
            return f"column {column} holds a value that is not a finite number"
    return None


def rebuild(run: TrainedRun):
    """The run's data splits (`pipeline.load_splits`, from its config.json) and its model.

    Raises:
      InputError: the vocabulary rebuilt from the data differs from the run's vocab.json,
        or the checkpoint holds another model's parameters than config.json builds.
    """
    from jaxsvr.train import pipeline

    config = run.config
    fields = models.text_fields(config)
    splits = pipeline.load_splits(config.data, fields, models.video_input(config))
    model = models.build(config, len(splits.vocab), splits.video_dim, **splits.dims)
    if splits.vocab.words != run.vocab.words:
        raise InputError(
            f"{run.workdir}: the vocabulary rebuilt from config.json differs from "
            "vocab.json: the run's data changed since it trained"
        )
    # Before any apply: flax would fail deep inside with ScopeParamNotFoundError.
    test = splits.test
    batch = ModelInputs.for_model(model, test.clips, test.video, test.text).init_batch()
    diffs = param_trees.differences(
        jax.eval_shape(model.init, jax.random.key(0), batch), run.params
    )
    if diffs:
        raise InputError(
            f"checkpoint {run.checkpoint.path} holds another model's parameters than "
            f"{run.workdir / 'config.json'} builds ({param_trees.summary(diffs)}): restore the "
            "config.json the run trained with"
        )
    return splits, model


def test_similarity(run: TrainedRun):
    """The run's test similarity [clips, sentences] float32 (its checkpoint on its own test
    split, rebuilt from config.json, as its evaluation scores it), and those splits."""
    splits, model = rebuild(run)
    with precision.scope(precision.of_run(run.config)):  # as the run's evaluation traced it
        return test_evaluator(run, splits, model).similarity(run.params), splits


def test_evaluator(run: TrainedRun, splits, model):
    """The `RetrievalEvaluator` of the run's test split (`rebuild`'s splits and model), as
    the trainer builds it: its config's chunks, context windows, one mesh of every device
    (only the chunk sizes are read: config.json files of older runs lack later eval keys)."""
    from jaxsvr.train.evaluation import split_evaluator

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

        name = precision.of_run(config)  # the run's matmul precision
        self._embed_text = jax.jit(precision.traced_under(name, embed_text))
        self._score = jax.jit(precision.traced_under(name, score))
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
        return self._top(scores, top), q.unknown

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
        return self._top(scores, top)

    def _top(self, scores: np.ndarray, top: int) -> list[Hit]:
        """The `top` best rows (ties: the lower row first); the scores must be finite."""
        if not np.isfinite(scores).all():
            raise InputError(
                f"checkpoint {self.run.checkpoint.path} gives non-finite scores (NaN or inf): "
                "its parameters are damaged; pick another checkpoint"
            )
        return _top(scores, top)


def _top(scores: np.ndarray, top: int) -> list[Hit]:
    """The `top` best rows (ties: the lower row first)."""
    top = max(1, min(top, scores.size))
    order = np.lexsort((np.arange(scores.size), -scores))[:top]
    return [Hit(rank + 1, float(scores[r]), int(r)) for rank, r in enumerate(order)]
