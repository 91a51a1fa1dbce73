"""Caption text: tokenizer, vocabulary, word vectors, and verb/noun words.

Text models read captions as padded token ids (`encode`) into an embedding table that
starts from pretrained word vectors (`load_word_vectors`, word2vec or GloVe text files
streamed line by line, keeping only vocabulary words). Part-of-speech models (JPoSE)
also need each caption's verbs and nouns; EPIC-100 ships them as columns, other caption
files get them from spaCy (`pos_words`).

The vocabulary is deterministic (sorted by count, then word) and serialises to JSON, so a
run stores it in its workdir and evaluation rebuilds the same ids.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.nlp.words import is_number

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
_INIT_STD = 0.1  # std of the random rows of words missing from the vector file


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """Word list with `<pad>` at id 0 and `<unk>` at id 1; other words in build order."""

    words: tuple[str, ...]
    _index: dict[str, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = tuple(self.words)
        if words[:2] != (PAD, UNK):
            raise InputError(f"vocabulary must start with {PAD!r}, {UNK!r}; got {words[:2]}")
        index = {w: i for i, w in enumerate(words)}
        if len(index) != len(words):
            dupes = sorted(w for w, c in Counter(words).items() if c > 1)
            raise InputError(f"vocabulary repeats word(s) {dupes[:5]}: each word once")
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "_index", index)

    @classmethod
    def build(cls, token_lists: Iterable[Sequence[str]], min_count: int = 1) -> Vocabulary:
        """Builds the vocabulary of words seen at least `min_count` times.

        Args:
          token_lists: tokenized captions.
          min_count: minimum number of occurrences for a word to get its own id.

        Returns:
          A Vocabulary ordered by (-count, word), so equal inputs give equal ids.
        """
        if min_count < 1:
            raise InputError(f"min_count must be at least 1, got {min_count}")
        counts = Counter(t for tokens in token_lists for t in tokens)
        for special in (PAD, UNK):
            counts.pop(special, None)
        kept = sorted(
            (w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w)
        )
        return cls((PAD, UNK, *kept))

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def id(self, token: str) -> int:
        """Id of one token; `UNK_ID` when it is not in the vocabulary."""
        return self._index.get(token, UNK_ID)

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; unknown tokens map to `UNK_ID`."""
        return [self._index.get(t, UNK_ID) for t in tokens]

    def to_json(self) -> str:
        """JSON text (`{"words": [...]}`) for `from_json`."""
        return json.dumps({"words": list(self.words)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str, *, source: str = "vocabulary JSON") -> Vocabulary:
        """Rebuilds a vocabulary written by `to_json`.

        Args:
          text: the JSON text.
          source: where the text came from (a file name), named in errors.

        Returns:
          The Vocabulary.
        """
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{source}: not valid JSON ({e}): rewrite it with to_json") from None
        words = data.get("words") if isinstance(data, dict) else None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise InputError(f'{source}: expected {{"words": [strings]}} as written by to_json')
        try:
            return cls(tuple(words))
        except InputError as e:
            raise InputError(f"{source}: {e}") from None


def encode(token_lists: Sequence[Sequence[str]], vocab: Vocabulary, max_len: int) -> np.ndarray:
    """Token ids of each caption, truncated to `max_len` and padded with `PAD_ID`.

    Args:
      token_lists: tokenized captions.
      vocab: the vocabulary.
      max_len: length of every output row.

    Returns:
      int32 [n, max_len]; an empty caption gives a row of zeros.
    """
    if max_len < 1:
        raise InputError(f"max_len must be at least 1, got {max_len}")
    out = np.zeros((len(token_lists), max_len), np.int32)
    for row, tokens in enumerate(token_lists):
        ids = vocab.ids(tokens[:max_len])
        out[row, : len(ids)] = ids
    return out


def load_word_vectors(
    path: str | Path, vocab: Vocabulary, dim: int | None = None, *, seed: int = 0
) -> tuple[np.ndarray, int]:
    """Embedding matrix for `vocab` from a word2vec or GloVe text file.

    Reads the file once, line by line, keeping only vocabulary words, so multi-GB files
    need no more memory than the result. word2vec text starts with a "count dim" header;
    GloVe has none (its dim is that of the first line). `.gz` files are read compressed.
    Matching is exact: the vocabulary is lowercase, so use lowercased vectors. The first
    occurrence of a word wins. Keys with spaces (GloVe 840B has a few) can never match a
    token and are skipped.

    Args:
      path: the vector file.
      vocab: the vocabulary to look up.
      dim: expected vector size, or None to take the file's.
      seed: seed of the N(0, 0.1^2) rows given to words absent from the file (and `<unk>`).

    Returns:
      (matrix float32 [len(vocab), dim] with the `<pad>` row 0, number of vocabulary words
      found in the file, specials excluded).
    """
    path = Path(path)
    if path.suffix == ".bin":
        raise InputError(
            f"{path}: binary word2vec is not supported: save it as text "
            "(gensim: save_word2vec_format(..., binary=False))"
        )
    if not path.is_file():
        raise InputError(f"word vectors file {path} not found")
    wanted = {w: i for i, w in enumerate(vocab.words) if i > UNK_ID}
    found: dict[int, np.ndarray] = {}
    try:
        file_dim = _read_vectors(path, wanted, found, dim)
    except (OSError, EOFError, zlib.error) as e:  # a corrupt or truncated .gz
        raise InputError(f"cannot read word vectors file {path}: {e}") from None
    if file_dim is None:
        raise InputError(f"{path}: no vectors in the file")
    if not found:
        raise InputError(
            f"{path}: none of the {len(wanted)} vocabulary words is in the file "
            "(lowercase English word vectors expected)"
        )
    rng = np.random.default_rng(seed)
    matrix = rng.normal(0.0, _INIT_STD, (len(vocab), file_dim)).astype(np.float32)
    matrix[PAD_ID] = 0.0
    for row, vector in found.items():
        matrix[row] = vector
    return matrix, len(found)


def _read_vectors(path: Path, wanted: dict[str, int], found: dict[int, np.ndarray], dim):
    """Streams the vector file into `found` (vocabulary row -> vector); returns its dim."""
    file_dim = None
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.rstrip().split(" ")
            if lineno == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                file_dim = _check_dim(int(parts[1]), dim, path)
                continue
            if parts == [""]:
                continue
            if file_dim is None:
                file_dim = _check_dim(len(parts) - 1, dim, path)
            n_values = len(parts) - 1
            if n_values != file_dim:
                if n_values > file_dim and not is_number(parts[1]):
                    continue  # a key with spaces: never a token
                raise InputError(
                    f"{path}:{lineno}: {n_values} values, expected {file_dim} "
                    "(is it a word2vec/GloVe text file?)"
                )
            row = wanted.get(parts[0])
            if row is None or row in found:
                continue
            try:
                with np.errstate(over="ignore"):
                    found[row] = np.array(parts[1:], np.float32)
            except ValueError:
                raise InputError(
                    f"{path}:{lineno}: vector of {parts[0]!r} is not numeric"
                ) from None
            if not np.isfinite(found[row]).all():
                raise InputError(
                    f"{path}:{lineno}: vector of {parts[0]!r} holds NaN, inf or a value "
                    "beyond the float32 range: fix or drop that line"
                )
            if len(found) == len(wanted):
                break  # every vocabulary word is in; skip the rest of a huge file
    return file_dim


def _check_dim(file_dim: int, dim: int | None, path: Path) -> int:
    if file_dim < 1:
        raise InputError(f"{path}: vectors have dim {file_dim}; expected at least 1")
    if dim is not None and file_dim != dim:
        raise InputError(
            f"{path}: vectors have dim {file_dim} but dim {dim} was asked for: "
            "use a file of that size or change the configured dim"
        )
    return file_dim
