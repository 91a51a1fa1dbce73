"""Free-text queries as a trained model's text inputs, tokenised as training tokenised
captions (`jaxsvr.retrieve`, the rankings notebook).

- `caption`: `words.tokenize`, then ids of the run's vocabulary (`vocab.json`), truncated
  to `data.max_caption_len`; words outside the vocabulary become `<unk>` and are reported.
- `verb` / `noun` (JPoSE): a free query has no verb/noun columns, so its words come from
  spaCy's tags (`words.pos_words`, the `data.pos_source="spacy"` route of training) with
  the run's `data.spacy_pipeline`, whichever source the run trained on.
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


def encode(
    query: str,
    vocab: text.Vocabulary,
    data: ml_collections.ConfigDict,
    fields: tuple[str, ...],
    caption_window: int | None = None,
) -> Query:
    """The inputs `fields` of one query, as the run with config section `data` built them.

    Args:
      caption_window: the half-width m of the model's caption windows, if it has them.

    Raises:
      InputError: the model reads frozen caption features, or no query word is in the
        vocabulary (the message names the words).
    """
    if FEATURE_FIELD in fields:
        raise InputError(
            "this run's model reads frozen caption features (text_feature), which a free-text "
            "query does not have: query a run of a model with a text encoder (mme, jpose, hgr, "
            "contra)"
        )
    tokens = words.tokenize(query)
    unknown = tuple(dict.fromkeys(t for t in tokens if vocab.ids([t])[0] == text.UNK_ID))
    if len(unknown) == len(tokens):
        said = f"its words {', '.join(unknown)} are" if unknown else "it has no words"
        raise InputError(
            f"query {query!r}: {said} not in the run's vocabulary ({len(vocab)} words from its "
            "training captions): use words of its captions"
        )
    token_lists = {"caption": [tokens]}
    if {"verb", "noun"} & set(fields):
        verbs, nouns = words.pos_words([query], pipeline=data.spacy_pipeline)
        token_lists.update(verb=verbs, noun=nouns)
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
