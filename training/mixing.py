"""The audio side of the mixes: source pools, levels, room tone, speech / music / effect stems, reverb, codecs,
and the per-window labelling rules (audible / salient, per stem and per event). Shared by build_corpus.py (the
domain tagger's mixes) and event_mixes.py (the event tagger's); it imports no training script.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from corpus_packages import EVENT_PACKAGES, EXTRA_PACKAGES
from earmark.experts.learned.windows import SR, window_bounds


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def frame_db(x: np.ndarray, hop: int = 320) -> np.ndarray:
    n = len(x) // hop
    if n == 0:
        return np.array([20 * np.log10(np.sqrt(np.mean(x**2)) + 1e-10)])
    f = x[: n * hop].reshape(n, hop)
    return 10 * np.log10(np.mean(f * f, axis=1) + 1e-12)


def trim(x: np.ndarray, top_db: float = 45.0) -> np.ndarray:
    d = frame_db(x)
    act = np.where(d > d.max() - top_db)[0]
    if len(act) == 0:
        return x[:0]
    a, b = act[0] * 320, (act[-1] + 1) * 320
    return x[max(0, a - 320) : b + 320]


# --------------------------------------------------------------------------- mixing
class Pools:
    """The decoded sources of one split, by kind and group, read from the corpus folder `tdir` (<cache>/<tag>:
    its sources/ and espeak/); extension (`extra`) and event-tagger (`events`) packages only when asked for."""

    def __init__(
        self, tdir: Path, rows: list[dict], split: str, use_espeak: bool, extra: bool = False, events: bool = False
    ):
        self.sdir = tdir / "sources"
        self.by = {}
        for r in rows:
            if (
                r["split"] != split
                or (not extra and r["pkg"] in EXTRA_PACKAGES)
                or (not events and r["pkg"] in EVENT_PACKAGES)
            ):
                continue
            self.by.setdefault(r["kind"], {}).setdefault(r["group"], []).append(r)
        self.espeak = sorted((tdir / "espeak").glob("tts_*.npy")) if use_espeak else []
        self._cache = {}
        self.alerts = {g: [r for r in rs if r["tag"] == "alert"] for g, rs in self.by.get("sfx", {}).items()}
        self.alerts = {g: rs for g, rs in self.alerts.items() if rs}
        self.beds = [
            r for rs in self.by.get("sfx", {}).values() for r in rs if r["duration"] >= 4.0 and r["tag"] != "alert"
        ]
        self.loops = {g: rs for g, rs in self.by.get("music", {}).items() if rs and rs[0]["tag"] == "loop"}
        self.tracks = {g: rs for g, rs in self.by.get("music", {}).items() if rs and rs[0]["tag"] != "loop"}
        self.drumhits = [r for rs in self.by.get("drumhit", {}).values() for r in rs]

    def load(self, uid_or_path) -> np.ndarray:
        key = str(uid_or_path)
        if key not in self._cache:
            p = uid_or_path if isinstance(uid_or_path, Path) else self.sdir / f"{uid_or_path}.npy"
            self._cache[key] = np.load(p, mmap_mode="r")
        return np.asarray(self._cache[key], dtype=np.float32) / 32767.0

    def pick(self, rng, groups: dict) -> dict:
        g = sorted(groups)[rng.integers(len(groups))]
        rs = groups[g]
        return rs[rng.integers(len(rs))]


def db2amp(db):
    return 10 ** (db / 20)


def active_rms_db(x):
    d = frame_db(x)
    if d.max() < -100:
        return -120.0
    act = d > d.max() - 30
    return float(10 * np.log10(np.mean(10 ** (d[act] / 10)) + 1e-12))


def set_level(x, target_db):
    cur = active_rms_db(x)
    if cur < -100:
        return x
    return x * db2amp(target_db - cur)


def colored_noise(rng, n, kind):
    w = rng.standard_normal(n).astype(np.float32)
    if kind == "white":
        return w
    X = np.fft.rfft(w)
    f = np.arange(len(X)) + 1.0
    X = X / (np.sqrt(f) if kind == "pink" else f)
    y = np.fft.irfft(X, n).astype(np.float32)
    return y / (np.std(y) + 1e-9)


def room_tone(rng, n, level_db):
    kind = rng.choice(["white", "pink", "brown", "pink", "brown"])
    x = colored_noise(rng, n, kind)
    if rng.random() < 0.5:  # HVAC-like low-pass hum bed
        from scipy.signal import butter, sosfilt

        sos = butter(2, float(rng.uniform(300, 3000)), "low", fs=SR, output="sos")
        x = sosfilt(sos, x).astype(np.float32)
    if rng.random() < 0.25:  # mains hum
        t = np.arange(n) / SR
        f0 = rng.choice([50.0, 60.0])
        h = sum(rng.uniform(0.2, 1.0) / k * np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) for k in (1, 2, 3))
        x = x + h.astype(np.float32) * rng.uniform(0.3, 2.0)
    x = x / (np.sqrt(np.mean(x**2)) + 1e-12)
    return (x * db2amp(level_db)).astype(np.float32)


def speech_track(rng, pools: Pools, n, continuous, use_tts):
    """Concatenate utterances (one speaker group) into a track of n samples."""
    y = np.zeros(n, np.float32)
    groups = pools.by["speech"]
    g = sorted(groups)[rng.integers(len(groups))]
    if continuous:
        pos = int(rng.uniform(0, 0.3) * SR)
        end = n - int(rng.uniform(0, 0.3) * SR)
    else:
        span = rng.uniform(0.5, max(0.6, n / SR - 0.2))
        pos = int(rng.uniform(0, max(0.01, n / SR - span)) * SR)
        end = min(n, pos + int(span * SR))
    first = True
    while pos < end:
        if use_tts:
            u = pools.load(pools.espeak[rng.integers(len(pools.espeak))])
        else:
            r = groups[g][rng.integers(len(groups[g]))]
            u = pools.load(r["uid"])
        u = u * db2amp(rng.uniform(-4, 4))
        if not first and rng.random() < 0.15:
            pos += int(rng.uniform(0.6, 1.5) * SR)  # occasional longer pause
        k = min(len(u), n - pos)
        if k <= 0:
            break
        if k < len(u) and not first and k < 0.3 * SR:
            break
        y[pos : pos + k] += u[:k]
        pos += k + int(rng.uniform(0.04, 0.5) * SR)
        first = False
    return y


def _tile(x, n, rng):
    if len(x) >= n:
        o = int(rng.integers(0, len(x) - n + 1))
        return x[o : o + n].copy()
    reps = int(math.ceil(n / len(x))) + 1
    y = np.tile(x, reps)
    o = int(rng.integers(0, len(x)))
    return y[o : o + n].copy()


def drum_sequence(rng, pools: Pools, n):
    hits = pools.drumhits
    bpm = rng.uniform(75, 175)
    step = 60.0 / bpm / 4  # 16th notes
    names = [r["path"].lower() for r in hits]
    kick = [r for r, nm in zip(hits, names) if re.search(r"(bd_|kick|bass|dhec|ghe|tun)", nm)] or hits
    snare = [r for r, nm in zip(hits, names) if re.search(r"(sn_|snare|clap|na|tas|te)", nm)] or hits
    hat = [r for r, nm in zip(hits, names) if re.search(r"(hat|hh|cymbal|ride|ke|re|tom)", nm)] or hits
    ks, ss, hs = (pools.load(k[rng.integers(len(k))]["uid"]) for k in (kick, snare, hat))
    pat_k = rng.random(16) < 0.25
    pat_k[0] = True
    pat_s = np.zeros(16, bool)
    pat_s[[4, 12]] = True
    pat_s |= rng.random(16) < 0.08
    pat_h = (np.arange(16) % rng.choice([1, 2]) == 0) & (rng.random(16) < 0.95)
    y = np.zeros(n + SR, np.float32)
    t, i = rng.uniform(0, step * 4), 0
    swing = rng.uniform(0, 0.25) * step
    while t * SR < n:
        p = int((t + (swing if i % 2 else 0)) * SR)
        for pat, s, g in ((pat_k, ks, 1.0), (pat_s, ss, 0.8), (pat_h, hs, 0.45)):
            if pat[i % 16]:
                s2 = s[: min(len(s), len(y) - p)] * g * db2amp(rng.uniform(-3, 1))
                y[p : p + len(s2)] += s2
        t += step
        i += 1
    return y[:n]


def music_track(rng, pools: Pools, n, drum_bias):
    r_ = rng.random()
    if r_ < drum_bias and pools.loops:
        r = pools.pick(rng, pools.loops)
        x = _tile(pools.load(r["uid"]), n, rng)
        src = r["uid"]
    elif r_ < drum_bias * 1.5 and pools.drumhits:
        x = drum_sequence(rng, pools, n)
        src = "drumseq"
    else:
        r = pools.pick(rng, pools.tracks or pools.loops)
        x = _tile(pools.load(r["uid"]), n, rng)
        src = r["uid"]
    if rng.random() < 0.25 and n >= 5 * SR:  # partial: music starts or stops inside the clip
        # at least 3 s: a shorter musical snippet is hard to tell from a jingle / chime (event)
        seg = int(rng.uniform(3.0, max(3.0, n / SR * 0.8)) * SR)
        a = int(rng.integers(0, n - seg + 1))
        m = np.zeros(n, np.float32)
        fade = min(int(0.3 * SR), seg // 4)
        env = np.ones(seg, np.float32)
        env[:fade] = np.linspace(0, 1, fade)
        env[-fade:] = np.linspace(1, 0, fade)
        m[a : a + seg] = env
        x = x * m
    return x, src


def synth_beep(rng):
    """UI beep / chime (TRAIN only): 1-4 short decaying tones."""
    notes = int(rng.integers(1, 4))
    f0 = rng.uniform(400, 2500)
    out = []
    for _ in range(notes):
        dur = rng.uniform(0.05, 0.4)
        t = np.arange(int(dur * SR)) / SR
        f = f0 * 2 ** (rng.integers(-7, 8) / 12)
        wave = np.sin(2 * np.pi * f * t)
        if rng.random() < 0.4:
            wave = np.sign(wave) * 0.5 + 0.5 * wave  # harsher beep
        if rng.random() < 0.5:
            wave += 0.3 * np.sin(2 * np.pi * 2.76 * f * t)  # bell partial
        env = np.exp(-t * rng.uniform(3, 25)) if rng.random() < 0.6 else np.minimum(1, (dur - t) * 50)
        out.append((wave * env).astype(np.float32))
        out.append(np.zeros(int(rng.uniform(0, 0.12) * SR), np.float32))
    return np.concatenate(out)


def events_track(rng, pools: Pools, n, alert_bias, synth_beeps, events: list | None = None):
    """The sound-events stem of a domain mix. With `events` (a list), each placed event is appended to it as
    {"row": source row or None (synthetic beep), "start": sample, "x": its samples as placed}: the RNG draws are
    the same either way, so recording the events does not change the audio."""
    y = np.zeros(n, np.float32)
    if rng.random() < 0.25 and pools.beds:
        r = pools.beds[rng.integers(len(pools.beds))]
        y += _tile(pools.load(r["uid"]), n, rng)
        if events is not None:
            events.append({"row": r, "start": 0, "x": y.copy()})
        return y
    k = int(rng.choice([1, 1, 2, 2, 3, 4, 6]))
    sfx = pools.by["sfx"]
    for _ in range(k):
        u = rng.random()
        r = None
        if u < alert_bias * 0.5 and synth_beeps:
            x = synth_beep(rng)
        elif u < alert_bias and pools.alerts:
            r = pools.pick(rng, pools.alerts)
            x = pools.load(r["uid"])
        else:
            r = pools.pick(rng, sfx)
            x = pools.load(r["uid"])
        maxlen = int(rng.uniform(0.3, 6.0) * SR)
        if len(x) > maxlen:
            o = int(rng.integers(0, len(x) - maxlen + 1))
            x = x[o : o + maxlen].copy()
            f = min(len(x) // 4, int(0.05 * SR))
            if f > 0:
                x[-f:] *= np.linspace(1, 0, f)
        x = x * db2amp(rng.uniform(-6, 0))
        p = int(rng.integers(0, max(1, n - min(len(x), n) // 2)))
        kk = min(len(x), n - p)
        y[p : p + kk] += x[:kk]
        if events is not None and kk > 0:
            events.append({"row": r, "start": p, "x": x[:kk].copy()})
    return y


def reverb(rng, x, rec=None):
    """Exponentially decaying noise IR (RT60 0.15-0.9 s) with a direct path; `rec` gets the RT60 drawn and
    the direct-to-reverberant energy ratio (ground truth for the by-hand check; the audio is unchanged)."""
    rt60 = rng.uniform(0.15, 0.9)
    L = int(rt60 * SR)
    t = np.arange(L) / SR
    ir = (rng.standard_normal(L) * np.exp(-6.9 * t / rt60)).astype(np.float32)
    ir[0] = 1.0 / rng.uniform(0.3, 1.2)
    if rec is not None:
        rec["rt60_s"] = round(float(rt60), 3)
        rec["drr_db"] = round(float(10 * np.log10(ir[0] ** 2 / max(float(np.sum(ir[1:] ** 2)), 1e-12))), 1)
    from scipy.signal import fftconvolve

    y = fftconvolve(x, ir)[: len(x)].astype(np.float32)
    return y * (np.sqrt(np.mean(x**2)) / (np.sqrt(np.mean(y**2)) + 1e-12))


# speech codecs (ffmpeg encoders): IVR prompts / codec speech samples / VoIP. Generated from our
# own TRAIN speech only.
CODECS = [
    ("codec2-3200", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "3200"], "codec2"),
    ("codec2-1600", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "1600"], "codec2"),
    ("codec2-1300", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "1300"], "codec2"),
    ("codec2-700C", ["-ar", "8000", "-c:a", "libcodec2", "-mode", "700C"], "codec2"),
    ("gsm", ["-ar", "8000", "-c:a", "libgsm"], "gsm"),
    ("g726-16k", ["-ar", "8000", "-c:a", "g726", "-b:a", "16k"], "wav"),
    ("g726-32k", ["-ar", "8000", "-c:a", "g726", "-b:a", "32k"], "wav"),
    ("g723.1", ["-ar", "8000", "-c:a", "g723_1", "-b:a", "6.3k"], "g723_1"),
    ("speex-nb", ["-ar", "8000", "-c:a", "libspeex"], "ogg"),
    ("opus-8k", ["-c:a", "libopus", "-b:a", "8k"], "ogg"),
    ("opus-16k", ["-c:a", "libopus", "-b:a", "16k"], "ogg"),
    ("mp3-16k", ["-ar", "8000", "-c:a", "libmp3lame", "-b:a", "16k"], "mp3"),
    ("mulaw", ["-ar", "8000", "-c:a", "pcm_mulaw"], "wav"),
    ("alaw", ["-ar", "8000", "-c:a", "pcm_alaw"], "wav"),
]


def codec(x: np.ndarray, name: str) -> np.ndarray:
    """Encode + decode through one of CODECS (ffmpeg); same length as x; x unchanged on failure."""
    _, args, fmt = next(c for c in CODECS if c[0] == name)
    peak = float(np.abs(x).max()) + 1e-9
    try:
        e = subprocess.run(
            [
                "ffmpeg",
                "-nostdin",
                "-v",
                "error",
                "-f",
                "f32le",
                "-ar",
                str(SR),
                "-ac",
                "1",
                "-i",
                "pipe:0",
                *args,
                "-f",
                fmt,
                "pipe:1",
            ],
            input=(x / peak * 0.5).astype(np.float32).tobytes(),
            capture_output=True,
            check=True,
        )
        d = subprocess.run(
            [
                "ffmpeg",
                "-nostdin",
                "-v",
                "error",
                "-f",
                fmt,
                "-i",
                "pipe:0",
                "-ac",
                "1",
                "-ar",
                str(SR),
                "-f",
                "f32le",
                "pipe:1",
            ],
            input=e.stdout,
            capture_output=True,
            check=True,
        )
    except subprocess.CalledProcessError:
        return x
    y = np.frombuffer(d.stdout, np.float32) * (peak / 0.5)
    out = np.zeros(len(x), np.float32)
    out[: min(len(x), len(y))] = y[: len(x)]
    return out


def telephone(x):
    import soxr
    from scipy.signal import butter, sosfilt

    y = soxr.resample(x, SR, 8000)
    sos = butter(4, [300, 3400], "band", fs=8000, output="sos")
    y = sosfilt(sos, y)
    y = np.round(y * 2**11) / 2**11  # coarse quantisation
    return soxr.resample(y, 8000, SR).astype(np.float32)[: len(x)]


ACT_ABS_DB = -62.0  # a stem frame quieter than this (dBFS) is inaudible
ACT_NOISE_DB = 3.0  # ... or not this much above the room tone / noise floor
# m3 rule ("audible"): <= 20 dB below the loudest other stem for >= 100 ms in a 2 s window
ACT_REL_DB = 20.0
ACT_MIN_FRAMES = 5  # 5 x 20 ms
# s1 rule ("salient", what a listener notices; MECAT-style references only name those):
SAL_REL_DB = 12.0  # within 12 dB of the loudest other stem (or alone above the floor)
SAL_WIN_FRAMES = 10  # >= 200 ms of salient frames in a 2 s window -> window positive
SAL_CLIP_FRAMES = 15  # >= 300 ms of salient frames in the clip -> clip positive
AMB_FRAMES = 5  # not salient but audible (m3 rule) for >= 100 ms -> ambiguous (-1)
LABEL_VERSION = "s1"


def frame_activity(stems: dict[str, np.ndarray], noise: np.ndarray):
    """Per 20 ms frame and stem: (audible, salient) boolean arrays of shape (3, n_frames)."""
    fdb = {k: frame_db(v) for k, v in stems.items()}
    ndb = frame_db(noise)
    aud, sal = [], []
    for k in ("speech", "music", "sound"):
        d = fdb[k]
        other = np.max([fdb[o] for o in stems if o != k] + [ndb], axis=0)
        base = (d > ACT_ABS_DB) & (d > ndb + ACT_NOISE_DB)
        aud.append(base & (d > other - ACT_REL_DB))
        sal.append(base & (d > other - SAL_REL_DB))
    return np.stack(aud), np.stack(sal)


def _tri(n_sal: int, n_aud: int, need: int) -> int:
    return 1 if n_sal >= need else (-1 if n_aud >= AMB_FRAMES else 0)


def window_labels(stems: dict[str, np.ndarray], noise: np.ndarray):
    """Labels from per-stem 20 ms frame energies.

    Returns dict with
      windows     per 2 s window [s, m, a] in {1 salient, 0 absent, -1 ambiguous / don't care}
      clip        [s, m, a] in {1, 0, -1} for the whole clip (>= 300 ms salient -> 1)
      windows_m3  the previous (m3) audibility rule per window, in {0, 1}
      frames      counts of salient / audible frames per window and for the clip."""
    n = len(noise)
    aud, sal = frame_activity(stems, noise)
    wl, wl3, fs, fa = [], [], [], []
    for a, b in window_bounds(n):
        f0, f1 = a // 320, max(a // 320 + 1, b // 320)
        need3 = min(ACT_MIN_FRAMES, max(1, (f1 - f0) // 4))
        ns = sal[:, f0:f1].sum(axis=1)
        na = aud[:, f0:f1].sum(axis=1)
        wl.append([_tri(int(ns[i]), int(na[i]), SAL_WIN_FRAMES) for i in range(3)])
        wl3.append([int(na[i] >= need3) for i in range(3)])
        fs.append(ns.tolist())
        fa.append(na.tolist())
    cs, ca = sal.sum(axis=1), aud.sum(axis=1)
    clip = [_tri(int(cs[i]), int(ca[i]), SAL_CLIP_FRAMES) for i in range(3)]
    return {
        "windows": wl,
        "clip": clip,
        "windows_m3": wl3,
        "frames": {"sal": fs, "aud": fa, "clip_sal": cs.tolist(), "clip_aud": ca.tolist()},
    }


def event_truth(placed: list[dict], scale: float, others: dict[str, np.ndarray], noise: np.ndarray) -> list[dict]:
    """The ground truth of every placed event: its class (None: an unlabelled effect), source, start / end time and,
    per 2 s window, whether it is salient (1), audible only (-1) or inaudible (0) by the rule of window_labels() with
    the speech, music and every other event as the competing stems; `salient_s` lists the spans (s) where it is
    salient. `scale` is the gain applied to the events stem after placing (level, final gain)."""
    n = len(noise)
    if not placed:
        return []
    stems = []
    for ev in placed:
        s = np.zeros(n, np.float32)
        s[ev["start"] : ev["start"] + len(ev["x"])] = ev["x"][: n - ev["start"]] * scale
        stems.append(s)
    total = np.sum(stems, axis=0)
    ndb = frame_db(noise)
    odb = [frame_db(v) for v in others.values()]
    out = []
    for ev, s in zip(placed, stems):
        d = frame_db(s)
        rest = frame_db(total - s)
        other = np.max(odb + [rest, ndb], axis=0)
        base = (d > ACT_ABS_DB) & (d > ndb + ACT_NOISE_DB)
        aud, sal = base & (d > other - ACT_REL_DB), base & (d > other - SAL_REL_DB)
        wins = []
        for a, b in window_bounds(n):
            f0, f1 = a // 320, max(a // 320 + 1, b // 320)
            # a short event (a beep, a shot, a click) is salient when most of it is: >= half of its frames above
            # the floor in this window, at least 40 ms; a longer one needs the 200 ms of window_labels()
            need = min(SAL_WIN_FRAMES, max(2, int(np.ceil(0.5 * base[f0:f1].sum()))))
            ns, na = int(sal[f0:f1].sum()), int(aud[f0:f1].sum())
            wins.append(1 if ns >= need else (-1 if na >= 2 else 0))
        spans, i = [], 0
        while i < len(sal):
            if sal[i]:
                j = i
                while j < len(sal) and sal[j]:
                    j += 1
                if j - i >= 5:  # >= 100 ms
                    spans.append([round(i * 0.02, 2), round(j * 0.02, 2)])
                i = j
            else:
                i += 1
        r = ev["row"]
        out.append(
            {
                "class": r.get("event") if r else "Beep, bleep",
                "src": r["uid"] if r else "synth",
                "pkg": r["pkg"] if r else None,
                "path": r["path"] if r else None,
                "start_s": round(ev["start"] / SR, 3),
                "end_s": round((ev["start"] + len(ev["x"])) / SR, 3),
                "windows": wins,
                "salient_s": spans,
            }
        )
    return out


def class_windows(events: list[dict], n_windows: int) -> dict[str, list[int]]:
    """Per event class, per window: 1 if an event of the class is salient there, else -1 if one is audible, else 0."""
    out: dict[str, list[int]] = {}
    for e in events:
        if not e["class"]:
            continue
        w = out.setdefault(e["class"], [0] * n_windows)
        for i, v in enumerate(e["windows"]):
            w[i] = 1 if (w[i] == 1 or v == 1) else (-1 if (w[i] == -1 or v == -1) else 0)
    return out
