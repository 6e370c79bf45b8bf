"""Stands for a release's ``scripts/train.py`` (test_drop_in.py): prints ``ARGS [its arguments]
BOOL``, whether upstream's ``load_and_preprocess_dataset`` is wrapped by the fixes."""

from __future__ import annotations

import sys

import speculators.data_generation.preprocessing as preprocessing

print("ARGS", sys.argv[1:], hasattr(preprocessing.load_and_preprocess_dataset, "__wrapped__"))
