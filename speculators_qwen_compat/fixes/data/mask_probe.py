"""Fix: the assistant-mask probe that kills prepare_data before it reads a row.

Target: ``_supports_assistant_mask`` (<= 0.7): a strict template's ``TemplateError`` escapes and
a processor's batched mask is misread (docs/upstream.md, "Mask probe"). Any error means "no HF
assistant mask"; the batch is unpacked there and in ``_get_input_ids_loss_mask`` (data/render).
"""

from __future__ import annotations

from speculators_qwen_compat.core.fix import not_needed
from speculators_qwen_compat.core.targets import ReleaseRange, Shape, Target, present
from speculators_qwen_compat.core.upstream import PREPROCESSING
from speculators_qwen_compat.route.declaration import RouteFix

PROBE = Target(PREPROCESSING, "_supports_assistant_mask", arity=1)
FALLBACK = present(PREPROCESSING, "_detect_assistant_pattern")
HF_MASK = Target(PREPROCESSING, "_get_input_ids_loss_mask", optional=True)
ADAPT = Target(PREPROCESSING, "_adapt_conv_for_hf", optional=True)


class MaskProbeFix(RouteFix):
    name = "mask_probe"
    summary = "probe for HF assistant masks with a well-formed conversation; never raise"
    modules = (PREPROCESSING,)
    shapes = (
        Shape(
            "the probe is replaced by one that never raises",
            (PROBE, FALLBACK, HF_MASK, ADAPT),
            when=(present(PREPROCESSING, PROBE.path),),
        ),
    )
    otherwise = not_needed("this release has no assistant-mask probe")
    applies_on = ReleaseRange("0.5.0", "0.7.0.2")
