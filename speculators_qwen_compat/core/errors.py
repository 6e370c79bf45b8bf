"""The one error type our fixes raise on purpose: a fatal problem with a what-to-do message."""


class CompatError(Exception):
    """Fatal for the run. The entry points print it as one line:
    ``speculators_qwen_compat: error: <message>``."""


def reason_of(exc: BaseException, limit: int = 200) -> str:
    """A short one-line reason for the skip report: the exception's own message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
