"""WordNet for NLTK without downloads: the Debian database, the cache folder, errors."""

import nltk
import pytest

from jaxsvr.errors import InputError
from jaxsvr.nlp import wordnet


def test_debian_wordnet_loads(wordnet_reader):
    assert wordnet_reader.get_version() == "3.0"
    assert {s.name() for s in wordnet_reader.synsets("stir", pos="v")} >= {"stir.v.01"}
    assert wordnet_reader.synset("dog.n.01").lexname() == "noun.animal"  # lexnames file
    assert wordnet_reader.synset("eat.v.01").lexname() == "verb.consumption"


def test_lexnames_is_wordnet_30():
    names = [n for _, (n, _) in wordnet._lexnames()]
    assert len(names) == 45 and names[0] == "adj.all" and names[44] == "adj.ppl"
    assert names[13] == "noun.food" and names[29] == "verb.body"


def test_cache_is_built_once_and_rebuilt_when_incomplete(tmp_path, monkeypatch):
    if not (wordnet.DEBIAN_ROOT / "data.noun").is_file():
        pytest.skip("Debian wordnet-base is not installed")
    monkeypatch.setenv("JAXSVR_CACHE", str(tmp_path))
    folder = wordnet._prepared(wordnet.DEBIAN_ROOT)
    assert folder == tmp_path / "nltk_data" / "corpora" / "wordnet"
    assert (folder / "lexnames").read_text().splitlines()[3] == "03\tnoun.Tops\t1"
    mtime = (folder / "data.noun").stat().st_mtime_ns
    assert wordnet._prepared(wordnet.DEBIAN_ROOT) == folder
    assert (folder / "data.noun").stat().st_mtime_ns == mtime  # reused, not copied again
    (folder / "index.verb").write_text("truncated")
    wordnet._prepared(wordnet.DEBIAN_ROOT)
    assert (folder / "index.verb").stat().st_size == (
        wordnet.DEBIAN_ROOT / "index.verb"
    ).stat().st_size
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".wordnet-")]


def test_missing_wordnet_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("JAXSVR_WORDNET", raising=False)
    monkeypatch.setattr(wordnet, "DEBIAN_ROOT", tmp_path / "none")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])
    with pytest.raises(InputError, match="apt-get install wordnet-base wordnet-sense-index"):
        wordnet.find()


def test_folder_without_database_files(tmp_path):
    (tmp_path / "data.noun").write_text("")
    with pytest.raises(InputError, match=r"lacks cntlist.rev, index.sense, index.adj \.\.\."):
        wordnet.find(str(tmp_path))
