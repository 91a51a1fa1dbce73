"""jaxsvr: semantic-similarity video retrieval in JAX/Flax.

The folders follow the data flow (docs/architecture.md): `files` and `nlp` (shared
readers and words) -> `annotations` -> `relevance` -> `inputs` -> `sampling` ->
`objectives` (over `models` and `losses`) -> `evaluation`; `pipeline` composes them from
the config and `train` runs the loop (entry point `python -m jaxsvr.main`).
"""

__version__ = "0.1.0"
