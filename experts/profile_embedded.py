"""The embedded (offline, CPU) profile: every slot's offline default, in dependency order.

The domain decision is the learned tagger (experts/learned/domain.py) unless `analyze.domain = "heuristic"`
selects the older DSP heuristic (experts/domain.py), kept for comparison. Beside the coarse DSP sound labels
(`tags`, experts/tags.py) the learned event tagger names AudioSet classes (`events`, experts/learned/events.py) unless
`analyze.events = false`; YAMNet scores the 521 AudioSet classes per frame (`yamnet`, experts/audioset_tags.py;
not in the evidence yet) unless `analyze.yamnet = false`.
Speech experts run on every clip and skip (with a reason) where VAD found no speech; the music experts
skip clips whose domain decision has no music; acoustics runs on all clips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from earmark.experts.base import Expert

if TYPE_CHECKING:
    from earmark.core.config import AnalyzeSection


def embedded_experts(cfg: AnalyzeSection) -> list[Expert]:
    from earmark.experts.acoustics import RoomAcousticsExpert
    from earmark.experts.asr import WhisperASRExpert
    from earmark.experts.asr_check import HallucinationCheckExpert
    from earmark.experts.audioset_tags import YamnetExpert
    from earmark.experts.diarize import ResemblyzerDiarizationExpert
    from earmark.experts.domain import HeuristicDomainExpert
    from earmark.experts.learned.domain import LearnedDomainExpert
    from earmark.experts.learned.events import LearnedEventsExpert
    from earmark.experts.levels import LevelsExpert
    from earmark.experts.music import HPSSSeparationExpert, LibrosaMusicExpert
    from earmark.experts.quality import DNSMOSExpert
    from earmark.experts.speakers import PitchSpeakerAttributesExpert
    from earmark.experts.tags import CoarseTagsExpert
    from earmark.experts.vad import SileroVADExpert

    return [
        LevelsExpert(),
        SileroVADExpert(),
        DNSMOSExpert(),
        WhisperASRExpert(beam_size=cfg.asr_beam_size),
        LearnedDomainExpert() if cfg.domain == "probe" else HeuristicDomainExpert(),
        HallucinationCheckExpert(),
        ResemblyzerDiarizationExpert(),
        PitchSpeakerAttributesExpert(),
        CoarseTagsExpert(),
        *([LearnedEventsExpert()] if cfg.events else []),
        *([YamnetExpert()] if cfg.yamnet else []),
        HPSSSeparationExpert(),
        LibrosaMusicExpert(),
        RoomAcousticsExpert(),
    ]
