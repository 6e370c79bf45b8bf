"""A user's script shaped like upstream's git-only scripts/prepare_data.py: a top-level import of
``load_and_preprocess_dataset``, run as ``__main__``, nothing of ours imported (test_drop_in.py).

``user_prepare_script.py START_METHOD MODEL DATA OUT``: prepares DATA with two map workers
started by START_METHOD (fork or spawn) and prints ``ROWS N``."""

from __future__ import annotations

import inspect
import sys

import multiprocess
from speculators.data_generation.preprocessing import load_and_preprocess_dataset

if __name__ == "__main__":
    method, model, data, out = sys.argv[1:5]
    multiprocess.set_start_method(method, force=True)
    kwargs = {"seq_length": 512, "build_dataset_num_proc": 2, "token_freq_path": out + "/tf.pt"}
    if "render_endpoint" in inspect.signature(load_and_preprocess_dataset).parameters:
        kwargs["render_endpoint"] = "local"
    dataset, _ = load_and_preprocess_dataset(model, [data], **kwargs)
    print("ROWS", len(dataset))
