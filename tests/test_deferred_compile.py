"""Our commands import upstream with ``torch.compile`` deferred to a first call
(cli/deferred_compile.py): the stand-in calls the real ``torch.compile`` (the oracle, spied on)
once, with the options upstream gave, and returns what the compiled function returns; nothing
is compiled at decoration; ``torch.compile`` is restored after. In a fresh interpreter, upstream's
import then loads no inductor, which torch.compile as shipped loads on wrapping a function
(programs/deferred_compile_probe.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from conftest import run_program

from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call

pytestmark = pytest.mark.pure  # torch and our command's start-up: once (tools/matrix.py)


def test_the_stand_in_compiles_on_its_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    shipped = torch.compile

    def spy(model: Any = None, **options: Any) -> Any:
        calls.append((model, options))
        return shipped(model, **options)

    monkeypatch.setattr(torch, "compile", spy)

    def scale(tensor: torch.Tensor) -> torch.Tensor:
        return tensor * 3

    with compile_on_first_call():
        deferred = torch.compile(scale, backend="eager", dynamic=False)
        decorated = torch.compile(backend="eager")(scale)  # the @torch.compile(...) form
        module = torch.compile(torch.nn.Identity(), backend="eager")
    assert torch.compile is spy  # restored
    assert [type(model) for model, _ in calls] == [torch.nn.Identity]  # a module: at once
    assert isinstance(module, torch.nn.Module)
    assert deferred.__name__ == "scale" and deferred.__wrapped__ is scale
    value = torch.arange(4.0)
    assert torch.equal(deferred(value), value * 3) and torch.equal(deferred(value), value * 3)
    assert torch.equal(decorated(value), value * 3)
    assert calls[1:] == [
        (scale, {"backend": "eager", "dynamic": False}),
        (scale, {"backend": "eager"}),
    ]


def test_upstream_imports_without_the_inductor_compiler() -> None:
    result = run_program("deferred_compile_probe")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["deferred_inside"] and report["restored"]
    assert report["inductor_after_import"] is False
    assert report["inductor_after_shipped_compile"] is True
    if "upstream_stand_in" in report:  # 0.9.0's dflash builds its compiled mask at import
        assert report == {
            **report,
            "upstream_stand_in": "create_block_mask",
            "wraps": "create_block_mask",
        }
