"""MME on YouCook2-style data trained with semantic (proxy) relevance, Wray et al. 2021.

  python -m jaxsvr.main --config=configs/youcook2_mme.py:proxy=syn,t=0.4 --workdir=/tmp/yc2
  python -m jaxsvr.main --config=configs/youcook2_mme.py:instance --workdir=/tmp/yc2_inst \
      --config.data.annotations=youcookii_annotations_trainval.json
  # EPIC captions in YouCook2 form (real captions, synthetic features):
  python -m jaxsvr.annotations.youcook2 --epic ../shared/data/epic100 --out /tmp/epic_yc2.json
  python -m jaxsvr.main --config=configs/youcook2_mme.py:proxy=bow,t=0.2 --workdir=/tmp/b \
      --config.data.annotations=/tmp/epic_yc2.json \
      --config.data.syn_classes=../shared/data/epic100

Data: `config.data.format = "youcook2"`; `data.annotations` is the YouCook2 JSON
(default "": the built-in kitchen annotations in YouCook2 form, nothing downloaded). Clips
get classes from their captions (`data.syn_classes`: "" words, "wordnet" Lesk, or a folder
of EPIC-style class CSVs, as the paper does for YouCook2), and synthetic features from
those classes; test relevance is the proxy with S = 1 on own captions.

Training (the paper's Sec. 5): MME with thresholded semantic triplets, positives S >= T
and negatives S < T under the proxy (`sampler.positives = "proxy"`, fixed margin), or
instance triplets (`instance`: only the clip's own caption is positive). The paper finds
on YouCook2 (CE model) that nDCG peaks around T = 0.4 for PoS/SYN/MET and T = 0.2 for BoW.

Variants: `proxy=bow|pos|syn|met` (relevance for training and evaluation; default syn),
`t=T` (threshold, default 0.4), `instance` (instance training; evaluation still uses the
proxy), `runlocal` (tiny, seconds; tests).

`margin=relevance`: the relevance-margin paper's YouCook2 setting ("Relevance-based Margin
for Contrastively-trained Video Retrieval Models", Falcon et al. ICMR 2022): class
triplets over the classes derived from the captions with EPIC-KITCHENS-100's class
knowledge, as that paper does for YouCook2: `data.syn_classes` defaults to the folder of
EPIC_100_{verb,noun}_classes.csv, `../shared/data/epic100` beside the checkout (the
location the benchmarks and tests use; a word in no EPIC class becomes a class of its own;
another folder with `--config.data.syn_classes=DIR`, WordNet synsets instead with
`=wordnet`, and a missing folder is an error). Each triplet has the margin 1 - R(anchor,
negative) of that class relevance (½ IoU of verbs + ½ IoU of nouns), evaluated under the
same class relevance (or a proxy given with `proxy=`). Published on YouCook2 (ResNet-152
features): MME 46.9 / 19.3 nDCG / mAP with the fixed margin, 47.3 / 19.5 with the
relevance margin.

  python -m jaxsvr.main --config=configs/youcook2_mme.py:margin=relevance --workdir=/tmp/rm \
      --config.data.annotations=youcookii_annotations_trainval.json
"""

from pathlib import Path

import ml_collections

from jaxsvr import configs
from jaxsvr.relevance import proxies

# EPIC-KITCHENS-100's class CSVs beside the checkout (as benchmarks/ and tests/ find them)
EPIC_CLASSES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "epic100"


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    v = configs.variants(
        arg,
        {
            "proxy": proxies.NAMES,
            "t": float,
            "instance": None,
            "margin": ("fixed", "relevance"),
            "runlocal": None,
        },
    )
    config = configs.base()
    configs.mme_jpose_model(config, "mme")
    config.data.format = "youcook2"
    config.data.relevance.proxy = v.get("proxy", "syn")
    config.loss.margin = "fixed"
    config.sampler.positives = "instance" if "instance" in v else "proxy"
    config.sampler.threshold = float(v.get("t", 0.4))
    if v.get("margin") == "relevance":  # class triplets, relevance margins, class relevance
        config.loss.margin = "relevance"
        config.sampler.positives = "class"
        config.data.relevance.proxy = v.get("proxy", "class")
        config.data.syn_classes = str(EPIC_CLASSES)  # the paper's class knowledge
    if "runlocal" in v:
        configs.runlocal(config)
    return config
