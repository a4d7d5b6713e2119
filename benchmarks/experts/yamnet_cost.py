"""What the YAMNet expert (table `yamnet`) costs per 10 s clip on one core, and what its rows take in Parquet.

    taskset -c 0 env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/experts/yamnet_cost.py

On N generated 10 s clips (earmark.corpus, every domain, cut from the clips laid end to end) it times the
expert clip by clip on one thread (`[run] cpu_threads = 1`), with the embedding read (what the expert does) and
without it (the interpreter without `experimental_preserve_all_tensors`, scores only), after one warm-up clip that
loads the model. Then it writes the expert's rows as one shard the way the catalog does (zstd,
`earmark.storage.shards.compression`) and prints the bytes per clip, in all and per column (each column
written alone, so the per-column figures include no file footer).
"""

from __future__ import annotations

import argparse
import io
import time

import numpy as np
import pyarrow.parquet as pq
from event_tagger_cost import ten_second_clips  # this folder's script

from earmark.core import threads
from earmark.experts.audioset_tags import YamnetExpert
from earmark.experts.base import ClipAudio
from earmark.experts.yamnet import yamnet
from earmark.schemas import AudioSetScores, to_table
from earmark.storage.shards import compression


def parquet_bytes(table) -> int:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression(table.schema))
    return len(sink.getvalue())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    threads.apply(1)
    clips = [ClipAudio(f"c{i}", x) for i, x in enumerate(ten_second_clips(a.n, a.seed))]
    expert, model = YamnetExpert(), yamnet()
    expert.analyze(clips[:1], {})
    model.score(clips[0].samples, threads=1, embedding=False)
    rows, with_emb, scores_only = [], [], []
    for c in clips:
        t0 = time.perf_counter()
        rows += expert.analyze([c], {})
        t1 = time.perf_counter()
        model.score(c.samples, threads=1, embedding=False)
        t2 = time.perf_counter()
        with_emb.append(t1 - t0)
        scores_only.append(t2 - t1)
    print(f"{len(clips)} clips of 10 s, one thread, {len(rows[0].frame_scores)} frames each")
    for name, v in (("expert (scores + embedding + row)", with_emb), ("scores only (interpreter)", scores_only)):
        print(f"  {name:36s} median {np.median(v) * 1000:7.1f} ms   mean {np.mean(v) * 1000:7.1f} ms")
    table = to_table(AudioSetScores, rows)
    total = parquet_bytes(table)
    print(f"Parquet (zstd), one shard of {len(rows)} rows: {total} bytes, {total / len(rows):.0f} per clip")
    for col in ("frame_scores", "clip_max", "clip_mean", "embedding", "top"):
        print(f"  {col:14s} {parquet_bytes(table.select([col])) / len(rows):7.0f} bytes per clip (column alone)")


if __name__ == "__main__":
    main()
