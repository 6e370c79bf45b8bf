"""``speculators-qwen-compat acceptance``: a served drafter's acceptance on the user's own data.

The row's trip: prompts.py (held-out conversations -> chat requests), counters.py (vLLM's
Prometheus counters, summed over engines, their increase), measure.py (one endpoint: counters,
requests, counters again), report.py (the table, the one line, the JSON), command.py (flags,
errors as one line).
"""
