"""``speculators-qwen-compat acceptance``: a served drafter's acceptance on the user's own data.

prompts.py (conversations -> chat requests), counters.py (vLLM's counters, their increase),
send.py (requests, retries), measure.py (one endpoint), report.py (table, JSON), progress.py
(the bar), command.py (flags; errors as one line).
"""
