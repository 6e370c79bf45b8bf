"""A target script that raises (test_entry_point_errors.py): ValueError from ``inner``."""


def inner() -> None:
    raise ValueError("boom from the user")


inner()
