"""A model repository's own tokenizer class (loaded by transformers only with
``trust_remote_code=True``), for tests/test_worker_processor.py."""

from transformers import PreTrainedTokenizerFast


class RemoteTokenizerFast(PreTrainedTokenizerFast):
    """The tiny tokenizer under a class of the repository's code."""
