"""prepare_data with a bug injected into the tokenizer (test_accounting.py):
``inject_tokenizer_bug.py PREPARE-DATA-ARGS``, or ``main(args)`` as a case of batch_main.py.
``apply_chat_template`` raises RuntimeError for every conversation whose text holds MARK: an
error that is not a data problem, which the run must not count as a skipped row. Exits as the
entry point does. The bug stays injected in the interpreter: a batch runs this case last."""

from __future__ import annotations

import sys
from typing import Any

MARK = "INJECT-BUG"


def inject_bug(marker: str = MARK) -> None:
    """``apply_chat_template`` raises RuntimeError on every conversation whose text holds marker."""
    import transformers

    original = transformers.PreTrainedTokenizerBase.apply_chat_template

    def buggy(self: Any, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        if marker in repr(conversation):
            raise RuntimeError("injected bug")
        return original(self, conversation, *args, **kwargs)

    transformers.PreTrainedTokenizerBase.apply_chat_template = buggy


def main(args: list[str]) -> int:
    from speculators_qwen_compat.cli.prepare_data import main as prepare_data

    inject_bug()
    return prepare_data(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
