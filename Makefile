# patchgate — every target sets up what it needs on first use (`make setup` is idempotent).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# A CPU build of torch: on this project's machines `torch==2.13.0` is a local CPU wheel.
# Elsewhere pass e.g. TORCH_SPEC=torch PIP_TORCH_ARGS="--index-url <your CPU wheel index>".
TORCH_SPEC ?= torch==2.13.0
PIP_TORCH_ARGS ?=
PROFILE ?= default
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup guard accept test test-fast perf perf-compare lint tasks eval-default clean help

help:
	@echo "make guard        run the gate on profile $(PROFILE) (exit 0 accepted, 1 rejected, 2 error)"
	@echo "make accept       run the gate and, if accepted, update baselines/ and CHANGELOG.md"
	@echo "                  (and store a pytest-benchmark run for --benchmark-compare)"
	@echo "make test         the test suite (CPU)"
	@echo "make perf         the six latency scenarios with pytest-benchmark"
	@echo "make perf-compare the same, compared with the committed baseline"
	@echo "make lint         ruff"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q $(PIP_TORCH_ARGS) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

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
