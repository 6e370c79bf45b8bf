"""Which exception from one conversation is the data's fault: counted as a skipped row, never
as a bug (data/account/ledger.py). Everything else a row raises is upstream's or ours: an error
of the run, not a skip; and a render server's fault is fatal (data/render/render_faults.py)."""

from __future__ import annotations

from speculators_qwen_compat.data.render.render_faults import is_refusal

#: Exception types, by name, that upstream raises for a conversation it cannot render: the
#: row's data (with this template) is the problem, not the code (docs/upstream.md, "row errors").
UPSTREAM_DATA_ERRORS = frozenset({"BoundaryUnstableError"})
#: Upstream's render client errors (0.8+): data only when the server refused the request for
#: its content (data/render/render_faults.py); a server or network fault is never a skipped row.
UPSTREAM_RENDER_ERRORS = frozenset({"RenderError", "InvalidResponseError"})


def is_data_problem(exc: BaseException) -> bool:
    """Whether a per-row exception is the data's fault (a template or normaliser rejection,
    a render the endpoint refused for its content) rather than a bug in upstream or in this
    package, or a fault of the render server."""
    if getattr(exc, "data_problem", False):  # our normaliser's and weights' rejections
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & UPSTREAM_RENDER_ERRORS:
        return is_refusal(exc)
    if names & UPSTREAM_DATA_ERRORS:
        return True
    try:
        from jinja2 import TemplateError
    except ImportError:  # pragma: no cover - every release depends on jinja2
        TemplateError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, TemplateError):
        return True
    tb = exc.__traceback__
    last = None
    while tb is not None:  # raised inside the template's own code (a filter, a test)
        last = tb
        tb = tb.tb_next
    return last is not None and last.tb_frame.f_code.co_filename == "<template>"
