"""Stage 2 — annotations: dataset readers -> one `Annotations` (`load.Annotations`).

- `epic100`: EPIC-KITCHENS-100 retrieval CSVs (clips, sentences, class vocabularies).
- `kitchen`: a small built-in kitchen vocabulary and annotation generator (no downloads).
- `captioned`: caption rows of YouCook2 (`youcook2`), MSR-VTT (`msrvtt`) and ActivityNet
  Captions (`activitynet`) files.
- `caption_table`: any caption CSV as a `CaptionTable` (the proxy command line).
- `class_sets`: ragged verb/noun class sets (CSR), multi-caption aggregation (rho).
- `load`: `Annotations` and the EPIC-style sources (folder, built-in).

A new dataset gets a reader here, its name in `FORMATS` (`config.data.format`) and its
loader in `jaxsvr.train.pipeline.FORMATS`.
"""

FORMATS = ("epic100", "youcook2", "msrvtt", "activitynet")  # config.data.format
