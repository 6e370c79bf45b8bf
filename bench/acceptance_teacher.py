"""Acceptance bench: does vLLM's verifier (bf16) pick the tokens the drafters are judged on?

Run by the vLLM venv's Python in tests/vllm_server.py's ``vllm_env``: ``VERIFIER PROMPTS``
prints ``TEACHER {...}``. Each held-out row (prompt + the continuation transformers' float32
verifier wrote) is one prompt; vLLM's own top-1 at every continuation position (prompt
logprobs, teacher-forced) is compared with the token written there. Separates the verifier's
precision from the drafter's serving when vLLM's acceptance is below the offline agreement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(verifier: str, prompts_path: Path) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    held_out = json.loads(prompts_path.read_text())
    rows = [p + c for p, c in zip(held_out["prompts"], held_out["continuations"], strict=True)]
    llm = LLM(
        model=verifier, enforce_eager=True, dtype="bfloat16", max_model_len=512,
        enable_prefix_caching=False, seed=0,
    )  # fmt: skip
    # prompt_logprobs=1: each position holds the written token and vLLM's rank-1 token
    params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=1, detokenize=False)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=r) for r in rows], params, use_tqdm=False)
    same = positions = 0
    before_first_difference = []
    for row, prompt, output in zip(rows, held_out["prompts"], outputs, strict=True):
        first = None
        for position in range(len(prompt), len(row)):
            ranked = output.prompt_logprobs[position]
            top = next(token for token, logprob in ranked.items() if logprob.rank == 1)
            positions += 1
            same += top == row[position]
            if top != row[position] and first is None:
                first = position - len(prompt)
        before_first_difference.append(len(row) - len(prompt) if first is None else first)
    result = {
        "positions": positions,
        "same": same / positions,
        "before_first_difference": sum(before_first_difference) / len(before_first_difference),
    }
    print("TEACHER " + json.dumps(result), flush=True)


if __name__ == "__main__":  # vLLM's engine starts a spawned process: the guard is required
    main(sys.argv[1], Path(sys.argv[2]))
