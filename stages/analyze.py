"""analyze stage: one expert over one clip shard; each expert writes its own table.

An expert's spec carries its version, backend and settings, and its shard reads the clips and the tables
of the experts it needs, so changing one expert recomputes its table and the experts downstream of it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import soundfile as sf

from earmark.experts import Expert
from earmark.experts.base import ClipAudio
from earmark.schemas.records import Clip
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


def decoded_batches(clips: Sequence[Clip], size: int = BATCH) -> Iterator[list[ClipAudio]]:
    """The clips decoded, `size` at a time; the next batch is decoded on a second thread while the caller
    analyses this one (FLAC decoding releases the GIL), so a model — on the GPU or the other core — does not
    wait for it. At most two batches are held decoded at once."""
    if not clips:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="earmark-decode") as pool:
        pending = pool.submit(_decode, clips[:size])
        for start in range(size, len(clips) + size, size):
            batch = pending.result()
            if start < len(clips):
                pending = pool.submit(_decode, clips[start : start + size])
            yield batch


def _decode(clips: Sequence[Clip]) -> list[ClipAudio]:
    out = []
    for clip in clips:
        try:
            out.append(decode_clip(clip))
        except sf.LibsndfileError as exc:
            raise ValueError(
                f"clip {clip.clip_id} (from {clip.source_path}): its stored FLAC does not decode ({exc}); the clips "
                "shard holding it is damaged: delete that file under <data root>/<dataset>/clips/ and build again, "
                "which writes it anew"
            ) from exc
    return out


def run(expert: Expert, inputs: Inputs) -> dict[str, list]:
    """The stage function: the expert's records for every clip of the shard."""
    clips = inputs("clips")
    context = {need: {r.clip_id: r for r in inputs(need)} for need in expert.needs}
    records = []
    for batch in decoded_batches(clips):
        records += expert.analyze(batch, context)
    return {expert.name: records}
