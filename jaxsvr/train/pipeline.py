"""Composes the stages of a run from `config`, in the order the data flows.

    annotations  ->  relevance  ->  inputs  ->  sampling + objective  ->  (train loop)
    config.data.format           config.data.*     config.loss / config.sampler

1. Annotations (`jaxsvr.annotations`): `config.data.format` names the source in
   `FORMATS`; "epic100" reads the EPIC-KITCHENS-100 CSVs of `config.data.annotations`, or
   generates the built-in kitchen annotations when that is ""; "youcook2" reads its JSON
   file, "msrvtt" a videodatainfo JSON or the folder of both files of the public release,
   "activitynet" the folder of ActivityNet Captions' train.json and
   val_1.json (the built-in data as segments when "" for youcook2 and activitynet, as
   MSR-VTT-style videos with 20 captions for msrvtt: `kitchen.captioned`), and
   class the clips by their captions (`jaxsvr.relevance.caption_classes`).
2. Relevance (`jaxsvr.relevance`): the [test clips, sentences] matrix under
   `relevance_spec(config.data)` (EPIC class relevance or a caption proxy).
3. Inputs (`jaxsvr.inputs`): vocabulary, token ids, role graphs, caption and video
   features of both splits (`splits.build`), a validation split carved from the training
   videos when `config.data.val_videos` or `val_fraction` asks (`validation.carve`), then
   the model's view of them (`ModelInputs`: tables, windows, gathering).
4. The model (`jaxsvr.models`) and the objective (`jaxsvr.objectives`, which owns its
   sampler from `jaxsvr.sampling`).

Everything below reads explicit arguments; `config` is read here, in the trainer, and in
the constructors of models and objectives.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import ml_collections

from jaxsvr import models, objectives
from jaxsvr.annotations import activitynet, kitchen, load, msrvtt, youcook2
from jaxsvr.annotations.captioned import CaptionedVideos
from jaxsvr.annotations.load import Annotations
from jaxsvr.errors import InputError
from jaxsvr.inputs import jpose_folder, validation
from jaxsvr.inputs import splits as splits_lib
from jaxsvr.inputs.model_inputs import ModelInputs
from jaxsvr.relevance import caption_classes, split_relevance
from jaxsvr.relevance.split_relevance import RelevanceSpec
from jaxsvr.train import checks


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
    """What the trainer needs: the splits, the model, its objective and its train inputs."""

    splits: splits_lib.Splits
    model: object
    objective: objectives.Objective
    train_inputs: ModelInputs


def build(config: ml_collections.ConfigDict) -> Run:
    """Every stage of a run up to the train loop, from `config` (checked by
    `jaxsvr.train.checks.check_train`)."""
    fields = models.text_fields(config)
    splits = load_splits(config.data, fields, models.video_input(config))
    checks.check_data(config, splits, fields)  # before anything is written
    d = config.data
    splits = validation.carve(
        splits,
        videos=d.val_videos,
        fraction=d.val_fraction,
        seed=d.val_seed,
        spec=relevance_spec(d),
    )
    model = models.build(config, len(splits.vocab), splits.video_dim, **splits.dims)
    objective = objectives.build(config, splits.train, model, relevance_spec(config.data))
    train = splits.train
    inputs = ModelInputs.for_model(
        model, train.clips, train.video, train.text, video_rows=train.video_rows
    )
    return Run(splits, model, objective, inputs)


def load_splits(
    data: ml_collections.ConfigDict, fields=splits_lib.TOKEN_FIELDS, video_input="segments"
) -> splits_lib.Splits:
    """Annotations, test relevance and the inputs of both splits, as `config.data` says
    (`video_input`: how real per-segment features enter the model, `models.video_input`)."""
    ann = load_annotations(data)
    spec = relevance_spec(data)
    relevance = split_relevance.test_relevance(
        spec, ann.test, ann.sentences, ann.sentence_rows(), ann.clip_texts
    )
    folder = splits_lib.jpose_data(data)
    if folder is not None and spec.proxy == "class":  # the official relevancy matrix
        relevance = jpose_folder.test_relevance(folder, relevance, allow_pickle=data.allow_pickle)
    return splits_lib.build(data, ann, relevance, fields, video_input)


def load_annotations(data: ml_collections.ConfigDict) -> Annotations:
    """The annotations `config.data.format` and `config.data.annotations` name."""
    # check_train checks the format of a training run; the rescore job reads here without it
    if data.format not in FORMATS:
        raise InputError(f"unknown config.data.format {data.format!r}: use one of {tuple(FORMATS)}")
    return FORMATS[data.format](data)


def relevance_spec(data: ml_collections.ConfigDict) -> RelevanceSpec:
    """The relevance settings of `config.data` (its `relevance` section, SYN classes and
    spaCy pipeline) as explicit values."""
    r = data.relevance
    return RelevanceSpec(
        proxy=r.proxy,
        rho=r.rho,
        weights=tuple(r.weights),
        syn_classes=data.syn_classes,
        spacy_pipeline=data.spacy_pipeline,
        own_is_relevant=data.format == "epic100",
    )


def _epic100(data) -> Annotations:
    if data.annotations:
        return load.epic100_folder(data.annotations, data.train_clips)
    return load.builtin(data.num_videos, data.test_videos, data.clips_per_video, data.seed)


def _captioned(data) -> Annotations:
    path = Path(data.annotations)
    if data.annotations:
        logging.info("data: %s annotations from %s (classes from the captions)", data.format, path)
        rows = CAPTIONED[data.format](path)
    elif data.format in BUILTIN_SEGMENTS:
        ann = _epic100(data)
        logging.info("data: the built-in kitchen annotations as %s segments", data.format)
        rows = youcook2.rows_from_clips(ann.train, ann.test)
    else:  # msrvtt: as many videos as the built-in kitchen data has clips, 20 captions each
        sizes = {
            s: n * data.clips_per_video
            for s, n in (("train", data.num_videos), ("test", data.test_videos))
        }
        logging.info(
            "data: built-in MSR-VTT-style videos (train %d, test %d; %d captions each; seed %d)",
            sizes["train"],
            sizes["test"],
            kitchen.CAPTIONS_PER_VIDEO,
            data.seed,
        )
        rows = CaptionedVideos.concat(
            [kitchen.captioned(n, data.seed, s) for s, n in sizes.items()]
        )
    train_rows, test_rows, val_rows = (rows.select(s) for s in ("train", "test", "val"))
    # The test videos are evaluated. Annotations without any (one MSR-VTT
    # train_val_videodatainfo.json) evaluate their validate videos instead: that changes
    # what the numbers mean, so the log says it, as it says which videos go unused.
    val_videos = len(set(val_rows.video_id))
    if not len(test_rows) and len(val_rows):
        logging.warning(
            "data: %s has no test videos: its %d validate videos (%d captions) are the test "
            "split; give the test annotations too (for MSR-VTT the folder of both files) to "
            "evaluate on the test split",
            path,
            val_videos,
            len(val_rows),
        )
        test_rows = val_rows
    elif len(val_rows):
        logging.info(
            "data: %s: %d validate videos (%d captions) are not used (the test split is evaluated)",
            path,
            val_videos,
            len(val_rows),
        )
    for name, part in (("train", train_rows), ("test or validation", test_rows)):
        if not len(part):
            raise InputError(f"{path}: no {name} captions: the file must hold both splits")
    classes = split_relevance.syn_class_map(data.syn_classes)
    return caption_classes.annotations(
        train_rows,
        test_rows,
        classes,
        data.spacy_pipeline,
        rho=data.relevance.rho,
        every_train_caption=data.train_captions == "all",
    )


CAPTIONED = {"youcook2": youcook2.read, "msrvtt": msrvtt.read, "activitynet": activitynet.read}
# segment datasets whose built-in form is the kitchen data's clips in time order
BUILTIN_SEGMENTS = ("youcook2", "activitynet")
FORMATS = {"epic100": _epic100, **{name: _captioned for name in CAPTIONED}}
