"""``doctor --drafter DIR --model VERIFIER``: did the drafter learn the verifier's targets, will
vLLM 0.32 serve it as it trained? Its config and tensors against what vLLM reads (training/
served_drafter.py), its verifier norm by its own release (training/norm_verdict.py); ends with
the ``vllm serve`` line, each problem one line of the fatal error (exit 1), after the report.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from speculators_qwen_compat.core.errors import CompatError, reason_of
from speculators_qwen_compat.training import drafter_record as dr
from speculators_qwen_compat.training import norm_verdict as nv
from speculators_qwen_compat.training import served_drafter as sd
from speculators_qwen_compat.training.save_path import BEST, beside

#: speculators type -> the speculative config vLLM 0.32 derives from it (``configs/speculators/
#: base.py``: PEAGLE is EAGLE-3 with parallel drafting; DFlash2 runs as DFlash).
VLLM_METHOD: dict[str, dict[str, Any]] = {
    "eagle3": {"method": "eagle3"},
    "peagle": {"method": "eagle3", "parallel_drafting": True},
    "dflash": {"method": "dflash"},
    "dflash2": {"method": "dflash"},
    "dspark": {"method": "dspark"},
}
PARALLEL = ("peagle", "dflash", "dflash2", "dspark")
MAPPING_KEYS = ("d2t", "t2d")


@dataclass
class DrafterCheck:
    lines: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    serve: str = ""
    norm: nv.NormVerdict | None = None

    def say(self, label: str, text: str) -> None:
        self.lines.append((label, text))

    def problem(self, label: str, text: str) -> None:
        self.lines.append((label, f"PROBLEM: {text}"))
        self.problems.append(text)


def read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise CompatError(f"{what}: no {path}") from None
    except (OSError, ValueError) as exc:
        raise CompatError(f"{what}: cannot read {path} ({reason_of(exc)})") from None
    if not isinstance(value, dict):
        raise CompatError(f"{what}: {path} holds a JSON {type(value).__name__}, not an object")
    return value


def drafter_config(drafter: str, flag: str = "--drafter") -> dict[str, Any]:
    """The drafter folder's config.json; given the folder that holds the epochs (``--save-path``),
    an error naming the epoch folders found there."""
    folder = Path(drafter).expanduser()
    if folder.is_dir() and not (folder / "config.json").exists():
        epochs = epoch_folders(folder)
        if epochs:
            names = ", ".join(f"{e.name}/" for e in epochs)
            best = next((e for e in epochs if e.name == BEST), epochs[0])
            raise CompatError(
                f"{flag} {drafter}: no config.json; it holds the epoch folders {names}: pass one "
                f"of them, e.g. {flag} {folder / best.name}"
            )
    return read_json(folder / "config.json", f"{flag} {drafter}")


def epoch_folders(folder: Path) -> list[Path]:
    """The drafter folders under a training ``--save-path``: epochs by number, then
    ``checkpoint_best`` (the trainer's link to the best epoch) and any other."""
    found = [p for p in folder.iterdir() if p.is_dir() and (p / "config.json").is_file()]
    return sorted(found, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit()
                                        else 0, p.name))  # fmt: skip


def _text_of(config: dict[str, Any]) -> dict[str, Any]:
    """The text config of a composite config (Qwen3.5/3.6: ``text_config``), else itself."""
    return config.get("text_config") or config


def model_types(config: dict[str, Any]) -> tuple[str, ...]:
    """The verifier's (text, top-level) model types from its whole config, as
    norm_convention orders them."""
    return tuple(str(c["model_type"]) for c in (_text_of(config), config) if c.get("model_type"))


def verifier_config(model: str) -> dict[str, Any]:
    """The verifier's whole config as a dict."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        config = read_json(folder / "config.json", f"--model {model}")
    else:
        try:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(model).to_dict()
        except Exception as exc:
            raise CompatError(
                f"--model {model}: cannot read its config ({reason_of(exc)})"
            ) from None
    return config


def weight_names(folder: Path) -> set[str]:
    """Tensor names of the drafter's safetensors files (headers only)."""
    names: set[str] = set()
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with path.open("rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                if not 0 < size <= path.stat().st_size - 8:
                    raise ValueError(f"a header of {size} bytes in a file of {path.stat().st_size}")
                header = json.loads(handle.read(size))
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
            data = path.stat().st_size - 8 - size
            ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
            if max(ends, default=0) > data:
                raise ValueError(
                    f"its tensors need {max(ends)} bytes of data, the file holds {data}"
                )
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise CompatError(
                f"--drafter {folder}: {path.name} is not a readable safetensors file "
                f"({reason_of(exc)}); save the drafter again or copy it whole"
            ) from None
        names.update(k for k in header if k != "__metadata__")
    return names


def check_drafter(drafter: str, model: str) -> DrafterCheck:
    folder = Path(drafter).expanduser()
    config = drafter_config(drafter)
    whole_verifier = verifier_config(model)
    verifier = _text_of(whole_verifier)
    check = DrafterCheck()
    kind = sd.speculator_type(config)
    if kind not in VLLM_METHOD:
        check.problem(
            "type", f"{kind or 'no speculators_model_type'}: vLLM 0.32 has no such drafter"
        )
        return check
    check.say("type", f"{kind} (vLLM method {VLLM_METHOD[kind]['method']})")
    if not isinstance(config.get("speculators_config"), dict):
        raise CompatError(
            f"--drafter {drafter}: config.json has no speculators_config object (vLLM reads "
            "the drafter's method and verifier there); is this a folder speculators saved?"
        )
    ignored = dr.ignored_because(folder)
    if ignored:
        check.say("record", f"ignored: {ignored}; judged as a folder without one")
    check.norm = nv.judge(config, dr.read(folder), model_types(whole_verifier))
    if check.norm.word == nv.MIS_SCALED:
        check.problems.append(
            f"verifier norm mis-scaled ({check.norm.why}); a config change cannot mend it: "
            + mend_line(drafter, model, kind)
        )
    names = weight_names(folder)
    if not names:
        check.problem("weights", f"no *.safetensors tensors in {folder}: vLLM loads none")
    try:
        _layers(check, config, verifier)
        _hidden_and_vocab(check, config, verifier, names)
        tokens = _block(check, config, verifier, kind)
        _rope(check, config, kind, drafter)
        v2 = _attention(check, config, drafter)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        # a hand-edited or foreign config.json: a value of a type vLLM would refuse too
        raise CompatError(
            f"--drafter {drafter}: config.json holds a value of an unexpected type or shape "
            f"({reason_of(exc)}); compare it with a config.json `train` saved"
        ) from None
    recorded = nv.recorded_verifier(config).get("name_or_path")
    if recorded and recorded != model:
        check.say("verifier recorded", f"{recorded} (vLLM uses the served --model, {model})")
    spec = {**VLLM_METHOD[kind], "model": str(drafter), "num_speculative_tokens": tokens}
    prefix = "VLLM_USE_V2_MODEL_RUNNER=1 " if v2 else ""
    served = shlex.quote(json.dumps(spec))
    check.serve = f"{prefix}vllm serve {shlex.quote(model)} --speculative-config {served}"
    return check


def whole(value: Any, name: str) -> int:
    """``value`` when it is a whole number (a config's count or id), else a TypeError naming
    the field: vLLM reads these as integers, "8" or 2.5 is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} is {value!r}, not a whole number")
    return value


def _layer_ids(config: dict[str, Any]) -> list[int]:
    for key in ("aux_hidden_state_layer_ids", "eagle_aux_hidden_state_layer_ids"):
        if config.get(key):
            return [whole(i, key) for i in config[key]]
    return []


def _layers(check: DrafterCheck, config: dict[str, Any], verifier: dict[str, Any]) -> None:
    layers = int(verifier.get("num_hidden_layers") or 0)
    ids = _layer_ids(config)
    if not ids:
        check.say("target layer ids", "none recorded (vLLM picks its default layers)")
        return
    if layers < 1:  # the verifier's config does not say: nothing to compare with
        check.say("target layer ids", f"{ids} (the verifier's config gives no num_hidden_layers)")
        return
    # Both sides count 0 = the embeddings and L = the input of decoder layer L (the output of
    # the last layer at L = num_hidden_layers).
    outside = [i for i in ids if not 0 <= i <= layers]
    text = f"{ids} of the verifier's 0-{layers} (0 = embeddings; vLLM keeps them as saved)"
    if outside:
        check.problem("target layer ids", f"{outside} outside the verifier's 0-{layers}: {text}")
    else:
        check.say("target layer ids", text)


def _hidden_and_vocab(check: DrafterCheck, config: dict[str, Any], verifier: dict[str, Any],
                      weights: set[str]) -> None:  # fmt: skip
    layer = sd.layer_config(config)
    hidden = config.get("target_hidden_size") or layer.get("hidden_size")
    if hidden != verifier.get("hidden_size"):
        check.problem("hidden size", f"{hidden}, the verifier's is {verifier.get('hidden_size')}")
    vocab = int(verifier.get("vocab_size") or 0)
    draft = whole(
        config.get("draft_vocab_size") or layer.get("vocab_size") or 0, "draft_vocab_size"
    )
    have = [k for k in MAPPING_KEYS if k in weights]
    if draft > vocab:
        check.problem("vocabulary", f"draft {draft} tokens, more than the verifier's {vocab}")
    elif draft < vocab and "d2t" not in have:
        check.problem(
            "vocabulary", f"draft {draft} of the verifier's {vocab} tokens but no d2t mapping saved"
        )
    elif draft < vocab:
        check.say("vocabulary", f"draft {draft} of {vocab} tokens, mapping {'/'.join(have)} saved")
    else:
        check.say("vocabulary", f"the verifier's {vocab} tokens (no mapping needed)")


def _block(check: DrafterCheck, config: dict[str, Any], verifier: dict[str, Any],
           kind: str) -> int:  # fmt: skip
    """The number of speculative tokens to serve with (and the mask token's check)."""
    methods = config["speculators_config"].get("proposal_methods") or [{}]
    saved = whole(methods[0].get("speculative_tokens") or 3, "speculative_tokens")
    if kind not in PARALLEL:
        check.say("speculative tokens", f"{saved} (saved; any number works for {kind})")
        return saved
    mask = config.get("mask_token_id")
    vocab = int(verifier.get("vocab_size") or 0)
    if mask is None:
        check.problem(
            "mask token", "none saved (vLLM requires mask_token_id for parallel drafting)"
        )
    elif not 0 <= whole(mask, "mask_token_id") < vocab:
        check.problem("mask token", f"{mask}, outside the verifier's vocabulary of {vocab}")
    else:
        check.say("mask token", f"{mask} (within the verifier's vocabulary of {vocab})")
    block = config.get("block_size")
    if not block:
        return saved
    anchor = bool(config.get("sample_from_anchor", False))
    tokens = whole(block, "block_size") - (0 if anchor else 1)
    check.say(
        "block size",
        f"{block}: num_speculative_tokens {tokens} (the block "
        + ("including" if anchor else "after")
        + " its anchor, as trained; more drafts than that the drafter never learned)",
    )
    recorded = methods[0].get("speculative_tokens")
    if recorded is not None and recorded != tokens:
        check.problem(
            "speculative tokens",
            f"{recorded} saved in speculators_config, but the block drafts {tokens}: vLLM uses "
            f"the saved {recorded} when the serve line leaves num_speculative_tokens out; "
            f"pass {tokens} (the line below does)",
        )
    return tokens


def mend_line(drafter: str, model: str, kind: str) -> str:
    """What mends a drafter trained on mis-scaled targets: retraining, fixes on; fine-tuning
    from it rights its norm, but whether it undoes what it learned is not measured."""
    tuned = shlex.quote(beside(drafter, "finetuned"))
    return (
        "retrain with the fixes on (the known answer); fine-tuning from this folder with them "
        "rights its norm, but whether it undoes what it learned is not measured: python -m "
        f"speculators_qwen_compat.train --speculator-type {kind} --verifier-name-or-path "
        f"{shlex.quote(model)} --from-pretrained {shlex.quote(str(drafter))} --data-path "
        f"YOUR_PREPARED_DATA --save-path {tuned} --total-seq-len 4096"
    )


def repair_line(drafter: str) -> str:
    copy = shlex.quote(beside(drafter, "served"))
    return f"speculators-qwen-compat repair-drafter {shlex.quote(str(drafter))} --output {copy}"


def _rope(check: DrafterCheck, config: dict[str, Any], kind: str, drafter: str) -> None:
    fields = sd.m_rope_fields(config)
    rope = next(
        (sd.layer_config(config).get(f) for f in sd.ROPE_FIELDS if sd.layer_config(config).get(f)),
        {},
    )
    if not fields:
        theta = rope.get("rope_theta", "default")
        dim = sd.rotary_dim(rope or {}, sd.head_dim_of(config))
        check.say("rope", f"plain RoPE, theta {theta}, {dim} of {sd.head_dim_of(config)} channels")
        return
    keys = ", ".join(sorted(fields))
    if kind in PARALLEL:
        check.problem(
            "rope",
            f'{keys} in the config: vLLM 0.32 refuses it ("does not support M-RoPE yet"); '
            f"a copy without them: {repair_line(drafter)}",
        )
    else:
        check.problem(
            "rope",
            f"{keys} in the config: vLLM serves it differently from how it trained (it rotates "
            f"the drafter by M-RoPE; it trained with plain RoPE); a copy without them: "
            f"{repair_line(drafter)}",
        )


def _attention(check: DrafterCheck, config: dict[str, Any], drafter: str) -> bool:
    """Checks each draft layer's causality; True when vLLM needs its V2 runner."""
    trained, served = sd.trained_causal(config), sd.served_causal(config)
    if trained is None or served is None:
        return False
    word = {True: "causal", False: "bidirectional"}
    text = ", ".join(f"{i}: {word[c]}" for i, c in enumerate(trained))
    fields = sd.attention_for_serving(config)
    if fields is None:
        check.problem("attention", f"trained {text}: {sd.attention_mismatch(config)}")
    elif fields:
        check.problem(
            "attention",
            "every layer trained bidirectional but vLLM serves them causal: vLLM serves it "
            "differently from how it trained; a copy with sliding_window_non_causal true: "
            + repair_line(drafter),
        )
    else:
        check.say("attention", f"served as trained ({text})")
    types = sd.layer_types(config)
    mixed = 0 < types.count(sd.SLIDING) < len(types)
    if mixed:
        check.say("runner", "mixed sliding/full layers: vLLM 0.32 needs VLLM_USE_V2_MODEL_RUNNER=1")
    return mixed


def print_drafter_view(drafter: str, model: str, out: TextIO) -> None:
    check = check_drafter(drafter, model)
    print(f"drafter: {drafter} for {model} (vLLM 0.32):", file=out)
    for label, text in check.lines:
        print(f"  {label + ':':<24}{text}", file=out)
    if check.norm is not None:
        print(f"verifier norm: {check.norm.word}: {check.norm.why}", file=out)
    if check.serve:
        print("serve it:", file=out)
        print(f"  {check.serve}", file=out)
    if check.problems:
        raise CompatError(f"--drafter {drafter}: " + "; ".join(check.problems))
