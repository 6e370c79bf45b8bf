"""prepare_data with a bug injected into the tokenizer (test_accounting.py):
``inject_tokenizer_bug.py PREPARE-DATA-ARGS``. ``apply_chat_template`` raises RuntimeError for
every conversation whose text holds MARK: an error that is not a data problem, which the run
must not count as a skipped row. Exits as the entry point does."""

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


if __name__ == "__main__":
    from speculators_qwen_compat.cli.prepare_data import main

    inject_bug()
    sys.exit(main(sys.argv[1:]))
