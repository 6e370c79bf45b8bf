"""The error types our fixes raise on purpose: a fatal problem with a what-to-do message.

Every one is a ``CompatError`` (the entry points print it as one line). Where upstream raises a
built-in type in the same situation, ours subclasses that type too, so callers and tests that
catch upstream's ``ValueError`` or ``FileNotFoundError`` still catch ours (issue 14): e.g.
``load_raw_dataset`` on a folder without JSON files raises ``ValueError`` on speculators 0.7+
(``No .json/.jsonl files found in directory``), a missing ``.jsonl`` reaches ``datasets``'
``FileNotFoundError``, and 0.7+ end a run with nothing left in ``ValueError("No samples remain
...")``.
"""

from __future__ import annotations

import contextlib
import json
import re

#: ``=1`` (or ``--debug``): our fatal errors print their traceback too.
DEBUG_ENV = "SPECULATORS_QWEN_COMPAT_DEBUG"


class CompatError(Exception):
    """Fatal for the run. The entry points print it as one line:
    ``speculators_qwen_compat: error: <message>``."""


class DataError(CompatError, ValueError):
    """The data (a file, a row, a column, the whole run's output) cannot be used: upstream
    raises ``ValueError`` in these situations."""


class DataFileNotFoundError(CompatError, FileNotFoundError):
    """A ``--data`` path that does not exist: upstream's loader raises ``FileNotFoundError``."""


#: Exception types, by name, that upstream raises for a conversation it cannot render: the
#: row's data (with this template) is the problem, not the code (docs/upstream.md, "row errors").
UPSTREAM_DATA_ERRORS = frozenset({"BoundaryUnstableError"})
#: Upstream's render client errors (0.8+): data only when the server refused the request for
#: its content (data/render_faults.py); a server or network fault is never a skipped row.
UPSTREAM_RENDER_ERRORS = frozenset({"RenderError", "InvalidResponseError"})


def is_data_problem(exc: BaseException) -> bool:
    """Whether a per-row exception is the data's fault (a template or normaliser rejection,
    a render the endpoint refused for its content) rather than a bug in upstream or in this
    package, or a fault of the render server."""
    if getattr(exc, "data_problem", False):  # our normaliser's and weights' rejections
        return True
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & UPSTREAM_RENDER_ERRORS:
        from speculators_qwen_compat.data.render_faults import is_refusal

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


#: speculators 0.8+'s render client on a 4xx: ``Render endpoint returned 400: {"error": ...}``.
_RENDER_ERROR = re.compile(r"Render endpoint returned \d{3}: (\{.*\})\s*$", re.DOTALL)


def reason_of(exc: BaseException, limit: int = 200) -> str:
    """A short one-line reason for the skip report: the exception's own message.

    A vLLM render server's 4xx answer is reduced to its error message (for a template error,
    the template's own words), so a conversation skipped through ``--render-endpoint URL`` is
    counted under the same reason as when rendering locally.
    """
    text = str(exc)
    match = _RENDER_ERROR.match(text)
    if match:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            text = str(json.loads(match.group(1))["error"]["message"])
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
