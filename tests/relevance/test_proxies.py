"""Caption proxies (BoW, PoS, SYN) against plain-loop references, the paper's example,
edge cases, multi-caption videos, the EPIC first-word rule, the parser's effect on tags,
and the EK-100 test sentences."""

import numpy as np
import pytest

from jaxsvr.annotations import epic100
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions, words
from jaxsvr.nlp.captions import Parsed
from jaxsvr.relevance import proxies

STIR = "stir food in the pan"
MIX = "mix the ingredients in the pan together"


def _iou(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


def _parsed(rows):
    """Parsed captions from (verbs, nouns, words) tuples, no spaCy."""
    return Parsed(
        tokens=[tuple(v + n) for v, n, _ in rows],
        words=[tuple(w) for _, _, w in rows],
        verbs=[tuple(v) for v, _, _ in rows],
        nouns=[tuple(n) for _, n, _ in rows],
    )


@pytest.fixture(scope="module")
def epic_vocabs(epic_dir):
    verbs = epic100.read_classes(epic_dir / "EPIC_100_verb_classes.csv")
    nouns = epic100.read_classes(epic_dir / "EPIC_100_noun_classes.csv")
    return verbs, nouns


@pytest.fixture(scope="module")
def epic_classes(epic_vocabs):
    return proxies.ClassMap.from_vocabs(*epic_vocabs)


def test_parse_words_verbs_nouns():
    p = captions.parse([STIR, MIX, "Pick up 2 knives.", STIR, ""])
    assert p.tokens[0] == ("stir", "food", "in", "the", "pan")
    assert p.words[:3] == [("stir", "food", "pan"), ("mix", "ingredient", "pan"), ("pick", "knife")]
    assert p.verbs[:3] == [("stir",), ("mix",), ("pick",)]
    assert p.nouns[:3] == [("food", "pan"), ("ingredient", "pan"), ("knife",)]
    assert p.take([3]).words == [p.words[0]]  # duplicates parse to the same
    assert p.tokens[4] == () and p.words[4] == ()
    assert len(captions.parse([])) == 0


def test_stop_words_leave_bow_but_not_pos():
    p = captions.parse(["put the plate down", "take the lid"])
    assert p.words == [("plate",), ("lid",)]  # spaCy lists put / take as stop words
    assert p.verbs == [("put",), ("take",)]


def test_missing_pipeline_says_how_to_install():
    with pytest.raises(InputError, match="pip install en-core-web-xx-missing"):
        captions.parse(["a"], pipeline="en_core_web_xx_missing")


def test_paper_example_syn_equivalent_bow_not(epic_classes):
    """Wray et al. 2021: 'stir food in the pan' and 'mix the ingredients in the pan
    together' are equivalent under SYN with the EPIC classes, not under BoW."""
    p = captions.parse([STIR, MIX])
    assert proxies.syn(p, classes=epic_classes)[0, 1] == 1.0
    assert proxies.bow(p)[0, 1] == pytest.approx(1 / 5)  # {stir,food,pan} vs {mix,ingredient,pan}
    assert proxies.pos(p)[0, 1] == pytest.approx(0.5 * 0 + 0.5 * 1 / 3)


def test_iou_edge_cases():
    p = _parsed([([], [], []), ([], [], []), (["cut"], ["onion"], ["cut", "onion"])])
    for rel in (proxies.bow(p), proxies.pos(p)):
        assert rel[0, 1] == 0.0 and rel[0, 0] == 0.0  # empty sets give 0
        assert rel[2, 2] == 1.0  # identical give 1


def test_against_loops_and_symmetric():
    rng = np.random.default_rng(0)
    verbs, nouns = ["cut", "wash", "put", "take"], ["onion", "pan", "knife", "board", "lid"]

    def caption():
        v = list(rng.choice(verbs, rng.integers(0, 3)))
        n = list(rng.choice(nouns, rng.integers(0, 4)))
        return v, n, v + n + ["extra"] * int(rng.integers(0, 2))

    a, b = _parsed([caption() for _ in range(40)]), _parsed([caption() for _ in range(25)])
    w = (0.3, 0.7)
    pos_want = [
        [w[0] * _iou(va, vb) + w[1] * _iou(na, nb) for vb, nb in zip(b.verbs, b.nouns)]
        for va, na in zip(a.verbs, a.nouns)
    ]
    np.testing.assert_allclose(proxies.pos(a, b, weights=w), pos_want, atol=1e-6)
    bow_want = [[_iou(x, y) for y in b.words] for x in a.words]
    np.testing.assert_allclose(proxies.bow(a, b), bow_want, atol=1e-6)
    for fn in (proxies.bow, proxies.pos):
        sq = fn(a)
        np.testing.assert_array_equal(sq, sq.T)


def test_syn_maps_instances_and_new_words(epic_classes):
    p = _parsed(
        [
            (["pick"], ["ingredient"], []),  # pick -> take (via pick-up), ingredient -> food
            (["grab"], ["food"], []),
            (["zorble"], ["food"], []),  # unseen verb: its own class
            (["zorble"], ["blarg"], []),
        ]
    )
    rel = proxies.syn(p, classes=epic_classes)
    assert rel[0, 1] == 1.0
    assert rel[1, 2] == 0.5 and rel[2, 3] == 0.5
    np.testing.assert_array_equal(rel, rel.T)


def test_first_word_rule_skips_verb_words(epic_vocabs, epic_classes):
    """'cut' (of cut:cold), 'layer', 'turn', 'sort' are verb-class words: as nouns they
    stay words instead of becoming salami / onion / sponge / broccoli."""
    verbs, nouns = epic_vocabs
    cls = {key: c for c, key in enumerate(nouns.key)}
    for word, instance, key in [
        ("cut", "cut:cold", "salami"),
        ("layer", "layer:onion", "onion"),
        ("turn", "turn:sponge", "sponge"),
        ("sort", "sort:broccoli", "broccoli"),
    ]:
        assert instance in nouns.instances[cls[key]]  # the instance that made the mapping
        assert word in verbs.synonyms()
        assert word not in epic_classes.noun
        assert proxies.first_word_classes(nouns)[word] == cls[key]  # the rule alone would
    # Legitimate first-word mappings stay: unambiguous, no verb-class word.
    assert epic_classes.noun["yolk"] == cls["egg"]  # yolk:egg
    assert epic_classes.noun["thigh"] == cls["chicken"]  # thigh:chicken
    assert epic_classes.noun["fillet"] == cls["salmon"]  # fillet:salmon
    assert epic_classes.verb["pick"] == verbs.key.index("take")  # pick-up
    assert "piece" not in epic_classes.noun  # piece:sponge, piece:chicken: ambiguous
    assert epic_classes.noun["cut:cold"] == cls["salami"]  # exact instances are untouched
    p = _parsed([(["cut"], ["cut"], []), (["slice"], ["salami"], [])])
    # verbs: cut and slice are one class; nouns: the word "cut" is not salami
    assert proxies.syn(p, classes=epic_classes)[0, 1] == 0.5


def test_first_word_rule_on_a_small_vocab():
    vocab = epic100.ClassVocab(
        key=["tap", "sponge", "chicken"],
        instances=[
            ("tap", "flow:tap"),
            ("sponge", "turn:sponge", "piece:sponge"),
            ("chicken", "piece:chicken", "thigh:chicken"),
        ],
        category=["", "", ""],
    )
    assert proxies.first_word_classes(vocab) == {"flow": 0, "turn": 1, "thigh": 2}
    assert proxies.first_word_classes(vocab, frozenset({"turn", "flow"})) == {"thigh": 2}


def test_parse_keeps_the_parser_for_tags():
    """13 attribute-ruler rules read dependency labels: with the parser, 'get' in 'get
    chopping board' is AUX (as in the full pipeline), not a verb."""

    full = words.spacy_pipeline(captions.DEFAULT_PIPELINE)  # every component
    sentences = ["get chopping board", "get knife from drawer", "wait for water to boil"]
    docs = list(full.pipe(sentences))
    assert [t.pos_ for t in docs[0]][0] == "AUX" and docs[0][0].dep_ == "aux"
    p = captions.parse(sentences)
    for doc, verbs, nouns in zip(docs, p.verbs, p.nouns):
        assert verbs == tuple(t.lemma_.lower() for t in doc if t.pos_ == "VERB")
        assert nouns == tuple(t.lemma_.lower() for t in doc if t.pos_ in captions.NOUN_TAGS)
    assert "get" not in p.verbs[0] and p.verbs[1] == ("get",)
    tagger_only = words.spacy_pipeline(captions.DEFAULT_PIPELINE, exclude=("parser", "ner"))
    assert next(iter(tagger_only("get chopping board"))).pos_ == "VERB"  # what it fixes


def test_syn_lesk_uses_wordnet_senses(wordnet_reader):
    classes = proxies.ClassMap.lesk(wordnet_reader)
    p = captions.parse(["chop the onion", "cut the onion", "chop the onion", "xqzv the blorp"])
    keys = classes.map(p, "nouns")
    assert keys[0] == keys[1] == keys[2] and str(keys[0][0]).startswith("onion.n.")
    assert classes.map(p, "verbs")[0] == classes.map(p, "verbs")[2]
    rel = proxies.syn(p, classes=classes)
    assert rel[0, 2] == 1.0 and rel[0, 1] >= 0.5
    assert "word:blorp" in classes.map(p, "nouns")[3]  # no synset: the word itself


def test_multi_caption_videos_keep_items_in_a_quarter():
    # video 0: 4 captions, "onion" in 1 (25%: kept), "pan" in 0; video 1: 2 captions
    rows = _parsed(
        [
            (["cut"], ["onion"], ["cut", "onion"]),
            (["cut"], ["knife"], ["cut", "knife"]),
            (["cut"], ["knife"], ["cut", "knife"]),
            (["cut"], ["board"], ["cut", "board"]),
            (["wash"], ["pan"], ["wash", "pan"]),
            (["wash"], ["lid"], ["wash", "lid"]),
        ]
    )
    cols = _parsed([(["cut"], ["onion", "knife", "board"], ["cut", "onion", "knife", "board"])])
    groups = [0, 0, 0, 0, 1, 1]
    pos = proxies.pos(rows, cols, row_groups=groups)
    assert pos.shape == (2, 1)
    assert pos[0, 0] == pytest.approx(0.5 + 0.5 * 1.0)
    assert pos[1, 0] == 0.0
    assert proxies.pos(rows, cols, row_groups=groups, rho=0.5)[0, 0] == pytest.approx(0.5 + 0.5 / 3)


def test_relevance_sets_own_pairs_to_one():
    proxy = np.array([[0.2, 0.3, 0.0], [0.1, 0.4, 0.9]], np.float32)
    rel = proxies.relevance(proxy, own=[0, 1, 1])
    np.testing.assert_array_equal(rel, np.float32([[1.0, 0.3, 0.0], [0.1, 1.0, 1.0]]))
    assert proxy[0, 0] == np.float32(0.2)  # input untouched


def test_epic_sentences_syn_tracks_class_relevance(epic_sentences_parsed, epic_classes, epic_test):
    """On the 3842 EK-100 test sentences, SYN with the EPIC classes is close to the
    class relevance of their annotated classes, and far closer than BoW."""
    _, parsed = epic_sentences_parsed
    _, sents = epic_test
    idx = np.random.default_rng(0).choice(len(parsed), 600, replace=False)
    sub = parsed.take(idx.tolist())
    from jaxsvr.relevance import class_relevance

    verbs, nouns = sents.verb_classes.take(idx), sents.noun_classes.take(idx)
    truth = class_relevance(verbs, nouns, verbs, nouns)
    syn = proxies.syn(sub, classes=epic_classes)
    bow = proxies.bow(sub)
    corr_syn = np.corrcoef(truth.ravel(), syn.ravel())[0, 1]
    corr_bow = np.corrcoef(truth.ravel(), bow.ravel())[0, 1]
    assert corr_syn > 0.6 and corr_syn > corr_bow + 0.2, (corr_syn, corr_bow)
