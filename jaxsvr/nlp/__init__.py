"""Stage 1 — nlp: words of captions, shared by every later stage.

- `words`: the one tokenizer, spaCy pipeline loading, spaCy verb/noun words.
- `captions`: captions parsed once with spaCy (tokens, content lemmas, verbs, nouns).
- `wordnet`: WordNet 3.0 for NLTK from Debian's packages, without downloads.
"""
