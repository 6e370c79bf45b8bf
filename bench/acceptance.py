"""``make bench-acceptance``: does a drafter trained with the fixes predict its verifier better?

Target: speculators 0.9.0 and 0.8.1 (their own ``python -m speculators.train``, on CPU through
the test-only shim tests/cpu_trainer.py), tiny Qwen3.5 verifiers; why: the fixes change the
targets a drafter learns from (README "Training"), and loss curves cannot show it (a run on flat
targets reports the lower loss). For each case the same drafter is trained twice, same data,
seed and steps: fixes off (``SPECULATORS_QWEN_COMPAT=0 python -m speculators.train``: upstream as
shipped) and on (``python -m speculators_qwen_compat.train``), then judged on held-out text the
verifier wrote itself against the verifier's greedy tokens (transformers' float32 forward):

1. bench/acceptance_data.py: the verifier, its text, offline hidden states (once per verifier);
2. training, ``--hidden-states-dtype float32`` (bf16 autocast is ~10x slower on CPU);
3. bench/acceptance_eval.py: targets' agreement, the drafter's top-1 agreement at each
   speculative step, mean accepted length (offline: every position of the held-out text);
4. bench/acceptance_vllm.py, EAGLE-3 only: vLLM 0.32 on CPU serves the verifier with each
   drafter as the trainer saved it; vLLM's own counters (it drafts only where its schedule
   lands: after the accepted tokens and the verifier's correction).

Cases: EAGLE-3 on the dense verifier (``Qwen3_5ForCausalLM``; 0.9.0), DFlash on the MoE verifier
(``Qwen3_5MoeForCausalLM``; 0.9.0, whose norm-type list lacks ``qwen3_5_moe``, and 0.8.1, which
builds ``Qwen3RMSNorm``). Prints the table and writes it between the acceptance markers of
README.md and bench/RESULTS.md. ``--quick`` is a few-minute smoke run of the same steps.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import cpu_trainer  # noqa: E402
import vllm_server  # noqa: E402

RELEASE_PYTHON = ROOT / "tools" / "release_python.sh"
RESULTS = ROOT / "bench" / "RESULTS.md"
README = ROOT / "README.md"
START, END = "<!-- acceptance:start -->", "<!-- acceptance:end -->"
MASK_TOKEN_ID = 1210  # the first id past the tiny tokenizer's, as upstream would add <|MASK|>
AUX_LAYERS = ["2", "4", "5"]  # bench/acceptance_data.py AUX_LAYERS
KEYS = ("off", "on")
#: Rows of verifier text (training, held-out), prompt and generated tokens, epochs, packing.
FULL = {"train": 160, "heldout": 32, "prompt": 16, "new": 80, "epochs": 4, "seq_len": 512}
QUICK = {"train": 24, "heldout": 8, "prompt": 16, "new": 48, "epochs": 1, "seq_len": 256}
DATA_RELEASE = "0.9.0"  # whose transformers builds the verifiers and their data


@dataclass(frozen=True)
class Case:
    name: str
    release: str
    verifier: str  # tests/pipeline/models.py kind
    drafter: str
    steps: int  # drafts per speculation: EAGLE-3 ttt steps, DFlash block size - 1
    flags: tuple[str, ...] = ()


DFLASH = ("--block-size", "8", "--max-anchors", "32")
EAGLE3 = ("--ttt-steps", "3")
CASES = (
    Case("EAGLE-3, dense Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_text", "eagle3", 3, EAGLE3),
    Case("DFlash, MoE Qwen3.5, 0.9.0", "0.9.0", "qwen3_5_moe_text", "dflash", 7, DFLASH),
    Case("DFlash, MoE Qwen3.5, 0.8.1", "0.8.1", "qwen3_5_moe_text", "dflash", 7, DFLASH),
)


def fail(message: str) -> None:
    sys.exit(f"speculators_qwen_compat: error: {message}")


def run(command: list[str], log: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command``, its output into ``log``; its stdout's text, or exit with the log's end."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as sink:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=sink, text=True, env=env)
        sink.write(done.stdout)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        fail(f"{' '.join(command[:4])} ... exited {done.returncode} (log {log}):\n{tail}")
    return done.stdout


def release_env(fixes: bool, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECULATORS_QWEN_COMPAT")}
    path = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # One thread per process: the cases run side by side, and on a busy machine OpenMP's
    # spinning worker threads made a training step ~10x slower.
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONPATH"] = path
    if not fixes:
        env["SPECULATORS_QWEN_COMPAT"] = "0"
    env.update(extra)
    return env


def make_data(verifier: str, work: Path, size: dict) -> Path:
    """The verifier and its data, once per verifier kind (both releases read the same files)."""
    out = work / f"data-{verifier}"
    if not (out / "data.json").is_file():
        numbers = [size["train"], size["heldout"], size["prompt"], size["new"]]
        command = [str(RELEASE_PYTHON), DATA_RELEASE, str(ROOT / "bench" / "acceptance_data.py"),
                   verifier, str(out), *map(str, numbers)]  # fmt: skip
        run(command, work / "logs" / f"{out.name}.log", release_env(True))
    return out


def last_checkpoint(save: Path) -> Path:
    saved = [p for p in save.iterdir() if p.name.isdigit() and (p / "config.json").is_file()]
    if not saved:
        fail(f"training saved no checkpoint under {save}")
    return max(saved, key=lambda p: int(p.name))


def train(case: Case, data: Path, work: Path, fixes: bool, size: dict) -> dict:
    label = f"{case.drafter}-{case.verifier}-{case.release}-{'on' if fixes else 'off'}"
    save, metrics = work / f"ckpt-{label}", work / f"metrics-{label}.jsonl"
    metrics.unlink(missing_ok=True)
    module = "speculators_qwen_compat.train" if fixes else "speculators.train"
    command = [
        str(RELEASE_PYTHON), case.release, "-m", module,
        "--verifier-name-or-path", str((data / "verifier").resolve()),
        "--data-path", str(data / "train"), "--save-path", str(save),
        "--speculator-type", case.drafter, "--num-layers", "1",
        "--target-layer-ids", *AUX_LAYERS, "--mask-token-id", str(MASK_TOKEN_ID),
        "--loss-implementation", "eager", "--draft-attn-impl", "sdpa",
        "--total-seq-len", str(size["seq_len"]), "--num-workers", "0", "--seed", "42",
        "--epochs", str(size["epochs"]), "--hidden-states-dtype", "float32",
        "--log-dir", str(work / "logs" / label), "--no-resume-from-checkpoint", *case.flags,
        # AdamW, not the default Muon: Muon's Newton-Schulz iterations took ~2/3 of a CPU step
        "--optimizer", "adamw",
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


def serve(data: Path, drafter: Path | None, steps: int, work: Path) -> dict:
    label = drafter.parent.name if drafter else "no-speculation"
    command = [str(vllm_server.VLLM_PYTHON), str(ROOT / "bench" / "acceptance_vllm.py"),
               str((data / "verifier").resolve()), str(drafter or "none"),
               str(data / "heldout_prompts.json"), str(steps)]  # fmt: skip
    started = time.monotonic()
    # vLLM's engine socket is <scratch>/<uuid4>: a Unix socket path holds 107 bytes, so the
    # scratch folder is a short one of the system's, not one under a checkout of any depth
    with tempfile.TemporaryDirectory(prefix="sqc-vllm-") as scratch:
        env = vllm_server.vllm_env(Path(scratch), torchvision=True)
        out = run(command, work / "logs" / f"vllm-{label}.log", env)
    line = next((x for x in out.splitlines() if x.startswith("ACCEPTANCE ")), None)
    if line is None:
        fail(f"vLLM printed no counters (log {work / 'logs' / f'vllm-{label}.log'})")
    result = json.loads(line[len("ACCEPTANCE ") :])
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two greedy outputs share before their first difference."""
    shorter = min(len(a), len(b))
    return next((i for i in range(shorter) if a[i] != b[i]), shorter)


def vllm_figures(served: dict, baseline: dict, continuations: list) -> dict:
    drafts, proposed = served.get("num_drafts", 0), served.get("num_draft_tokens", 0)
    accepted = served.get("num_accepted_tokens", 0)
    per_pos = served.get("num_accepted_tokens_per_pos", [])
    return {
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
        case, off, on = r["case"], r["off"], r["on"]
        lines += [
            f"| {case.name} ({off['steps']} steps, {off['anchors']:,} held-out anchors) "
            "| fixes off (upstream) | fixes on |",
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
        if "vllm_off" in r:
            voff, von = r["vllm_off"], r["vllm_on"]
            lines += [
                f"| vLLM acceptance rate (accepted / drafted tokens, {voff['drafts']:,} and "
                f"{von['drafts']:,} drafts) | {pct(voff['acceptance'])} "
                f"| {pct(von['acceptance'])} |",
                f"| vLLM mean accepted tokens per draft of {case.steps} (its own mean "
                f"acceptance length is 1 + this) | {voff['accepted_per_draft']:.3f} "
                f"| {von['accepted_per_draft']:.3f} |",
                f"| vLLM greedy output = without speculation (rows) | {voff['unchanged']}/"
                f"{voff['rows']} | {von['unchanged']}/{von['rows']} |",
                f"| the same, tokens before the first difference (mean of {voff['new']}; bf16: "
                "a draft's verification batches tokens, so rounding differs from one-token "
                f"steps and near-tied logits flip) | {voff['same_prefix']:.1f} "
                f"| {von['same_prefix']:.1f} |",
            ]
        lines.append("")
    return "\n".join(lines).rstrip()


def write_section(path: Path, body: str, heading: str = "") -> None:
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    block = f"{START}\n{body}\n{END}"
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip() + f"\n\n{heading}{block}\n"
    path.write_text(text, encoding="utf-8")


def run_case(case: Case, data: Path, work: Path, size: dict) -> dict:
    """Both trainings side by side (and, for EAGLE-3, vLLM without speculation beside them),
    then vLLM with each drafter side by side: independent processes."""
    result: dict = {"case": case}
    eagle3 = case.drafter == "eagle3"
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = {key: pool.submit(train, case, data, work, key == "on", size) for key in KEYS}
        baseline = pool.submit(serve, data, None, case.steps, work) if eagle3 else None
        for key in KEYS:
            result[key] = runs[key].result()
            shown = {k: v for k, v in result[key].items() if k != "checkpoint"}
            print(f"{case.name}, fixes {key}: {json.dumps(shown)}", flush=True)
        if baseline is not None:
            served = json.loads((data / "heldout_prompts.json").read_text())["continuations"]
            counts = {k: pool.submit(serve, data, result[k]["checkpoint"], case.steps, work)
                      for k in KEYS}  # fmt: skip
            for key in KEYS:
                result[f"vllm_{key}"] = vllm_figures(
                    counts[key].result(), baseline.result(), served
                )
                print(f"vLLM, fixes {key}: {json.dumps(result[f'vllm_{key}'])}", flush=True)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run at small sizes")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "acceptance")
    parser.add_argument("--cases", default="", help="comma list of case numbers (1-based)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--jobs", type=int, default=len(CASES), help="cases run side by side")
    for name in FULL:
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default {FULL[name]}")
    args = parser.parse_args(argv)
    size = dict(QUICK if args.quick else FULL)
    size.update({k: getattr(args, k) for k in FULL if getattr(args, k) is not None})
    picked = [CASES[int(i) - 1] for i in args.cases.split(",") if i] or list(CASES)
    work = args.work / ("quick" if args.quick else "full")
    started = time.monotonic()
    kinds = sorted({case.verifier for case in picked})
    # The cases are independent processes: run side by side (--jobs), data first.
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        data = dict(zip(kinds, pool.map(lambda k: make_data(k, work, size), kinds), strict=True))
        results = list(pool.map(lambda c: run_case(c, data[c.verifier], work, size), picked))
    minutes = (time.monotonic() - started) / 60
    body = table(results) + "\n\n" + note(size, minutes, args.quick)
    print("\n" + body)
    if not args.no_write:
        write_section(RESULTS, body, "## Acceptance (`make bench-acceptance`)\n\n")
        write_section(README, body)
        print(f"\nwrote the acceptance section of {RESULTS} and {README}")
    return 0


def note(size: dict, minutes: float, quick: bool) -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"{'Smoke run (--quick). ' if quick else ''}Measured {when} "
        f"on {os.cpu_count()} cores ({platform.processor() or platform.machine()}), load average "
        f"at the end {load} (other jobs shared the cores); the whole run took {minutes:.1f} min. "
        f"Verifiers: tiny random Qwen3.5 (hidden 128, 8 layers [3 Gated DeltaNet, 1 attention] "
        f"x 2, vocabulary 1,216; MoE: 8 experts, 2 active), final-norm weights ~ N(0, 0.5) and "
        f"lm_head ~ N(0, 0.35) like a trained model's. Text: {size['train']} training and "
        f"{size['heldout']} held-out rows of {size['prompt']} random prompt tokens + "
        f"{size['new']} greedy tokens the verifier wrote itself; {size['epochs']} epochs, "
        f"sequences packed to {size['seq_len']} tokens, seed 42, one drafter layer. Offline "
        "figures are over every position of the held-out text (teacher-forced drafts, which "
        "equal the speculative chain up to the first rejection); vLLM's are over the drafts its "
        "schedule made while decoding the held-out prompts greedily (bf16), which start only "
        "after the accepted tokens and the verifier's correction: lower than the offline top-1."
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
