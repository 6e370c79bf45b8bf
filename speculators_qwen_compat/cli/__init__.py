"""The entry points' code: prepare_data, train, run and what they share (support.py). The public
module names ``python -m speculators_qwen_compat.prepare_data|train|run`` are thin shims."""
