"""``doctor --model M``: the training view of the verifier, for the installed speculators release.

The verifier's final-norm convention and the drafter types built with the other one (run through
the release's own hook points), the draft decoder config upstream derives, and whether the mask
token resolves without ``--mask-token-id`` (docs/upstream.md, "Training"). No weights are loaded.
"""

from __future__ import annotations

import argparse
import inspect
import logging
from types import SimpleNamespace
from typing import Any, TextIO

from speculators_qwen_compat.core.errors import reason_of
from speculators_qwen_compat.core.fix import FixState
from speculators_qwen_compat.training import norm_convention as nc

DECODER_FIELDS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
    "intermediate_size",
    "vocab_size",
)


def print_training_view(model: str, out: TextIO) -> None:
    """The training section of the doctor report; never fatal."""
    from importlib.metadata import version

    print(f"training (speculators {version('speculators')}):", file=out)
    types = nc.verifier_model_types(model)
    if types is None:
        print("  verifier config: none readable (a tokenizer-only folder?); skipped", file=out)
        return
    one_plus = nc.uses_one_plus_weight(types)
    convention = nc.ONE_PLUS_WEIGHT if one_plus else nc.TIMES_WEIGHT
    print(f"  {'final norm:':<24}{convention} ({' / '.join(dict.fromkeys(types[::-1]))})", file=out)
    for line in _verifier_norm_lines(model, convention):
        print(f"  {line}", file=out)
    for line in _decoder_lines(model):
        print(f"  {line}", file=out)
    print(f"  {'mask token:':<24}{_mask_token_line(model)}", file=out)
    for line in _guarded(layer_lines, model):
        print(f"  {line}", file=out)


def layer_lines(model: str) -> list[str]:
    """The verifier's decoder layers (``text_config`` first, as Qwen3.6's composite config
    holds them) and the ids to pass: train's ``--target-layer-ids`` (upstream's default) and
    the list ``vllm serve`` extracts (those and the last)."""
    from speculators_qwen_compat.doctor.endpoint import default_layer_ids, verifier_shape

    shape = verifier_shape(model)
    if shape is None:
        return [
            f"{'layers:':<24}no num_hidden_layers in a local config.json: read it from the "
            "model's card and pass --target-layer-ids to train"
        ]
    layers = shape[0]
    ids = default_layer_ids(layers)
    return [
        f"{'layers:':<24}{layers} (num_hidden_layers)",
        f"{'train:':<24}--target-layer-ids {' '.join(map(str, ids))}",
        f'{"vllm serve:":<24}"eagle_aux_hidden_state_layer_ids": {[*ids, layers]}',
    ]


def _guarded(describe: Any, *args: Any) -> list[str]:
    try:
        return describe(*args)
    except Exception as exc:  # the view is advice: say what could not be read, go on
        return [f"could not tell ({type(exc).__name__}: {reason_of(exc)})"]


def _verifier_norm_lines(model: str, convention: str) -> list[str]:
    return _guarded(_verifier_norm_lines_of, model, convention)


def _verifier_norm_lines_of(model: str, convention: str) -> list[str]:
    import speculators.models  # noqa: F401 (registers every drafter type)
    from speculators.model import SpeculatorModel

    from speculators_qwen_compat import status

    wrong, right = [], []
    for name, cls in sorted(SpeculatorModel.registry.items()):
        built = _upstream_convention(cls, model)
        if built is None:
            continue
        (right if built == convention else wrong).append(name)
    fix = next((s for s in status() if s.name == "verifier_norm"), None)
    lines = [f"{'verifier_norm right:':<24}{', '.join(right) or 'none'}"]
    if wrong:
        covered = fix is not None and fix.state == FixState.APPLIED
        lines.append(
            f"{'verifier_norm wrong:':<24}{', '.join(wrong)} (upstream builds "
            f"{nc.TIMES_WEIGHT if convention == nc.ONE_PLUS_WEIGHT else nc.ONE_PLUS_WEIGHT}: "
            + ("fixed by verifier_norm)" if covered else f"NOT fixed: verifier_norm is "
               f"{fix.state if fix else 'not installed'})")
        )  # fmt: skip
    return lines


def _upstream_convention(cls: type, model: str) -> str | None:
    """What the release's own code builds as ``cls``'s verifier_norm for ``model``."""
    if "verifier_norm.weight" not in getattr(cls, "_keys_to_ignore_on_load_missing", ()):
        return None  # this drafter type holds no frozen verifier norm
    import importlib

    try:
        eagle = importlib.import_module("speculators.models.eagle3.core").Eagle3DraftModel
        definitions = importlib.import_module("speculators.models.eagle3.model_definitions")
    except (ImportError, AttributeError):
        eagle, definitions = None, None
    if eagle is not None and issubclass(cls, eagle):
        found = {
            nc.convention_of(d.norm_class(8, eps=1e-6))
            for d in definitions.model_classes.values()  # type: ignore[union-attr]
        }
        return found.pop() if len(found) == 1 else None
    dflash = importlib.import_module("speculators.models.dflash.core")
    if not issubclass(cls, dflash.DFlashDraftModel):
        return None
    resolve = getattr(dflash, "resolve_verifier_norm_class", None)
    if resolve is not None:
        verifier = SimpleNamespace(name_or_path=model)
        norm_class = resolve(SimpleNamespace(speculators_config=SimpleNamespace(verifier=verifier)))
    else:
        norm_class = dflash.Qwen3RMSNorm
    return nc.convention_of(norm_class(8, eps=1e-6))


def _decoder_lines(model: str) -> list[str]:
    return _guarded(_decoder_lines_of, model)


def _decoder_lines_of(model: str) -> list[str]:
    try:
        from speculators.train import cli
    except ImportError:
        cli = None
    if cli is None or not hasattr(cli, "create_transformer_layer_config"):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model)
        text = getattr(config, "text_config", config)
        return [f"{'draft decoder:':<24}copied by scripts/train.py (git-only) from the text "
                f"config: {_describe(text)}"]  # fmt: skip
    lines = []
    for speculator_type in ("eagle3", "dflash"):
        args = _cli_args(model, speculator_type)
        create = cli.create_transformer_layer_config
        kwargs = {}
        for name in inspect.signature(create).parameters:
            for key in (name, f"draft_{name}"):
                if key in args:
                    kwargs[name] = args[key]
                    break
        logging.disable(logging.WARNING)  # the derivation logs its own adjustments
        try:
            config = create(**kwargs)
        finally:
            logging.disable(logging.NOTSET)
        label = f"draft ({speculator_type}):"
        lines.append(f"{label:<24}{type(config).__name__}: {_describe(config)}")
    return lines


def _cli_args(model: str, speculator_type: str) -> dict[str, Any]:
    """The flat arguments ``speculators.train`` derives from a minimal command line."""
    from speculators.train.config import TrainConfig

    argv = ["--speculator-type", speculator_type, "--verifier-name-or-path", model]
    return vars(argparse.Namespace(**TrainConfig.resolve(argv).flatten()))


def _describe(config: Any) -> str:
    fields = [f"{name}={getattr(config, name)}" for name in DECODER_FIELDS if hasattr(config, name)]
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if rope:
        fields.append(f"rope={dict(rope)}")
    return ", ".join(fields)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _mask_token_line(model: str) -> str:
    try:
        from speculators.train.utils import resolve_mask_token_id
    except ImportError as exc:
        return f"not resolved here ({reason_of(exc)})"
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)
    vocab = getattr(getattr(config, "text_config", config), "vocab_size", None)
    ours = _Lines()
    logger = logging.getLogger("speculators_qwen_compat")
    logger.addHandler(ours)
    try:
        token_id = resolve_mask_token_id(model, vocab)
    except Exception as exc:
        return f"does not resolve: pass --mask-token-id ({type(exc).__name__}: {reason_of(exc)})"
    finally:
        logger.removeHandler(ours)
    if any("fix mask_token" in m for m in ours.messages):
        return (f"{token_id} (from the tokenizer: the processor cannot be built; fixed by "
                "mask_token, else --mask-token-id is needed)")  # fmt: skip
    return f"{token_id}"
