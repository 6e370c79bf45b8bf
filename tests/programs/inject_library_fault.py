"""prepare_data with a library's own error raised at one stage (test_fatal_stages.py):
``main(["--fault", KIND, *PREPARE-DATA-ARGS])`` as a case of batch_main.py.

KIND ``map``: Arrow's ``ArrowInvalid`` from datasets' writer inside the map (a worker's batch
Arrow cannot store); ``save``: ``OSError(ENOSPC)`` from ``Dataset.save_to_disk`` (the disk full
while the rows are saved). The classes are the libraries' own, raised where they raise them;
the fault stays injected in the interpreter, so a batch runs such a case last or alone."""

from __future__ import annotations

import errno
import sys
from typing import Any


def inject(kind: str) -> None:
    """The writer of the prepared rows (a ``loss_mask`` column) fails: inside the map
    (``map``), or inside ``save_to_disk`` (``save``); reading the data writes through the same
    class and is left alone."""
    import pyarrow
    from datasets.arrow_writer import ArrowWriter

    if kind not in ("map", "save"):
        raise ValueError(kind)
    originals = {name: getattr(ArrowWriter, name) for name in ("write_batch", "write_table")}

    def failing(name: str) -> Any:
        def write(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
            columns = batch.column_names if isinstance(batch, pyarrow.Table) else list(batch)
            if "loss_mask" in columns:
                saving = _called_from("save_to_disk")
                if kind == "map" and not saving:
                    raise pyarrow.lib.ArrowInvalid("injected: a column Arrow cannot store")
                if kind == "save" and saving:
                    raise OSError(errno.ENOSPC, "No space left on device", self._path)
            return originals[name](self, batch, *args, **kwargs)

        return write

    for name in originals:
        setattr(ArrowWriter, name, failing(name))


def _called_from(function: str) -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def main(args: list[str]) -> int:
    from speculators_qwen_compat.cli.prepare_data import main as prepare_data

    assert args[0] == "--fault"
    inject(args[1])
    return prepare_data(args[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
