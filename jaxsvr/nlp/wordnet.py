"""WordNet 3.0 for NLTK without `nltk.download` (no network needed).

METEOR's synonym stage and the Lesk synsets of the SYN proxy read WordNet through NLTK's
`WordNetCorpusReader`. NLTK only opens a `corpora/wordnet` folder inside one of its data
paths (`nltk.data.path`), and it needs a `lexnames` file that Debian's packages lack. So
`load()` looks, in order, for:

1. `$JAXSVR_WORDNET` or the `root` argument: a folder holding WordNet's database files
   (`data.noun`, `index.noun`, ...; a prepared NLTK `corpora/wordnet` folder works too);
2. an NLTK WordNet already installed in a data path (`nltk.download("wordnet")` elsewhere);
3. Debian's `wordnet-base` + `wordnet-sense-index` in /usr/share/wordnet (Ubuntu too).

For 1 and 3 the files (36 MB) are copied, since NLTK refuses symlinks and hard links,
into a cache, `$JAXSVR_CACHE` or
~/.cache/jaxsvr, under `nltk_data/corpora/wordnet`, with the 45-line `lexnames` file of
WordNet 3.0 written beside them (unless the source has one), and that `nltk_data` joins
`nltk.data.path`; the folder is built in a temporary sibling and renamed,
so an interrupted build leaves nothing half-written. When none is found, one line says
how to install it (`apt-get install wordnet-base wordnet-sense-index`).
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

from jaxsvr.errors import InputError

DEBIAN_ROOT = Path("/usr/share/wordnet")
# The database files NLTK's reader opens (lexnames is written by us).
FILES = (
    "cntlist.rev",
    "index.sense",
    *(f"{kind}.{pos}" for kind in ("index", "data") for pos in ("adj", "adv", "noun", "verb")),
    *(f"{pos}.exc" for pos in ("adj", "adv", "noun", "verb")),
)
# lexnames(5WN) of WordNet 3.0: file number, lexicographer file, syntactic category.
LEXNAMES = (
    "adj.all 3, adj.pert 3, adv.all 4, noun.Tops 1, noun.act 1, noun.animal 1, "
    "noun.artifact 1, noun.attribute 1, noun.body 1, noun.cognition 1, "
    "noun.communication 1, noun.event 1, noun.feeling 1, noun.food 1, noun.group 1, "
    "noun.location 1, noun.motive 1, noun.object 1, noun.person 1, noun.phenomenon 1, "
    "noun.plant 1, noun.possession 1, noun.process 1, noun.quantity 1, noun.relation 1, "
    "noun.shape 1, noun.state 1, noun.substance 1, noun.time 1, verb.body 2, "
    "verb.change 2, verb.cognition 2, verb.communication 2, verb.competition 2, "
    "verb.consumption 2, verb.contact 2, verb.creation 2, verb.emotion 2, verb.motion 2, "
    "verb.perception 2, verb.possession 2, verb.social 2, verb.stative 2, verb.weather 2, "
    "adj.ppl 3"
).split(", ")
INSTALL_HINT = (
    "install WordNet 3.0: `apt-get install wordnet-base wordnet-sense-index` (Debian/Ubuntu), "
    "or set JAXSVR_WORDNET to a folder of WordNet database files"
)


def cache_dir() -> Path:
    """Where jaxsvr keeps built data: $JAXSVR_CACHE, else $XDG_CACHE_HOME/jaxsvr."""
    if os.environ.get("JAXSVR_CACHE"):
        return Path(os.environ["JAXSVR_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxsvr"


@functools.lru_cache(maxsize=4)
def load(root: str | None = None) -> Any:
    """NLTK's WordNet reader (`nltk.corpus.reader.WordNetCorpusReader`), loaded once.

    Args:
      root: a folder of WordNet database files; default $JAXSVR_WORDNET, then an installed
        NLTK WordNet, then Debian's /usr/share/wordnet.

    Raises:
      InputError: no WordNet was found, or a given folder lacks database files.
    """
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    folder = find(root)
    import nltk

    data_path = str(folder.parent.parent)  # NLTK reads only inside its data paths
    if data_path not in nltk.data.path:
        nltk.data.path.append(data_path)
    with warnings.catch_warnings():  # no Open Multilingual Wordnet: English only
        warnings.filterwarnings("ignore", "The multilingual functions")
        return WordNetCorpusReader(str(folder), None)


def find(root: str | None = None) -> Path:
    """The NLTK `corpora/wordnet` folder to read, building it in the cache if needed."""
    root = root or os.environ.get("JAXSVR_WORDNET")
    if root:
        source = Path(root)
        missing = [f for f in FILES if not (source / f).is_file()]
        if missing:
            raise InputError(
                f"WordNet folder {source} lacks {', '.join(missing[:3])}"
                f"{' ...' if len(missing) > 3 else ''}: {INSTALL_HINT}"
            )
        return _prepared(source)
    nltk_folder = _installed_nltk_wordnet()
    if nltk_folder is not None:
        return nltk_folder
    if all((DEBIAN_ROOT / f).is_file() for f in FILES):
        return _prepared(DEBIAN_ROOT)
    raise InputError(f"WordNet 3.0 not found (no NLTK WordNet, no {DEBIAN_ROOT}): {INSTALL_HINT}")


def _installed_nltk_wordnet() -> Path | None:
    import nltk

    for base in nltk.data.path:
        folder = Path(base) / "corpora" / "wordnet"
        if (folder / "lexnames").is_file() and all((folder / f).is_file() for f in FILES):
            return folder
    return None


def _prepared(source: Path) -> Path:
    """A cached NLTK folder with the files of `source` and a lexnames file."""
    target = cache_dir() / "nltk_data" / "corpora" / "wordnet"
    if _complete(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet-", dir=target.parent))
    try:
        for name in FILES:
            shutil.copyfile(source / name, tmp / name)
        if (source / "lexnames").is_file():
            shutil.copyfile(source / "lexnames", tmp / "lexnames")
        else:
            lines = (f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in _lexnames())
            (tmp / "lexnames").write_text("".join(lines))
        if target.exists():  # stale (the source changed): replace it
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _lexnames():
    return enumerate(entry.split() for entry in LEXNAMES)


def _complete(target: Path, source: Path) -> bool:
    """Whether the cached folder holds every file, each the size of the source's."""
    if not (target / "lexnames").is_file():
        return False
    for name in FILES:
        cached = target / name
        if not cached.is_file() or cached.stat().st_size != (source / name).stat().st_size:
            return False
    return True
