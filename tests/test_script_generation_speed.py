"""The speed fixes of 0.5-0.7 give upstream's answers: ``offsets_loss_mask`` the masks of
upstream's own ``_create_loss_mask_from_offsets``, ``forked_tokenizer`` the rows of upstream's own
``build_eagle3_dataset`` (both as shipped, unwrapped: the oracles), each beside a count showing
the fixed path ran (no per-token tensor writes; no tokenizer pickled per map job).
programs/script_generation_speed_probe.py runs both in one interpreter of this release. 0.8+ have
neither target (their states, not-needed, are checked by test_activation.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import RENDERS, run_program

pytestmark = pytest.mark.skipif(RENDERS, reason="0.8+: no offsets masks, no tokenizer in the map")


@pytest.fixture(scope="module")
def report(qwen36_dir: Path) -> dict[str, Any]:
    result = run_program("script_generation_speed_probe", str(qwen36_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_span_masks_are_upstreams_masks(report: dict[str, Any]) -> None:
    assert report["states"]["offsets_loss_mask"] == "applied"
    masks = report["masks"]
    assert masks["differ"] == []
    assert masks["cases"] > 200 and masks["supervised_tokens"] > 5000  # real spans were compared
    # upstream writes one token per call; the fixed path none (only the cases it hands back:
    # the unsorted starts, which mark as many tokens as upstream does there)
    assert masks["upstream_setitem_calls"] > masks["supervised_tokens"] / 2
    assert masks["fixed_setitem_calls"] < masks["upstream_setitem_calls"] / 20


def test_map_workers_use_the_tokenizer_they_were_forked_with(report: dict[str, Any]) -> None:
    assert report["states"]["forked_tokenizer"] == "applied"
    builds = report["builds"]
    assert builds["start_method"] == "fork"
    assert builds["rows"] > 30 and builds["same_rows"]
    # upstream pickles the whole tokenizer into each of the 2 map jobs; fixed, none of it crosses
    # (what is left is the shards' rows, the same on both sides)
    saved = builds["upstream_bytes_sent"] - builds["fixed_bytes_sent"]
    assert saved > 1.8 * builds["tokenizer_bytes"]
    assert not builds["reducer_left"]  # the registration ends with upstream's call
    assert builds["by_value_under_spawn"]  # a spawned worker would get the whole tokenizer
