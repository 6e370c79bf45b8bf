"""Fix (speed): upstream's token-frequency count in Arrow batches instead of one row at a time.

Target: ``save_token_frequency_distribution`` as preprocessing binds it (docs/upstream.md, "Token
frequencies"; cost: docs/maintainers.md, "Speed"). Counted with numpy, saved as the same dict in
the same insertion order (data/account/token_frequency.py); other cases go to upstream.
"""

from __future__ import annotations

from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

COUNTER = Target(
    PREPROCESSING, "save_token_frequency_distribution", params=("dataset", "output_path")
)


class TokenFrequencyFix(RouteFix):
    name = "token_frequency"
    summary = "count the token-frequency file over Arrow batches (same file, a fraction of the CPU)"
    modules = (PREPROCESSING,)
    shapes = (Shape("counted over Arrow batches", (COUNTER,)),)
    applies_on = ReleaseRange("0.5.0", "0.9.0")
