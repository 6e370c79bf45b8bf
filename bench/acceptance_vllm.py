"""Acceptance bench, step 4: a real serving engine's acceptance of a drafter (vLLM 0.32 on CPU).

Run by the vLLM venv's Python in the environment of tests/vllm_server.py ``vllm_env`` (its
sitecustomize answers vLLM's version lookup and makes torchvision importable for the Qwen3.5
model): ``VERIFIER DRAFTER|none PROMPTS STEPS [METHOD]`` prints one JSON object. ``vllm.LLM``
serves the verifier in bf16, eager, with ``speculative_config={"method": METHOD (eagle3 or
dflash), "model": DRAFTER, "num_speculative_tokens": STEPS}`` (the drafter folder as given),
or without speculation for ``none``; greedy decoding of the held-out prompts (token ids, no
detokenisation: the tiny tokenizer does not cover the whole vocabulary), each as many new tokens
as its continuation in bench/acceptance_data.py (the verifier's reply, to ``<|im_end|>``).
Counters are vLLM's own totals from
``llm.get_metrics()`` (the "SpecDecoding metrics" log line is an interval snapshot):
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens``,
``..._num_accepted_tokens_per_pos``. The output token ids are printed too, so the caller can
check that speculation leaves greedy output unchanged. A drafter vLLM refuses to load prints
``{"refused": ERROR}`` instead (the engine's own error line is in the log; the caller reads it).

Prefix caching is off: with it and any speculative method the hybrid model takes a Triton path
(vLLM's ``mamba_utils``), and CPU has no Triton (tests/vllm_server.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PREFIX = "vllm:spec_decode_"


def counters(metrics: list) -> dict:
    out: dict = {}
    for metric in metrics:
        if not metric.name.startswith(PREFIX):
            continue
        name = metric.name[len(PREFIX) :]
        if hasattr(metric, "values"):  # a vector: one count per draft position
            out[name] = [int(v) for v in metric.values]
        else:
            out[name] = out.get(name, 0) + int(metric.value)
    return out


def main(verifier: str, drafter: str, prompts_path: Path, steps: int, method: str) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    served = json.loads(prompts_path.read_text())
    speculative = None
    if drafter != "none":
        speculative = {"method": method, "model": drafter, "num_speculative_tokens": steps}
    try:
        llm = LLM(
            model=verifier, enforce_eager=True, dtype="bfloat16", max_model_len=512,
            disable_log_stats=False, enable_prefix_caching=False, seed=0,
            speculative_config=speculative,
        )  # fmt: skip
    except Exception as exc:  # a drafter vLLM will not load: a result, not a fault of the bench
        print("ACCEPTANCE " + json.dumps({"refused": f"{type(exc).__name__}: {exc}"}), flush=True)
        return
    params = [
        SamplingParams(temperature=0.0, max_tokens=len(reply), ignore_eos=True, detokenize=False)
        for reply in served["continuations"]
    ]
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in served["prompts"]]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    result = counters(llm.get_metrics())
    result["outputs"] = [list(o.outputs[0].token_ids) for o in outputs]
    print("ACCEPTANCE " + json.dumps(result), flush=True)


if __name__ == "__main__":
    method = sys.argv[5] if len(sys.argv) > 5 else "eagle3"
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]), method)
