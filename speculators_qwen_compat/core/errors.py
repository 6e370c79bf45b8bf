"""The error types our fixes raise on purpose: a fatal problem with a what-to-do message.

Every one is a ``CompatError`` (the entry points print it as one line). Where upstream raises a
built-in type in the same situation, ours subclasses that type too, so callers and tests that
catch upstream's ``ValueError`` or ``FileNotFoundError`` still catch ours (issue 14): e.g.
``load_raw_dataset`` on a folder without JSON files raises ``ValueError`` on speculators 0.7+
(``No .json/.jsonl files found in directory``), a missing ``.jsonl`` reaches ``datasets``'
``FileNotFoundError``, and 0.7+ end a run with nothing left in ``ValueError("No samples remain
...")``.
"""


class CompatError(Exception):
    """Fatal for the run. The entry points print it as one line:
    ``speculators_qwen_compat: error: <message>``."""


class DataError(CompatError, ValueError):
    """The data (a file, a row, a column, the whole run's output) cannot be used: upstream
    raises ``ValueError`` in these situations."""


class DataFileNotFoundError(CompatError, FileNotFoundError):
    """A ``--data`` path that does not exist: upstream's loader raises ``FileNotFoundError``."""


def reason_of(exc: BaseException, limit: int = 200) -> str:
    """A short one-line reason for the skip report: the exception's own message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
