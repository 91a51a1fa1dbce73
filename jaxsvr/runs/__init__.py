"""A trained run read back: its config, vocabulary and parameters checked
(`trained_run`), its test split embedded, cached and searched (`gallery`), and re-scored
under every relevance (`rescore`, the `rescore` job).
"""
