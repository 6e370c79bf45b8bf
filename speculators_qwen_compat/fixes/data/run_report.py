"""Fix: a run ends with what it read and skipped, and never with a silently empty dataset.

Targets: ``load_and_preprocess_dataset`` (the ledger, the counts, no row left a CompatError),
``save_token_frequency_distribution`` (limits checked before it writes) and ``_visualize_sample``
(<= 0.6's IndexError on an empty dataset); docs/upstream.md, "Run report"; data/account/run.py.
"""

from __future__ import annotations

from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import CLI_PREPARE_DATA, PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

RUN = Target(PREPROCESSING, "load_and_preprocess_dataset")
#: 0.8+: the name ``speculators.cli.prepare_data`` binds with ``from ... import``.
CLI_RUN = Target(CLI_PREPARE_DATA, "load_and_preprocess_dataset", optional=True)
#: <= 0.6 die on an empty dataset here (IndexError).
VISUALIZE = Target(PREPROCESSING, "_visualize_sample", params=("preprocessed",), optional=True)
#: Every release writes token_freq.pt here, after the map and before returning the dataset.
SAVE_FREQ = Target(PREPROCESSING, "save_token_frequency_distribution", optional=True)


class RunReportFix(RouteFix):
    name = "run_report"
    summary = "count what a run reads and skips; fail with reasons instead of an empty dataset"
    modules = (PREPROCESSING, CLI_PREPARE_DATA)
    shapes = (
        Shape(
            "load_and_preprocess_dataset reports skips and refuses empty output",
            (RUN, CLI_RUN, VISUALIZE, SAVE_FREQ),
        ),
    )
    applies_on = ReleaseRange("0.5.0", "0.9.0")
