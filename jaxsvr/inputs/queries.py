"""Free-text queries as a trained model's text inputs, tokenised as training tokenised
captions (`jaxsvr.retrieve`, the rankings notebook).

- `caption`: `words.tokenize`, then ids of the run's vocabulary (`vocab.json`), truncated
  to `data.max_caption_len`; words outside the vocabulary become `<unk>` and are reported.
- `verb` / `noun` (JPoSE): a run trained on spaCy's tags (`data.pos_source="spacy"`) tags
  the query the same way (`words.pos_words`, the run's `data.spacy_pipeline`). A run
  trained on the annotations' verb/noun columns (EPIC) has no columns for a free query, and
  spaCy mis-tags the verb-first fragments EPIC narrations are ("wipe water": two nouns), so
  the query's verbs and nouns are its words that the training columns used as verbs and as
  nouns (`pos_vocabulary`; a word used as both goes to both), in query order.
- role graphs (HGR): `roles.from_spacy`, with the run's node counts.
- caption windows (ConTra with text context): a query is a video of one caption, so its
  window repeats it (`jaxsvr.inputs.windows` repeats the edge clip the same way).
- frozen caption features (`text_feature`, projection heads): a free query has none;
  `QueryError` says so.
"""

from __future__ import annotations

import dataclasses

import ml_collections
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.inputs import roles, text
from jaxsvr.inputs.splits import FEATURE_FIELD, ROLE_FIELDS
from jaxsvr.nlp import words


@dataclasses.dataclass(frozen=True)
class Query:
    inputs: dict[str, np.ndarray]  # field -> [1, ...] the model's text inputs
    unknown: tuple[str, ...]  # query words outside the vocabulary (read as <unk>)


def pos_vocabulary(token_ids: dict[str, np.ndarray], vocab: text.Vocabulary) -> dict:
    """{"verb": words, "noun": words}: the words of the training verb / noun token ids."""
    return {
        field: sorted(vocab.words[i] for i in np.unique(token_ids[field]) if i > text.UNK_ID)
        for field in ("verb", "noun")
    }


def encode(
    query: str,
    vocab: text.Vocabulary,
    data: ml_collections.ConfigDict,
    fields: tuple[str, ...],
    caption_window: int | None = None,
    pos_words: dict[str, list[str]] | None = None,
) -> Query:
    """The inputs `fields` of one query, as the run with config section `data` built them.

    Args:
      caption_window: the half-width m of the model's caption windows, if it has them.
      pos_words: `pos_vocabulary` of the training split, for runs trained on verb/noun
        columns (`data.pos_source="columns"`) whose model reads verbs and nouns.

    Raises:
      InputError: the model reads frozen caption features, the query has no words, or no
        word of it is in the vocabulary (the message names the words).
    """
    frozen = [f for f in fields if f == FEATURE_FIELD or f.endswith("_feature")]
    if frozen:
        raise InputError(
            f"this run's model reads frozen text features ({', '.join(frozen)}), which a "
            "free-text query does not have: query its test sentences with --clip, or a run "
            "of a model with a text encoder (mme, jpose with model.text_input=words, hgr, "
            "contra)"
        )
    tokens = words.tokenize(query)
    unknown = tuple(dict.fromkeys(t for t in tokens if vocab.ids([t])[0] == text.UNK_ID))
    if not tokens:
        raise InputError(
            f"query {query!r} has no words (tokenised as the training captions were): use "
            "words of the run's captions"
        )
    if len(unknown) == len(tokens):
        raise InputError(
            f"query {query!r}: no word of the query is in the run's vocabulary: "
            f"{', '.join(unknown)} (it has {len(vocab)} words, from its training captions); "
            "use words of its captions"
        )
    token_lists = {"caption": [tokens]}
    if {"verb", "noun"} & set(fields):
        if data.pos_source == "spacy" or pos_words is None:
            verbs, nouns = words.pos_words([query], pipeline=data.spacy_pipeline)
            token_lists.update(verb=verbs, noun=nouns)
        else:
            for field in ("verb", "noun"):
                known = set(pos_words[field])
                token_lists[field] = [[t for t in tokens if t in known]]
    lengths = {"caption": data.max_caption_len, "verb": data.max_verb_len}
    lengths["noun"] = data.max_noun_len
    inputs = {f: text.encode(token_lists[f], vocab, lengths[f]) for f in fields if f in token_lists}
    if set(ROLE_FIELDS) & set(fields):
        inputs.update(
            roles.from_spacy(
                [query],
                pipeline=data.spacy_pipeline,
                max_len=data.max_caption_len,
                num_verbs=data.num_verb_nodes,
                num_nouns=data.num_noun_nodes,
            )
        )
    if caption_window is not None:  # [1, L] -> [1, 2m + 1, L]: the query alone in its video
        inputs["caption"] = np.repeat(inputs["caption"][:, None], 2 * caption_window + 1, 1)
    return Query({f: inputs[f] for f in fields}, unknown)
