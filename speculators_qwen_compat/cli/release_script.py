"""The prepare_data command of releases that ship none in their wheel (<= 0.7).

Why: there it is a git-only script (docs/upstream.md, "The prepare_data command"). Its argparse
flags are rebuilt from the installed ``load_and_preprocess_dataset``, so upstream's command lines
work unchanged; ``--overwrite`` replaces only prepare_data's own artifacts (staged_output.py).
"""

from __future__ import annotations

import argparse
import inspect
import logging
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

from speculators_qwen_compat.cli.staged_output import StagedOutput, stage

log = logging.getLogger("speculators_qwen_compat")

#: (parameter of load_and_preprocess_dataset, flag, argparse options), in the script's order.
FLAGS: list[tuple[str, str, dict[str, Any]]] = [
    ("target_model_path", "--model", {"required": True, "help": "target model id or path"}),
    (
        "train_data_paths",
        "--data",
        {"required": True, "action": "append", "help": "training data file or folder (repeatable)"},
    ),
    (
        "seq_length",
        "--seq-length",
        {"type": int, "default": 8192, "help": "maximum sequence length (default 8192)"},
    ),
    (
        "max_samples",
        "--max-samples",
        {"type": int, "default": None, "help": "keep at most this many samples"},
    ),
    (
        "token_freq_path",
        "--token-freq-path",
        {"default": None, "help": "default: <output>/token_freq.pt"},
    ),
    (
        "assistant_pattern",
        "--assistant-pattern",
        {"default": None, "help": "regex for assistant spans"},
    ),
    (
        "turn_dropout",
        "--turn-dropout",
        {"action": "store_true", "help": "keep a random first N turns per conversation"},
    ),
    ("seed", "--seed", {"type": int, "default": 0, "help": "shuffle seed (default 0)"}),
    (
        "build_dataset_num_proc",
        "--num-preprocessing-workers",
        {"type": int, "default": 8, "help": "datasets.map worker processes (default 8)"},
    ),
    (
        "minimum_valid_tokens",
        "--minimum-valid-tokens",
        {"type": int, "default": None, "help": "drop rows with fewer supervised tokens"},
    ),
    (
        "allow_empty_output",
        "--allow-empty-output",
        {"action": "store_true", "help": "allow writing an empty dataset"},
    ),
    (
        "trust_remote_code",
        "--trust-remote-code",
        {"action": "store_true", "help": "allow code from the model repository"},
    ),
]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"speculators_qwen_compat: error: {message} (see --help)\n")


def build_parser(preprocessing: ModuleType, prog: str) -> argparse.ArgumentParser:
    accepted = inspect.signature(preprocessing.load_and_preprocess_dataset).parameters
    parser = _Parser(
        prog=prog,
        description="speculators prepare_data (the release's script "
        "flags), with speculators_qwen_compat's fixes on",
    )
    for parameter, flag, options in FLAGS:
        if parameter in accepted:
            parser.add_argument(flag, dest=parameter, **options)
    parser.add_argument("--output", default="./output", help="output folder (default ./output)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace prepare_data artifacts already in --output",
    )
    return parser


def run(preprocessing: ModuleType, args: list[str], prog: str) -> tuple[int, StagedOutput | None]:
    """Run the release's pipeline into a staging folder beside ``--output``; returns (exit
    code, the staged output to commit, or None when skipped because a dataset is there)."""
    options = vars(build_parser(preprocessing, prog).parse_args(args))
    output = Path(options.pop("output"))
    freq = options.get("token_freq_path")
    staged = stage(output, options.pop("overwrite"), Path(freq) if freq else None)
    if staged is None:
        log.warning(
            "Dataset files already exist in %s, skipping preprocessing. "
            "To overwrite existing files use --overwrite.",
            output,
        )
        return 0, None
    try:
        if "token_freq_path" in options:
            options["token_freq_path"] = str(
                staged.folder / "token_freq.pt" if freq is None else staged.inside(Path(freq))
            )
        dataset, _ = preprocessing.load_and_preprocess_dataset(**options)
        log.info("Writing dataset to %s", output)
        dataset.save_to_disk(str(staged.folder))
    except BaseException:
        staged.abandon()
        raise
    return 0, staged
