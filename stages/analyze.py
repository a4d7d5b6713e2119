"""analyze stage: one expert over one clip shard; each expert writes its own table.

An expert's spec carries its version, backend and settings, and its shard reads the clips and the tables
of the experts it needs, so changing one expert recomputes its table and the experts downstream of it.
"""

from __future__ import annotations

from earmark.experts import Expert
from earmark.stages.base import Inputs, StageSpec
from earmark.stages.ingest import decode_clip

BATCH = 32  # clips decoded and analysed at a time, bounding memory on shards of long files


def spec(expert: Expert) -> StageSpec:
    return StageSpec(
        f"analyze:{expert.name}",
        expert.version,
        writes=(expert.name,),
        reads=("clips", *expert.needs),
        model=expert.backend,
        config=expert.key_config(),
    )


def run(expert: Expert, inputs: Inputs) -> dict[str, list]:
    """The stage function: the expert's records for every clip of the shard."""
    clips = inputs("clips")
    context = {need: {r.clip_id: r for r in inputs(need)} for need in expert.needs}
    records = []
    for i in range(0, len(clips), BATCH):
        records += expert.analyze([decode_clip(c) for c in clips[i : i + BATCH]], context)
    return {expert.name: records}
