"""A build is reproducible: the same inputs and config into a fresh data root give identical rows (measured on the
demo with the embedded LLM and with the fake endpoint: docs/benchmarks.md, "Reproducible builds"); where a backend
cannot promise it, a model behind an external endpoint, the dataset card says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from earmark.schemas import to_table
from earmark.schemas.records import Caption
from earmark.storage import Catalog, ShardMeta
from support.records import caption as _caption


@pytest.mark.parametrize(
    ("endpoint", "said"), [(None, "identical rows in every table"), ("http://gpu:8000/v1", "Not promised")]
)
def test_the_card_says_whether_a_rebuild_gives_the_same_rows(tmp_path: Path, endpoint, said):
    """Builds are reproducible with the embedded LLM (docs/benchmarks.md); where a model behind an external endpoint
    wrote items, the dataset card says a rebuild may differ."""
    from earmark.stages.publish import dataset_card

    cat = Catalog(tmp_path, "ds")
    run = cat.start_run("build", {"llm": {"endpoint": endpoint}})
    meta = ShardMeta(stage="synthesize", stage_version="1", inputs=["x"], prompt_sha="p", model="m")
    cat.write_shard("k1", {"captions": to_table(Caption, [_caption(1)])}, meta, run)  # writer "llm"
    cat.publish({"captions": ["k1"]}, run)
    card = dataset_card(cat, "v0001", {})
    assert said in card.split("## Reproducibility", 1)[1]
    if endpoint:
        assert endpoint in card
