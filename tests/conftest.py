"""Shared fixtures: the official EPIC-KITCHENS-100 annotations beside the project.

The CSVs live in ../shared/data/epic100/ (never copied into the repository). Parsed files
and the 9668 x 3842 test relevance are built once per session.

Tests compare jitted JAX against float32 NumPy loops, so every float32 product here is
float32 (`highest`) on any backend: on GPUs XLA would otherwise use TensorFloat-32 and miss
rtol 1e-5 by about 1e-4 (as `config.matmul_precision` documents).
"""

import os
import shutil
import tempfile
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

jax.config.update("jax_default_matmul_precision", "highest")
# In-process tests compile with most XLA optimizations off: the suite compiles many tiny
# programs once each, and unoptimised compiles take about half the time (two trainer test
# files: 74 s -> 40 s of pytest -n2). Tests compare runs with each other or with NumPy
# references within float32 rounding, which holds either way; the pinned runlocal metrics
# (`tests/test_runlocal_pinned.py`) compile this way too, and agree with users' optimized
# runs within float32 rounding.
jax.config.update("jax_disable_most_optimizations", True)
# The processes the tests start (training subprocesses, launcher processes, notebook
# kernels) take both settings from the environment: they compile as fast (notebook 05,
# which trains ConTra and HGR: 73 -> 45 CPU seconds), and a program one of them shares
# with an in-process test (a config trained both ways) is the same program, compiled once
# for the session's cache below. On CPU, where they run, float32 products are float32
# under any precision setting but "bfloat16" (jaxsvr's Dense layers then round their
# inputs themselves): their numbers stay as they were.
os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
# XLA's CPU code generation by its older loop emitters instead of the fusion emitters:
# compiles take about 40% less CPU time (tests/test_mining_analysis.py and
# tests/models/test_hgr.py: 71 -> 44 CPU s) for the same float operations. Every process
# of the session reads it from the environment at its first compile (this process too:
# JAX has not started a backend yet), so runs compared with each other compile alike (with
# XLA's optimizations on, as users compile, the ConTra runs took 50% more CPU time this
# way). The helpers that set XLA_FLAGS for fake devices add to it (`train_runs.cpu_env`).
TEST_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false"
os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"), TEST_XLA_FLAGS]))
# The training command lowers JAX's threefry hash unrolled on the CPU
# (`jaxsvr.runtime.threefry`): the same bits, but another program than the in-process
# tests compile, so a config trained both ways would be compiled twice for the cache
# below (and the unrolled hash compiles slower, which tiny models never earn back). The
# session's processes keep JAX's loop; tests/test_threefry.py checks the unrolled hash
# draws the same bits, and test_main's smoke run runs the command as users do.
os.environ["JAXSVR_THREEFRY"] = "loop"

# One XLA compilation cache per test session, shared by the in-process runs, the training
# subprocesses they start and the pytest-xdist workers (all through the environment): the
# suite trains the same few tiny models many times, and on CPU compiling their steps costs
# more than running them. A cached executable is the one compiled, so results stay bit for
# bit. JAX reads the setting at its first compile, hence here, before any test module is
# imported. JAX writes entries in place, without a lock (its lock comes with size-limited
# caches, whose bookkeeping made the suite 40% slower): a process may read an entry another
# is still writing, fail to decompress it and compile the program itself, with a warning
# that is silenced here because tests compare what runs print. The process that made the
# folder removes it at the end.
_OWN_CACHE = "JAXSVR_TEST_XLA_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["JAXSVR_TEST_XLA_CACHE"] = tempfile.mkdtemp(prefix="jaxsvr-tests-xla-cache-")
XLA_CACHE = os.environ["JAXSVR_TEST_XLA_CACHE"]
os.environ["JAX_COMPILATION_CACHE_DIR"] = XLA_CACHE
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
_TORN_READ = "Error reading persistent compilation cache entry"
os.environ["PYTHONWARNINGS"] = ",".join(
    filter(None, [os.environ.get("PYTHONWARNINGS"), f"ignore:{_TORN_READ}"])
)
warnings.filterwarnings("ignore", message=_TORN_READ)
jax.config.update("jax_compilation_cache_dir", XLA_CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)


def pytest_unconfigure(config):
    if _OWN_CACHE:
        shutil.rmtree(XLA_CACHE, ignore_errors=True)


EPIC_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "epic100"


@pytest.fixture(scope="session")
def epic_dir() -> Path:
    if not (EPIC_DIR / "EPIC_100_retrieval_test.csv").is_file():
        pytest.skip(f"EPIC-KITCHENS-100 annotations not found in {EPIC_DIR}")
    return EPIC_DIR


@pytest.fixture(scope="session")
def epic_test(epic_dir):
    from jaxsvr.annotations import epic100

    clips = epic100.read_clips(epic_dir / epic100.TEST_CLIPS)
    return clips, epic100.read_sentences(epic_dir / epic100.TEST_SENTENCES, clips)


@pytest.fixture(scope="session")
def epic_test_relevance(epic_test) -> np.ndarray:
    from jaxsvr.relevance import class_relevance

    clips, sents = epic_test
    return class_relevance(
        clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
    )


# Test helpers import as top-level modules: the reference implementations and the
# official-style baseline (ek100_baseline) from tests/, the result grids
# (train_results) from benchmarks/.
import sys  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="session")
def wordnet_reader(tmp_path_factory):
    """NLTK's WordNet from the Debian packages (the test command installs them), built
    into a session cache; no NLTK download."""
    import os

    from jaxsvr.nlp import wordnet

    os.environ.setdefault("JAXSVR_CACHE", str(tmp_path_factory.mktemp("jaxsvr_cache")))
    return wordnet.load()


@pytest.fixture(scope="session")
def epic_sentences_parsed(epic_dir):
    """The 3842 EK-100 test sentences (texts) and their spaCy parse."""
    from jaxsvr.annotations import caption_table
    from jaxsvr.nlp import captions

    table = caption_table.read_csv(epic_dir / "EPIC_100_retrieval_test_sentence.csv")
    return table.texts, captions.parse(table.texts)


# The longest modules first: pytest-xdist (--dist loadscope --no-loadscope-reorder, as
# pyproject.toml sets) hands out whole modules in this order, so no worker is left alone
# with a long module at the end of the run. (xdist's own reordering, by number of tests,
# would put these few-test, long modules last.)
LONGEST_FIRST = (
    "test_notebooks.py",
    "test_distributed.py",
    "test_runlocal_pinned.py",
    "test_train_contra.py",
    "test_checkpoint_faults.py",
    "test_public_data.py",
    "test_main.py",
    "test_metrics.py",
    "test_retrieve.py",
    "test_train_msrvtt.py",
    "test_mining_analysis.py",
    "test_contra_analysis.py",
    "test_train_objectives.py",
    "test_train_proxy.py",
    "test_validation.py",
    "test_train_config_errors.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
