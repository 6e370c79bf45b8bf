"""The data path the data fixes run: reading files (files.py), normalising rows into
conversations a template accepts (normalize.py, content_format.py), rendering the way vLLM's
``/render`` does (render.py), and counting skips across worker processes (ledger.py)."""
