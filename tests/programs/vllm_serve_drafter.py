"""Run by the vLLM venv's Python (tests/vllm_server.py ``vllm_env``, torchvision importable):
``vllm_serve_drafter.py VERIFIER DRAFTER METHOD STEPS``. ``vllm.LLM`` serves the verifier in bf16
with ``speculative_config={"method": METHOD, "model": DRAFTER, "num_speculative_tokens": STEPS}``
(prefix caching off: the hybrid model's cache path is Triton's) and decodes two prompts greedily;
prints one line ``SERVED {json}``: vLLM's own spec-decode counters, or ``{"refused": error}``."""

from __future__ import annotations

import json
import sys

PREFIX = "vllm:spec_decode_"


def main(verifier: str, drafter: str, method: str, steps: int) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    speculative = {"method": method, "model": drafter, "num_speculative_tokens": steps}
    try:
        llm = LLM(
            model=verifier, enforce_eager=True, dtype="bfloat16", max_model_len=256,
            disable_log_stats=False, enable_prefix_caching=False, seed=0,
            speculative_config=speculative,
        )  # fmt: skip
    except Exception as exc:  # the engine's refusal is the answer
        print("SERVED " + json.dumps({"refused": f"{type(exc).__name__}: {exc}"}), flush=True)
        return
    params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True, detokenize=False)
    prompts = [TokensPrompt(prompt_token_ids=list(range(10 + i, 30 + i))) for i in range(2)]
    llm.generate(prompts, params, use_tqdm=False)
    counts: dict[str, int] = {}
    for metric in llm.get_metrics():
        if metric.name.startswith(PREFIX) and hasattr(metric, "value"):
            name = metric.name[len(PREFIX) :]
            counts[name] = counts.get(name, 0) + int(metric.value)
    print("SERVED " + json.dumps(counts), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
