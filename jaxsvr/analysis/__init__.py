"""Analyses of trained runs and training: ConTra's window attention and rank changes
(`contra`), the relevance of the negatives batch mining picks (`mining`), the margins a
triplet loss uses (`margin`).
"""
