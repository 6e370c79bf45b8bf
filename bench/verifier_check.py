"""Does vLLM's bf16 write the trained verifier's float32 text? (issue 52, item 1)

Run by the vLLM venv's Python in the environment of tests/vllm_server.py ``vllm_env``:
``VERIFIER`` prints one JSON object. ``vllm.LLM`` serves VERIFIER (bench/verifier_train.py's
folder) in bf16, eager, no speculation, and answers the held-out prompts of its
``heldout.json`` greedily (token ids in, token ids out, stopping at ``<|im_end|>``, at most as
many tokens as the trainer allowed); the result is the share of prompts whose reply equals
transformers' float32 reply token for token (``agrees``), with vLLM's replies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(verifier: Path) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    held = json.loads((verifier / "heldout.json").read_text())
    longest = max(map(len, held["float32"]))
    llm = LLM(model=str(verifier), enforce_eager=True, dtype="bfloat16", max_model_len=512,
              enable_prefix_caching=False, seed=0)  # fmt: skip
    params = SamplingParams(temperature=0.0, max_tokens=longest, stop_token_ids=[held["stop"]],
                            detokenize=False)  # fmt: skip
    prompts = [TokensPrompt(prompt_token_ids=ids) for ids in held["prompts"]]
    outputs = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params, use_tqdm=False)]
    agrees = sum(a == b for a, b in zip(outputs, held["float32"], strict=True)) / len(outputs)
    print("VERIFIER " + json.dumps({"agrees": agrees, "prompts": len(outputs), "vllm": outputs}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
