"""The embedded (offline, CPU) profile: every slot's offline default, in dependency order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from experts.base import Expert

if TYPE_CHECKING:
    from earmark.config import AnalyzeSection


def embedded_experts(cfg: "AnalyzeSection") -> list[Expert]:
    from experts.asr import WhisperASRExpert
    from experts.domain import HeuristicDomainExpert
    from experts.levels import LevelsExpert
    from experts.quality import DNSMOSExpert
    from experts.vad import SileroVADExpert

    return [LevelsExpert(), SileroVADExpert(), DNSMOSExpert(), WhisperASRExpert(beam_size=cfg.asr_beam_size),
            HeuristicDomainExpert()]
