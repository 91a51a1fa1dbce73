"""Role graphs of captions: the verb and noun-phrase nodes HGR reasons over.

HGR (Chen et al., "Fine-grained Video-Text Retrieval with Hierarchical Graph Reasoning",
CVPR 2020) parses a caption into a sentence node, verb nodes (actions) and noun-phrase
nodes (their arguments), each noun phrase tied to its verb by a semantic role. The
published code reads these graphs from semantic-role-labelling JSON; here they come from
EPIC-100's verb/noun columns (`from_columns`) or from a spaCy dependency parse
(`from_spacy`), and are stored as fixed-shape int32 arrays that travel with the token ids:

- `token_node` [n, max_len]: node of each token position of `text.encode(tokens, vocab,
  max_len)` (same tokenizer, same truncation); -1 = no node, k < num_verbs = verb slot k,
  num_verbs + m = noun-phrase slot m. A token belongs to at most one node.
- `node_role` [n, num_verbs + num_nouns]: 0 = empty slot, else an index of `ROLES`.
- `noun_verb` [n, num_nouns]: the verb slot whose argument noun phrase m is (-1 = none).

Slots are filled in order (verbs, then noun phrases, in caption order for spaCy and in
column order for EPIC); nodes beyond `num_verbs`/`num_nouns` are dropped, and so is a node
none of whose tokens lies in the first `max_len` tokens.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.nlp.words import DEFAULT_PIPELINE, TOKEN, spacy_pipeline, tokenize

ROLES = ("<none>", "V", "ARG0", "ARG1", "ARG2", "ARGM")
ROLE_ID = {name: i for i, name in enumerate(ROLES)}
# spaCy dependency label of a noun chunk's root -> role. A passive subject is the
# patient (PropBank ARG1), not the agent.
_DEP_ROLE = {"nsubj": "ARG0", "nsubjpass": "ARG1", "dobj": "ARG1", "pobj": "ARG2"}
_INFLECTIONS = ("s", "es", "ing", "ed", "d")


@dataclasses.dataclass
class _Node:
    role: str
    positions: list[int]  # token positions, all < max_len
    verb: int = -1  # for a noun phrase: index of its verb in the caption's verb list


def from_columns(
    captions: Sequence[str],
    verbs: Sequence[str],
    nouns: Sequence[Sequence[str]],
    *,
    max_len: int,
    num_verbs: int = 4,
    num_nouns: int = 6,
) -> dict[str, np.ndarray]:
    """Role graphs from EPIC-100 style columns (one verb and its nouns per caption).

    Every noun is an argument of the caption's verb: the first noun is its object (ARG1),
    later ones (usually after a preposition: "put plate in sink") are ARG2. A column word
    is tokenized like the caption ("turn-on" -> turn, on; "board:chopping" -> board,
    chopping) and each of its tokens takes the first unused caption token equal to it; a
    token with no exact match then takes the first unused inflected form ("hand" ->
    "hands", "stir" -> "stirring", "slice" -> "slicing"), after every node has had its
    exact matches, so an inflection never steals another node's exact word. A node none of
    whose tokens is found (EPIC's "turn-on" for "open tap") is dropped, and its nouns then
    have no verb.

    Args:
      captions: the narrations.
      verbs: the verb column, one string per caption ("" for none).
      nouns: the all_nouns column, a sequence of noun strings per caption.
      max_len: caption length in tokens (as `text.encode`).
      num_verbs: verb slots.
      num_nouns: noun-phrase slots.

    Returns:
      {"token_node": [n, max_len], "node_role": [n, num_verbs + num_nouns],
      "noun_verb": [n, num_nouns]}, int32.
    """
    _check_sizes(max_len, num_verbs, num_nouns)
    if not len(captions) == len(verbs) == len(nouns):
        raise InputError(
            f"from_columns: {len(captions)} captions, {len(verbs)} verbs and {len(nouns)} "
            "noun lists: give one of each per caption"
        )
    graphs = []
    for caption, verb, noun_list in zip(captions, verbs, nouns):
        tokens = tokenize(caption)[:max_len]
        words = [tokenize(verb or "")] + [tokenize(n) for n in noun_list]
        found = _match_words(tokens, words)
        verb_nodes = [_Node("V", found[0])] if found[0] else []
        noun_nodes = [
            _Node("ARG1" if i == 0 else "ARG2", pos, verb=0 if verb_nodes else -1)
            for i, pos in enumerate(found[1:])
            if pos
        ]
        graphs.append((verb_nodes, noun_nodes))
    return _pack(graphs, max_len, num_verbs, num_nouns)


def from_spacy(
    captions: Sequence[str],
    *,
    pipeline: str = DEFAULT_PIPELINE,
    max_len: int,
    num_verbs: int = 4,
    num_nouns: int = 6,
) -> dict[str, np.ndarray]:
    """Role graphs from a spaCy dependency parse, for captions without verb/noun columns.

    Verb nodes are VERB tokens, each with its particles (`prt` children: the "up" of
    "pick up"); noun-phrase nodes are `doc.noun_chunks`. A noun phrase's role comes from
    the dependency label of its root (nsubj -> ARG0, nsubjpass and dobj -> ARG1, pobj ->
    ARG2, anything else ARGM; a conjunct takes the label of the first conjunct, so the
    "fork" of "take knife and fork" is an object too) and its verb is the nearest VERB
    ancestor of that root (none when that verb has no slot). spaCy tokens are mapped to
    `tokenize` tokens by character offsets, so positions index the encoded caption.

    Args:
      captions: the captions.
      pipeline: an installed spaCy pipeline with a tagger and a parser.
      max_len: caption length in tokens (as `text.encode`).
      num_verbs: verb slots.
      num_nouns: noun-phrase slots.

    Returns:
      The arrays of `from_columns`.
    """
    _check_sizes(max_len, num_verbs, num_nouns)
    nlp = spacy_pipeline(pipeline, exclude=("ner", "lemmatizer"))
    graphs = []
    for caption, doc in zip(captions, nlp.pipe(captions, batch_size=256)):
        spans = _token_spans(caption)[:max_len]

        verb_index: dict[int, int] = {}  # spaCy token index -> index in verb_nodes
        verb_nodes = []
        for tok in doc:
            if tok.pos_ != "VERB":
                continue
            parts = [tok] + [c for c in tok.children if c.dep_ == "prt"]
            pos = _positions(spans, [(t.idx, t.idx + len(t)) for t in parts])
            if pos and len(verb_nodes) < num_verbs:
                verb_index[tok.i] = len(verb_nodes)
                verb_nodes.append(_Node("V", pos))
        noun_nodes = []
        for chunk in doc.noun_chunks:
            pos = _positions(spans, [(chunk.start_char, chunk.end_char)])
            if not pos:
                continue
            head = next((a for a in chunk.root.ancestors if a.pos_ == "VERB"), None)
            verb = verb_index.get(head.i, -1) if head is not None else -1
            root = chunk.root
            while root.dep_ == "conj" and root.head is not root:  # "knife and fork"
                root = root.head
            role = _DEP_ROLE.get(root.dep_, "ARGM")
            noun_nodes.append(_Node(role, pos, verb=verb))
        graphs.append((verb_nodes, noun_nodes))
    return _pack(graphs, max_len, num_verbs, num_nouns)


def _pack(
    graphs: list[tuple[list[_Node], list[_Node]]], max_len: int, num_verbs: int, num_nouns: int
) -> dict[str, np.ndarray]:
    """Writes (verb nodes, noun nodes) per caption into the fixed-shape arrays.

    A token already claimed by an earlier node (verbs first) stays with it; a node left
    without tokens is dropped.
    """
    n = len(graphs)
    token_node = np.full((n, max_len), -1, np.int32)
    node_role = np.zeros((n, num_verbs + num_nouns), np.int32)
    noun_verb = np.full((n, num_nouns), -1, np.int32)
    for row, (verb_nodes, noun_nodes) in enumerate(graphs):
        slot_of_verb = {}
        for i, node in enumerate(verb_nodes):
            slot = len(slot_of_verb)
            if slot < num_verbs and _claim(token_node[row], node.positions, slot):
                slot_of_verb[i] = slot
                node_role[row, slot] = ROLE_ID[node.role]
        m = 0
        for node in noun_nodes:
            if m < num_nouns and _claim(token_node[row], node.positions, num_verbs + m):
                node_role[row, num_verbs + m] = ROLE_ID[node.role]
                noun_verb[row, m] = slot_of_verb.get(node.verb, -1)
                m += 1
    return {"token_node": token_node, "node_role": node_role, "noun_verb": noun_verb}


def _claim(row: np.ndarray, positions: list[int], node: int) -> bool:
    """Gives the free positions to `node`; False (nothing written) when none is free."""
    free = [p for p in positions if row[p] < 0]
    row[free] = node
    return bool(free)


def _match_words(tokens: list[str], words: list[list[str]]) -> list[list[int]]:
    """Caption positions of each column word's tokens: exact matches for every word first,
    then inflected ones; each position is used once."""
    used = [False] * len(tokens)
    found: list[list[int]] = [[] for _ in words]
    missing: list[tuple[int, str]] = []
    for w, word in enumerate(words):
        for tok in word:
            j = next((j for j, t in enumerate(tokens) if not used[j] and t == tok), None)
            if j is None:
                missing.append((w, tok))
            else:
                used[j] = True
                found[w].append(j)
    for w, tok in missing:
        forms = _inflections(tok)
        j = next((j for j, t in enumerate(tokens) if not used[j] and t in forms), None)
        if j is not None:
            used[j] = True
            found[w].append(j)
    return [sorted(p) for p in found]


@functools.lru_cache(maxsize=8192)
def _inflections(word: str) -> frozenset[str]:
    """Regular English plural and verb forms of `word` (hand -> hands, stir -> stirring,
    slice -> slicing, berry -> berries, knife -> knives); none for words under 3 letters,
    whose forms would be other words."""
    if len(word) < 3:
        return frozenset()
    forms = {word + s for s in _INFLECTIONS}
    forms |= {word + word[-1] + s for s in ("ing", "ed")}  # stir -> stirring
    if word.endswith("e"):
        forms |= {word[:-1] + s for s in ("ing", "ed")}
    if word.endswith("y"):
        forms |= {word[:-1] + s for s in ("ies", "ied")}
    if word.endswith(("f", "fe")):
        forms.add(word[: -1 if word.endswith("f") else -2] + "ves")
    return frozenset(forms)


def _positions(spans: list[tuple[int, int]], char_spans: list[tuple[int, int]]) -> list[int]:
    """Indices of the token `spans` that overlap any of `char_spans`."""
    return [j for j, (a, b) in enumerate(spans) if any(a < e and s < b for s, e in char_spans)]


def _token_spans(caption: str) -> list[tuple[int, int]]:
    """Character spans in `caption` of the tokens of `tokenize(caption)`, in order."""
    lowered, origin = [], []
    for i, c in enumerate(caption):
        low = c.lower()  # may be longer than one character ("İ")
        lowered.append(low)
        origin.extend([i] * len(low))
    spans = []
    for match in TOKEN.finditer("".join(lowered)):
        tok = match.group()
        start = match.start() + (len(tok) - len(tok.lstrip("'")))
        end = match.end() - (len(tok) - len(tok.rstrip("'")))
        if start < end:
            spans.append((origin[start], origin[end - 1] + 1))
    return spans


def _check_sizes(max_len: int, num_verbs: int, num_nouns: int) -> None:
    for name, value in (("max_len", max_len), ("num_verbs", num_verbs), ("num_nouns", num_nouns)):
        if value < 1:
            raise InputError(f"role graphs: {name} must be at least 1, got {value}")
