# patchgate — every target sets up what it needs on first use (`make setup` is idempotent).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch, chosen once by `make setup` (see the torch target): a local build where pip is
# configured with one (this project's machines: a CPU wheel), the CUDA build where the
# machine has an NVIDIA GPU, else the CPU build from TORCH_CPU_INDEX. Override with
# TORCH_SPEC / PIP_TORCH_ARGS (e.g. PIP_TORCH_ARGS="--index-url <your wheel index>").
TORCH_SPEC ?= torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
PIP_TORCH_ARGS ?=
PROFILE ?= default
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup torch guard accept test test-fast perf perf-compare lint tasks eval-default clean help

help:
	@echo "make guard        run the gate on profile $(PROFILE) (exit 0 accepted, 1 rejected, 2 error, 3 inconclusive)"
	@echo "make accept       run the gate and, if accepted, update baselines/ and CHANGELOG.md"
	@echo "                  (and store a pytest-benchmark run for --benchmark-compare)"
	@echo "make test         the test suite (CPU)"
	@echo "make perf         the six latency scenarios with pytest-benchmark"
	@echo "make perf-compare the same, compared with this machine's stored run (make accept stores one)"
	@echo "make lint         ruff"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@$(MAKE) -s torch
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

torch: | $(BIN)/python
	@if $(BIN)/python -c "import torch" 2>/dev/null; then :; \
	elif [ -n "$(PIP_TORCH_ARGS)" ] || $(BIN)/python -m pip install -q --dry-run --no-index \
	    --no-deps "$(TORCH_SPEC)" >/dev/null 2>&1; then \
	  echo "installing $(TORCH_SPEC) $(PIP_TORCH_ARGS)"; \
	  $(BIN)/python -m pip install -q $(PIP_TORCH_ARGS) "$(TORCH_SPEC)"; \
	elif command -v nvidia-smi >/dev/null 2>&1; then \
	  echo "NVIDIA GPU found: installing the CUDA build of $(TORCH_SPEC)"; \
	  $(BIN)/python -m pip install -q "$(TORCH_SPEC)"; \
	else \
	  echo "no GPU: installing the CPU build of $(TORCH_SPEC) from $(TORCH_CPU_INDEX)"; \
	  $(BIN)/python -m pip install -q --index-url $(TORCH_CPU_INDEX) "$(TORCH_SPEC)"; \
	fi

setup: $(VENV)/.installed

guard: setup
	$(BIN)/patchgate guard --profile $(PROFILE)

accept: setup
	$(BIN)/patchgate guard --profile $(PROFILE) --accept
	PATCHGATE_PROFILE=$(PROFILE) $(BIN)/python -m pytest perf/ -q --benchmark-save=accepted

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

perf: setup
	$(BIN)/python -m pytest perf/ -q

perf-compare: setup
	$(BIN)/python -m pytest perf/ -q --benchmark-compare

lint: setup
	$(BIN)/ruff check src tests perf models guards model_patches

tasks: setup
	$(BIN)/python -m guards.build_tasks

eval-default: setup
	$(BIN)/python -m models.eval_default --quant all

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
