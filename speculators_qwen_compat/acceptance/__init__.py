"""``speculators-qwen-compat acceptance``: a served drafter's acceptance on the user's own data.

prompts.py (held-out conversations -> chat requests), counters.py (vLLM's counters, summed over
engines, their increase), send.py (the requests, their retries), measure.py (one endpoint's
run), report.py (table, one line, JSON), progress.py (the bar), command.py (flags; errors as one
line).
"""
