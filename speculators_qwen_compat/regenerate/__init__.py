"""The ``regenerate-responses`` command's own code (speculators 0.8.1/0.9.0; the fixes under
fixes/regenerate/ apply it to upstream): plan.py (what is sent, the template pre-check),
run.py (one run from lock to report), loop.py (requests, pairing, statuses, liveness),
state.py (the run in progress: settings, stop), output.py (partial file, lock, torn line,
resume, final publish), torn.py (which bytes a killed run left cut), tally.py (counting and
report.json). docs/regenerate-responses.md is the user's page."""
