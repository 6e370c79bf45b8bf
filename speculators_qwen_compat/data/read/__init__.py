"""Where a row's trip begins: data files, tables and ``hf:`` data sets read as JSON-text rows
with their source, the column that holds the conversation, and the folders a run owns."""
