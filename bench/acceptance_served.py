"""Acceptance bench, the user's view: ``speculators-qwen-compat acceptance`` on the served drafter.

vLLM 0.32 serves the trained composite Qwen3.6-class verifier (processor files included) with the
first case's fixes-on EAGLE-3 drafter as users serve it (``vllm serve --speculative-config``);
the command measures the held-out conversations (README step 8's flags); its figures are set
beside the increase of ``/metrics`` read around it by Prometheus' own parser
(tests/metrics_oracle.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import metrics_oracle
import vllm_server
from acceptance_run import ONE_SERVER, RELEASE_PYTHON, fail, release_env, run

MAX_MODEL_LEN = 512
FIGURES = ("drafts", "draft_tokens", "accepted_tokens")


def measure(verifier: Path, drafter: Path, steps: int, heldout: Path, work: Path) -> dict:
    """The command's JSON for the one endpoint, and whether each figure equals the counters'
    increase (``equals_counters``)."""
    speculative = {"method": "eagle3", "model": str(drafter), "num_speculative_tokens": steps}
    out = work / "acceptance-served.json"
    out.unlink(missing_ok=True)  # the command refuses to replace a file: this run's own
    args = [
        "vllm", "serve", str(verifier), "--max-model-len", str(MAX_MODEL_LEN),
        "--speculative-config", json.dumps(speculative),
        "--enforce-eager", "--dtype", "bfloat16", "--no-enable-prefix-caching",
    ]  # fmt: skip
    with ONE_SERVER, vllm_server.serve(args) as server:
        before = metrics_oracle.spec_counters(server.url)
        command = [str(RELEASE_PYTHON), "0.9.0", "-m", "speculators_qwen_compat", "acceptance",
                   "--endpoint", server.url, "--data", str(heldout), "--max-tokens", "64",
                   "--json", str(out)]  # fmt: skip
        printed = run(command, work / "logs" / "acceptance-served.log", release_env(True))
        after = metrics_oracle.spec_counters(server.url)
    (figures,) = json.loads(out.read_text())["endpoints"]
    if figures["drafts"] is None:
        fail(f"the acceptance command found no speculation on the served drafter ({out})")
    added = {name: after[name] - before[name] for name in FIGURES}
    positions = sorted(after["per_position"], key=int)
    per_position = [after["per_position"][p] - before["per_position"].get(p, 0) for p in positions]
    drafts = added["drafts"]
    derived = {  # vLLM's own definitions, from the oracle's counts
        "acceptance_rate": added["accepted_tokens"] / added["draft_tokens"],
        "mean_acceptance_length": 1 + added["accepted_tokens"] / drafts,
        "per_position": [n / drafts for n in per_position],
    }
    equal = all(figures[name] == added[name] for name in FIGURES)
    equal = equal and figures["per_position_accepted"] == per_position
    equal = equal and all(_close(figures[name], value) for name, value in derived.items())
    return {**figures, "equals_counters": equal, "table": printed.strip()}


def _close(ours: float | list[float], oracle: float | list[float]) -> bool:
    if isinstance(oracle, list):
        return len(ours) == len(oracle) and all(map(_close, ours, oracle))
    return abs(ours - oracle) <= 1e-9 * max(1.0, abs(oracle))
