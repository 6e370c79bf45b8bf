"""Fixes to upstream training (drafter construction, trainer start-up), one module each."""
