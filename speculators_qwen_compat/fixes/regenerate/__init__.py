"""Fixes of speculators 0.8+'s ``regenerate-responses`` command
(``speculators.cli.regenerate_responses``)."""
