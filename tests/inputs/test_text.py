"""Caption text: tokenizer, deterministic vocabulary, padding, word vector files, and
spaCy verbs/nouns."""

import gzip

import numpy as np
import pytest

from jaxsvr.errors import InputError
from jaxsvr.inputs.text import Vocabulary, encode, load_word_vectors
from jaxsvr.nlp.words import pos_words, tokenize

CAPTIONS = ["pick up the knife", "Put knife on board:chopping", "pick-up board", "knife"]


def test_tokenize():
    assert tokenize("Pick-up the KNIFE") == ["pick", "up", "the", "knife"]
    expected = "put board chopping then wash 2 cups".split()
    assert tokenize("put board:chopping, then  wash 2 cups!") == expected
    assert tokenize("don't drop 'knife'") == ["don't", "drop", "knife"]
    assert tokenize("  -- ' ") == []
    assert tokenize("café") == ["caf"]


def test_vocabulary_is_deterministic():
    tokens = [tokenize(c) for c in CAPTIONS]
    vocab = Vocabulary.build(tokens)
    # knife x3; board, pick, up x2; then alphabetical
    assert vocab.words[:6] == ("<pad>", "<unk>", "knife", "board", "pick", "up")
    assert vocab.words[6:] == ("chopping", "on", "put", "the")
    assert Vocabulary.build(reversed(tokens)) == vocab
    assert vocab.ids(["knife", "spoon", "up"]) == [2, 1, 5]
    assert len(vocab) == 10 and "knife" in vocab and "spoon" not in vocab
    assert Vocabulary.build(tokens, min_count=2).words == (
        "<pad>",
        "<unk>",
        "knife",
        "board",
        "pick",
        "up",
    )


def test_vocabulary_json_round_trip(tmp_path):
    vocab = Vocabulary.build([tokenize(c) for c in CAPTIONS])
    (tmp_path / "vocab.json").write_text(vocab.to_json())
    again = Vocabulary.from_json((tmp_path / "vocab.json").read_text())
    assert again == vocab and again.ids(["board"]) == vocab.ids(["board"])
    with pytest.raises(InputError, match="vocab.json"):
        Vocabulary.from_json('{"words": ["knife"]}', source="vocab.json")
    with pytest.raises(InputError, match="not valid JSON"):
        Vocabulary.from_json("{", source="vocab.json")


def test_encode_pads_and_truncates():
    vocab = Vocabulary.build([["a", "b", "c"]])
    ids = encode([["a", "b"], [], ["c", "b", "a", "zzz"]], vocab, max_len=3)
    assert ids.dtype == np.int32
    np.testing.assert_array_equal(ids, [[2, 3, 0], [0, 0, 0], [4, 3, 2]])


def _vocab():
    return Vocabulary.build([["knife", "board", "pan", "zebra"]])


def test_word2vec_with_header(tmp_path):
    path = tmp_path / "w2v.txt"
    path.write_text("4 3\nknife 1 2 3 \nthe 0 0 0\nboard 4 5 6\nknife 9 9 9\n")
    matrix, found = load_word_vectors(path, _vocab(), dim=3)
    vocab = _vocab()
    assert matrix.shape == (len(vocab), 3) and matrix.dtype == np.float32 and found == 2
    np.testing.assert_array_equal(matrix[vocab.ids(["knife", "board"])], [[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(matrix[0], 0)
    missing = matrix[vocab.ids(["pan", "zebra", "<unk>"])]
    assert np.all(missing != 0) and np.abs(missing).max() < 1.0  # N(0, 0.1^2) rows
    again, _ = load_word_vectors(path, vocab)
    np.testing.assert_array_equal(again, matrix)  # seeded
    other, _ = load_word_vectors(path, vocab, seed=1)
    assert not np.array_equal(other[vocab.ids(["pan"])], missing[:1])


def test_glove_without_header(tmp_path):
    path = tmp_path / "glove.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write("the 0.1 0.2\n. . . 7 7\npan -1 0.5\nzebra 2 2\n")
    matrix, found = load_word_vectors(path, _vocab())
    assert matrix.shape == (6, 2) and found == 2
    np.testing.assert_allclose(matrix[_vocab().ids(["pan"])], [[-1, 0.5]])


def test_word_vector_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("knife 1 2 3\nboard 1 2\n")
    with pytest.raises(InputError, match=r"bad\.txt:2: 2 values, expected 3"):
        load_word_vectors(bad, _vocab())
    with pytest.raises(InputError, match=r"bad\.txt: vectors have dim 3 but dim 300"):
        load_word_vectors(bad, _vocab(), dim=300)
    header = tmp_path / "header.txt"
    header.write_text("2 5\nknife 1 2 3 4 5\n")
    with pytest.raises(InputError, match=r"header\.txt: vectors have dim 5 but dim 4"):
        load_word_vectors(header, _vocab(), dim=4)
    none = tmp_path / "none.txt"
    none.write_text("the 1 2\nof 3 4\n")
    with pytest.raises(InputError, match=r"none\.txt: none of the 4 vocabulary words"):
        load_word_vectors(none, _vocab())
    with pytest.raises(InputError, match="missing.txt not found"):
        load_word_vectors(tmp_path / "missing.txt", _vocab())


def test_pos_words():
    verbs, nouns = pos_words(["pick up the knife and the board", "stir food in the pan"])
    assert "pick" in verbs[0] and "stir" in verbs[1]
    assert {"knife", "board"} <= set(nouns[0]) and {"food", "pan"} <= set(nouns[1])
    assert pos_words([]) == ([], [])


def test_missing_pipeline():
    with pytest.raises(InputError, match="pip install en-core-web-nonexistent"):
        pos_words(["stir food"], pipeline="en_core_web_nonexistent")
