"""The analyze stage decodes the next batch of clips on a second thread while the expert runs on this one."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
import soundfile as sf

from earmark.schemas.records import Clip
from earmark.stages import analyze


def _clip(i: int, flac: bytes | None = None) -> Clip:
    if flac is None:
        buf = io.BytesIO()
        sf.write(buf, np.full(1600, i / 100, dtype=np.float32), 16_000, format="FLAC", subtype="PCM_16")
        flac = buf.getvalue()
    return Clip(
        clip_id=f"c{i:03d}",
        source_path=f"f{i}.wav",
        source_sha256="0" * 64,
        source_format="WAV",
        clip_index=0,
        offset_s=0.0,
        duration_s=0.1,
        sample_rate=16_000,
        audio_flac=flac,
    )


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 64, 70])
def test_batches_hold_every_clip_once_in_order(n):
    clips = [_clip(i) for i in range(n)]
    batches = list(analyze.decoded_batches(clips, 32))
    assert [len(b) for b in batches] == [min(32, n - s) for s in range(0, n, 32)]
    flat = [c for b in batches for c in b]
    assert [c.clip_id for c in flat] == [c.clip_id for c in clips]
    for i, c in enumerate(flat):
        assert c.samples == pytest.approx(np.full(1600, i / 100), abs=1e-4)


def test_the_next_batch_is_decoded_while_this_one_is_analysed(monkeypatch):
    """While the expert holds batch k (and has not asked for k + 1), batch k + 1 gets decoded, in the decode
    thread: waited for as an event, not timed against a sleep (a busy machine delayed the decode past it)."""
    decoded: dict[str, str] = {}
    changed = threading.Condition()
    decode = analyze.decode_clip

    def traced(clip):
        out = decode(clip)
        with changed:
            decoded[clip.clip_id] = threading.current_thread().name
            changed.notify_all()
        return out

    monkeypatch.setattr(analyze, "decode_clip", traced)
    clips = [_clip(i) for i in range(6)]
    ids = [c.clip_id for c in clips]
    for k, batch in enumerate(analyze.decoded_batches(clips, 2)):
        assert [c.clip_id for c in batch] == ids[2 * k : 2 * k + 2]
        following = ids[2 * k + 2 : 2 * k + 4]  # the expert is still on batch k: k + 1 comes without asking
        with changed:
            assert changed.wait_for(lambda f=following: all(c in decoded for c in f), timeout=600), (k, decoded)
    assert len(decoded) == 6 and all(name.startswith("earmark-decode") for name in decoded.values())


def test_a_clip_that_does_not_decode_fails_the_stage_naming_the_clip_and_its_source():
    clips = [_clip(0), _clip(1, flac=b"not flac"), _clip(2)]
    with pytest.raises(ValueError, match=r"clip c001 \(from f1.wav\).*does not decode.*delete that file.*build again"):
        list(analyze.decoded_batches(clips, 1))
