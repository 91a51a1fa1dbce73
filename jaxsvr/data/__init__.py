"""Annotation readers, feature stores, synthetic data and batch samplers.

- `epic100`: EPIC-KITCHENS-100 retrieval CSVs (clips, sentences, class vocabularies).
- `literals`: strict parsing of list columns, without eval.
- `kitchen`: a small built-in kitchen vocabulary and annotation generator (no downloads).
"""
