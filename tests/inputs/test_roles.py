"""Role graphs: EPIC column matching worked by hand, truncation, slot overflow, spaCy
roles, and token positions that agree with `tokenize`."""

import numpy as np
import pytest

from jaxsvr.errors import InputError
from jaxsvr.inputs import roles
from jaxsvr.nlp.words import tokenize

V, ARG0, ARG1, ARG2, ARGM = (roles.ROLE_ID[r] for r in ("V", "ARG0", "ARG1", "ARG2", "ARGM"))


def columns(rows, max_len=6, num_verbs=2, num_nouns=3):
    caps, verbs, nouns = zip(*rows)
    sizes = dict(max_len=max_len, num_verbs=num_verbs, num_nouns=num_nouns)
    return roles.from_columns(list(caps), list(verbs), list(nouns), **sizes)


def test_epic_rows_by_hand():
    g = columns(
        [
            ("turn on light", "turn-on", ("light",)),
            ("put plate in sink", "put", ("plate", "sink")),
            ("put down chopping board", "put-down", ("board:chopping",)),
        ]
    )
    # slots: verbs 0-1, noun phrases 2-4
    np.testing.assert_array_equal(
        g["token_node"],
        [[0, 0, 2, -1, -1, -1], [0, 2, -1, 3, -1, -1], [0, 0, 2, 2, -1, -1]],
    )
    np.testing.assert_array_equal(
        g["node_role"],
        [[V, 0, ARG1, 0, 0], [V, 0, ARG1, ARG2, 0], [V, 0, ARG1, 0, 0]],
    )
    np.testing.assert_array_equal(g["noun_verb"], [[0, -1, -1], [0, 0, -1], [0, -1, -1]])
    assert all(a.dtype == np.int32 for a in g.values())


def test_words_missing_from_the_caption_drop_their_node():
    g = columns(
        [
            ("open tap", "turn-on", ("tap",)),  # EPIC's verb is not in the narration
            ("sharpening", "sharpen", ("knife",)),  # nor is the noun here
            ("", "take", ()),
        ]
    )
    np.testing.assert_array_equal(g["token_node"][:, :2], [[-1, 2], [0, -1], [-1, -1]])
    np.testing.assert_array_equal(g["node_role"][:, [0, 2]], [[0, ARG1], [V, 0], [0, 0]])
    np.testing.assert_array_equal(g["noun_verb"][:, 0], [-1, -1, -1])  # no verb to attach to


def test_inflected_forms_match_after_exact_ones():
    g = columns(
        [
            ("dry hands", "dry", ("hand",)),
            ("stirring onions", "stir", ("onion",)),
            ("take knives", "take", ("knife",)),
            # "chopping" belongs to the noun exactly; the verb's inflected match loses it
            ("chopping board", "chop", ("board:chopping",)),
        ]
    )
    np.testing.assert_array_equal(g["token_node"][:, :2], [[0, 2], [0, 2], [0, 2], [2, 2]])
    assert g["node_role"][3, 0] == 0 and g["noun_verb"][3, 0] == -1


def test_truncation_and_slot_overflow():
    g = columns([("put the plate in the sink", "put", ("plate", "sink"))], max_len=3)
    np.testing.assert_array_equal(g["token_node"], [[0, -1, 2]])
    np.testing.assert_array_equal(g["node_role"], [[V, 0, ARG1, 0, 0]])
    g = columns(
        [("mix flour sugar eggs", "mix", ("flour", "sugar", "egg"))], num_verbs=1, num_nouns=2
    )
    np.testing.assert_array_equal(g["token_node"], [[0, 1, 2, -1, -1, -1]])
    np.testing.assert_array_equal(g["node_role"], [[V, ARG1, ARG2]])
    np.testing.assert_array_equal(g["noun_verb"], [[0, 0]])


def test_positions_follow_the_tokenizer():
    caption = "Pick-up the 'knife', don't drop it"
    g = columns([(caption, "pick-up", ("knife",))], max_len=8)
    assert tokenize(caption)[:3] == ["pick", "up", "the"]
    np.testing.assert_array_equal(g["token_node"], [[0, 0, -1, 2, -1, -1, -1, -1]])
    for cap in (caption, "'' a-b ''c'", ""):
        spans = roles._token_spans(cap)
        assert [cap[a:b].lower() for a, b in spans] == tokenize(cap)
    # "İ" lowercases to two characters ("i" + a combining dot that splits the token)
    assert roles._token_spans("İstanbul knife") == [(0, 1), (1, 8), (9, 14)]
    assert tokenize("İstanbul knife") == ["i", "stanbul", "knife"]


def test_bad_arguments():
    with pytest.raises(InputError, match="one of each per caption"):
        roles.from_columns(["a", "b"], ["a"], [()], max_len=4)
    with pytest.raises(InputError, match="num_nouns must be at least 1"):
        roles.from_columns(["a"], ["a"], [()], max_len=4, num_nouns=0)


def test_spacy_roles():
    g = roles.from_spacy(
        ["a man is cutting an onion with a knife", "the woman opens the fridge and takes out milk"],
        max_len=9,
        num_verbs=2,
        num_nouns=3,
    )
    # a man | is | cutting | an onion | with | a knife;  the woman | opens | the fridge | and |
    # takes out | milk
    np.testing.assert_array_equal(
        g["token_node"], [[2, 2, -1, 0, 3, 3, -1, 4, 4], [2, 2, 0, 3, 3, -1, 1, 1, 4]]
    )
    np.testing.assert_array_equal(
        g["node_role"], [[V, 0, ARG0, ARG1, ARG2], [V, V, ARG0, ARG1, ARG1]]
    )
    np.testing.assert_array_equal(g["noun_verb"], [[0, 0, 0], [0, 0, 1]])
    # one verb slot: "milk"'s verb "takes" has none
    g = roles.from_spacy(
        ["the woman opens the fridge and takes out milk"], max_len=9, num_verbs=1, num_nouns=3
    )
    np.testing.assert_array_equal(g["token_node"], [[1, 1, 0, 2, 2, -1, -1, -1, 3]])
    np.testing.assert_array_equal(g["noun_verb"], [[0, 0, -1]])


def test_missing_pipeline_is_an_input_error():
    with pytest.raises(InputError, match="pip install no-such-pipeline"):
        roles.from_spacy(["take plate"], pipeline="no_such_pipeline", max_len=4)
