"""HGR (Hierarchical Graph Reasoning) on EPIC-KITCHENS-100, trained with batch mining losses.

  python -m jaxsvr.main --config=configs/epic_hgr.py:ranp --workdir=/tmp/hgr_ranp \
      --config.data.annotations=../shared/data/epic100

Variants, one loss each: `hard` (default: VSE++ hardest negatives, margin 0.2), `all`
(every negative), `ran` (relevance-aware negatives, tau 0.15), `ranp` (RAN plus hardest
relevant positives, tau 0.15, margins 0.2), `relmargin` (relevance margin 1 - R, hardest
negatives); `tau=X` sets the RAN/RANP threshold (default 0.15, the threshold of the RANP
paper's headline EPIC rows; its Table 1 also reports 0.75 and 0.40); `runlocal` (tiny,
seconds; tests).

Published on EPIC-100 with TBN features: HGR 35.9 nDCG / 39.5 mAP, with RAN 48.4 / 46.5,
with RANP 58.8 / 47.2, both at tau 0.15 ("Learning video retrieval models with
relevance-aware online mining", Falcon et al. ICIAP 2022); with the relevance margin
32.2 -> 50.2 nDCG, 36.0 -> 45.6 mAP ("Relevance-based Margin for Contrastively-trained
Video Retrieval Models", ICMR 2022).
Settings of the public code (aranciokov/ranp): Adam lr 1e-4, batch 64, 50 epochs, 1024-d
embeddings, 300-d words, BiGRU 1024, at most 20 segments, the loss on the fused (`action`)
score with class relevance; captions are cut at 16 tokens here (EPIC narrations are short;
the public code allows 30). Synthetic per-segment features default to 8 segments here
(16115 x 8 x 3072 float32 = 1.6 GB); real features bring their own (up to 20 are used).
"""

import ml_collections

from jaxsvr import configs


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return configs.hgr(arg)
