"""A conversation turned into token ids, as vLLM's render endpoint gives them (locally or through
a server), the loss-mask weights applied, and the batch handed to ``datasets.map``."""
