"""A prepare_data run traced as it happens (test_route_trace.py): ``route_trace.py OUT ARGS``.

Runs the entry point's ``main(ARGS)`` with a profile function in this process and in every map
worker forked from it. Each process appends to ``OUT/<pid>.jsonl``: per call of an upstream
function the route declares, the stack of declared calls it was made under (our wrapper entered
counts as the call, as upstream's caller sees it), each call with a serial number; per batch and
per process, the functions of this package that ran (``file``, ``qualname``). Prints the exit
code last."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import sys
import threading
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import wrapt

MODULES = ("speculators.data_generation.preprocessing", "speculators.cli.prepare_data")
PACKAGE = str(Path(__import__("speculators_qwen_compat").__file__).parent)
BATCH = "_preprocess_batch"
RUN = "load_and_preprocess_dataset"


class Tracer:
    """The profile function: declared upstream calls as stacks, our functions as sets."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.codes: dict[CodeType, str] = {}  # a declared function's own code -> its path
        self.route_call: CodeType | None = None  # core.fix.Route.__call__: a wrapped call
        self.seen: dict[CodeType, Any] = {}
        # (frame, path, serial or 0, whether it is upstream's run function's own body)
        self.stack: list[tuple[FrameType, str, int, bool]] = []
        self.serial = 0
        self.ours: set[tuple[str, str]] = set()
        self.inside: set[tuple[str, str]] = set()  # within upstream's run function's body
        self.in_run = 0
        self.batch: set[tuple[str, str]] | None = None
        self.pid = os.getpid()
        self.file: Any = None

    def watch(self, paths: dict[str, Any]) -> None:
        """Declared path -> upstream's function (any wrappers of ours around it unwrapped)."""
        for path, function in paths.items():
            code = getattr(inspect.unwrap(function), "__code__", None)
            if code is not None:
                self.codes[code] = path
        from speculators_qwen_compat.core.fix import Route

        self.route_call = Route.__call__.__code__
        self.seen.clear()

    def forked(self) -> None:
        """In a worker forked from this process: its own file and its own functions."""
        self.pid, self.file, self.batch = os.getpid(), None, None
        self.ours, self.inside = set(), set()

    def write(self, record: dict[str, Any]) -> None:
        if self.file is None:
            self.file = open(self.out / f"{self.pid}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()

    def classify(self, code: CodeType) -> Any:
        if code in self.codes:
            return ("upstream", self.codes[code])
        if code is self.route_call:
            return ("route", None)
        if code.co_filename.startswith(PACKAGE):
            name = os.path.relpath(code.co_filename, PACKAGE)
            return ("ours", (name, code.co_qualname))
        return None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            kind = self.seen.get(code, self)
            if kind is self:
                kind = self.seen[code] = self.classify(code)
            if kind is None:
                return
            what, value = kind
            body = what == "upstream"  # upstream's own frame, not our wrapper's
            if what == "route":
                wrapped = frame.f_locals.get("wrapped")
                inner = getattr(inspect.unwrap(wrapped), "__code__", None) if wrapped else None
                value = self.codes.get(inner) if inner is not None else None
                if value is None:
                    return
                what = "upstream"
            if what == "ours":
                self.ours.add(value)
                if self.in_run:
                    self.inside.add(value)
                if self.batch is not None:
                    self.batch.add(value)
                return
            again = bool(self.stack) and self.stack[-1][1] == value  # the route, then the body
            self.serial += not again
            self.stack.append((frame, value, 0 if again else self.serial, body and value == RUN))
            self.in_run += body and value == RUN
            if not again:
                shown = [(path, serial) for _, path, serial, _ in self.stack if serial]
                self.write({"stack": [p for p, _ in shown], "ids": [i for _, i in shown]})
                if value == BATCH and self.batch is None:
                    self.batch = set()
        elif event == "return" and self.stack and self.stack[-1][0] is frame:
            _, value, shown, run_body = self.stack.pop()
            self.in_run -= run_body
            if shown and value == BATCH and not any(p == BATCH for _, p, _, _ in self.stack):
                self.write({"batch_ours": sorted(self.batch or ())})
                self.batch = None
                self.close()

    def close(self) -> None:
        self.write({"ours": sorted(self.ours), "inside": sorted(self.inside)})


def _declared(tracer: Tracer) -> None:
    """Watch every upstream function the route declares, once upstream is imported."""
    try:
        from speculators_qwen_compat.route.declaration import watched
    except ImportError:  # before the declaration existed: batches and our functions alone
        preprocessing = sys.modules["speculators.data_generation.preprocessing"]
        tracer.watch({name: getattr(preprocessing, name) for name in (BATCH, RUN)})
        return
    tracer.watch(watched())


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    tracer = Tracer(out)
    os.register_at_fork(after_in_child=tracer.forked)
    for module in MODULES:
        wrapt.register_post_import_hook(lambda _m: _declared(tracer), module)
    from speculators_qwen_compat.cli import frozen_imports
    from speculators_qwen_compat.cli.deferred_compile import compile_on_first_call
    from speculators_qwen_compat.cli.prepare_data import main as prepare

    # upstream imported as the entry point imports it, before the trace: its import is not a row's
    with frozen_imports.importing(), compile_on_first_call():
        for module in MODULES:
            with contextlib.suppress(ImportError):  # <= 0.7 ship no cli
                importlib.import_module(module)
    sys.setprofile(tracer)
    threading.setprofile(tracer)
    try:
        code = prepare(argv[1:])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        tracer.close()
    print(json.dumps({"code": code}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
