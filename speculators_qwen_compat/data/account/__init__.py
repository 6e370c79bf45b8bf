"""What a run kept, skipped and why: the skip ledger across worker processes, which errors are
the data's, and the file-wide data-quality checks."""
