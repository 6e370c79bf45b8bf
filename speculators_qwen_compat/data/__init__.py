"""The data path the data fixes run, grouped by a row's trip through it.

read/ (files, tables, columns: one row as JSON text, where it came from) -> normalize/ (the
row's turns and media as the conversation a chat template takes) -> render/ (token ids the way
vLLM's ``/render`` gives them, loss-mask weights, the batch handed to datasets) -> account/
(what was kept, skipped and why, across worker processes: the skip ledger)."""
