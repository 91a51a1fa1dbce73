"""Fast METEOR equals NLTK's `meteor_score` (to 1e-9) on real and stress captions; one
tokenisation rule for strings, the proxies and the CLI."""

import numpy as np
import pytest
from nltk.translate.meteor_score import meteor_score, single_meteor_score

from jaxsvr.nlp import captions
from jaxsvr.relevance import meteor, proxies

# Free-form captions with repeated words, shared stems and WordNet synonyms, so every
# alignment stage and the order NLTK takes matches in are exercised.
STRESS = [
    "stir the soup in the pot and stir again",
    "mix the soup in the pot then mix it again",
    "the chef is cutting the onions and the chef cuts the carrots",
    "cut onions cut carrots cut the onion",
    "chop the onion and the carrot",
    "slice the bread slices on the board",
    "the the the pan",
    "pan the the",
    "boil water in a kettle",
    "heat the water in the kettle",
    "add salt and pepper to the pan",
    "season the pan with pepper and salt",
    "pour the oil into the hot pan",
    "put oil in pan",
    "a man is talking to a woman",
    "a woman speaks with a man",
    "",
    "knife",
]


def _nltk(ref_tokens, hyp_tokens, wn):
    return single_meteor_score(list(ref_tokens), list(hyp_tokens), wordnet=wn)


@pytest.fixture(scope="module")
def stress_tokens():
    return captions.parse(STRESS).tokens


def test_stress_pairs_equal_nltk(stress_tokens, wordnet_reader):
    got = meteor.meteor_matrix(stress_tokens, stress_tokens, wordnet=wordnet_reader, workers=1)
    want = [[_nltk(r, h, wordnet_reader) for h in stress_tokens] for r in stress_tokens]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert (got > 0).mean() > 0.4 and not np.allclose(got, got.T)  # not symmetric


def test_epic_sample_equals_nltk(epic_sentences_parsed, wordnet_reader):
    """12 000 pairs of EK-100 test sentences (half random, half sharing a word)."""
    _, parsed = epic_sentences_parsed
    tokens = parsed.tokens
    rng = np.random.default_rng(0)
    rows = rng.choice(len(tokens), 300, replace=False)
    got = meteor.meteor_matrix([tokens[i] for i in rows], tokens, wordnet=wordnet_reader, workers=1)
    nonzero = np.argwhere(got > 0)
    pairs = np.concatenate(
        [
            np.stack([rng.integers(0, 300, 6000), rng.integers(0, len(tokens), 6000)], 1),
            nonzero[rng.choice(len(nonzero), 6000, replace=False)],
        ]
    )
    want = np.array([_nltk(tokens[rows[r]], tokens[h], wordnet_reader) for r, h in pairs])
    diff = np.abs(got[pairs[:, 0], pairs[:, 1]] - want)
    assert diff.max() <= 1e-9
    assert (want > 0).sum() >= 6000


def test_workers_and_duplicates_give_the_same(stress_tokens, wordnet_reader):
    refs = list(stress_tokens) + [stress_tokens[0], tuple(t.upper() for t in stress_tokens[1])]
    one = meteor.meteor_matrix(refs, stress_tokens, wordnet=wordnet_reader, workers=1)
    two = meteor.meteor_matrix(refs, stress_tokens, wordnet=wordnet_reader, workers=2)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one[-2], one[0])
    np.testing.assert_array_equal(one[-1], one[1])  # lowercased, as NLTK's preprocess


def test_groups_take_nltk_multi_reference_max(stress_tokens, wordnet_reader):
    groups = [i % 3 for i in range(len(stress_tokens))]
    got = meteor.meteor_matrix(
        stress_tokens, stress_tokens[:6], wordnet=wordnet_reader, ref_groups=groups, workers=1
    )
    assert got.shape == (3, 6)
    for g in range(3):
        refs = [list(t) for t, k in zip(stress_tokens, groups) if k == g]
        for h in range(6):
            assert got[g, h] == pytest.approx(
                meteor_score(refs, list(stress_tokens[h]), wordnet=wordnet_reader), abs=1e-12
            )


def test_met_proxy_float32(stress_tokens, wordnet_reader):
    p = captions.parse(STRESS[:4])
    rel = proxies.met(p, wordnet=wordnet_reader, workers=1)
    assert rel.dtype == np.float32 and rel.shape == (4, 4)
    assert 0.99 < rel[0, 0] < 1.0  # identical: fmean 1, a small one-chunk penalty
    assert meteor.nltk_version()


PUNCTUATED = ["Cut the onion.", "chop onion, then cut", "rinse the knife's blade", "knife."]


def test_strings_take_the_cli_tokens(wordnet_reader, tmp_path):
    """Strings are tokenised like the CLI's captions (spaCy, punctuation dropped): the
    library, the met proxy and `python -m jaxsvr.relevance proxy --proxy met` agree."""
    tokens = captions.tokenize(PUNCTUATED)
    assert tokens == captions.parse(PUNCTUATED).tokens
    assert tokens[0] == ("cut", "the", "onion") and tokens[3] == ("knife",)
    got = meteor.meteor_matrix(PUNCTUATED, PUNCTUATED, wordnet=wordnet_reader, workers=1)
    want = [[_nltk(r, h, wordnet_reader) for h in tokens] for r in tokens]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    mixed = meteor.meteor_matrix(PUNCTUATED, tokens, wordnet=wordnet_reader, workers=1)
    np.testing.assert_array_equal(mixed, got)  # a str and its tokens are the same caption
    assert got[3, 2] > 0  # "knife." matches the "knife" of "knife's": punctuation is dropped
    from jaxsvr.relevance import __main__ as relevance_cli

    csv = tmp_path / "c.csv"
    csv.write_text("caption\n" + "".join(f'"{c}"\n' for c in PUNCTUATED))
    out = tmp_path / "met.npy"
    argv = ["proxy", "--proxy", "met", "--captions", csv, "--columns", csv, "--out", out]
    assert relevance_cli.main([str(a) for a in [*argv, "--workers", "1"]]) == 0
    np.testing.assert_array_equal(np.load(out), got.astype(np.float32))


def test_token_lists_are_the_callers(wordnet_reader):
    """A token list is used as given (lowercased): whitespace-split tokens keep the
    punctuation the SVR authors' NLTK 3.6.2 strings kept."""
    split = [c.split() for c in PUNCTUATED]
    got = meteor.meteor_matrix(split, split, wordnet=wordnet_reader, workers=1)
    want = [[_nltk(r, h, wordnet_reader) for h in split] for r in split]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert got[3, 2] == 0.0  # "knife." vs "knife's" do not match
