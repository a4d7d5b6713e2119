"""How well a domain expert (the learned probe, or the DSP heuristic) tags clips whose domains are known.

    .venv/bin/python benchmarks/quality/domain_accuracy.py --expert probe --seed 2 --per-domain 10 --out res.json
    .venv/bin/python benchmarks/quality/domain_accuracy.py --expert heuristic --truth /work/data-cache/tagger/mixes/dev.jsonl

By default it generates a corpus with earmark.corpus (domains known by construction; the 14 s file becomes
two clips); with `--truth` it reads a labelled real-audio set instead (training/build_corpus.py's dev mixes:
JSON lines with `id` and `domain`, the wavs in the directory named like the file). It runs the real ingest,
levels, VAD and domain experts as the analyze stage would, and prints the accuracy and the 8×8 confusion
matrix (rows = true domain, columns = predicted) as markdown. The heuristic's thresholds were set on the
generated corpus's seed 0: report other seeds as held-out numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from earmark.core.config import IngestSection
from earmark.corpus import generate_corpus  # noqa: E402
from earmark.experts.domain import HeuristicDomainExpert  # noqa: E402
from earmark.experts.learned.domain import LearnedDomainExpert  # noqa: E402
from earmark.experts.levels import LevelsExpert  # noqa: E402
from earmark.experts.vad import SileroVADExpert  # noqa: E402
from earmark.schemas.records import DOMAIN_CODES, domain_flags  # noqa: E402
from earmark.stages.ingest import decode_clip, ingest_file  # noqa: E402

FLAGS = ("speech", "music", "sound")


def confusion_markdown(matrix: np.ndarray) -> str:
    head = "| true \\ pred | " + " | ".join(DOMAIN_CODES) + " |"
    rule = "|---" * (len(DOMAIN_CODES) + 1) + "|"
    rows = [f"| **{code}** | " + " | ".join(str(int(v)) for v in row) + " |" for code, row in zip(DOMAIN_CODES, matrix)]
    return "\n".join([head, rule, *rows])


def run(seed: int, per_domain: int, workdir: Path, backend: str = "probe", truth_file: Path | None = None) -> dict:
    if truth_file is None:  # the generated corpus, domains known by construction
        labelled = [
            (i.path, i.domain) for i in generate_corpus(workdir, per_domain=per_domain, seed=seed, hostile=False)
        ]
    else:  # a labelled real-audio set: JSON lines {id, domain}, the .wav files beside the truth file's stem dir
        rows = [json.loads(line) for line in truth_file.read_text().splitlines() if line.strip()]
        wav_dir = truth_file.with_suffix("")
        labelled = [(wav_dir / f"{r['id']}.wav", r["domain"]) for r in rows]
    clips, truth, files = [], [], []
    for path, domain in labelled:
        rows, quarantined = ingest_file(path, IngestSection())
        if quarantined:
            raise RuntimeError(f"corpus file {path} was quarantined: {quarantined[0].reason}")
        for row in rows:
            clips.append(decode_clip(row))
            truth.append(domain)
            files.append(f"{path.name}#{row.clip_index}")

    timings, context = {}, {}
    for expert in (LevelsExpert(), SileroVADExpert()):
        expert.analyze(clips[:1], {})  # load the model outside the timing
        start = time.perf_counter()
        context[expert.name] = {r.clip_id: r for r in expert.analyze(clips, {})}
        timings[expert.name] = (time.perf_counter() - start) / len(clips)
    domain = LearnedDomainExpert() if backend == "probe" else HeuristicDomainExpert()
    domain.analyze(clips[:1], context)  # load the model outside the timing
    start = time.perf_counter()
    decisions = domain.analyze(clips, context)
    timings[domain.name] = (time.perf_counter() - start) / len(clips)

    matrix = np.zeros((len(DOMAIN_CODES), len(DOMAIN_CODES)), int)
    errors = []
    for file, true, dec in zip(files, truth, decisions):
        matrix[DOMAIN_CODES.index(true), DOMAIN_CODES.index(dec.domain)] += 1
        if dec.domain != true:
            errors.append(
                {
                    "clip": file,
                    "true": true,
                    "pred": dec.domain,
                    "speech_prob": dec.speech_prob,
                    "music_prob": dec.music_prob,
                    "sound_prob": dec.sound_prob,
                }
            )
    flags = np.array([domain_flags(t) for t in truth])
    preds = np.array([domain_flags(d.domain) for d in decisions])
    return {
        "seed": seed,
        "per_domain": per_domain,
        "clips": len(clips),
        "backend": domain.backend,
        "accuracy": float(np.trace(matrix) / matrix.sum()),
        "flag_accuracy": {k: float(np.mean(flags[:, i] == preds[:, i])) for i, k in enumerate(FLAGS)},
        "labels": list(DOMAIN_CODES),
        "confusion": matrix.tolist(),
        "seconds_per_clip": timings,
        "errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-domain", type=int, default=10)
    parser.add_argument("--expert", choices=("probe", "heuristic"), default="probe", help="the domain backend")
    parser.add_argument(
        "--truth",
        type=Path,
        help="instead of the generated corpus: a labelled set's JSON lines (id, domain), wavs in the same-named dir",
    )
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--workdir", type=Path, help="keep the generated corpus here (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.seed, args.per_domain, args.workdir or Path(tmp), args.expert, args.truth)
    matrix = np.array(result["confusion"])
    print(
        f"{result['backend']}, seed {result['seed']}: {result['clips']} clips, accuracy {result['accuracy']:.1%} "
        f"(speech {result['flag_accuracy']['speech']:.1%}, music {result['flag_accuracy']['music']:.1%}, "
        f"sound {result['flag_accuracy']['sound']:.1%})\n"
    )
    print(confusion_markdown(matrix))
    print("\nseconds per clip: " + ", ".join(f"{k} {v:.3f}" for k, v in result["seconds_per_clip"].items()))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({**result, "confusion_markdown": confusion_markdown(matrix)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
