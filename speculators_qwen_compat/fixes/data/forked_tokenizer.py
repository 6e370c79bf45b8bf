"""Fix (speed): forked map workers use the tokenizer they inherited instead of a pickled copy.

Target: ``build_eagle3_dataset`` (<= 0.7), whose map lambda holds the tokenizer: every job pickles
it, every worker rebuilds it (docs/upstream.md, "Map workers"). Meanwhile it crosses to forked
workers by reference (data/render/forked_tokenizer.py); anything else pickles as before.
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

BUILD = Target(
    PREPROCESSING, "build_eagle3_dataset", params=("dataset", "tokenizer|processor", "num_proc")
)


class ForkedTokenizerFix(RouteFix):
    name = "forked_tokenizer"
    summary = "map workers use the tokenizer they were forked with, not a pickled copy per job"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "the map's tokenizer crosses to forked workers by reference",
            (BUILD,),
            when=(present(PREPROCESSING, BUILD.path),),
        ),
    )
    otherwise = not_needed("the map function holds a render endpoint, not a tokenizer")
    applies_on = ReleaseRange("0.5.0", "0.7.0.2")
