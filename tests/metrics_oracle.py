"""vLLM's speculative-decoding counters as Prometheus' own parser reads them: the tests' oracle.

``spec_counters(url)`` fetches ``url/metrics`` and parses it with ``prometheus_client``'s text
parser in the vLLM venv (vLLM serves its counters through that library; the package under test
parses the text itself, speculators_qwen_compat/acceptance/counters.py, and must agree),
summing every engine's series: ``{"drafts", "draft_tokens", "accepted_tokens", "per_position":
{position: count}}``.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import vllm_server

_PARSE = """
import json, sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=30).read().decode()
out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0, "per_position": {}}
for family in text_string_to_metric_families(text):
    for sample in family.samples:
        name = sample.name.removeprefix("vllm:spec_decode_num_")
        if name == "accepted_tokens_per_pos_total":
            at = sample.labels["position"]
            out["per_position"][at] = out["per_position"].get(at, 0.0) + sample.value
        elif name in ("drafts_total", "draft_tokens_total", "accepted_tokens_total"):
            out[name.removesuffix("_total")] += sample.value
print(json.dumps(out))
"""


def spec_counters(url: str) -> dict[str, Any]:
    """The counters of the vLLM at ``url`` (without ``/v1``) now, summed over engines."""
    done = subprocess.run(
        [str(vllm_server.VLLM_PYTHON), "-c", _PARSE, url], capture_output=True, text=True,
        timeout=60, env=vllm_server.vllm_env(vllm_server.ROOT / "build" / "metrics-oracle"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    out["per_position"] = {int(k): v for k, v in out["per_position"].items()}
    return out
