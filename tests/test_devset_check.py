"""devset.py --split check: a corpus whose speech rows carry `text` and `gender` gives its own words and genders,
and every group with words counts as English; rows of other splits are not mixed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from support.devset import DOMAINS, SR, Sources, make_clip


def _tone(f0: float, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.5 * np.sin(2 * np.pi * f0 * t) * np.hanning(len(t)) * 32767).astype(np.int16)


def _corpus(tmp: Path) -> Path:
    (tmp / "sources").mkdir()
    rows = []
    for i in range(12):  # an English group with words, a group without, an effect, music; and a "dev" row
        rows.append(
            {
                "uid": f"en{i}",
                "kind": "speech",
                "split": "check",
                "group": "g-en",
                "pkg": "p",
                "path": f"en/{i}.als",
                "text": f"line {i}",
                "gender": "female",
                "lang": "en",
            }
        )
        rows.append(
            {
                "uid": f"nl{i}",
                "kind": "speech",
                "split": "check",
                "group": "g-nl",
                "pkg": "p",
                "path": f"nl/{i}.ogg",
                "text": None,
                "gender": "male",
                "lang": "nl",
            }
        )
    rows.append(
        {"uid": "fx", "kind": "sfx", "split": "check", "group": "p", "pkg": "p", "path": "door.wav", "event": "Door"}
    )
    rows.append({"uid": "mu", "kind": "music", "split": "check", "group": "p", "pkg": "p", "path": "m.ogg"})
    rows.append({"uid": "dv", "kind": "speech", "split": "dev", "group": "g-dev", "pkg": "p", "path": "d.ogg"})
    for r in rows:
        seconds = {"speech": 1.2, "sfx": 0.6, "music": 12.0}[r["kind"]]
        np.save(tmp / "sources" / f"{r['uid']}.npy", _tone(220 if r["uid"].startswith("en") else 110, seconds))
    (tmp / "sources.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp


def test_check_split_takes_words_and_gender_from_the_corpus(tmp_path: Path) -> None:
    src = Sources(_corpus(tmp_path), {}, {}, "check")
    assert src.english == ("warzone-memressp", "ktuberling-en", "g-en")  # the DEV names stay, unused here
    assert set(src.speech) == {"g-en", "g-nl"}  # the "dev" row is not mixed
    assert src.gender["g-en"] == "female" and src.gender["g-nl"] == "male"
    assert [e["event"] for e in src.events] == ["Door"] and len(src.music) == 1
    seen = {}
    for i in range(12):
        _, truth = make_clip(src, "SMA", np.random.default_rng([1, 7, i]), f"check_SMA_{i:02d}")
        assert truth["music"] and truth["events"] and truth["events"][0]["class"] == "Door"
        for s in truth["speakers"]:
            seen[s["group"]] = s["gender"]
            for turn in s["turns"]:
                assert turn["text"] == (f"line {turn['file'][3:-4]}" if s["group"] == "g-en" else None)
    assert seen == {"g-en": "female", "g-nl": "male"}  # both groups were drawn, each with its own gender


def test_dev_split_ignores_check_rows(tmp_path: Path) -> None:
    src = Sources(_corpus(tmp_path), {}, {}, "dev")
    assert set(src.speech) == {"g-dev"} and not src.events and "g-en" not in src.english
    assert DOMAINS[0] == "000"


def test_a_speech_domain_clip_always_holds_a_voice(tmp_path: Path) -> None:
    """A group of mostly too-long utterances: the mixer draws again instead of leaving the S clip voiceless."""
    corpus = _corpus(tmp_path)
    for i in range(11):  # g-en: 11 of 12 utterances longer than any clip, one short
        np.save(corpus / "sources" / f"en{i}.npy", _tone(220, 12.0))
    src = Sources(corpus, {}, {}, "check")
    for i in range(20):
        _, truth = make_clip(src, "S00", np.random.default_rng([3, i]), f"check_S00_{i:02d}")
        assert truth["speakers"], i
