"""The speculators releases we test, declared once: status, the test matrix and the README's
support table read it. A release outside it still gets every fix whose target fits."""

from __future__ import annotations

#: release -> what its preprocessing looks like (fact sheet groups).
TESTED_RELEASES: dict[str, str] = {
    "0.5.0": "C: argparse script in git only; assistant-mask probe crashes on strict templates",
    "0.9.0": "G: typer prepare-data; renders through vLLM's /render",
}

#: Releases that cannot be tested here, and why.
UNTESTABLE_RELEASES: dict[str, str] = {
    "0.3.x": "speculators.data_generation imports vLLM at module level; vLLM cannot run here",
    "0.4.x": "speculators.data_generation imports vLLM at module level; vLLM cannot run here",
}
