"""Programs the tests run in fresh interpreters: ``python tests/programs/NAME.py ARGS`` (by path,
so that isolated ``-I`` interpreters run them too; conftest.run_program). Each is a module with a
docstring saying what it prints, linted like the rest of the tests."""
