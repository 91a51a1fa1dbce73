"""The public JPoSE data folder (`JPoSE_data/`) as a run's inputs, read as it is.

JPoSE and MME were published training on the folder released with
mwray/Joint-Part-of-Speech-Embeddings; `config.data.features` pointing at it is detected by
its `video_features/` and `text_features/` subfolders. Its files (pickles: read only with
`config.data.allow_pickle=True`), as that repository's `src/scripts/create_*_files.py`
write them and `src/datasets/mmen_dataset.py` reads them:

- `video_features/EPIC_100_retrieval_{train,test}_features_mean.pkl`: `{'features':
  (n, 3072)}`, the TBN RGB | Flow | Audio temporal means, rows in the clip tables' order;
- `text_features/EPIC_100_retrieval_{caption,verb,noun}_text_features_{train,test}.pkl`:
  (sentences, 100) frozen word2vec features (a sentence's mean word vector; its verb's;
  the mean of its nouns'), one row per sentence of the split's sentence table. Train
  sentences are the unique narrations of the train table in first-appearance order, then
  one more for each action class left without a sentence (`create_sentence_df`): the
  EK-100 `EPIC_100_retrieval_train_sentence.csv`, read from `config.data.annotations`
  when there (else derived from the train table the same way); test sentences are
  `EPIC_100_retrieval_test_sentence.csv`;
- `relational/EPIC_100_retrieval_{caption,verb,noun}_relational_dict_train.pkl`:
  `{vid2class, class2vid, sent2class, class2sent}`, the classes the public code samples
  its triplets by (action `"{verb}_{noun}"`, verb class, main noun class);
- `relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl`: the official (clips, sentences)
  test relevance;
- `dataframes/`: pandas pickles of the tables; not read (the EK-100 CSVs in
  `config.data.annotations` are the same tables).

How jaxsvr uses them: video features as any features folder's; with
`config.model.text_input = "features"` (MME, JPoSE) the text branches read the frozen
features instead of a learned word table: a train clip's text is the sentence set's row of
its narration (`caption_feature`, `verb_feature`, `noun_feature`), a test sentence's its
own row. Triplets are drawn by class over the train clips, as for every jaxsvr run, from
the relational dicts' classes: `relational_classes` compares them with the train table's
and says in the log whether they agree (then nothing changes) or how many clips differ
(then the dicts' verb and main-noun classes are used). The test relevance is the folder's
relevancy matrix; the log states its largest |difference| to jaxsvr's own class relevance
on the same tables (`test_relevance`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from jaxsvr.annotations import epic100
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.annotations.epic100 import Clips
from jaxsvr.errors import InputError
from jaxsvr.files import arrays, pickles
from jaxsvr.inputs import features

VIDEO = "video_features/EPIC_100_retrieval_{split}_features_mean.pkl"
TEXT = "text_features/EPIC_100_retrieval_{pos}_text_features_{split}.pkl"
RELATIONAL = "relational/EPIC_100_retrieval_{pos}_relational_dict_{split}.pkl"
RELEVANCY = "relevancy/EPIC_100_retrieval_{split}_relevancy_mat.pkl"
FIELDS = {"caption_feature": "caption", "verb_feature": "verb", "noun_feature": "noun"}
PICKLE_FLAG = "--config.data.allow_pickle=True"


def is_folder(path) -> bool:
    """True when `path` is laid out as the public JPoSE data folder."""
    path = Path(path)
    return (path / "video_features").is_dir() and (path / "text_features").is_dir()


def video(folder: Path, split: str, *, rows: int, allow_pickle: bool) -> np.ndarray:
    """[rows, 3072] float32: the folder's mean video features of `split`."""
    _check_opt_in(folder, allow_pickle)
    return features.load_features(folder / VIDEO.format(split=split), rows=rows, allow_pickle=True)


def train_text(
    folder: Path, clips: Clips, sentences: list[str] | None, fields, *, allow_pickle: bool
) -> dict[str, np.ndarray]:
    """{field: [clips, D]} each train clip's frozen text features: the row of its
    narration in the train sentence table (`sentences`: that table's narrations, or None
    to derive them from `clips` as the public script does)."""
    _check_opt_in(folder, allow_pickle)
    derived = sentences is None
    if derived:
        sentences = list(dict.fromkeys(clips.narration))
    row_of: dict[str, int] = {}
    for i, text in enumerate(sentences):
        row_of.setdefault(text, i)
    missing = [i for i, text in enumerate(clips.narration) if text not in row_of]
    if missing:
        i = missing[0]
        raise InputError(
            f"train clip {clips.narration_id[i]} ({clips.narration[i]!r}) has no sentence in "
            f"{epic100.TRAIN_SENTENCES} ({len(missing)} such clips): the sentence table must "
            "be the one the folder's text features were made from"
        )
    rows = np.array([row_of[text] for text in clips.narration], np.int64)
    out = {}
    for field in fields:
        path = folder / TEXT.format(pos=FIELDS[field], split="train")
        table = _matrix(path, "text features")
        # derived: the table may hold the public script's extra missing-class sentences
        if table.shape[0] != len(sentences) and not (derived and table.shape[0] > len(sentences)):
            raise InputError(
                f"{path} has {table.shape[0]} rows but the train sentence table has "
                f"{len(sentences)}: the features must follow {epic100.TRAIN_SENTENCES}"
            )
        out[field] = np.ascontiguousarray(table[rows])
    logging.info(
        "text features: frozen %s from %s (%d train sentences%s; %d-d)",
        "/".join(FIELDS[f] for f in fields),
        folder / "text_features",
        len(sentences),
        ", derived from the train table" if derived else f" of {epic100.TRAIN_SENTENCES}",
        next(iter(out.values())).shape[-1],
    )
    return out


def test_text(folder: Path, sentences: int, fields, *, allow_pickle: bool) -> dict:
    """{field: [sentences, D]} the test sentences' frozen text features."""
    _check_opt_in(folder, allow_pickle)
    out = {}
    for field in fields:
        path = folder / TEXT.format(pos=FIELDS[field], split="test")
        out[field] = _matrix(path, "text features")
        if out[field].shape[0] != sentences:
            raise InputError(
                f"{path} has {out[field].shape[0]} rows but the test sentence table has "
                f"{sentences}: the features must follow {epic100.TEST_SENTENCES}"
            )
    return out


def relational_classes(folder: Path, clips: Clips, *, allow_pickle: bool) -> Clips:
    """The train clips with the relational dicts' triplet classes, saying in the log
    whether those equal the train table's (module docstring)."""
    _check_opt_in(folder, allow_pickle)
    table = {
        "verb": _verbs(clips),
        "noun": _main_nouns(clips),
    }
    table["caption"] = [f"{v}_{n}" for v, n in zip(table["verb"], table["noun"])]
    given = {}
    for pos in ("verb", "noun", "caption"):
        path = folder / RELATIONAL.format(pos=pos, split="train")
        if not path.is_file():
            logging.info(
                "relational dicts: %s not found; triplets use the train table's classes", path
            )
            return clips
        given[pos] = _vid2class(path, clips)
    differ = {
        pos: [i for i, (a, b) in enumerate(zip(table[pos], given[pos])) if str(a) != str(b)]
        for pos in given
    }
    if not any(differ.values()):
        logging.info(
            "relational dicts: the verb, noun and action classes of all %d train clips equal "
            "the train table's; triplets sampled by those classes",
            len(clips),
        )
        return clips
    first = next(i for rows in differ.values() for i in rows[:1])
    logging.warning(
        "relational dicts: classes differ from the train table's for %s (first: clip %s, "
        "table verb %s noun %s, dicts %s / %s); triplets use the dicts' classes",
        ", ".join(f"{len(r)} {pos}" for pos, r in differ.items() if r),
        clips.narration_id[first],
        table["verb"][first],
        table["noun"][first],
        given["verb"][first],
        given["noun"][first],
    )
    verbs = np.array([int(v) for v in given["verb"]], np.int64)
    nouns = np.array([int(n) for n in given["noun"]], np.int32)
    return dataclasses.replace(
        clips,
        verb_classes=ClassSets.from_labels(verbs),
        verb_class=None,
        noun_class=nouns,
        noun_classes=ClassSets.from_labels(nouns),
    )


def test_relevance(folder: Path, own: np.ndarray, *, allow_pickle: bool) -> np.ndarray:
    """[clips, sentences] float32: the folder's official test relevance, with its largest
    |difference| to `own` (jaxsvr's class relevance of the same tables) in the log."""
    _check_opt_in(folder, allow_pickle)
    path = folder / RELEVANCY.format(split="test")
    if not path.is_file():
        logging.info("relevance: %s not found; using jaxsvr's class relevance", path)
        return own
    given = read_relevancy(path)
    if given.shape != own.shape:
        raise InputError(
            f"{path} is {given.shape[0]} x {given.shape[1]} but the test tables give "
            f"{own.shape[0]} clips x {own.shape[1]} sentences: use the folder's tables"
        )
    diff = np.abs(given - own)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    where = f" (clip {worst[0]}, sentence {worst[1]})" if diff[worst] > 0 else ""
    logging.info(
        "relevance: the official test relevancy matrix %s; largest |difference| to "
        "jaxsvr's class relevance %.3g%s, %d entries differ by more than 1e-6",
        path,
        float(diff[worst]),
        where,
        int(np.count_nonzero(diff > 1e-6)),
    )
    return given


def read_relevancy(path: Path) -> np.ndarray:
    """[clips, sentences] float32 in [0, 1]: a pickled relevancy matrix (the official
    `EPIC_100_retrieval_test_relevancy_mat.pkl`); the caller has the pickle opt-in."""
    given = _matrix(path, "relevancy matrix")
    low, high = float(given.min(initial=0.0)), float(given.max(initial=0.0))
    if low < 0 or high > 1:
        raise InputError(f"{path}: relevance must lie in [0, 1], found [{low:g}, {high:g}]")
    return given


def _check_opt_in(folder: Path, allow_pickle: bool) -> None:
    if not allow_pickle:
        raise InputError(
            f"{folder} is a JPoSE data folder of pickles, and loading a pickle runs code from "
            f"the file: if the folder is trusted set {PICKLE_FLAG}"
        )


def _matrix(path: Path, what: str) -> np.ndarray:
    """A pickled 2-D real array (or a dict holding one as `features`), as float32."""
    if not path.is_file():
        raise InputError(f"{what} file {path} not found")
    obj = pickles.load(path)
    if isinstance(obj, Mapping) and "features" in obj:
        obj = obj["features"]
    return arrays.to_float32(pickles.real_array(obj, path, what, 2), path, what)


def _vid2class(path: Path, clips: Clips) -> list:
    """The relational dict's class of each train clip, in the clips' order."""
    obj = pickles.load(path)
    if not isinstance(obj, Mapping) or not isinstance(obj.get("vid2class"), Mapping):
        raise InputError(f"{path}: expected a dict with 'vid2class' (a relational dict)")
    vid2class = obj["vid2class"]
    if len(vid2class) != len(clips):
        raise InputError(
            f"{path}: vid2class has {len(vid2class)} clips but the train table has "
            f"{len(clips)}: use the train table the folder was made from"
        )
    keys = list(vid2class)
    if all(isinstance(k, str) for k in keys):  # indexed by narration_id
        missing = [n for n in clips.narration_id if n not in vid2class]
        if missing:
            raise InputError(
                f"{path}: vid2class has no clip {missing[0]} ({len(missing)} train clips "
                "missing): use the train table the folder was made from"
            )
        return [vid2class[n] for n in clips.narration_id]
    return [vid2class[k] for k in keys]  # positional: the table's order


def _verbs(clips: Clips) -> np.ndarray:
    if clips.verb_class is not None:
        return clips.verb_class
    return clips.verb_classes.indices[clips.verb_classes.indptr[:-1]]


def _main_nouns(clips: Clips) -> np.ndarray:
    if clips.noun_class is not None:
        return clips.noun_class
    sets = clips.noun_classes
    first = np.minimum(sets.indptr[:-1], max(sets.indices.size - 1, 0))
    return np.where(sets.sizes > 0, sets.indices[first], -1)
