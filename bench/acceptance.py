"""``make bench-acceptance``: does a drafter trained with the fixes predict its verifier better?

Target: speculators 0.9.0 and 0.8.1 (their own ``python -m speculators.train``, on CPU through
the test-only shim tests/cpu_trainer.py), tiny Qwen3.5 verifiers trained here on a learnable chat
corpus (bench/verifier.py: once per machine); why: the fixes change the targets a drafter learns
from (docs/training.md), and loss curves cannot show it. For each case the same drafter is trained
twice, same data, seed and steps: fixes off (``SPECULATORS_QWEN_COMPAT=0 python -m
speculators.train``: upstream as shipped) and on (``python -m speculators_qwen_compat.train``),
then judged on held-out replies the verifier wrote itself:

1. bench/acceptance_data.py: the corpus's prompts, the verifier's replies, offline hidden states
   (once per verifier); for the cases on vLLM's states, bench/acceptance_states.py: the same
   rows' states as ``generate-offline-data`` gets them from vLLM serving the verifier in bf16;
2. training, ``--hidden-states-dtype float32`` (bf16 autocast is ~10x slower on CPU);
3. bench/acceptance_eval.py: targets' agreement, the drafter's top-1 agreement at each
   speculative step, mean accepted length (offline: every position of the held-out replies);
4. bench/acceptance_vllm.py: vLLM 0.32 on CPU serves the verifier with each drafter as the
   trainer saved it (``eagle3``, ``dflash``); vLLM's own counters (it drafts only where its
   schedule lands). A folder vLLM refuses (upstream's DFlash keeps the verifier's
   ``mrope_section``) is recorded as refused and counted on a copy without the M-RoPE keys (what
   the served_rope fix saves), so the off/on comparison still shows the verifier_norm fix.

Cases (``CASES``): EAGLE-3 on the dense verifier (0.9.0), DFlash on the MoE verifier (0.9.0,
whose norm-type list lacks ``qwen3_5_moe``) and on the dense one (0.9.0: off and on are one
drafter), on transformers' float32 states; MoE DFlash on vLLM's states (0.9.0 and 0.8.1, which
builds ``Qwen3RMSNorm``). Then the on-policy arm (``ARM``, bench/acceptance_onpolicy.py:
placeholder vs regenerated replies), the fine-tune arm (the first case's fixes-off drafter
fine-tuned with the fixes on, ``--from-pretrained``) and the user's view (bench/
acceptance_served.py: the acceptance command on the served composite verifier). Writes the
tables between the markers of docs/training.md and bench/RESULTS.md. ``--quick``: cases 1 and
2 at small sizes, printed only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.append(str(ROOT / "tools"))  # doc_block
sys.path.append(str(ROOT))  # speculators_qwen_compat.training.served_drafter (pure Python)

import acceptance_onpolicy  # noqa: E402
import acceptance_served  # noqa: E402
import acceptance_states  # noqa: E402
import cpu_trainer  # noqa: E402
import doc_block  # noqa: E402
import verifier as bench_verifier  # noqa: E402
import vllm_server  # noqa: E402
from acceptance_run import ONE_SERVER, RELEASE_PYTHON, fail, release_env, run, tagged  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
#: The page that shows the acceptance tables (block ``acceptance``, tools/doc_block.py).
DOC = ROOT / "docs" / "training.md"
BLOCK = "acceptance"
#: The DFlash cases trained on vLLM's states, in a block of their own (``--cases vllm-states``).
STATES_BLOCK = "acceptance-vllm-states"
VLLM_GROUP = "vllm-states"
HEADINGS = {
    BLOCK: "## Acceptance (`make bench-acceptance`)",
    "acceptance-finetune": "## A mis-scaled drafter fine-tuned (`make bench-acceptance`)",
    STATES_BLOCK: "## Acceptance on vLLM's states (`make bench-acceptance`)",
}
MASK_TOKEN_ID = 1210  # the first id past the tiny tokenizer's, as upstream would add <|MASK|>
AUX_LAYERS = ["2", "4", "5"]  # bench/acceptance_data.py AUX_LAYERS
LAST_LAYER = 8  # tests/pipeline/models.py NUM_LAYERS: its pre-norm output is stored after them
KEYS = ("off", "on")
HEADERS = ("fixes off (upstream)", "fixes on")
#: Conversations of verifier text (training, held-out), reply tokens at most, epochs, packing.
FULL = {"train": 480, "heldout": 48, "new": 64, "epochs": 4, "seq_len": 512}
QUICK = {"train": 160, "heldout": 16, "new": 64, "epochs": 2, "seq_len": 512}
DATA_RELEASE = "0.9.0"  # whose transformers builds the verifiers and their data
#: the scripts that make a verifier's data (and the arm's): data made by others is made anew
DATA_SCRIPTS_HASH = hashlib.sha256(b"".join(
    (ROOT / "bench" / name).read_bytes()
    for name in ("acceptance_data.py", "acceptance_chat.py", "verifier_corpus.py")
)).hexdigest()[:12]  # fmt: skip


@dataclass(frozen=True)
class Case:
    name: str
    release: str
    verifier: str  # tests/pipeline/models.py kind
    drafter: str
    steps: int  # drafts per speculation: EAGLE-3 ttt steps, DFlash block size - 1
    flags: tuple[str, ...] = ()
    #: whose hidden states it trains on: transformers' float32 forward, or vLLM's (bf16,
    #: generate-offline-data: bench/acceptance_states.py)
    states: str = "transformers"


DFLASH = ("--block-size", "8", "--max-anchors", "32")
VLLM_STATES = "vllm"
EAGLE3 = ("--ttt-steps", "3")
CASES = (
    Case("EAGLE-3, dense Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_text", "eagle3", 3, EAGLE3),
    Case("DFlash, MoE Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_moe_text", "dflash", 7, DFLASH),
    Case("DFlash, dense Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_text", "dflash", 7, DFLASH),
    Case("DFlash, MoE Qwen3.5, 0.9.0, vLLM's states", "0.9.0", "qwen3_5_moe_text", "dflash", 7,
         DFLASH, VLLM_STATES),
    Case("DFlash, MoE Qwen3.5, 0.8.1, vLLM's states", "0.8.1", "qwen3_5_moe_text", "dflash", 7,
         DFLASH, VLLM_STATES),
)  # fmt: skip
#: the on-policy arm (bench/acceptance_onpolicy.py): the first case's drafter, fixes on
ARM = Case(
    "EAGLE-3, placeholder vs regenerated replies, dense Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_text",
    "eagle3", 3, EAGLE3,
)  # fmt: skip
ARM_HEADERS = ("placeholder replies (as given)", "replies regenerated by the verifier")
EQUAL_HEADERS = ("placeholder replies (as given)", "regenerated, trained for the same steps")
ONPOLICY = "onpolicy"
QUICK_CASES = ("1", "2")  # --quick: EAGLE-3 and MoE DFlash, at QUICK sizes
#: the repair arm: the first case's fixes-off (mis-scaled) drafter fine-tuned with the fixes on
FINETUNE = "finetune"
FINETUNE_BLOCK = "acceptance-finetune"
FROM_PRETRAINED = "--from-pretrained"
FINETUNE_EPOCHS = 1
FINETUNE_HEADERS = (
    "trained with the fixes off (mis-scaled), as it is",
    "fine-tuned from it with the fixes on",
    "retrained from scratch, fixes on",
)


def make_data(verifier: str, work: Path, size: dict, vllm_states: bool = False) -> Path:
    """The trained verifier (bench/verifier.py, once per machine) and its data, once per verifier
    kind (both releases read the same files); with ``vllm_states``, the training rows' states as
    vLLM extracts them too."""
    out = work / f"data-{verifier}"
    trained = bench_verifier.trained(verifier, work / "logs")
    made = json.loads((out / "data.json").read_text()) if (out / "data.json").is_file() else {}
    wanted = {"verifier": str(trained), "train": size["train"], "heldout": size["heldout"],
              "new": size["new"], "made_by": DATA_SCRIPTS_HASH}  # fmt: skip
    if {k: made.get(k) for k in wanted} != wanted:
        # another verifier's or size's data (the on-policy arm's too): made anew
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(work / "onpolicy", ignore_errors=True)
        numbers = [size["train"], size["heldout"], size["new"]]
        command = [str(RELEASE_PYTHON), DATA_RELEASE, str(ROOT / "bench" / "acceptance_data.py"),
                   str(trained), str(out), *map(str, numbers)]  # fmt: skip
        run(command, work / "logs" / f"{out.name}.log", release_env(True))
        made = json.loads((out / "data.json").read_text())
        (out / "data.json").write_text(json.dumps({**made, "made_by": DATA_SCRIPTS_HASH}))
    if vllm_states:
        layer_ids = [*map(int, AUX_LAYERS), LAST_LAYER]
        acceptance_states.vllm_states(out, work, layer_ids)
    return out


def last_checkpoint(save: Path) -> Path:
    saved = [p for p in save.iterdir() if p.name.isdigit() and (p / "config.json").is_file()]
    if not saved:
        fail(f"training saved no checkpoint under {save}")
    return max(saved, key=lambda p: int(p.name))


def train(
    case: Case, data: Path, work: Path, fixes: bool, size: dict, source: Path | None = None,
    tag: str = "", extra: tuple[str, ...] = (),
) -> dict:  # fmt: skip
    """Train ``case``'s drafter on ``source`` (default ``data/train``), judge it on
    ``data/heldout.pt``; ``tag`` names the run (default: the fixes' state)."""
    label = f"{case.drafter}-{case.verifier}-{case.release}-{tag or ('on' if fixes else 'off')}"
    if case.states == VLLM_STATES:
        label += "-vllm-states"
        source = source or data / acceptance_states.FOLDER
    save, metrics = work / f"ckpt-{label}", work / f"metrics-{label}.jsonl"
    metrics.unlink(missing_ok=True)
    shutil.rmtree(save, ignore_errors=True)  # an earlier run's epochs would be judged as this one's
    module = "speculators_qwen_compat.train" if fixes else "speculators.train"
    # a fine-tune takes its layers from the folder: upstream refuses --num-layers beside it
    layers = () if FROM_PRETRAINED in extra else ("--num-layers", "1")
    command = [
        str(RELEASE_PYTHON), case.release, "-m", module,
        "--verifier-name-or-path", str((data / "verifier").resolve()),
        "--data-path", str(source or data / "train"), "--save-path", str(save),
        "--speculator-type", case.drafter, *layers,
        "--target-layer-ids", *AUX_LAYERS, "--mask-token-id", str(MASK_TOKEN_ID),
        "--loss-implementation", "eager", "--draft-attn-impl", "sdpa",
        "--total-seq-len", str(size["seq_len"]), "--num-workers", "0", "--seed", "42",
        "--epochs", str(size["epochs"]), "--hidden-states-dtype", "float32",
        "--log-dir", str(work / "logs" / label), "--no-resume-from-checkpoint", *case.flags,
        # AdamW, not the default Muon: Muon's Newton-Schulz iterations took ~2/3 of a CPU step
        "--optimizer", "adamw", *extra,
    ]  # fmt: skip
    env = release_env(fixes, CPU_TRAINER_METRICS=str(metrics))
    env["PYTHONPATH"] = cpu_trainer.subprocess_pythonpath(env["PYTHONPATH"])
    started = time.monotonic()
    run(command, work / "logs" / f"train-{label}.log", env)
    seconds = time.monotonic() - started
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    steps = [r for r in records if "train" in r]
    if not steps:
        fail(f"training {label} logged no step (metrics {metrics})")
    last = steps[-1]["train"]
    loss = last.get("loss", last.get("loss_sum"))
    checkpoint = last_checkpoint(save)
    evaluate = [str(ROOT / "bench" / "acceptance_eval.py"), str(checkpoint),
                str(data / "heldout.pt"), case.drafter, str(case.steps)]  # fmt: skip
    runner = ["-m", "speculators_qwen_compat.run"] if fixes else []
    out = run([str(RELEASE_PYTHON), case.release, *runner, *evaluate],
              work / "logs" / f"eval-{label}.log", release_env(fixes))  # fmt: skip
    result = json.loads(out.strip().splitlines()[-1])
    result.update(loss=loss, steps=len(steps), seconds=round(seconds, 1), checkpoint=checkpoint)
    return result


def serve(data: Path, drafter: Path | None, steps: int, work: Path, method: str = "eagle3") -> dict:
    label = drafter.parent.name if drafter else f"no-speculation-{data.name}"
    command = [str(vllm_server.VLLM_PYTHON), str(ROOT / "bench" / "acceptance_vllm.py"),
               str((data / "verifier").resolve()), str(drafter or "none"),
               str(data / "heldout_prompts.json"), str(steps), method]  # fmt: skip
    started = time.monotonic()
    result = json.loads(run_in_vllm(command, work / "logs" / f"vllm-{label}.log", "ACCEPTANCE"))
    result["seconds"] = round(time.monotonic() - started, 1)
    if "refused" in result:  # the engine's own error line, from its process's log
        log = (work / "logs" / f"vllm-{label}.log").read_text(errors="replace").splitlines()
        cause = [x for x in log if "Error: " in x and "Engine core initialization" not in x]
        result["refused"] = (cause[-1] if cause else result["refused"]).split("] ")[-1].strip()
    return result


#: one no-speculation run per verifier's data, whichever case asks first
_BASELINES: dict[Path, threading.Lock] = defaultdict(threading.Lock)
_TEACHERS: dict[Path, threading.Lock] = defaultdict(threading.Lock)


def without_speculation(data: Path, work: Path) -> dict:
    """vLLM's greedy replies to the held-out prompts without speculation (once per data
    folder, kept beside it): what each drafter's served text is compared with."""
    kept = data / "vllm_baseline.json"
    with _BASELINES[data]:
        if not kept.is_file():
            kept.write_text(json.dumps(serve(data, None, 1, work)))
    return json.loads(kept.read_text())


def verifier_agreement(data: Path, work: Path) -> dict:
    """Teacher-forced, how often vLLM's bf16 verifier's top-1 is the token of the held-out text
    (bench/acceptance_teacher.py); once per verifier (kept beside its data)."""
    kept = data / "vllm_teacher.json"
    with _TEACHERS[data]:  # the cases on one verifier's data ask side by side
        if not kept.is_file():
            script = ROOT / "bench" / "acceptance_teacher.py"
            verifier, prompts = (data / "verifier").resolve(), data / "heldout_prompts.json"
            command = [str(vllm_server.VLLM_PYTHON), str(script), str(verifier), str(prompts)]
            log = work / "logs" / f"teacher-{data.name}.log"
            kept.write_text(run_in_vllm(command, log, "TEACHER"))
    return json.loads(kept.read_text())


def run_in_vllm(command: list[str], log: Path, tag: str) -> str:
    """Run a bench script in the vLLM venv, one vLLM at a time; the JSON of its ``TAG`` line."""
    # vLLM's engine socket is <scratch>/<uuid4>: a Unix socket path holds 107 bytes, so the
    # scratch folder is a short one of the system's, not one under a checkout of any depth
    with ONE_SERVER, tempfile.TemporaryDirectory(prefix="sqc-vllm-") as scratch:
        env = vllm_server.vllm_env(Path(scratch), torchvision=True)
        out = run(command, log, env, result_tag=tag)
    result = tagged(out, tag)
    if result is None:
        fail(f"{command[1]} printed no {tag} line (log {log})")
    return result


def without_m_rope(checkpoint: Path) -> Path:
    """A copy of a saved drafter whose rope parameters lose their M-RoPE keys (the edit the
    served_rope fix makes when it saves), for counting a drafter vLLM refuses as saved."""
    from speculators_qwen_compat.training import served_drafter

    copy = checkpoint.parent.parent / f"{checkpoint.parent.name}-without-mrope" / checkpoint.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(checkpoint, copy)
    config = json.loads((copy / "config.json").read_text())
    layer = config["transformer_layer_config"]
    for field in served_drafter.ROPE_FIELDS:
        if isinstance(layer.get(field), dict):
            layer[field] = served_drafter.served_rope(layer[field])
    (copy / "config.json").write_text(json.dumps(config, indent=2))
    return copy


def serve_as_saved(data: Path, checkpoint: Path, case: Case, work: Path) -> dict:
    """vLLM's counters for the folder as saved; if vLLM refuses it, the refusal and the counters
    of the copy without M-RoPE keys."""
    method = "eagle3" if case.drafter == "eagle3" else "dflash"
    result = serve(data, checkpoint, case.steps, work, method)
    if "refused" not in result:
        return result
    counted = serve(data, without_m_rope(checkpoint), case.steps, work, method)
    if "refused" in counted:
        fail(f"vLLM refused {checkpoint} without its M-RoPE keys too: {counted['refused']}")
    counted["refused_as_saved"] = result["refused"]
    return counted


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two greedy outputs share before their first difference."""
    shorter = min(len(a), len(b))
    return next((i for i in range(shorter) if a[i] != b[i]), shorter)


def vllm_figures(served: dict, baseline: dict, continuations: list) -> dict:
    drafts, proposed = served.get("num_drafts", 0), served.get("num_draft_tokens", 0)
    accepted = served.get("num_accepted_tokens", 0)
    per_pos = served.get("num_accepted_tokens_per_pos", [])
    return {
        "refused_as_saved": served.get("refused_as_saved", ""),
        "per_pos_counts": per_pos,
        "drafted": proposed,
        "accepted": accepted,
        "drafts": drafts,
        "acceptance": accepted / proposed if proposed else 0.0,
        "accepted_per_draft": accepted / drafts if drafts else 0.0,
        "per_pos": [n / drafts if drafts else 0.0 for n in per_pos],
        "unchanged": sum(
            a == b for a, b in zip(served["outputs"], baseline["outputs"], strict=True)
        ),
        "same_prefix": sum(
            common_prefix(a, b) for a, b in zip(served["outputs"], baseline["outputs"], strict=True)
        )
        / max(len(continuations), 1),
        "as_transformers": sum(
            a == b for a, b in zip(served["outputs"], continuations, strict=True)
        ),
        "rows": len(continuations),
        "new": max((len(c) for c in continuations), default=0),
        "seconds": served["seconds"],
    }


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def table(results: list[dict]) -> str:
    lines = []
    for r in results:
        case, (key_off, key_on), headers = r["case"], r.get("keys", KEYS), r.get("headers", HEADERS)
        off, on = r[key_off], r[key_on]
        steps = (
            f"{off['steps']}"
            if off["steps"] == on["steps"]
            else f"{off['steps']} and {on['steps']}"
        )
        lines += [
            f"| {case.name}, trained verifier ({steps} steps, {off['anchors']:,} held-out "
            "anchors) "
            f"| {headers[0]} | {headers[1]} |",
            "|---|---|---|",
            f"| training targets' argmax = the verifier's greedy token | {pct(off['targets'])} "
            f"| {pct(on['targets'])} |",
        ]
        for s in range(case.steps if case.drafter == "eagle3" else 3):
            what = f"step {s + 1}" if case.drafter == "eagle3" else f"block slot {s + 1}"
            lines.append(
                f"| drafter top-1 agreement, {what} (offline, every position) "
                f"| {pct(off['top1_per_step'][s])} | {pct(on['top1_per_step'][s])} |"
            )
        lines += [
            f"| mean accepted length of {case.steps} drafts (offline) "
            f"| {off['accepted_length']:.3f} | {on['accepted_length']:.3f} |",
            f"| final training loss | {off['loss']:.2f} | {on['loss']:.2f} |",
            f"| training wall time | {off['seconds']:.0f} s | {on['seconds']:.0f} s |",
        ]
        if "training_data" in r:
            d_off, d_on = (r["training_data"][k] for k in (key_off, key_on))
            lines.append(
                f"| training data: rows, tokens, supervised tokens | {d_off['rows']:,}, "
                f"{d_off['tokens']:,}, {d_off['supervised']:,} | {d_on['rows']:,}, "
                f"{d_on['tokens']:,}, {d_on['supervised']:,} |"
            )
        if "loop" in off:  # DFlash: vLLM's schedule offline (bench/acceptance_eval.py)
            loff, lon = off["loop"], on["loop"]
            lines += [
                "| offline on vLLM's schedule (each block anchored after the accepted tokens "
                "and the correction, float32 text): acceptance rate (accepted / drafted tokens, "
                f"{loff['drafts']:,} and {lon['drafts']:,} drafts) "
                f"| {pct(loff['accepted'] / max(loff['drafted'], 1))} "
                f"| {pct(lon['accepted'] / max(lon['drafted'], 1))} |",
                "| the same, accepted tokens per draft position | "
                f"{', '.join(map(str, loff['per_position']))} "
                f"| {', '.join(map(str, lon['per_position']))} |",
            ]
        if f"vllm_{key_off}" in r:
            voff, von = r[f"vllm_{key_off}"], r[f"vllm_{key_on}"]
            if voff["refused_as_saved"] or von["refused_as_saved"]:
                lines.append(
                    "| vLLM loads the folder as the trainer saved it (refused: counted below on a "
                    "copy without the M-RoPE keys) | "
                    + " | ".join(
                        f"no: {v['refused_as_saved']}" if v["refused_as_saved"] else "yes"
                        for v in (voff, von)
                    )
                    + " |"
                )
            lines += [
                f"| vLLM acceptance rate (accepted / drafted tokens, {voff['drafts']:,} and "
                f"{von['drafts']:,} drafts) | {pct(voff['acceptance'])} "
                f"| {pct(von['acceptance'])} |",
                "| vLLM mean acceptance length (1 + accepted / drafts; at most "
                f"{case.steps + 1}) | {1 + voff['accepted_per_draft']:.2f} "
                f"| {1 + von['accepted_per_draft']:.2f} |",
                "| vLLM per-position acceptance rate (accepted at position i / drafts) | "
                f"{', '.join(pct(x) for x in voff['per_pos'])} "
                f"| {', '.join(pct(x) for x in von['per_pos'])} |",
                f"| vLLM drafts, drafted tokens, accepted tokens | {voff['drafts']:,}, "
                f"{voff['drafted']:,}, {voff['accepted']:,} | {von['drafts']:,}, "
                f"{von['drafted']:,}, {von['accepted']:,} |",
                f"| vLLM greedy output = without speculation (rows) | {voff['unchanged']}/"
                f"{voff['rows']} | {von['unchanged']}/{von['rows']} |",
                "| the same, tokens before the first difference (mean over rows, replies of at "
                f"most {voff['new']} tokens; bf16: "
                "a draft's verification batches tokens, so rounding differs from one-token "
                f"steps and near-tied logits flip) | {voff['same_prefix']:.1f} "
                f"| {von['same_prefix']:.1f} |",
            ]
        if "teacher" in r:  # one verifier for both columns
            t = r["teacher"]
            lines.append(
                "| vLLM's bf16 verifier, teacher-forced on the held-out text: its top-1 = the "
                f"token written there ({t['positions']:,} positions; tokens before the first "
                f"difference, mean) | {pct(t['same'])} ({t['before_first_difference']:.1f}) "
                f"| {pct(t['same'])} ({t['before_first_difference']:.1f}) |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def run_case(case: Case, data: Path, work: Path, size: dict) -> dict:
    """The same drafter trained with the fixes off and on (bench/acceptance_data.py's text)."""
    trainers = {key: partial(train, case, data, work, key == "on", size) for key in KEYS}
    result = train_and_judge(case, data, work, trainers, {"case": case})
    if case.states == VLLM_STATES:
        result["teacher"] = verifier_agreement(data, work)
    return result


def run_arm(data: Path, work: Path, size: dict) -> dict:
    """The on-policy arm: the same drafter, fixes on, trained on the user's placeholder replies
    and on the verifier's own (bench/acceptance_onpolicy.py), judged on held-out chat prompts."""
    verifier = (data / "verifier").resolve()
    heldout, sources = acceptance_onpolicy.build(verifier, work, size)
    keys = acceptance_onpolicy.KEYS
    trainers = {key: partial(train, ARM, heldout, work, True, size, sources[key]["train"], key)
                for key in keys}  # fmt: skip
    counts = {key: {k: v for k, v in sources[key].items() if k != "train"} for key in keys}
    result = {"case": ARM, "keys": keys, "headers": ARM_HEADERS, "training_data": counts}
    result = train_and_judge(ARM, heldout, work, trainers, result)
    return [result, equal_steps(result, heldout, work, size, sources)]


def run_finetune(first: dict, data: Path, work: Path, size: dict) -> dict:
    """The first case's mis-scaled drafter (fixes off) fine-tuned with the fixes on for
    ``FINETUNE_EPOCHS`` epochs (``python -m speculators_qwen_compat.train --from-pretrained``, as
    docs/training.md tells users), judged like the others beside the drafter as it was and the
    one retrained from scratch."""
    case = first["case"]
    source = first["off"]["checkpoint"]
    extra = (FROM_PRETRAINED, str(source), "--epochs", str(FINETUNE_EPOCHS))
    tuned = train(case, data, work, True, size, tag="finetuned", extra=extra)
    result = {"case": case, "off": first["off"], "finetuned": tuned, "on": first["on"]}
    if "baseline" in first:
        served = json.loads((data / "heldout_prompts.json").read_text())["continuations"]
        counted = serve_as_saved(data, tuned["checkpoint"], case, work)
        result["vllm_finetuned"] = vllm_figures(counted, first["baseline"], served)
        result["vllm_off"], result["vllm_on"] = first["vllm_off"], first["vllm_on"]
    return result


def finetune_table(r: dict) -> str:
    """The repair arm's table: one column per drafter."""
    keys = ("off", "finetuned", "on")
    runs = [r[k] for k in keys]
    served = [r.get(f"vllm_{k}") for k in keys]
    case = r["case"]

    def row(name: str, cells: list[str]) -> str:
        return f"| {name} | " + " | ".join(cells) + " |"

    lines = [
        row(f"{case.name}, trained verifier: a drafter that learned mis-scaled targets",
            list(FINETUNE_HEADERS)),
        "|---|---|---|---|",
        row("training steps", [f"{x['steps']}" for x in runs]),
        row("training targets' argmax = the verifier's greedy token",
            [pct(x["targets"]) for x in runs]),
        row(f"mean accepted length of {case.steps} drafts (offline)",
            [f"{x['accepted_length']:.3f}" for x in runs]),
    ]  # fmt: skip
    if all(served):
        lines += [
            row("vLLM acceptance rate (accepted / drafted tokens)",
                [pct(v["acceptance"]) for v in served]),
            row(f"vLLM mean acceptance length (1 + accepted / drafts; at most {case.steps + 1})",
                [f"{1 + v['accepted_per_draft']:.2f}" for v in served]),
            row("vLLM per-position acceptance rate (accepted at position i / drafts)",
                [", ".join(pct(x) for x in v["per_pos"]) for v in served]),
        ]  # fmt: skip
    return "\n".join(lines)


def equal_steps(first: dict, heldout: Path, work: Path, size: dict, sources: dict) -> dict:
    """The regenerated set trained for the placeholder's number of steps (``--max-steps``):
    placeholder vs regenerated at equal training steps, judged the same way."""
    placeholder, regenerated = acceptance_onpolicy.KEYS
    steps = first[placeholder]["steps"]
    tag = f"{regenerated}-{steps}-steps"
    result = {"case": ARM, "keys": (placeholder, tag), "headers": EQUAL_HEADERS,
              placeholder: first[placeholder], "training_data": {
                  placeholder: first["training_data"][placeholder],
                  tag: first["training_data"][regenerated]}}  # fmt: skip
    # upstream's trainer stops only the epoch that reaches --max-steps (0.9.0 trainer.py
    # run_training): each later epoch runs one more step, so the epochs are cut to those needed
    per_epoch = first[regenerated]["steps"] / size["epochs"]
    epochs = str(math.ceil(steps / per_epoch))
    result[tag] = train(ARM, heldout, work, True, size, sources[regenerated]["train"], tag,
                        ("--max-steps", str(steps), "--epochs", epochs))  # fmt: skip
    if result[tag]["steps"] != steps:
        fail(f"{tag} trained {result[tag]['steps']} steps, not {steps}: not equal steps")
    shown = {k: v for k, v in result[tag].items() if k != "checkpoint"}
    print(f"{ARM.name}, {tag}: {json.dumps(shown)}", flush=True)
    if "baseline" in first:
        served = json.loads((heldout / "heldout_prompts.json").read_text())["continuations"]
        counted = serve_as_saved(heldout, result[tag]["checkpoint"], ARM, work)
        result[f"vllm_{placeholder}"] = first[f"vllm_{placeholder}"]
        result[f"vllm_{tag}"] = vllm_figures(counted, first["baseline"], served)
    return result


def train_and_judge(
    case: Case, data: Path, work: Path, trainers: dict[str, Callable[[], dict]], result: dict
) -> dict:
    """Both trainings side by side (and vLLM without speculation beside them), then vLLM with
    each drafter side by side: independent processes."""
    served_by_vllm = case.drafter in ("eagle3", "dflash")
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = {key: pool.submit(trainer) for key, trainer in trainers.items()}
        baseline = pool.submit(without_speculation, data, work) if served_by_vllm else None
        for key in runs:
            result[key] = runs[key].result()
            shown = {k: v for k, v in result[key].items() if k != "checkpoint"}
            print(f"{case.name}, {key}: {json.dumps(shown)}", flush=True)
        if baseline is not None:
            result["baseline"] = baseline.result()
            served = json.loads((data / "heldout_prompts.json").read_text())["continuations"]
            counts = {k: pool.submit(serve_as_saved, data, result[k]["checkpoint"], case, work)
                      for k in runs}  # fmt: skip
            for key in runs:
                result[f"vllm_{key}"] = vllm_figures(
                    counts[key].result(), baseline.result(), served
                )
                print(f"vLLM, {case.name}, {key}: {json.dumps(result[f'vllm_{key}'])}", flush=True)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run at small sizes")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "acceptance")
    parser.add_argument(
        "--cases", default="",
        help=f"comma list of case numbers (1-based), '{ONPOLICY}' and/or '{VLLM_GROUP}'",
    )  # fmt: skip
    parser.add_argument(
        "--no-write", action="store_true", help="print only (--cases and --quick always do)"
    )
    parser.add_argument(
        "--jobs", type=int, default=len(CASES) + 1, help="cases (and the arm) run side by side"
    )
    for name in FULL:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default {FULL[name]}")
    args = parser.parse_args(argv)
    size = dict(QUICK if args.quick else FULL)
    size.update({k: getattr(args, k) for k in FULL if getattr(args, k) is not None})
    chosen = [x.strip() for x in args.cases.split(",") if x.strip()]
    if args.quick and not chosen:
        chosen = list(QUICK_CASES)
    numbers = [str(i) for i, c in enumerate(CASES, 1) if c.states == VLLM_STATES]
    named = [n for x in chosen for n in (numbers if x == VLLM_GROUP else [x])]
    picked = [CASES[int(i) - 1] for i in named if i.isdigit()]
    arm = ONPOLICY in chosen or not chosen
    finetune = FINETUNE in chosen or not chosen
    picked = picked if chosen else list(CASES)
    if finetune and CASES[0] not in picked:
        picked.insert(0, CASES[0])  # the repair arm starts from the first case's drafter
    work = args.work / ("quick" if args.quick else "full")
    started = time.monotonic()
    kinds = sorted({case.verifier for case in picked} | ({ARM.verifier} if arm else set()))
    extracted = {case.verifier for case in picked if case.states == VLLM_STATES}
    # The cases are independent processes: run side by side (--jobs), data first.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        made = pool.map(lambda k: make_data(k, work, size, k in extracted), kinds)
        data = dict(zip(kinds, made, strict=True))
        futures = {c: pool.submit(run_case, c, data[c.verifier], work, size) for c in picked}
        arm_future = pool.submit(run_arm, data[ARM.verifier], work, size) if arm else None
        results = [futures[c].result() for c in picked]
        if arm_future is not None:
            results += arm_future.result()
        served = None
        if CASES[0] in picked:  # the user's view of the first case's fixed drafter
            first = futures[CASES[0]].result()
            composite = bench_verifier.trained(bench_verifier.COMPOSITE, work / "logs")
            heldout = data[CASES[0].verifier] / "heldout.jsonl"
            served = acceptance_served.measure(
                composite, first["on"]["checkpoint"], CASES[0].steps, heldout, work
            )
            print(served["table"], flush=True)
        tuned = None
        if finetune:
            tuned = run_finetune(futures[CASES[0]].result(), data[CASES[0].verifier], work, size)
    minutes = (time.monotonic() - started) / 60
    on_vllm_states = [r for r in results if r["case"].states == VLLM_STATES]
    others = [r for r in results if r["case"].states != VLLM_STATES]
    blocks = {}
    closing = note(size, minutes, args.quick, kinds, work)
    if others:
        blocks[BLOCK] = table(others) + "\n\n" + closing
        if served is not None:
            blocks[BLOCK] = served_table(served) + "\n\n" + blocks[BLOCK]
        if arm:
            blocks[BLOCK] += " " + acceptance_onpolicy.describe(size)
    if on_vllm_states:
        blocks[STATES_BLOCK] = table(on_vllm_states) + "\n\n" + closing
    if tuned is not None:
        blocks[FINETUNE_BLOCK] = finetune_table(tuned) + "\n\n" + finetune_note(tuned, closing)
    print("\n" + "\n\n".join(blocks.values()))
    # Each block holds its cases' tables: a run writes only a block it measured whole (a full
    # run both; --cases vllm-states the second), so it never replaces tables it did not measure.
    whole = not args.quick and not args.no_write and (not chosen or chosen == [VLLM_GROUP])
    if not args.quick and not args.no_write and chosen == [FINETUNE]:
        blocks = {FINETUNE_BLOCK: blocks[FINETUNE_BLOCK]}
        whole = True
    if not whole:
        print("\nprinted only: a full run writes the blocks (no --cases, no --quick); "
              f"--cases {VLLM_GROUP} or --cases {FINETUNE} writes its block")  # fmt: skip
        return 0
    for name, body in blocks.items():
        doc_block.write(RESULTS, name, body, heading=HEADINGS[name])
        doc_block.write(DOC, name, body)
    print(f"\nwrote {', '.join(blocks)} in {RESULTS} and {DOC}")
    return 0


def served_table(served: dict) -> str:
    """The acceptance command's figures on the served composite verifier and drafter."""
    rates = ", ".join(pct(x) for x in served["per_position"])
    return "\n".join([
        f"| `speculators-qwen-compat acceptance` on vLLM serving the trained composite Qwen3.6 "
        f"class with the fixes-on drafter of \"{CASES[0].name}\" | |",
        "|---|---|",
        f"| requests, completion tokens | {served['requests']}, {served['completion_tokens']:,} |",
        f"| vLLM acceptance rate | {pct(served['acceptance_rate'])} |",
        f"| vLLM mean acceptance length (1 + accepted / drafts) | "
        f"{served['mean_acceptance_length']:.2f} |",
        f"| vLLM per-position acceptance rate | {rates} |",
        "| every figure = the increase of /metrics around the run (Prometheus' parser) | "
        f"{'yes' if served['equals_counters'] else 'NO'} |",
    ])  # fmt: skip


def finetune_note(r: dict, closing: str) -> str:
    steps = r["finetuned"]["steps"]
    return (
        f'The fixes-off drafter of "{r["case"].name}" above, fine-tuned for {steps} steps '
        f"({FINETUNE_EPOCHS} epoch of the same data) by `python -m "
        "speculators_qwen_compat.train --from-pretrained FOLDER` (fixes on), beside the drafter "
        f"as it was ({r['off']['steps']} steps, fixes off) and the one retrained from scratch "
        f"with the fixes on ({r['on']['steps']} steps). " + closing
    )


def verifiers_line(kinds: list[str], work: Path) -> str:
    """What each trained verifier learned and how far vLLM's bf16 text follows its float32 text
    (bench/verifier.py's record beside it)."""
    parts = []
    for kind in kinds:
        check = json.loads((work / f"data-{kind}" / "verifier" / "vllm_check.json").read_text())
        parts.append(
            f"{kind} ({check['steps']} steps, {check['seconds'] / 60:.0f} min; its float32 reply "
            f"= the corpus's on {check['correct']:.0%} of {check['prompts']} held-out prompts, "
            f"vLLM's bf16 reply = float32's on {check['agrees']:.0%})"
        )
    return "; ".join(parts)


def note(size: dict, minutes: float, quick: bool, kinds: list[str], work: Path) -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"{'Smoke run (--quick). ' if quick else ''}Measured {when} "
        f"on {os.cpu_count()} cores ({platform.processor() or platform.machine()}), load average "
        f"at the end {load} (other jobs shared the cores); the whole run took {minutes:.1f} min. "
        "Trained verifiers (bench/verifier.py, trained here on CPU once per machine and kept by "
        "their recipe's hash): tiny Qwen3.5 (hidden 128, 8 layers [3 Gated DeltaNet, 1 "
        "attention] x 2, vocabulary 1,216; MoE: 8 experts, 2 active), final-norm weights held "
        "at ~ N(0, 0.5) like a trained model's, trained on bench/verifier_corpus.py's chats "
        "(greetings that repeat a name, counting, one-digit sums, a tool call and its answer, "
        "small functions, repeating words) in the chat template: "
        f"{verifiers_line(kinds, work)}. Text: {size['train']} training and {size['heldout']} "
        "held-out prompts of that corpus (other draws) in the chat template, each continued by "
        f"the verifier's greedy reply (at most {size['new']} tokens); {size['epochs']} epochs, "
        f"sequences packed to {size['seq_len']} tokens, seed 42, one drafter layer. Offline "
        "figures are over every position of the held-out replies (teacher-forced drafts, which "
        "equal the speculative chain up to the first rejection); vLLM's are its own counters "
        "over the drafts its schedule made while answering the held-out prompts greedily (bf16): "
        'the figure users judge a drafter by. Cases marked "vLLM\'s states" train on the same '
        "rows' hidden states as vLLM extracts them (bf16, speculators 0.9.0's "
        "generate-offline-data against vLLM serving the verifier with extract_hidden_states), "
        "the states users train on; the others on transformers' float32 states."
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
