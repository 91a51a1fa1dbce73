"""Stage 0 — files: how annotation and feature files are opened and checked.

- `arrays`: safe .npy/.npz loading (header checked before reading; real dtypes only).
- `tables`: every CSV / JSON annotation file, with one-line errors (file, line, column).
- `literals`: list columns (`['a', 'b']`, `[1, 2]`) parsed without eval.
- `array_cache`: arrays cached beside a JSON manifest, used only when they agree.
- `json_text`: JSON output that every parser reads (non-finite numbers as null).
"""
