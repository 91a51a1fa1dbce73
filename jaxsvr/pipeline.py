"""Composes the stages of a run from `config`: the only place a ConfigDict is read apart
from the trainer, models and objectives.

annotations -> relevance -> inputs -> sampling -> objective (see docs/architecture.md).
"""

from __future__ import annotations

import ml_collections

from jaxsvr.relevance.split_relevance import RelevanceSpec


def relevance_spec(data: ml_collections.ConfigDict) -> RelevanceSpec:
    """The relevance settings of `config.data` (its `relevance` section, SYN classes and
    spaCy pipeline) as explicit values."""
    r = data.relevance
    return RelevanceSpec(
        proxy=r.proxy,
        rho=r.rho,
        weights=tuple(r.weights),
        syn_classes=data.syn_classes,
        spacy_pipeline=data.spacy_pipeline,
        own_is_relevant=data.format == "epic100",
    )
