"""Fixes to upstream's data preparation (``speculators.data_generation.preprocessing`` and the 0.8+
``prepare-data`` command), one module each."""
