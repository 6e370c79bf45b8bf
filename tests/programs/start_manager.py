"""Start and stop a ``multiprocess`` manager, as datasets' ``Dataset.map(num_proc=N)`` does;
prints ``started`` (test_fatal_errors.py: the socket-path limit of cli/worker_sockets.py, held
to the real library)."""

import multiprocess

with multiprocess.Manager() as manager:
    manager.Queue().put(1)
print("started")
