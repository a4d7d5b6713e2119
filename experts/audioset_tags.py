"""AudioSet classes scored by YAMNet (label set "audioset-yamnet-tflite-1"): table `yamnet` of the embedded profile.

Every clip, whatever its domain, is cut into 0.975 s frames every 0.48 s, the last one filled with zeros
(`padded_s` says how much), and each frame gets the 521 classes' scores (experts/yamnet: Google's TF-Lite
release, vendored and checked by sha256, run with ai-edge-litert on the process's thread budget). The row holds
every frame's scores, their max and mean over the clip, the frames' mean 1,024-d embedding, for reading the top
classes by name, and per 2 s window the probabilities of the event head over the embedding (experts/yamnet
`event_head.npz`). Neither scores nor head are stated as such: the evidence states an event from them only for the
classes and ontology groups whose precision was measured (`earmark.experts.yamnet.events`, its policy file).
`analyze.yamnet = false` leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import numpy as np

from earmark.core.threads import cpu_threads
from earmark.experts.audio import samples_16k
from earmark.experts.base import ClipAudio, Context, Expert, load_once
from earmark.schemas.records import AudioSetScores, LabelProb

TOP_K = 10  # classes named in `top`
EMBEDDING_DECIMALS = 4  # the dequantised int8 steps are 0.022: 4 decimals keep them apart, and take 2/3 the bytes
HEAD_DECIMALS = 5  # the head's window probabilities: its thresholds lie as close to 1 as 0.99


def _model() -> Any:
    from earmark.experts.yamnet import yamnet

    return yamnet()


class YamnetExpert(Expert):
    name, version, record = "yamnet", "2", AudioSetScores

    def __init__(self) -> None:
        from earmark.experts.yamnet.model import MODEL_SHA256

        self.backend = f"yamnet:tflite-1-{MODEL_SHA256[:12]}+ai-edge-litert:{version('ai-edge-litert')}"

    def key_config(self) -> dict[str, Any]:
        from earmark.experts.yamnet.events import event_head
        from earmark.experts.yamnet.model import CLASS_MAP_SHA256, FRAME, HOP, LABEL_SET, MODEL_SHA256

        return {
            "weights": MODEL_SHA256,
            "class_map": CLASS_MAP_SHA256,
            "label_set": LABEL_SET,
            "frame": FRAME,
            "hop": HOP,
            "pad": "zeros",
            "top_k": TOP_K,
            "embedding_decimals": EMBEDDING_DECIMALS,
            "event_head": event_head().sha256,
        }

    def analyze(self, clips: Sequence[ClipAudio], context: Context) -> list[AudioSetScores]:
        model = load_once("yamnet-tflite-1", _model)
        return [self._score(model, c) for c in clips]

    def _score(self, model: Any, clip: ClipAudio) -> AudioSetScores:
        from earmark.experts.yamnet.events import event_head, head_windows
        from earmark.experts.yamnet.model import FRAME, HOP, LABEL_SET, SR

        x = samples_16k(clip)
        got = model.score(x, threads=cpu_threads(), embedding=True)
        n = len(got.scores)
        clip_max = got.scores.max(axis=0)
        top = np.argsort(-clip_max, kind="stable")[:TOP_K]
        return AudioSetScores(
            **self.lineage(clip.clip_id),
            label_set=LABEL_SET,
            frame_s=FRAME / SR,
            hop_s=HOP / SR,
            padded_s=((n - 1) * HOP + FRAME - x.size) / SR,
            frame_scores=got.scores.tolist(),
            clip_max=clip_max.tolist(),
            clip_mean=(got.scores.sum(axis=0, dtype=np.float64) / n).tolist(),
            embedding=np.round(got.embeddings.mean(axis=0, dtype=np.float64), EMBEDDING_DECIMALS).tolist(),
            top=[LabelProb(label=model.classes[i].name, prob=float(clip_max[i])) for i in top],
            event_head=event_head().sha256[:12],
            window_events=np.round(head_windows(got.scores, got.embeddings, x.size), HEAD_DECIMALS).tolist(),
        )
