"""``deferred_compile_probe.py``: upstream imported inside ``compile_on_first_call()`` loads no
inductor compiler, and what upstream compiled at import is a stand-in that compiles on its first
call; then, outside, ``torch.compile`` as shipped loads inductor as soon as it wraps a function
(the cost the stand-in avoids). Prints one JSON line (test_deferred_compile.py)."""

from __future__ import annotations

import importlib
import json
import sys

import torch

from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call
from speculators_qwen_compat.core.upstream import PREPROCESSING

INDUCTOR = "torch._inductor.compile_fx"
#: 0.9.0 models/dflash/core.py:35 compiles flex attention's block-mask builder at import
DFLASH = "speculators.models.dflash.core"


def main() -> None:
    shipped = torch.compile
    with compile_on_first_call():
        importlib.import_module(PREPROCESSING)
        deferred = torch.compile is not shipped
    report = {
        "deferred_inside": deferred,
        "restored": torch.compile is shipped,
        "inductor_after_import": INDUCTOR in sys.modules,
    }
    stand_in = getattr(sys.modules.get(DFLASH), "_compiled_create_block_mask", None)
    if stand_in is not None:
        report["upstream_stand_in"] = getattr(stand_in, "__name__", "")
        report["wraps"] = getattr(getattr(stand_in, "__wrapped__", None), "__name__", "")
    torch.compile(lambda tensor: tensor + 1)
    report["inductor_after_shipped_compile"] = INDUCTOR in sys.modules
    print(json.dumps(report))


if __name__ == "__main__":
    main()
