"""The expert stage's throughput passes (clips, the GPU slot, fresh-process workers, peak memory): the machinery of benchmarks/experts/expert_throughput.py, which gpu_worker_cpu.py reuses, and of their tests."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from earmark.core import threads
from earmark.core.config import AnalyzeSection
from earmark.experts import build_experts
from earmark.experts.base import ClipAudio, Expert, gpu_sections
from earmark.schemas.records import DomainDecision


class ModelClock:
    """Seconds inside outermost torch module forwards while active (`--host-share`): what a faster device can
    shrink. The rest of an expert's time (decoding, resampling, features on the CPU, DTW, Python between
    calls) is host work that a GPU does not speed up. TorchScript modules (Silero VAD, always on the CPU)
    count as host work; on CUDA the clock synchronises at both ends of each outermost forward."""

    def __init__(self) -> None:
        self.seconds, self._depth, self._began, self._timing, self._handles = 0.0, 0, 0.0, False, []

    def __enter__(self) -> ModelClock:
        import torch
        from torch.nn.modules import module

        self._torch, self._cuda = torch, torch.cuda.is_available()
        self._handles = [
            module.register_module_forward_pre_hook(self._enter_forward),
            module.register_module_forward_hook(self._leave_forward),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()

    def _enter_forward(self, mod: object, args: object) -> None:
        self._depth += 1
        if self._depth == 1:  # an outermost forward: timed unless TorchScript (then its inner calls are not)
            self._timing = not isinstance(mod, self._torch.jit.ScriptModule)
            if self._timing:
                if self._cuda:
                    self._torch.cuda.synchronize()
                self._began = time.perf_counter()

    def _leave_forward(self, mod: object, args: object, output: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._timing:
            if self._cuda:
                self._torch.cuda.synchronize()
            self.seconds += time.perf_counter() - self._began


def _cuda_peak() -> float | None:
    """Peak GPU memory since the last reset, GiB (None without torch or CUDA)."""
    if "torch" not in sys.modules:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def _cuda_reserved_peak() -> float | None:
    """Peak GPU memory the caching allocator reserved since the last reset, GiB: what this process keeps."""
    if "torch" not in sys.modules:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_reserved() / 2**30, 2)


def cuda_memory() -> dict | None:
    """After the models are loaded: the GPU's total memory, what this process' allocator reserves, and the rest
    of what it uses (CUDA context, library workspaces), GiB; None without CUDA. Call with this process alone on
    the GPU (each pass runs in fresh processes, after the previous pass' have ended)."""
    if "torch" not in sys.modules:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {
        "total_gib": round(total / 2**30, 2),
        "resident_gib": round(reserved / 2**30, 2),
        "context_gib": round(max(0, total - free - reserved) / 2**30, 2),
    }


def memory_needed(result: dict, workers: int) -> float | None:
    """GiB that `workers` processes like the one measured in `result` (a one-worker pass) hold at once: each
    keeps its CUDA context and what its caching allocator reserved at its peak, whichever expert reached it."""
    memory = result.get("gpu_memory")
    if not memory:
        return None
    peak = max([v.get("gpu_peak_reserved_gib") or 0.0 for v in result["experts"].values()] + [memory["resident_gib"]])
    return round(workers * (memory["context_gib"] + peak), 1)


def _reset_cuda_peak() -> None:
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()


def corpus_clips(per_domain: int, seed: int, workdir: Path) -> tuple[list[ClipAudio], dict[str, str]]:
    """The synthetic corpus (espeak-ng for its speech), ingested and decoded as the analyze stage sees it, and
    each clip's true MECAT domain code."""
    from earmark.core.config import IngestSection
    from earmark.corpus import generate_corpus
    from earmark.stages.ingest import decode_clip, ingest_file

    clips, truth = [], {}
    for item in generate_corpus(workdir, per_domain=per_domain, seed=seed, hostile=False):
        rows, _ = ingest_file(item.path, IngestSection())
        clips += [decode_clip(r) for r in rows]
        truth |= {r.clip_id: str(item.domain) for r in rows}
    return clips, truth


class TruthDomainExpert(Expert):
    """`--route truth`: the domain decision a correct tagger would make (the corpus' own codes), so that routing
    with random-weight stand-ins is the routing of the 8-domain mix, not a random tagger's (which finds every
    kind of content everywhere). The tagger itself still runs and is timed."""

    name, version, record, needs = "domain", "1", DomainDecision, ()
    backend = "corpus-truth"

    def __init__(self, truth: dict[str, str]) -> None:
        self.truth = truth

    def analyze(self, clips, context) -> list[DomainDecision]:
        return [
            DomainDecision(
                **self.lineage(c.clip_id),
                domain=(code := self.truth[c.clip_id]),
                speech_prob=float(code[0] == "S"),
                music_prob=float(code[1] == "M"),
                sound_prob=float(code[2] == "A"),
                silent=code == "000",
                features=[],
            )
            for c in clips
        ]


def save_clips(clips: list[ClipAudio], truth: dict[str, str], out: Path) -> None:
    """The decoded clips as FLAC files plus their order, so a machine without espeak-ng, DuckDB or the ingest
    stage's dependencies (a lent GPU machine) runs the stage on the very same audio (`--clips`)."""
    import soundfile as sf

    out.mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(clips):
        sf.write(out / f"{i:05d}.flac", c.samples, c.sample_rate, subtype="PCM_16")
    (out / "clips.json").write_text(json.dumps({"ids": [c.clip_id for c in clips], "domains": truth}))


def load_clips(folder: Path) -> tuple[list[ClipAudio], dict[str, str]]:
    import soundfile as sf

    saved = json.loads((folder / "clips.json").read_text())
    out = []
    for i, clip_id in enumerate(saved["ids"]):
        data, sr = sf.read(folder / f"{i:05d}.flac", dtype="float32")
        out.append(ClipAudio(clip_id=clip_id, samples=data, sample_rate=sr))
    return out, saved["domains"]


def run(
    clips: list[ClipAudio],
    cfg: AnalyzeSection | None = None,
    truth: dict[str, str] | None = None,
    host_share: bool = False,
) -> dict:
    audio_s = sum(c.duration_s for c in clips)
    done = _run_experts(clips, cfg or AnalyzeSection(), truth, host_share=host_share)
    per_expert = done["experts"]
    total = sum(v.pop("raw_s") for v in per_expert.values())
    extra = {}
    if host_share:  # the GPU slot's floor: its experts' host work, which a faster GPU does not shrink
        slot_host = sum(v["host_s"] for v in per_expert.values() if v["gpu_slot"])
        extra = {
            "gpu_slot_host_s": round(slot_host, 2),
            "gpu_slot_ceiling_x_realtime": round(audio_s / slot_host, 1) if slot_host else None,
        }
    return {
        "profile": (cfg or AnalyzeSection()).profile,
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "cpu_count": os.cpu_count(),
        "experts": per_expert,
        "total_s": round(total, 2),
        "total_x_realtime": round(audio_s / total, 1),
        "gpu_memory": done["gpu_memory"],
        **extra,
    }


def warmup_clips(clips: list[ClipAudio], truth: dict[str, str] | None) -> list[ClipAudio]:
    """One clip of each domain (or 8 spread over the list): every expert then runs at least once before the
    timing, whatever the routing, so first-call costs (numba compiling librosa's kernels, CUDA kernels for a
    new shape) stay out of it."""
    if truth:
        first: dict[str, ClipAudio] = {}
        for c in clips:
            first.setdefault(truth.get(c.clip_id, ""), c)
        return list(first.values())
    return clips[:: max(1, len(clips) // 8)][:8]


def _run_experts(
    clips: list,
    cfg: AnalyzeSection,
    truth: dict[str, str] | None = None,
    start=None,
    gpu_lock=None,
    host_share: bool = False,
) -> dict:
    """Every expert in dependency order on all `clips` as one batch; `start` (a barrier) is passed once
    every model is loaded and warm; `gpu_lock` is held while a GPU expert runs; `host_share`: each expert's
    seconds split into model forwards and host work (ModelClock)."""
    audio_s = sum(c.duration_s for c in clips)
    experts = build_experts(cfg)
    if truth is not None:
        experts["domain"] = TruthDomainExpert(truth)
    warm_context: dict[str, dict] = {}
    warmup = {}
    warm = warmup_clips(clips, truth)
    for name, expert in experts.items():  # model loading and compilation stay out of the timing
        t = time.monotonic()
        warm_context[name] = {r.clip_id: r for r in expert.analyze(warm, warm_context)}
        warmup[name] = round(time.monotonic() - t, 2)
    memory = cuda_memory()  # models loaded and warm
    if start is not None:
        start.wait()
    context: dict[str, dict] = {}
    per_expert = {}
    slots = gpu_slots(cfg) if host_share else set()
    began = time.monotonic()
    for name, expert in experts.items():
        _reset_cuda_peak()
        clock = ModelClock() if host_share else nullcontext()
        with _slot(gpu_lock, expert), clock:
            t = time.monotonic()
            records = expert.analyze(clips, context)
            took = time.monotonic() - t
        context[name] = {r.clip_id: r for r in records}
        skipped = sum(1 for r in records if getattr(r, "skipped_reason", None))
        per_expert[name] = {
            "backend": expert.backend,
            "seconds": round(took, 2),
            "raw_s": took,
            "warmup_s": warmup[name],
            "x_realtime": round(audio_s / took, 1),
            "clips_routed_away": skipped,
            "gpu_peak_gib": _cuda_peak(),
            "gpu_peak_reserved_gib": _cuda_reserved_peak(),
        }
        if isinstance(clock, ModelClock):
            host = max(0.0, took - clock.seconds)
            per_expert[name].update(
                gpu_slot=name in slots,
                model_s=round(clock.seconds, 2),
                host_s=round(host, 2),
                host_x_realtime=round(audio_s / host, 1) if host > 0 else None,
            )
    return {"experts": per_expert, "began": began, "ended": time.monotonic(), "gpu_memory": memory}


def _slot(gpu_lock, expert: Expert):
    """The flow's `gpu` slot, emulated by the shared lock: around the whole expert, or only around its
    gpu_section()s for an expert that takes it there (as flows.slots.compute_slot does)."""
    if gpu_lock is None or not expert.uses_gpu:
        return nullcontext()
    if expert.gpu_in_sections:
        return gpu_sections(lambda: gpu_lock)
    return gpu_lock


def gpu_slots(cfg: AnalyzeSection) -> set[str]:
    """The experts whose shards hold the `gpu` slot with `[analyze] device = "cuda"` on this worker's packages
    (DNSMOS only with onnxruntime-gpu, the music expert only with a tagger): built, not loaded."""
    experts = build_experts(cfg.model_copy(update={"device": "cuda"}))
    return {name for name, expert in experts.items() if expert.uses_gpu}


def _worker(clips: list, cfg: AnalyzeSection, truth: dict[str, str] | None, n_threads: int, start, gpu_lock) -> dict:
    threads.apply(n_threads)  # the pools already loaded while this process unpickled its arguments
    return _run_experts(clips, cfg, truth, start, gpu_lock)


def _in_child(fn, *args):
    """fn(*args) in a fresh spawned process, so that whatever it loads is freed when it returns."""
    with mp.get_context("spawn").Pool(1) as pool:
        return pool.apply(fn, args)


def run_workers(
    clips: list[ClipAudio], cfg: AnalyzeSection, workers: int, truth: dict[str, str] | None = None, slots: int = 1
) -> dict:
    audio_s = sum(c.duration_s for c in clips)
    shares = [clips[i::workers] for i in range(workers)]
    n_threads = max(1, (os.cpu_count() or 1) // workers)
    ctx = mp.get_context("spawn")
    saved = dict(os.environ)
    os.environ.update(threads.environ(n_threads))  # spawned workers load their libraries with them
    try:
        with ctx.Manager() as manager:
            start, gpu_lock = manager.Barrier(workers), manager.Semaphore(slots)
            with ctx.Pool(workers) as pool:
                done = pool.starmap(_worker, [(share, cfg, truth, n_threads, start, gpu_lock) for share in shares])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
    per_expert = {}
    for name in done[0]["experts"]:
        rows = [d["experts"][name] for d in done]
        seconds = sum(r["raw_s"] for r in rows)
        peaks = [r["gpu_peak_gib"] for r in rows if r["gpu_peak_gib"] is not None]
        per_expert[name] = {
            "backend": rows[0]["backend"],
            "seconds": round(seconds, 2),  # summed over workers: the expert's compute time
            "warmup_s": max(r["warmup_s"] for r in rows),
            "x_realtime": round(audio_s / seconds, 1),
            "clips_routed_away": sum(r["clips_routed_away"] for r in rows),
            "gpu_peak_gib": max(peaks) if peaks else None,
            "gpu_peak_reserved_gib": max(
                [r["gpu_peak_reserved_gib"] for r in rows if r["gpu_peak_reserved_gib"]] or [0]
            )
            or None,
        }
    return {
        "profile": cfg.profile,
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "cpu_count": os.cpu_count(),
        "workers": workers,
        "gpu_slots": slots,
        "threads_per_worker": n_threads,
        "experts": per_expert,
        "total_s": round(wall, 2),
        "total_x_realtime": round(audio_s / wall, 1),
    }


def markdown(result: dict) -> str:
    if "gpu_slot_host_s" in result:
        return _host_markdown(result)
    lines = [
        "| expert | backend | s | × real time | clips routed away | peak GPU GiB (allocated / reserved) |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in result["experts"].items():
        gpu = "–" if v.get("gpu_peak_gib") is None else f"{v['gpu_peak_gib']:.2f} / {v['gpu_peak_reserved_gib']:.2f}"
        lines.append(
            f"| `{name}` | `{v['backend']}` | {v['seconds']:.2f} | {v['x_realtime']:.0f} | "
            f"{v.get('clips_routed_away', 0)} | {gpu} |"
        )
    total = (
        "**total**"
        if "workers" not in result
        else f"**stage, {result['workers']} workers, {result['gpu_slots']} gpu slot(s) (wall)**"
    )
    lines.append(f"| {total} | | {result['total_s']:.2f} | {result['total_x_realtime']:.1f} | | |")
    if result.get("gpu_memory"):
        m = result["gpu_memory"]
        lines.append(
            f"\nGPU {m['total_gib']} GiB; after loading, one worker reserves {m['resident_gib']} GiB plus "
            f"{m['context_gib']} GiB of CUDA context"
            + (f"; needed: {result['gpu_needed_gib']} GiB" if result.get("gpu_needed_gib") else "")
        )
    return "\n".join(lines)


def _host_markdown(result: dict) -> str:
    lines = [
        "| expert | gpu slot | s | model forwards s | host s | host × real time | clips routed away |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v in result["experts"].items():
        host_x = "–" if v["host_x_realtime"] is None else f"{v['host_x_realtime']:.0f}"
        lines.append(
            f"| `{name}` | {'yes' if v['gpu_slot'] else 'no'} | {v['seconds']:.2f} | {v['model_s']:.2f} | "
            f"{v['host_s']:.2f} | {host_x} | {v['clips_routed_away']} |"
        )
    lines.append(f"| **total** | | {result['total_s']:.2f} | | | | |")
    lines.append(
        f"| **gpu slot, host work only** | | | | {result['gpu_slot_host_s']:.2f} | "
        f"**{result['gpu_slot_ceiling_x_realtime'] or '– (no slot experts)'}** | |"
    )
    return "\n".join(lines)
