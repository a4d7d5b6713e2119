"""What a GPU worker still spends on the CPU (process CPU time, the aten ops a forward dispatches, the fresh-process worker passes): the machinery of benchmarks/experts/gpu_worker_cpu.py and of tests/test_gpu_worker_cpu.py."""

from __future__ import annotations

import os
import pickle
import platform
import time
from functools import partial
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from earmark.core import threads
from earmark.core.config import AnalyzeSection, IngestSection
from earmark.experts import build_experts
from earmark.stages import analyze, ingest
from earmark.stages.base import ShardJob, run_job, stored
from earmark.storage import Catalog
from support.throughput import TruthDomainExpert, gpu_slots

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# experts whose model runs clip by clip, whatever the batch: acoustics' PLCMOS (its GRUs run to each clip's
# own length, and the graph takes no lengths to pad a batch with)
PER_CLIP_FORWARDS = {"acoustics"}


class _OpCount(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


class ForwardClock:
    """CPU seconds and aten ops inside outermost torch module forwards while active. TorchScript modules
    (Silero VAD, which stays on the CPU) are host work: they are neither timed nor counted."""

    def __init__(self) -> None:
        self.cpu_s, self.ops, self._depth, self._began, self._on, self._count = 0.0, 0, 0, 0.0, False, None

    def __enter__(self) -> ForwardClock:
        from torch.nn.modules import module

        self._handles = [
            module.register_module_forward_pre_hook(self._enter),
            module.register_module_forward_hook(self._leave),
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()

    def _enter(self, mod: object, args: object) -> None:
        self._depth += 1
        if self._depth == 1:
            self._on = not isinstance(mod, torch.jit.ScriptModule)
            if self._on:
                self._count = _OpCount().__enter__()
                self._began = time.process_time()

    def _leave(self, mod: object, args: object, output: object) -> None:
        self._depth -= 1
        if self._depth == 0 and self._on:
            self.cpu_s += time.process_time() - self._began
            self._count.__exit__(None, None, None)
            self.ops += self._count.ops
            self._on = False


class _Block(torch.nn.Module):
    """A pre-norm transformer block written out op by op (no fused fast path), as Whisper's and AST's are."""

    def __init__(self, width: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.out = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.up, self.down = torch.nn.Linear(width, 4 * width), torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5, dim=-1) @ v
        x = x + self.out(att.transpose(1, 2).reshape(b, t, w))
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


def host_us_per_op(repeats: int = 200) -> float:
    """Host microseconds per aten op of eager PyTorch when the tensors are tiny: a transformer block written
    out op by op (width 64) on a 1 × 4 input on the CPU, where the Python, module calls and dispatcher are
    nearly all of the time. It stands for what an op costs the host before the launch itself on a GPU."""
    block = _Block().eval()
    x = torch.zeros(1, 4, 64)
    with torch.inference_mode():
        block(x)
        counter = _OpCount()
        with counter:
            block(x)
        t = time.process_time()
        for _ in range(repeats):
            block(x)
        spent = time.process_time() - t
    return 1e6 * spent / repeats / max(counter.ops, 1)


def _timed_decode(spent: dict[str, float]):
    """analyze.decoded_batches on the calling thread, its CPU time added to spent['decode']."""

    def batches(clips, size=analyze.BATCH):
        for start in range(0, len(clips), size):
            t = time.process_time()
            batch = analyze._decode(clips[start : start + size])
            spent["decode"] += time.process_time() - t
            yield batch

    return batches


def as_on_cuda() -> None:
    """Run the experts that a CUDA worker runs on the GPU through torch here too, on the CPU: DNSMOS through
    its graphs' torch port (ONNX Runtime here has no CUDA provider, nor has the lent GPU machine's) and PLCMOS
    likewise, so that their model work counts as forwards (GPU work), not as host work. `gpu_slots` then sees
    what a worker with torch CUDA holds the slot for."""
    from earmark.experts import acoustics, quality

    quality.gpu_runtime = lambda device: "torch"
    quality.torch_cuda = acoustics.torch_cuda = lambda: True
    acoustics.RoomAcousticsExpert.uses_gpu = property(lambda self: self.with_plcmos)


def measure(
    cfg: AnalyzeSection,
    per_domain: int,
    seed: int,
    work: Path,
    launch_us: float,
    route_truth: bool,
    workers: list[int] = (),
    device_batch: int = 64,
    repeat: int = 1,
    context_out: Path | None = None,
) -> dict:
    from earmark.corpus import generate_corpus

    items = generate_corpus(work / "corpus", per_domain=per_domain, seed=seed, hostile=False)
    files = [item.path for item in items]  # domain by domain, per_domain each
    domains = {Path(item.path).name: str(item.domain) for item in items}
    sources = [ingest.Source(f, f.name) for f in files]  # shown by file name: `truth` below maps names
    cat = Catalog(work / "data", "cpu")
    icfg = IngestSection()
    job = ShardJob(
        ingest.spec(icfg),
        partial(ingest.run, sources, icfg),
        sources=[ingest.source_identity(s) for s in sources],
        label="shard-0000",
    )
    t = time.process_time()
    clip_ref = run_job(cat, job, None)
    ingest_s = time.process_time() - t
    clips = stored(cat, clip_ref, "clips")
    audio_s = sum(c.duration_s for c in clips)
    truth = {c.clip_id: domains[Path(c.source_path).name] for c in clips}

    if cfg.profile == "paper":
        as_on_cuda()
    experts = build_experts(cfg)
    if route_truth:
        experts["domain"] = TruthDomainExpert(truth)
    slots = gpu_slots(cfg) if cfg.profile == "paper" else set()
    # warm-up: every expert once on one file of each domain, in a throwaway catalog (model loading, numba
    # compiling, first-shape costs stay out of the figure)
    warm_sources = sources[::per_domain]
    warm_cat = Catalog(work / "warm", "cpu")
    warm_job = ShardJob(
        ingest.spec(icfg),
        partial(ingest.run, warm_sources, icfg),
        sources=[ingest.source_identity(s) for s in warm_sources],
        label="warm",
    )
    _run_all(warm_cat, run_job(warm_cat, warm_job, None), experts, {})

    spent = {"decode": 0.0}
    rows, refs = _run_all(cat, clip_ref, experts, spent, slots)
    us_per_op = host_us_per_op()
    per_op_s = (us_per_op + launch_us) * 1e-6
    for name, row in rows.items():
        row["launch_estimate_s"] = row["forward_ops"] * per_op_s if row["gpu_slot"] else 0.0
        # one batch of `clips_analyzed` here; a worker's batches of `device_batch` clips need fewer ops per clip,
        # except where the expert runs its model clip by clip (PER_CLIP_FORWARDS)
        scale = min(1.0, row["clips_analyzed"] / device_batch) if row["clips_analyzed"] else 0.0
        if name in PER_CLIP_FORWARDS:
            scale = 1.0
        row["launch_at_batch_s"] = row["launch_estimate_s"] * scale
    parts = {
        "decode": spent["decode"],
        "io": sum(r["io_s"] for r in rows.values()),
        "cpu experts": sum(r["analyze_s"] for r in rows.values() if not r["gpu_slot"]),
        "slot host": sum(r["analyze_s"] - r["forward_cpu_s"] for r in rows.values() if r["gpu_slot"]),
        f"launch estimate (batch {device_batch})": sum(r["launch_at_batch_s"] for r in rows.values()),
    }
    launch_here = sum(r["launch_estimate_s"] for r in rows.values())
    worker = sum(parts.values())
    scaling = {}
    if workers:
        context = {name: {r.clip_id: r for r in stored(cat, ref, name)} for name, ref in refs.items()}
        state = (cfg, truth if route_truth else None, clips, context, [name for name in experts if name not in slots])
        if context_out:
            context_out.write_bytes(pickle.dumps(state))
        scaling = scaling_passes(state, workers, repeat)
    return {
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.python_version()}, torch {torch.__version__}",
        "date": time.strftime("%Y-%m-%d"),
        "profile": cfg.profile,
        "threads": 1,
        "clips": len(clips),
        "audio_s": round(audio_s, 1),
        "host_us_per_op": round(us_per_op, 2),
        "device_batch": device_batch,
        "launch_estimate_at_this_batch_core_s": round(launch_here, 3),
        "launch_us_assumed": launch_us,
        "experts": {k: {n: round(v, 4) if isinstance(v, float) else v for n, v in r.items()} for k, r in rows.items()},
        "parts_core_s": {k: round(v, 3) for k, v in parts.items()},
        "parts_core_s_per_audio_s": {k: round(v / audio_s, 4) for k, v in parts.items()},
        "worker_core_s_per_audio_s": round(worker / audio_s, 4),
        "ingest_core_s_per_audio_s": round(ingest_s / audio_s, 4),
        "cores_for_100x": round(100 * worker / audio_s, 1),
        "cpu_experts_workers": scaling,
    }


def _run_all(
    cat: Catalog, clip_ref, experts: dict, spent: dict[str, float], slots: set[str] = frozenset()
) -> tuple[dict, dict]:
    """Every expert's shard job on the clip shard, in dependency order; per expert: run_job's CPU seconds split
    into decode, analyze (and its forwards) and the rest (io)."""
    keys: dict[str, str] = {}
    rows, refs = {}, {}
    real = analyze.decoded_batches
    spent.setdefault("decode", 0.0)
    analyze.decoded_batches = _timed_decode(spent)
    try:
        for name, expert in experts.items():
            clock = ForwardClock()
            analyzed = {"s": 0.0, "clips": 0}

            def fn(inputs, expert=expert, clock=clock, analyzed=analyzed):
                inner = expert.analyze

                def timed(batch, context):
                    t = time.process_time()
                    with clock:
                        out = inner(batch, context)
                    analyzed["s"] += time.process_time() - t
                    analyzed["clips"] += sum(1 for r in out if not getattr(r, "skipped_reason", None))
                    return out

                expert.analyze = timed
                try:
                    return analyze.run(expert, inputs)
                finally:
                    del expert.analyze

            job = ShardJob(
                analyze.spec(expert),
                fn,
                label="shard-0000",
                inputs={"clips": [clip_ref.key], **{n: [keys[n]] for n in expert.needs}},
                gpu=expert.uses_gpu,
            )
            decode_before = spent["decode"]
            t = time.process_time()
            ref = run_job(cat, job, None)
            total = time.process_time() - t
            keys[name] = ref.key
            refs[name] = ref
            decode = spent["decode"] - decode_before
            rows[name] = {
                "backend": expert.backend,
                "gpu_slot": name in slots,
                "run_job_s": total,
                "decode_s": decode,
                "analyze_s": analyzed["s"],
                "forward_cpu_s": clock.cpu_s,
                "forward_ops": clock.ops,
                "clips_analyzed": analyzed["clips"],
                "io_s": max(0.0, total - decode - analyzed["s"]),
            }
    finally:
        analyze.decoded_batches = real
    return rows, refs


def _cpu_worker(cfg, truth, clips, context, names, n_threads, start) -> dict:
    """One worker process: the CPU experts (`names`) on its share of the clips, decoding included, the slot
    experts' records given (they are GPU work, computed once beforehand)."""
    threads.apply(n_threads)
    if cfg.profile == "paper":
        as_on_cuda()
    experts = build_experts(cfg)
    if truth is not None:
        experts["domain"] = TruthDomainExpert(truth)
    experts = {name: experts[name] for name in names}
    ctx = {name: dict(records) for name, records in context.items()}

    spent: dict[str, float] = dict.fromkeys(["decode", *experts], 0.0)

    def one_pass(batch_clips) -> None:
        t = time.process_time()
        decoded = analyze._decode(batch_clips)
        spent["decode"] += time.process_time() - t
        for name, expert in experts.items():
            t = time.process_time()
            out = expert.analyze(decoded, ctx)
            spent[name] += time.process_time() - t
            ctx[name].update({r.clip_id: r for r in out})

    first: dict[str, object] = {}
    for c in clips:
        first.setdefault((truth or {}).get(c.clip_id, c.clip_id[:1]), c)
    one_pass(list(first.values()))  # warm-up: loading, numba compiling
    spent.update(dict.fromkeys(spent, 0.0))
    start.wait()
    began, cpu = time.monotonic(), time.process_time()
    for i in range(0, len(clips), analyze.BATCH):
        one_pass(clips[i : i + analyze.BATCH])
    return {"began": began, "ended": time.monotonic(), "cpu_s": time.process_time() - cpu, "spent": spent}


def scaling_passes(state: tuple, workers: list[int], repeat: int = 1) -> dict:
    """The CPU experts alone in N processes for each N, on the clips `repeat` times over (copies under new ids,
    with copies of their records: the slot experts' records are GPU work, computed once before)."""
    cfg, truth, clips, context, names = state
    if repeat > 1:
        clips = [c.model_copy(update={"clip_id": f"{c.clip_id}~{k}"}) for k in range(repeat) for c in clips]
        context = {
            name: {
                f"{cid}~{k}": r.model_copy(update={"clip_id": f"{cid}~{k}"})
                for k in range(repeat)
                for cid, r in records.items()
            }
            for name, records in context.items()
        }
        if truth is not None:
            truth = {f"{cid}~{k}": code for k in range(repeat) for cid, code in truth.items()}
    return {str(n): cpu_workers(cfg, truth, clips, context, names, n) for n in workers}


def cpu_workers(cfg, truth, clips, context, names, workers: int) -> dict:
    """The CPU side of `workers` GPU workers on this machine's cores: each a process with cores // workers
    threads and its share of the clips; wall seconds from the common start to the last one's end."""
    import multiprocessing as mp

    n_threads = max(1, (os.cpu_count() or 1) // workers)
    shares = [clips[i::workers] for i in range(workers)]
    ctx = mp.get_context("spawn")
    saved = dict(os.environ)
    os.environ.update(threads.environ(n_threads))
    try:
        with ctx.Manager() as manager:
            start = manager.Barrier(workers)
            with ctx.Pool(workers) as pool:
                done = pool.starmap(
                    _cpu_worker,
                    [
                        (
                            cfg,
                            truth,
                            share,
                            {n: {c.clip_id: v[c.clip_id] for c in share if c.clip_id in v} for n, v in context.items()},
                            names,
                            n_threads,
                            start,
                        )
                        for share in shares
                    ],
                )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    wall = max(d["ended"] for d in done) - min(d["began"] for d in done)
    audio_s = sum(c.duration_s for c in clips)
    return {
        "load_average_after": [round(x, 2) for x in os.getloadavg()],  # other jobs on the cores skew the ratio
        "threads_per_worker": n_threads,
        "wall_s": round(wall, 3),
        "cpu_s": round(sum(d["cpu_s"] for d in done), 3),
        "cpu_s_by_part": {k: round(sum(d["spent"][k] for d in done), 3) for k in done[0]["spent"]},
        "clips": len(clips),
        "x_realtime": round(audio_s / wall, 1),
    }


def markdown(result: dict) -> str:
    audio = result["audio_s"]
    lines = [
        "| expert | gpu slot | decode | io | analyze | of it, forwards | host (analyze − forwards) | aten ops |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["experts"].items():
        lines.append(
            f"| `{name}` | {'yes' if r['gpu_slot'] else 'no'} | {r['decode_s']:.3f} | {r['io_s']:.3f} | "
            f"{r['analyze_s']:.3f} | {r['forward_cpu_s']:.3f} | {r['analyze_s'] - r['forward_cpu_s']:.3f} | "
            f"{r['forward_ops']} |"
        )
    lines += ["", "| part | core-s | core-s per audio s |", "|---|---|---|"]
    for part, s in result["parts_core_s"].items():
        lines.append(f"| {part} | {s:.3f} | {s / audio:.4f} |")
    lines.append(f"| **GPU worker, all of the above** | | **{result['worker_core_s_per_audio_s']:.4f}** |")
    lines.append(f"| ingest (once per clip, any node) | | {result['ingest_core_s_per_audio_s']:.4f} |")
    if result.get("cpu_experts_workers"):
        lines += ["", "| CPU experts: workers | threads each | wall s | CPU s | × real time |", "|---|---|---|---|---|"]
        for n, r in result["cpu_experts_workers"].items():
            lines.append(
                f"| {n} | {r['threads_per_worker']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | {r['x_realtime']} |"
            )
    return "\n".join(lines)
