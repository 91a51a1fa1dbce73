"""Small files in the public EK-100 retrieval structures, written the way the public scripts
write them (mwray/Joint-Part-of-Speech-Embeddings, src/scripts/create_{feature,relational,
relevancy}_files.py; the TBN release of its README), not by jaxsvr's own writers:

- `write_tables`: an EPIC annotations folder (train / test clip CSVs, the test sentence
  table and the train sentence table as `create_sentence_df` builds them from pandas
  frames: unique narrations in order, then one per action class left without one);
- `write_jpose_folder`: `JPoSE_data/` (video_features, text_features from a toy word2vec
  table, relational dicts, the relevancy matrix by the script's IoU loops);
- `write_tbn_pickles`: `train.pkl` / `test.pkl`, dicts of RGB / Flow / Audio (n, T, D).

Video features carry the clips' verb and noun classes (a prototype per class plus noise),
so a few steps of training find them.
"""

from __future__ import annotations

import ast
import pickle
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from kitchen_files import write_epic_folder

from jaxsvr.annotations import epic100

WORD_DIM = 12
BLOCK = 8  # width of each of RGB / Flow / Audio


def write_tables(folder: Path) -> dict[str, pd.DataFrame]:
    """The built-in kitchen data as EPIC CSVs, with both sentence tables made as the
    public script makes them; returns the frames {train, test, train_sentences,
    test_sentences} (pandas, as the public code holds them)."""
    write_epic_folder(folder)
    train = pd.read_csv(folder / epic100.TRAIN_CLIPS, index_col="narration_id")
    test = pd.read_csv(folder / epic100.TEST_CLIPS, index_col="narration_id")
    for df in (train, test):
        df["all_nouns"] = df.all_nouns.apply(ast.literal_eval)
        df["all_noun_classes"] = df.all_noun_classes.apply(ast.literal_eval)
    frames = {"train": train, "test": test}
    for split in ("train", "test"):
        frames[f"{split}_sentences"] = sentence_df(frames[split])
    s = frames["train_sentences"]
    pd.DataFrame(
        {
            "narration_id": s["index"],
            "narration": s.sentence,
            "verb_class": s.verb_class,
            "noun_classes": s.noun_class.apply(str),
            "verb": s.verb,
            "nouns": s.nouns.apply(str),
        }
    ).to_csv(folder / epic100.TRAIN_SENTENCES, index=False)
    t = frames["test_sentences"]
    pd.DataFrame({"narration_id": t["index"], "narration": t.sentence}).to_csv(
        folder / epic100.TEST_SENTENCES, index=False
    )
    return frames


def sentence_df(df: pd.DataFrame) -> pd.DataFrame:
    """`create_sentence_df`: each unique narration with its first clip's classes, then a
    sentence for each action class no first clip carries."""
    df = df.copy()
    df["action_class"] = [f"{v}_{n}" for v, n in zip(df.verb_class, df.noun_class)]
    # each narration's first clip, in the order of first appearance (the script's loop over
    # `narration.unique()` taking `df[df.narration == sent].iloc[0]`, without its quadratic
    # scan: 2.6 s on the EK-100 test clips)
    rows = [(first.narration, first.name, first) for _, first in _firsts(df, "narration")]
    have = {r[2].action_class for r in rows}
    firsts = dict(_firsts(df, "action_class"))
    for action in sorted(set(df.action_class) - have):
        first = firsts[action]
        rows.append((first.narration, first.name, first))
    return pd.DataFrame(
        {
            "sentence": [r[0] for r in rows],
            "index": [r[1] for r in rows],
            "action_class": [r[2].action_class for r in rows],
            "verb_class": [int(r[2].verb_class) for r in rows],
            "noun_class": [list(r[2].all_noun_classes) for r in rows],
            "verb": [r[2].verb for r in rows],
            "nouns": [list(r[2].all_nouns) for r in rows],
        }
    )


def word_vector(word: str) -> np.ndarray:
    """A toy word2vec entry: a fixed random vector per word (create_feature_files'
    `get_word_embedding` lower-cases and strips punctuation first)."""
    for ch in ".(),'":
        word = word.replace(ch, "")
    word = word.lower().split("/")[0]
    rng = np.random.default_rng(zlib.crc32(word.encode()))
    return rng.normal(size=WORD_DIM).astype(np.float32)


def text_features(sentences: pd.DataFrame) -> dict[str, np.ndarray]:
    """create_feature_files: caption = mean word vector of the sentence (split on ' '),
    verb = of the verb (split on '-'), noun = of the nouns (split on ':')."""
    caption, verb, noun = [], [], []
    for _, row in sentences.iterrows():
        caption.append(np.mean([word_vector(w) for w in row.sentence.split(" ")], axis=0))
        verb.append(np.mean([word_vector(w) for w in row.verb.split("-")], axis=0))
        parts = [p for n in row.nouns for p in n.split(":")]
        noun.append(np.mean([word_vector(w) for w in parts], axis=0))
    return {"caption": np.array(caption), "verb": np.array(verb), "noun": np.array(noun)}


def video_features(df: pd.DataFrame, segments: int = 0, seed: int = 0) -> np.ndarray:
    """[n, 3 BLOCK] (or [n, T, 3 BLOCK]) features around verb + noun class prototypes."""
    rng = np.random.default_rng(seed)
    verbs = np.random.default_rng(100).normal(size=(128, 3 * BLOCK))
    nouns = np.random.default_rng(101).normal(size=(512, 3 * BLOCK))
    mean = verbs[df.verb_class.to_numpy()] + nouns[df.noun_class.to_numpy()]
    if not segments:
        return (mean + 0.3 * rng.normal(size=mean.shape)).astype(np.float32)
    noise = 0.3 * rng.normal(size=(len(df), segments, 3 * BLOCK))
    return (mean[:, None, :] + noise).astype(np.float32)


def relational_dict(df: pd.DataFrame, sentences: pd.DataFrame, column: str) -> dict:
    """create_PoS_rel_dict: vid2class / class2vid over the clip frame (keyed by its index,
    the narration ids), sent2class / class2sent over the sentence frame."""
    out = {}
    for name, frame in (("vid", df), ("sent", sentences)):
        to_class, from_class = {}, {}
        for i, row in frame.iterrows():
            to_class[i] = row[column]
            from_class.setdefault(row[column], []).append(i)
        out[f"{name}2class"], out[f"class2{name}"] = to_class, from_class
    return out


def relevancy(df: pd.DataFrame, sentences: pd.DataFrame) -> np.ndarray:
    """create_relevancy_files: (verb IoU + noun-set IoU) / 2. As the script does, noun IoU
    is computed by loops over the unique noun sets of each side and expanded to every
    (clip, sentence) pair (here by indexing, not its per-pair loop); verbs by equality."""
    video_sets = list(dict.fromkeys(frozenset(x) for x in df.all_noun_classes))
    sent_sets = list(dict.fromkeys(frozenset(x) for x in sentences.noun_class))
    iou = np.zeros((len(video_sets), len(sent_sets)))
    for i, a in enumerate(video_sets):
        for j, b in enumerate(sent_sets):
            iou[i, j] = len(a & b) / len(a | b)
    v_idx = {s: i for i, s in enumerate(video_sets)}
    s_idx = {s: i for i, s in enumerate(sent_sets)}
    rows = np.array([v_idx[frozenset(x)] for x in df.all_noun_classes])
    cols = np.array([s_idx[frozenset(x)] for x in sentences.noun_class])
    verb = df.verb_class.to_numpy()[:, None] == sentences.verb_class.to_numpy()[None, :]
    return (verb.astype(np.float64) + iou[np.ix_(rows, cols)]) / 2


def _firsts(df: pd.DataFrame, column: str) -> list[tuple[object, pd.Series]]:
    """(value, first row with it) for each value of `column`, in order of first appearance."""
    return [(row[column], row) for _, row in df[~df[column].duplicated()].iterrows()]


def write_jpose_folder(root: Path, frames: dict[str, pd.DataFrame]) -> Path:
    """`root`/{video_features, text_features, relational, relevancy, dataframes}."""
    for sub in ("video_features", "text_features", "relational", "relevancy", "dataframes"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for split, seed in (("train", 0), ("test", 1)):
        feats = {"features": video_features(frames[split], seed=seed)}
        _dump(root / f"video_features/EPIC_100_retrieval_{split}_features_mean.pkl", feats)
        for pos, array in text_features(frames[f"{split}_sentences"]).items():
            _dump(root / f"text_features/EPIC_100_retrieval_{pos}_text_features_{split}.pkl", array)
    train = frames["train"].copy()
    train["action_class"] = [f"{v}_{n}" for v, n in zip(train.verb_class, train.noun_class)]
    sents = frames["train_sentences"].copy()
    sents["noun_class"] = sents.noun_class.apply(lambda x: x[0])  # as the script does
    columns = {"caption": "action_class", "verb": "verb_class", "noun": "noun_class"}
    for pos, column in columns.items():
        _dump(
            root / f"relational/EPIC_100_retrieval_{pos}_relational_dict_train.pkl",
            relational_dict(train, sents, column),
        )
    _dump(
        root / "relevancy/EPIC_100_retrieval_test_relevancy_mat.pkl",
        relevancy(frames["test"], frames["test_sentences"]),
    )
    return root


def write_tbn_pickles(folder: Path, frames: dict[str, pd.DataFrame], segments: int = 5) -> Path:
    """`folder`/{train,test}.pkl: dicts of RGB / Flow / Audio, each (n, T, BLOCK)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, seed in (("train", 0), ("test", 1)):
        x = video_features(frames[split], segments, seed)
        names = ("RGB", "Flow", "Audio")
        blocks = {m: x[..., i * BLOCK : (i + 1) * BLOCK] for i, m in enumerate(names)}
        _dump(folder / f"{split}.pkl", blocks)
    return folder


def _dump(path: Path, obj) -> None:
    with path.open("wb") as f:
        pickle.dump(obj, f)
