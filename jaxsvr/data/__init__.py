"""Annotation readers, feature stores, synthetic data and batch samplers.

- `epic100`: EPIC-KITCHENS-100 retrieval CSVs (clips, sentences, class vocabularies).
- `tables`: how every CSV / JSON annotation file is opened and checked (one-line errors).
- `literals`: strict parsing of list columns, without eval.
- `kitchen`: a small built-in kitchen vocabulary and annotation generator (no downloads).
- `synthetic`: synthetic RGB|Flow|Audio clip features from the class structure.
- `features`: the feature store (npy/npz memory-mapped; EPIC TBN pickles behind opt-in).
- `arrays`: safe .npy/.npz loading (header checked before reading; real dtypes only).
- `text`: tokenizer, vocabulary, word vectors, spaCy verb/noun words.
- `triplets`: offline triplet sampling and batches, a pure function of (seed, epoch, step).
- `dataset`: assembles train/test splits from `config.data`.
"""
