"""cli/frozen_imports.py: ``importing()`` keeps Python's collector off for the block (no
collection runs however much it allocates, counted with ``gc.callbacks``), freezes what exists
at its end, and leaves the collector as it found it, also when the block raises (the error goes
on unchanged)."""

from __future__ import annotations

import gc

import pytest

from speculators_qwen_compat.cli import frozen_imports

pytestmark = pytest.mark.pure


class Collections:
    """Counts the collections the interpreter starts while the context is open."""

    def __init__(self) -> None:
        self.started = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started += 1

    def __enter__(self) -> Collections:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def _cyclic_garbage(count: int) -> None:
    for _ in range(count):
        node: list[object] = []
        node.append(node)


def test_no_collection_inside_then_frozen_and_back_on() -> None:
    assert gc.isenabled()
    with Collections() as outside:
        _cyclic_garbage(20_000)
    assert outside.started > 0  # the same allocations set the collector off with it on
    frozen_before = gc.get_freeze_count()
    with Collections() as inside, frozen_imports.importing():
        assert not gc.isenabled()
        kept = [[index] for index in range(20_000)]
        _cyclic_garbage(20_000)
    assert inside.started == 0
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen_before + len(kept)
    gc.unfreeze()  # give this test process its collector back


def test_an_error_in_the_block_goes_on_and_the_collector_comes_back() -> None:
    with pytest.raises(KeyError, match="missing"), frozen_imports.importing():
        raise KeyError("missing")
    assert gc.isenabled()
    gc.unfreeze()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with frozen_imports.importing():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()
