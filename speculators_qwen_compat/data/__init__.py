"""The data path the data fixes run, grouped by a row's trip: read/ (files, tables, columns: a
row and where it came from) -> normalize/ (its turns and media as the conversation a chat
template takes) -> render/ (token ids as vLLM's ``/render`` gives them, loss-mask weights, the
batch handed to datasets) -> account/ (what was kept, skipped and why, across workers)."""
