"""The paper profile: MECAT's expert models (bring your weights; see experts/models.py), in dependency order.

Slots with a paper backend use it: AudioSet tagger → tags and domain, Whisper large-v3 (faster-whisper or
transformers, + whisperX) → asr, pyannote → diarization, HF classifiers → speakers, demucs → separation, HF
music tagger → music tags, NISQA → nisqa, an audio-language model → description (only with an endpoint).
Slots without one reuse the offline default (levels, vad, dnsmos, asr_check, acoustics, librosa music
analysis). A slot whose model id is configured as None falls back to its offline default where one exists,
or is left out; a configured model whose weights or package are missing fails here, when the profile is
built, never silently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from earmark.experts.base import Expert

if TYPE_CHECKING:
    from earmark.core.config import AnalyzeSection


def paper_experts(cfg: AnalyzeSection) -> list[Expert]:
    from earmark.experts.acoustics import RoomAcousticsExpert
    from earmark.experts.asr_check import HallucinationCheckExpert
    from earmark.experts.levels import LevelsExpert
    from earmark.experts.music import HPSSSeparationExpert
    from earmark.experts.paper.tagger import AudioSetTagsExpert, TaggerDomainExpert
    from earmark.experts.quality import DNSMOSExpert
    from earmark.experts.speakers import PitchSpeakerAttributesExpert
    from earmark.experts.vad import SileroVADExpert

    root, device, batch, precision = cfg.models_dir, cfg.device, cfg.batch_size, cfg.precision
    out: list[Expert] = [
        LevelsExpert(),
        SileroVADExpert(),
        DNSMOSExpert(device=device, batch_size=batch),
        AudioSetTagsExpert(
            cfg.tagger_model, root, device=device, window_s=cfg.tagger_window_s, batch_size=batch, precision=precision
        ),
        TaggerDomainExpert(cfg.tagger_model, threshold=cfg.tag_threshold),
        _asr(cfg),
        HallucinationCheckExpert(),
    ]
    if cfg.diarization_model:
        from earmark.experts.paper.diarize import PyannoteDiarizationExpert

        out.append(PyannoteDiarizationExpert(cfg.diarization_model, root, device=device))
    else:  # imported only here: its class reads the resemblyzer package's version, which a GPU image may lack
        from earmark.experts.diarize import ResemblyzerDiarizationExpert

        out.append(ResemblyzerDiarizationExpert())
    attributes = {
        "gender": cfg.gender_model,
        "age_band": cfg.age_model,
        "emotion": cfg.emotion_model,
        "accent": cfg.accent_model,
    }
    if any(attributes.values()):
        from earmark.experts.paper.speakers import HFSpeakerAttributesExpert

        out.append(HFSpeakerAttributesExpert(attributes, root, device=device, batch_size=batch, precision=precision))
    else:
        out.append(PitchSpeakerAttributesExpert())
    from earmark.experts.paper.music import DemucsSeparationExpert, PaperMusicExpert

    out.append(
        DemucsSeparationExpert(cfg.separation_model, root, device=device)
        if cfg.separation_model
        else HPSSSeparationExpert()
    )
    out.append(PaperMusicExpert(cfg.music_tagger_model, root, device=device, batch_size=batch, precision=precision))
    out.append(RoomAcousticsExpert(device=device))  # PLCMOS on the GPU through its torch port where CUDA is
    if cfg.nisqa_model:
        from earmark.experts.paper.nisqa import NISQAExpert

        out.append(NISQAExpert(cfg.nisqa_model, root, device=device, batch_size=batch))
    if cfg.description_endpoint:
        from earmark.experts.paper.describe import AudioLMDescriptionExpert

        out.append(AudioLMDescriptionExpert(cfg.description_endpoint, cfg.description_model))
    return out


def _asr(cfg: AnalyzeSection) -> Expert:
    """Whisper through faster-whisper (CTranslate2) or through transformers (torch), per `asr_backend`."""
    if cfg.asr_backend == "transformers":
        from earmark.experts.paper.asr_hf import TransformersWhisperPaperExpert

        return TransformersWhisperPaperExpert(
            cfg.asr_model,
            cfg.models_dir,
            device=cfg.device,
            precision=cfg.precision,
            beam_size=cfg.asr_beam_size,
            batch_size=cfg.batch_size,
            align_model=cfg.asr_align_model,
            max_new_tokens=cfg.asr_max_new_tokens,
        )
    from earmark.experts.paper.asr import FasterWhisperPaperExpert

    return FasterWhisperPaperExpert(
        cfg.asr_model,
        cfg.models_dir,
        device=cfg.device,
        compute_type=cfg.asr_compute_type,
        beam_size=cfg.asr_beam_size,
        batch_size=cfg.batch_size,
        align_model=cfg.asr_align_model,
        max_new_tokens=cfg.asr_max_new_tokens,
    )
