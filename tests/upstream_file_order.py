"""``python upstream_file_order.py FOLDER``: the ``id`` of each row upstream's own
``load_raw_dataset`` reads from a data folder, in its order (run with the fixes off,
``SPECULATORS_QWEN_COMPAT=0``), as one JSON list. For tests/test_data_order.py."""

from __future__ import annotations

import json
import sys

from speculators.data_generation.preprocessing import load_raw_dataset

if __name__ == "__main__":
    loaded = load_raw_dataset(sys.argv[1])
    dataset = loaded[0] if isinstance(loaded, tuple) else loaded
    print(json.dumps(list(dataset["id"])))
