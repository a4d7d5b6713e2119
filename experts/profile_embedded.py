"""The embedded (offline, CPU) profile: every slot's offline default, in dependency order.

Speech experts run on every clip and skip (with a reason) where VAD found no speech; the music experts
skip clips whose domain decision has no music; acoustics runs on all clips.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from experts.base import Expert

if TYPE_CHECKING:
    from earmark.config import AnalyzeSection


def embedded_experts(cfg: "AnalyzeSection") -> list[Expert]:
    from experts.acoustics import RoomAcousticsExpert
    from experts.asr import WhisperASRExpert
    from experts.asr_check import HallucinationCheckExpert
    from experts.diarize import ResemblyzerDiarizationExpert
    from experts.domain import HeuristicDomainExpert
    from experts.levels import LevelsExpert
    from experts.music import HPSSSeparationExpert, LibrosaMusicExpert
    from experts.quality import DNSMOSExpert
    from experts.speakers import PitchSpeakerAttributesExpert
    from experts.tags import CoarseTagsExpert
    from experts.vad import SileroVADExpert

    return [
        LevelsExpert(), SileroVADExpert(), DNSMOSExpert(), WhisperASRExpert(beam_size=cfg.asr_beam_size),
        HeuristicDomainExpert(), HallucinationCheckExpert(), ResemblyzerDiarizationExpert(),
        PitchSpeakerAttributesExpert(), CoarseTagsExpert(), HPSSSeparationExpert(), LibrosaMusicExpert(),
        RoomAcousticsExpert(),
    ]
