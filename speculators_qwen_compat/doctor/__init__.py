"""``python -m speculators_qwen_compat doctor``: the template profile, the installed release's mask
strategy, and a dry run over the first rows (command.py drives them)."""
