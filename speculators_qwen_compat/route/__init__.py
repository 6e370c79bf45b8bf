"""The route of a prepare_data row through upstream: one module per upstream generation (render.py:
0.8+, script.py: <= 0.7), its wrappers in the order upstream calls them, callers before callees,
each handing the row to data/; its ``ROUTE`` tree is what the fixes install, what ``status
--route`` prints and what tests/test_route_trace.py holds a traced run against (declaration.py)."""
