"""Stage 4 — inputs: what the model reads, built from the annotations.

- `features`: the feature store (npy/npz memory-mapped; EPIC TBN pickles behind opt-in).
- `synthetic`, `synthetic_text`: synthetic clip and caption features from the classes.
- `text`: vocabulary, padded token ids, word vectors.
- `roles`: HGR's role graphs of captions.
- `windows`: ConTra's context windows of neighbouring clips.
- `splits`: both splits as arrays (`Splits`: train / test, vocabulary, class counts).
- `model_inputs`: `ModelInputs`, a model's view of a split: tables, windows, gathering
  on the devices or the host.
"""
