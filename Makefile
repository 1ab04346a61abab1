# Two entry points that work on a fresh machine (Python, gcc and nvcc only):
#   make demo   - create the virtualenv, install polykernel, run the main job
#   make test   - create the virtualenv, install polykernel with its test extras, run the tests
# PYTHON / VENV select the interpreter and environment (CI also runs Python 3.12 this way).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_DIR := $(CURDIR)/.cache
# Every cache the run writes lives under this checkout, never in the user's home.
RUN_ENV := JAX_PLATFORMS=cpu NUMBA_THREADING_LAYER=omp TRITON_DEFAULT_FP_FUSION=1 \
	POLYKERNEL_CACHE_DIR=$(RUN_DIR)/polykernel NUMBA_CACHE_DIR=$(RUN_DIR)/numba \
	WARP_CACHE_PATH=$(RUN_DIR)/warp TRITON_CACHE_DIR=$(RUN_DIR)/triton \
	POLYKERNEL_CONFIG_DIR=$(RUN_DIR)/config MPLBACKEND=Agg

.PHONY: demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	mkdir -p -m 700 $(RUN_DIR)
	$(RUN_ENV) $(PY) -m polykernel.demo --output demo-output

test: $(VENV)/.installed
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(PY) -m ruff check src tests examples benchmarks

clean:
	rm -rf $(VENV) $(RUN_DIR) demo-output
