"""The peer: SpecForge 0.2.0's data preparation on the bench's conversations, driven as its
trainer drives it (``training.assembly._prepare_prompts``): ``specforge.data.prompt_builder.
prepare_prompt_tasks`` -> ``load_dataset("json")`` -> ``data.preprocessing.build_eagle3_dataset``
with its registered ``qwen3.5`` template (there is no ``qwen3.6`` entry), ``num_proc`` workers,
at least one loss token, an Arrow cache folder of the run's own. Facts:
the project's SpecForge fact sheet (shared/reference/peer-specforge.md).

``python peer_specforge.py MODEL DATA OUTPUT SEQ_LENGTH WORKERS``, run in SpecForge's own
environment (`make specforge`; tools/release_python.sh specforge-0.2.0). DATA holds
``{"conversations": [OpenAI turns], "tools": [...]}`` rows, the form its data path reads. Writes
"ROWS TOKENS SUPERVISED_SPANS" to OUTPUT/count.txt (bench/count_tokens.py reads it); a run that
raises exits non-zero with SpecForge's own error, which the bad-rows probe reports.
"""

from __future__ import annotations

import sys
from pathlib import Path

from arrow_counts import counts
from specforge.data.prompt_builder import prepare_prompt_tasks
from transformers import AutoTokenizer

TEMPLATE = "qwen3.5"


def main() -> None:
    model, data, output, seq_length, workers = sys.argv[1:6]
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tasks = prepare_prompt_tasks(
        data,
        tokenizer,
        chat_template=TEMPLATE,
        max_length=int(seq_length),
        is_preformatted=False,
        train_only_last_turn=False,
        cache_dir=str(out / "cache"),
        cache_key="bench",
        num_proc=int(workers),
        min_loss_tokens=1,
    )
    # Counted from the Arrow rows it prepared (the rows its trainer reads lazily), vectorised:
    # reading them row by row through the sequence would time our counting, not its work.
    rows, tokens, spans = counts(tasks._dataset.with_format("arrow")[:])
    (out / "count.txt").write_text(f"{rows} {tokens} {spans}\n")


if __name__ == "__main__":
    main()
