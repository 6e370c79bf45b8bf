"""Rendering through a vLLM server: the conversation's faults are skips, the server's are fatal.

Why: upstream retries every failure for 14 s and the row guard then counted it as a skip, so a
dead server ended the run with exit 0 (docs/upstream.md, "Render faults"). Here a refusal of the
request is a skip; anything else is retried within a budget, then ``RenderServerFailed``, one line.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from speculators_qwen_compat.core.errors import CompatError
from speculators_qwen_compat.core.run_options import current_options
from speculators_qwen_compat.data.render import media_faults

log = logging.getLogger("speculators_qwen_compat")

RETRY_SECONDS = 180.0
#: A server that answers "no such thing here" is at the wrong address, not busy.
WRONG_ADDRESS = frozenset({401, 403, 404, 405, 407})
WRONG_ADDRESS_SECONDS = 3.0
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 15.0
#: statuses upstream itself treats as "retry" (render_client.TRANSIENT_STATUSES)
TRANSIENT = frozenset({408, 429})

#: vLLM 0.32's 500 answers that are about one request's images, not the server: an image file
#: it cannot use (data/render/media_faults.py: missing, a folder, ...), an image placeholder the
#: truncation dropped before expansion (data/render/media.py). Counted skips, as the same
#: conversations are when rendering locally.
MEDIA_REFUSALS = (
    "Failed to apply prompt replacement for mm_items",
    # one image URL the server could not fetch (aiohttp's words: a host down or unknown): that
    # conversation's, counted under the server's words; a server that is down never answers
    "Cannot connect to host",
)
#: vLLM 0.32's 500 answer to every local image when started without --allowed-local-media-path.
NO_LOCAL_MEDIA = "Cannot load local files without `--allowed-local-media-path`"

#: vLLM 0.32's answer to a local image outside its --allowed-local-media-path folder
OUTSIDE_ALLOWED = "must be a subpath of `--allowed-local-media-path"
#: vLLM 0.32's 400 answer to a request carrying ``mm_processor_kwargs`` (a server started
#: without ``--trust-request-mm-kwargs``).
NO_REQUEST_KWARGS = "Per-request mm_processor_kwargs are disabled by default"
#: upstream's message for a non-200 answer (render_client.py): "Render endpoint returned N: body"
_STATUS = re.compile(r"Render endpoint returned (\d{3}): (.*)\Z", re.DOTALL)
#: exception types (by name, in the MRO) of the network layer upstream uses (httpx)
_TRANSPORT = ("TransportError", "TimeoutException", "HTTPError", "StreamError")


class RenderServerFailed(CompatError):
    """The render server did not answer usably within the retry budget: the run fails (never
    a skipped row). One message argument, so it crosses the map workers' pickling intact."""


def status_of(exc: BaseException) -> tuple[int, str] | None:
    """(HTTP status, body) from upstream's render error message, or None."""
    match = _STATUS.match(str(exc))
    return (int(match.group(1)), match.group(2)) if match else None


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is the server refusing this request for its content: a 4xx, not one of
    the address/auth/transient statuses, whose body is a JSON error object (vLLM: ``{"error":
    {"message": ...}}``; FastAPI validation: ``{"detail": [...]}``); or one of vLLM's 500
    answers about the request's own images (``MEDIA_REFUSALS``)."""
    found = status_of(exc)
    if found is None:
        return False
    status, body = found
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    if not isinstance(parsed, dict):
        return False
    if status == 500:
        message = _message(parsed)
        return media_faults.reason(message) is not None or any(
            words in message for words in MEDIA_REFUSALS
        )
    if not 400 <= status < 500 or status in WRONG_ADDRESS or status in TRANSIENT:
        return False
    return "error" in parsed or "detail" in parsed


def refusal_reason(exc: BaseException) -> str | None:
    """The skip reason of a server refusal about one of the request's image files (missing, a
    folder, undecodable, too large, an aspect ratio the processor refuses): the reason local
    rendering counts for the same file (data/render/media_faults.py, one rule for both paths: vLLM's
    words hold the file's path, partly masked by how deep it lies); None: the server's own
    message is the reason (core/errors.py ``reason_of``)."""
    found = status_of(exc)
    if found is None:
        return None
    status, body = found
    if status not in (400, 500):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    message = _message(parsed) if isinstance(parsed, dict) else ""
    return media_faults.reason(message) if message else None


def media_config_fault(exc: BaseException) -> str | None:
    """The fix, when ``exc`` says the server is not set up for this run's images: vLLM's 500
    "Cannot load local files without `--allowed-local-media-path`" for every image, or its 400
    refusing per-request ``mm_processor_kwargs`` (``--mm-processor-kwargs`` given, a server
    started without ``--trust-request-mm-kwargs``). A configuration fault, fatal at once (no
    retry can change it, no row is to blame)."""
    found = status_of(exc)
    if found is not None and found[0] == 400 and NO_REQUEST_KWARGS in found[1]:
        return (
            "the render server refuses per-request mm_processor_kwargs (HTTP 400: "
            f"{NO_REQUEST_KWARGS}): start it with --mm-processor-kwargs set as for the "
            "hidden-states server and drop --mm-processor-kwargs from prepare_data, or start "
            "it with --trust-request-mm-kwargs"
        )
    if found is not None and OUTSIDE_ALLOWED in found[1]:
        # vLLM masks the path (by depth): which image it was cannot be told, and every image
        # outside that folder meets the same refusal again in the hidden-state step
        media = current_options().inline_media_dir
        wrote = f"the images this run wrote to {media} or " if media else ""
        return (
            f"the render server cannot read {wrote}an image the data names (vLLM: "
            f"{OUTSIDE_ALLOWED} DIR`): start it with --allowed-local-media-path naming a folder "
            "that holds every image of the data" + (" and that media folder" if media else "")
        )
    if found is None or found[0] != 500 or NO_LOCAL_MEDIA not in found[1]:
        return None
    return (
        f"the render server cannot read local image files (HTTP 500: {NO_LOCAL_MEDIA}): start "
        "vLLM with --allowed-local-media-path DIR, DIR a folder holding every image of the data"
    )


def _message(parsed: dict[str, Any]) -> str:
    error = parsed.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else ""


def is_server_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is the server's or the network's doing (retried, then fatal)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "InvalidResponseError" in names or "RenderError" in names:
        return not is_refusal(exc)
    if isinstance(exc, (RenderReplyMalformed, json.JSONDecodeError, ConnectionError, TimeoutError)):
        return True  # a reply that is not JSON or holds no ids; sockets
    return any(name in names for name in _TRANSPORT)


def render(raw: Callable[[], Any], endpoint: str) -> list[int]:
    """``raw()`` (one render request), retried while the server fails, within the budget."""
    started = None
    backoff = FIRST_BACKOFF
    attempts = 0
    while True:
        attempts += 1
        try:
            ids = checked(raw())
        except Exception as exc:
            fix = media_config_fault(exc)
            if fix is not None:
                raise RenderServerFailed(f"render server {endpoint}: {fix}") from exc
            if not is_server_fault(exc):
                raise
            now = time.monotonic()
            if started is None:
                started = now
                log.warning(
                    "render server %s: %s; retrying for up to %.0f s",
                    endpoint, describe(exc), budget(exc),
                )  # fmt: skip
            if now + backoff - started > budget(exc):
                raise RenderServerFailed(
                    f"render server {endpoint} failed: {describe(exc)} (still after "
                    f"{attempts} attempts over {now - started:.0f} s)"
                ) from exc
            time.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
            continue
        if started is not None:
            log.warning(
                "render server %s answers again after %.0f s", endpoint, time.monotonic() - started
            )
        return ids


class RenderReplyMalformed(ValueError):
    """A 200 answer whose ``token_ids`` is not a list of ids."""


def checked(ids: Any) -> list[int]:
    """A 200 answer's ``token_ids`` as upstream returned them, if they are a list (upstream
    returns whatever the key holds: ``null`` included)."""
    if not isinstance(ids, list):
        raise RenderReplyMalformed(f"Render endpoint replied token_ids={ids!r:.80}")
    return ids


def budget(exc: BaseException) -> float:
    found = status_of(exc)
    if found is not None and found[0] in WRONG_ADDRESS:
        return WRONG_ADDRESS_SECONDS
    try:
        chosen = current_options().render_retry_seconds
        return RETRY_SECONDS if chosen is None else float(chosen)
    except (TypeError, ValueError):
        return RETRY_SECONDS


def describe(exc: BaseException) -> str:
    """The cause in a few words: the status and the server's message, or the network error."""
    found = status_of(exc)
    if found is not None:
        status, body = found
        words = " ".join(body.split())[:160]
        return f"HTTP {status}" + (f" ({words})" if words else "")
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
