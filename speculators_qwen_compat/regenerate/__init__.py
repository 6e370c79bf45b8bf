"""The ``regenerate-responses`` command's own code (speculators 0.8+; fixes/regenerate/ applies
it): plan.py (what is sent), run.py (one run), loop.py (requests, pairing, statuses), state.py
(the run in progress), output.py (files, lock, resume), torn.py (a killed run's cut bytes),
tally.py (counting). docs/regenerate-responses.md is the user's page.
"""
