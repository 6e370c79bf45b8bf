"""The error types our fixes raise on purpose: a fatal problem with a what-to-do message.

Every one is a ``CompatError`` (one line from the entry points). Where upstream raises a built-in
type in the same situation (``ValueError``, ``FileNotFoundError``), ours subclasses it too, so
callers that catch upstream's type still catch ours (issue 14).
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
