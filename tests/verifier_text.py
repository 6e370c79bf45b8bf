"""A verifier's own text and states, by transformers' forward (test and bench helper, CPU).

What a drafter is trained on and judged by: greedy continuations the tiny verifier writes itself
(so a drafter can learn them), and for each position transformers' float32 forward of that
verifier: the hidden states of the layers EAGLE-3/DFlash read, the pre-norm last hidden state
the data pipeline stores (speculators 0.9.0 ``train/data.py:329``), and the verifier's greedy
next token. Those greedy tokens are the oracle of the training-target checks; nothing here is
code under test. ``spread_like_trained`` gives random weights the two traits that matter
(docs/upstream.md "Training"): final-norm weights away from zero, as a trained model's are, and
an lm_head peaked like a trained model's (entropy ~2.4 nats at hidden 128).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def spread_like_trained(model: Any, final_norm: Any, seed: int = 0) -> None:
    """Final-norm weights ~ N(0, 0.5) and lm_head ~ N(0, 0.35 * sqrt(128 / hidden))."""
    generator = torch.Generator().manual_seed(seed)
    head = model.lm_head.weight
    with torch.no_grad():
        final_norm.weight.copy_(torch.randn(final_norm.weight.shape, generator=generator) * 0.5)
        scale = 0.35 * (128 / head.shape[1]) ** 0.5
        head.copy_(torch.randn(head.shape, generator=generator) * scale)


def greedy_text(
    model: Any, count: int, prompt_len: int, new_tokens: int, vocab: int, seed: int = 0
) -> torch.Tensor:
    """``count`` rows of ``prompt_len`` random tokens (ids 3..vocab-1) followed by the model's
    greedy continuation of ``new_tokens``, each step a full forward (no cache to get wrong)."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (count, prompt_len), generator=generator)
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(input_ids=ids).logits[:, -1]
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    return ids


@dataclass
class VerifierStates:
    """transformers' forward of one row: what offline data holds, and the greedy tokens."""

    input_ids: torch.Tensor  # [seq]
    aux: torch.Tensor  # [seq, len(layers) * hidden], the layers' outputs concatenated
    pre_norm: torch.Tensor  # [seq, hidden], the input of the final norm
    greedy: torch.Tensor  # [seq], the verifier's argmax next token at each position


def verifier_states(model: Any, final_norm: Any, ids: torch.Tensor, layers: list[int]) -> list:
    """One ``VerifierStates`` per row of ``ids``; ``layers`` index transformers' hidden_states
    (0 is the embeddings, i the output of decoder layer i), as speculators' layer ids do."""
    captured: list[torch.Tensor] = []
    handle = final_norm.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            out = model(input_ids=ids, output_hidden_states=True)
    finally:
        handle.remove()
    aux = torch.cat([out.hidden_states[i] for i in layers], dim=-1)
    greedy = out.logits.argmax(-1)
    return [
        VerifierStates(ids[r], aux[r].float(), captured[0][r].float(), greedy[r])
        for r in range(ids.shape[0])
    ]
