"""Test-only hidden-states connector for vLLM on CPU; loaded by the pipeline tier's server
through ``kv_connector_module_path`` and never shipped.

vLLM 0.32's ``ExampleHiddenStatesConnector`` (the stock connector ``extract_hidden_states``
works with) copies the extracted states with a CUDA stream, CUDA events and ``pin_memory=True``,
which fail on a CPU-only build at its save path. This subclass changes only that: it gathers
the same cache slots and writes the file synchronously, then releases the lock file the stock
connector pre-created. Everything else (which slots, which file, which lock) is the stock code.
"""

from __future__ import annotations

import os

import torch
from safetensors.torch import save_file
from vllm.distributed.kv_transfer.kv_connector.v1.example_hidden_states_connector import (
    ExampleHiddenStatesConnector,
    PendingSave,
    extract_from_kv_cache,
)


class _Written:
    """Stands where the stock connector keeps a CUDA event: the copy is already done."""

    def query(self) -> bool:
        return True


class CpuHiddenStatesConnector(ExampleHiddenStatesConnector):
    def _submit_async_write(self, pending: PendingSave) -> None:
        if not self._is_tp_rank_zero:
            return
        assert self._kv_cache is not None
        blocks = torch.tensor(pending.block_ids, dtype=torch.long)
        offsets = torch.arange(self._block_size, dtype=torch.long)
        slots = (blocks[:, None] * self._block_size + offsets[None, :]).flatten()
        states = extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0])
        os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        try:
            save_file(
                {"hidden_states": states.clone(), "token_ids": pending.token_ids.clone()},
                pending.filename,
            )
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
        self._req_copy_events[pending.req_id] = _Written()
