"""jaxsvr: semantic-similarity video retrieval in JAX/Flax.

Host-side relevance (`jaxsvr.relevance`), EK-100 evaluation (`jaxsvr.evaluation`), data and
synthetic features (`jaxsvr.data`), models (`jaxsvr.models`), losses (`jaxsvr.losses`) and
the trainer (`jaxsvr.train`, entry point `python -m jaxsvr.main`).
"""

__version__ = "0.1.0"
