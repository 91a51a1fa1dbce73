"""The train and test splits as model inputs: `build(config.data, annotations, relevance)`.

From the run's `Annotations` (`jaxsvr.annotations`) and its test relevance
(`jaxsvr.relevance`), as `config.data` (this stage's config section) says:
- video features: `config.data.features` = a folder of real features
  (`jaxsvr.inputs.features`), or "" for synthetic features from the class structure
  (`jaxsvr.inputs.synthetic`);
- text: a vocabulary built from the training captions and their verb/noun words
  (`jaxsvr.inputs.text`); verb and noun words come from the annotation columns, or from a
  spaCy parse when `config.data.pos_source = "spacy"` (`jaxsvr.nlp.words`). Only the text
  inputs the model reads (`Model.text_fields`) are built beyond the token ids: role graphs
  (`jaxsvr.inputs.roles`, HGR; from the columns or spaCy likewise) and frozen caption
  features `text_feature` (heads): `{train,test}_text.npy|npz` in the features folder when
  `config.data.features` is set (then required), else synthetic ones from
  `jaxsvr.inputs.synthetic_text`;
- a public JPoSE data folder as `config.data.features` (`jaxsvr.inputs.jpose_folder`):
  its mean video features, its frozen caption / verb / noun features for models with
  `text_input = "features"` (`caption_feature`, `verb_feature`, `noun_feature`), and its
  relational dicts' triplet classes;
- per-segment real features [N, T, D] enter as `video_input` says ("mean": averaged over
  T once at load; "segments": as stored; `jaxsvr.models.video_input`).

Train rows are clips: clip i's video features and its own narration form pair i (a
multi-caption MSR-VTT video trains with each of its captions by default,
`config.data.train_captions`). Test rows are clips (videos) and sentences (texts), with
the relevance between them.
"""

from __future__ import annotations

import dataclasses
import logging

import ml_collections
import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.annotations.epic100 import Clips
from jaxsvr.annotations.load import Annotations
from jaxsvr.errors import InputError
from jaxsvr.files.locations import locate
from jaxsvr.inputs import features, jpose_folder, roles, synthetic, synthetic_text, text
from jaxsvr.nlp import words

TOKEN_FIELDS = ("caption", "verb", "noun")  # always built
ROLE_FIELDS = ("token_node", "node_role", "noun_verb")
FEATURE_FIELD = "text_feature"
FROZEN_FIELDS = tuple(jpose_folder.FIELDS)  # a JPoSE folder's frozen text features
POS_SOURCES = ("columns", "spacy")  # config.data.pos_source: verb/noun words and role graphs


@dataclasses.dataclass(frozen=True, eq=False)
class TrainSplit:
    clips: Clips
    video: np.ndarray  # [V, D] or [V, T, D] float32 (possibly memory-mapped)
    text: dict[str, np.ndarray]  # field -> [N, ...]: token ids (0 = padding), roles, features
    # [N] int32 the video row of each train row when rows share videos (a multi-caption
    # video's captions), else None: row i is video i (V = N)
    video_rows: np.ndarray | None = None
    # (verbs, nouns) ClassSets of each row's own caption, where rows are a multi-caption
    # video's captions (`clips` holds the videos' classes), else None
    caption_classes: tuple | None = None

    @property
    def verbs(self) -> np.ndarray:
        """[N] each clip's main verb class (the samplers' and batch losses' verb level)."""
        if self.clips.verb_class is not None:
            return self.clips.verb_class
        return self.clips.verb_classes.indices[self.clips.verb_classes.indptr[:-1]]


@dataclasses.dataclass(frozen=True, eq=False)
class TestSplit:
    video: np.ndarray  # [Nv, D] or [Nv, T, D] float32
    text: dict[str, np.ndarray]  # field -> [Nt, ...], one row per sentence
    relevance: np.ndarray  # [Nv, Nt] float32 class relevance
    clips: Clips  # the test clips (videos), for context windows
    sentence_rows: np.ndarray  # [Nt] the clip whose narration each sentence is
    clip_captions: np.ndarray  # [Nv, L] caption token ids of every test clip (windows)

    def instance_relevance(self) -> np.ndarray:
        """[Nv, Nt] float32: 1 where the clip's narration is the sentence (single-instance
        retrieval, as ConTra evaluates EPIC), else 0."""
        ids = epic100.text_ids(self.clips.narration)
        return (ids[:, None] == ids[self.sentence_rows][None, :]).astype(np.float32)


@dataclasses.dataclass(frozen=True, eq=False)
class Splits:
    train: TrainSplit
    test: TestSplit
    vocab: text.Vocabulary
    num_verbs: int
    num_nouns: int
    val: TestSplit | None = None  # carved from the training videos (inputs.validation)

    @property
    def video_dim(self) -> int:
        return int(self.train.video.shape[-1])

    @property
    def dims(self) -> dict[str, int]:
        """Model sizes the data decides (`jaxsvr.models.build` passes them on)."""
        out = {}
        if FEATURE_FIELD in self.train.text:
            out["text_dim"] = int(self.train.text[FEATURE_FIELD].shape[-1])
        if "noun_verb" in self.train.text:
            out["num_nouns"] = int(self.train.text["noun_verb"].shape[-1])
            out["num_verbs"] = int(self.train.text["node_role"].shape[-1]) - out["num_nouns"]
        return out


def build(
    data: ml_collections.ConfigDict,
    ann: Annotations,
    relevance: np.ndarray,
    fields: tuple[str, ...] = TOKEN_FIELDS,
    video_input: str = "segments",
) -> Splits:
    """The model inputs of both splits from the annotations, as `config.data` says.

    Args:
      data: `config.data` (text lengths, vocabulary, features; the inputs stage's section).
      ann: the run's annotations.
      relevance: [test clips, sentences] float32 test relevance (the relevance stage).
      fields: the text inputs the model reads; token ids are always built.
      video_input: "mean" or "segments": how real per-segment features enter the model.
    """
    unknown = set(fields) - {*TOKEN_FIELDS, *ROLE_FIELDS, FEATURE_FIELD, *FROZEN_FIELDS}
    if unknown:
        raise ValueError(f"unknown text fields {sorted(unknown)}")
    train_clips, test_clips, test_sents = ann.train, ann.test, ann.sentences
    folder = jpose_data(data)
    if folder is not None:  # the triplet classes of the public code
        train_clips = jpose_folder.relational_classes(
            folder, train_clips, allow_pickle=data.allow_pickle
        )
    elif set(fields) & set(FROZEN_FIELDS):
        raise InputError(
            "config.model.text_input = 'features' reads the frozen text features of a public "
            "JPoSE data folder: point config.data.features at one (video_features/, "
            "text_features/), or use text_input = 'words'"
        )
    num_verbs, num_nouns = ann.num_verbs, ann.num_nouns
    train_words = _pos_words(train_clips.narration, train_clips.verb, train_clips.nouns, data)
    sent_rows = ann.sentence_rows()
    test_words = _pos_words(
        test_sents.narration,
        [test_clips.verb[r] for r in sent_rows],
        [test_clips.nouns[r] for r in sent_rows],
        data,
    )
    vocab = text.Vocabulary.build(
        [w for field in train_words.values() for w in field], min_count=data.min_word_count
    )
    lengths = {
        "caption": data.max_caption_len,
        "verb": data.max_verb_len,
        "noun": data.max_noun_len,
    }
    logging.info("text: %d words in the vocabulary (from the training captions)", len(vocab))

    video_rows = ann.train_video_rows
    video_clips = train_clips  # the train clips the video features belong to
    if video_rows is not None:  # one clip per video: its first row
        video_clips = train_clips.take(np.unique(video_rows, return_index=True)[1])
    train_video, test_video = features.select_modalities(
        _features(data, video_clips, test_clips, num_verbs, num_nouns, video_input),
        data.modalities,
    )
    rel = relevance
    train_text = {f: text.encode(train_words[f], vocab, lengths[f]) for f in TOKEN_FIELDS}
    test_text = {f: text.encode(test_words[f], vocab, lengths[f]) for f in TOKEN_FIELDS}
    if set(ROLE_FIELDS) & set(fields):
        train_text.update(_roles(train_clips.narration, train_clips.verb, train_clips.nouns, data))
        test_text.update(
            _roles(
                test_sents.narration,
                [test_clips.verb[r] for r in sent_rows],
                [test_clips.nouns[r] for r in sent_rows],
                data,
            )
        )
    if folder is not None:  # frozen text features: MME / JPoSE's, and heads' caption ones
        _folder_text(data, folder, fields, train_clips, len(test_sents), train_text, test_text)
    elif FEATURE_FIELD in fields:
        train_text[FEATURE_FIELD], test_text[FEATURE_FIELD] = _caption_features(
            data, train_clips, test_clips, test_sents, sent_rows, num_verbs, num_nouns
        )
    train = TrainSplit(train_clips, train_video, train_text, video_rows, ann.train_caption_classes)
    clip_captions = text.encode(
        [words.tokenize(c) for c in test_clips.narration], vocab, lengths["caption"]
    )
    test = TestSplit(test_video, test_text, rel, test_clips, sent_rows, clip_captions)
    logging.info(
        "data: train %d clips%s; test %d clips x %d sentences (relevance mean %.4f); "
        "video features %s",
        len(video_clips),
        "" if video_rows is None else f" ({len(train_clips)} captions, each a training pair)",
        rel.shape[0],
        rel.shape[1],
        rel.mean(dtype=np.float64),
        "x".join(map(str, train_video.shape[1:])),
    )
    return Splits(train, test, vocab, num_verbs, num_nouns)


def _pos_words(captions, verbs, nouns, data) -> dict[str, list[list[str]]]:
    """Token lists per field: whole caption, verb words, noun words."""
    caption = [words.tokenize(c) for c in captions]
    if data.pos_source == "spacy":
        verb, noun = words.pos_words(list(captions), pipeline=data.spacy_pipeline)
    else:
        verb = [words.tokenize(v) for v in verbs]
        noun = [[t for n in ns for t in words.tokenize(n)] for ns in nouns]
    return {"caption": caption, "verb": verb, "noun": noun}


def _roles(captions, verbs, nouns, data) -> dict[str, np.ndarray]:
    """Role graphs of captions (HGR) from the verb/noun columns or a spaCy parse."""
    sizes = dict(
        max_len=data.max_caption_len, num_verbs=data.num_verb_nodes, num_nouns=data.num_noun_nodes
    )
    if data.pos_source == "spacy":
        return roles.from_spacy(list(captions), pipeline=data.spacy_pipeline, **sizes)
    return roles.from_columns(list(captions), list(verbs), list(nouns), **sizes)


def _caption_features(data, train, test, sents, sent_rows, num_verbs: int, num_nouns: int):
    """Frozen caption features: train clips [N, Dt] and test sentences [Nt, Dt]."""
    if data.features:
        return _real_features(data, "text features", train_text=len(train), test_text=len(sents))
    spec = synthetic_text.TextSpec(**data.synthetic_text.to_dict())
    logging.info(
        "text features: synthetic frozen caption features (%d-d, seed %d; "
        "jaxsvr.inputs.synthetic_text)",
        spec.dim,
        data.feature_seed,
    )
    make = dict(seed=data.feature_seed, spec=spec)
    test_main = synthetic.main_nouns(test)[sent_rows]
    return (
        synthetic_text.caption_features(
            train.narration,
            train.verb_classes,
            train.noun_classes,
            synthetic.main_nouns(train),
            num_verbs,
            num_nouns,
            **make,
        ),
        synthetic_text.caption_features(
            sents.narration,
            sents.verb_classes,
            sents.noun_classes,
            test_main,
            num_verbs,
            num_nouns,
            **make,
        ),
    )


def _folder_text(data, folder, fields, train_clips, sentences: int, train_text, test_text):
    """Adds the JPoSE folder's frozen features of `fields` to the text tables: its
    caption / verb / noun features, and for heads (`text_feature`) its caption ones."""
    names = {f: f for f in fields if f in FROZEN_FIELDS}
    if FEATURE_FIELD in fields:
        names[FEATURE_FIELD] = "caption_feature"
    if not names:
        return
    kinds = tuple(dict.fromkeys(names.values()))
    train = jpose_folder.train_text(
        folder, train_clips, _train_sentences(data), kinds, allow_pickle=data.allow_pickle
    )
    test = jpose_folder.test_text(folder, sentences, kinds, allow_pickle=data.allow_pickle)
    train_text.update({f: train[kind] for f, kind in names.items()})
    test_text.update({f: test[kind] for f, kind in names.items()})


def jpose_data(data):
    """The features folder when it is a public JPoSE data folder, else None."""
    if not data.features:
        return None
    folder = locate(data.features)
    return folder if jpose_folder.is_folder(folder) else None


def _train_sentences(data) -> list[str] | None:
    """The narrations of the annotations' train sentence table, None without one."""
    if not data.annotations or data.format != "epic100":
        return None
    path = locate(data.annotations) / epic100.TRAIN_SENTENCES
    return list(epic100.read_sentences(path).narration) if path.is_file() else None


def _real_features(
    data, what: str, temporal: str = "segments", **rows: int
) -> tuple[np.ndarray, ...]:
    """The arrays named by `rows` (file stem -> expected rows) in the features folder."""
    folder = locate(data.features)
    logging.info("%s: real, from %s", what, folder)
    return tuple(
        features.find_split_features(
            folder,
            stem,
            rows=n,
            allow_pickle=data.allow_pickle,
            temporal=temporal,
            cache=data.feature_cache,
        )
        for stem, n in rows.items()
    )


def _features(data, train: Clips, test: Clips, num_verbs: int, num_nouns: int, video_input: str):
    folder = jpose_data(data)
    if folder is not None:
        logging.info("features: the public JPoSE data folder %s", folder)
        return tuple(
            jpose_folder.video(folder, split, rows=len(clips), allow_pickle=data.allow_pickle)
            for split, clips in (("train", train), ("test", test))
        )
    if data.features:
        return _real_features(data, "features", video_input, train=len(train), test=len(test))
    spec = synthetic.SyntheticSpec(**data.synthetic.to_dict())
    if not (num_verbs and num_nouns):  # the features are drawn around class prototypes
        raise InputError(
            f"synthetic features need verb and noun classes, but the annotations "
            f"({data.annotations or 'built-in'}) give {num_verbs} verb and {num_nouns} noun "
            "classes: give captions with verbs and nouns, or real features (config.data.features)"
        )
    logging.info(
        "features: synthetic, from the verb/noun classes (seed %d, %d segments; "
        "jaxsvr.inputs.synthetic)",
        data.feature_seed,
        data.segments,
    )
    make = dict(seed=data.feature_seed, spec=spec, segments=data.segments)
    return (
        synthetic.clip_features(train, num_verbs, num_nouns, split="train", **make),
        synthetic.clip_features(test, num_verbs, num_nouns, split="test", **make),
    )
