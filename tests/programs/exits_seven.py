"""A target script that exits with code 7 (test_entry_point_errors.py)."""

import sys

sys.exit(7)
