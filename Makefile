# Two entry points that work on a fresh machine (Python, gcc and nvcc only):
#   make demo      - create the virtualenv, install polykernel and what the demo runs
#                    (polykernel[demo]: Numba, Warp, matplotlib, scipy), run the main job
#   make test      - create the virtualenv, install polykernel with its test extras, run the tests
#                    (in parallel, a worker per core and one more; make test-fast skips slow
#                    and GPU tests)
#   make docs      - build the documentation site into site/ (mkdocs --strict; its tools,
#                    pinned in docs/requirements.txt, in their own virtualenv .venv-docs)
# and, for the support matrix and GPU machines:
#   make test JAX=0.11   - the same on the newest JAX 0.11.x (in .venv-jax0.11, Python 3.12)
#   make demo-gpu        - the demo on every platform JAX sees (GPU kernels too)
#   make test-gpu        - the whole suite with JAX allowed to use the GPU (gpu tests must pass)
# JAX selects a supported JAX line (0.10 on Python 3.11; 0.11, 0.12 on Python 3.12): its
# newest release, with the newest NumPy and Numba it allows, in its own virtualenv. Without
# JAX, PYTHON (default python3) gets the newest JAX it can install. PYTHON / VENV override.

JAX ?=
JAX_LINES := 0.10 0.11 0.12
PYTHON_FOR_0.10 := 3.11
PYTHON_FOR_0.11 := 3.12
PYTHON_FOR_0.12 := 3.12
ifeq ($(JAX),)
PYTHON ?= python3
VENV ?= .venv
JAX_PIN :=
else
ifeq ($(filter $(JAX),$(JAX_LINES)),)
$(error JAX=$(JAX) is not a supported line; use one of: $(JAX_LINES))
endif
# Recursive (=): the interpreter is only searched for when a recipe needs it.
PYTHON ?= $(shell .ci/find-python $(PYTHON_FOR_$(JAX)))
VENV ?= .venv-jax$(JAX)
JAX_PIN := "jax==$(JAX).*" "jaxlib==$(JAX).*"
endif
JAX_CUDA ?= cuda12
PY := $(VENV)/bin/python
RUN_DIR := $(CURDIR)/.cache
# Every cache the run writes lives under this checkout, never in the user's home.
RUN_ENV := JAX_PLATFORMS=cpu NUMBA_THREADING_LAYER=omp TRITON_DEFAULT_FP_FUSION=1 \
	POLYKERNEL_CACHE_DIR=$(RUN_DIR)/polykernel NUMBA_CACHE_DIR=$(RUN_DIR)/numba \
	WARP_CACHE_PATH=$(RUN_DIR)/warp TRITON_CACHE_DIR=$(RUN_DIR)/triton \
	POLYKERNEL_CONFIG_DIR=$(RUN_DIR)/config MPLBACKEND=Agg MPLCONFIGDIR=$(RUN_DIR)/matplotlib
# No target writes under ~ either: the caches of the tools the recipes run (pip, uv,
# matplotlib for the docs' plots, pyright and the npm it runs, the CUDA driver's JIT
# cache on GPU machines) live there too. A value set in your environment wins.
export PIP_CACHE_DIR ?= $(RUN_DIR)/pip
export UV_CACHE_DIR ?= $(RUN_DIR)/uv
export MPLCONFIGDIR ?= $(RUN_DIR)/matplotlib
export PYRIGHT_PYTHON_CACHE_DIR ?= $(RUN_DIR)/pyright
export npm_config_cache ?= $(RUN_DIR)/npm
export CUDA_CACHE_PATH ?= $(RUN_DIR)/nv

# Python's bytecode for polykernel, written as `pip install` writes it for an
# installed package (compileall rewrites only stale files; the test targets add the
# tests' helpers, which their child processes import). Where the environment sets
# PYTHONDONTWRITEBYTECODE, no process would ever write it, and every child process
# of the suite or the demo would compile each polykernel module it imports from
# source again: about 0.25 s of CPU per process.
BYTECODE := -m compileall -q -j 0 src/polykernel

# The versions the suite runs on, read from the installed distributions' metadata
# (importing JAX and Numba only to print them took 1.5 s before every run).
VERSIONS = $(PY) -c "import sys; from importlib.metadata import version; \
	print('== python', sys.version.split()[0], \
	*(f'{n} {version(n)}' for n in ('jax', 'jaxlib', 'numpy', 'numba')))"

.PHONY: demo demo-gpu test test-fast test-gpu lint typecheck docs clean venv

# Packages are installed by uv (INSTALLER=uv, the default; one wheel, pinned): it
# downloads and unpacks on every core where pip goes file after file (the test extras,
# 2.9 GB, into a fresh virtualenv on 2 cores: 8 s against 23 s for pip). uv reads none
# of pip's configuration (pip.conf, PIP_* variables): where packages must come through
# a mirror or certificates pip is configured with, set uv's own (UV_DEFAULT_INDEX,
# UV_NATIVE_TLS=1, ...) or use INSTALLER=pip. Neither writes bytecode here: one
# compileall on every core afterwards writes it (.ci/site-bytecode), where pip
# compiles file after file (11 s less of a fresh install on 2 cores).
INSTALLER ?= uv
UV_PIN := uv==0.13.9
ifeq ($(INSTALLER),uv)
# $(call make_venv,BASE_PYTHON,DIR): a virtualenv without a pip of its own (0.1 s,
# against 4 s to unpack one into it); uv goes into it from a pip found elsewhere
# (.ci/uv-into), then installs pip into it too. $(call install,PYTHON,ARGS): ARGS
# installed into the virtualenv of PYTHON.
make_venv = $(1) -m venv --without-pip $(2)
install = .ci/uv-into $(1) "$(UV_PIN)" && \
	$(dir $(1))uv pip install --quiet --python $(1) pip $(2)
else ifeq ($(INSTALLER),pip)
make_venv = $(1) -m venv $(2)
install = $(1) -m pip install --quiet --disable-pip-version-check --upgrade pip && \
	$(1) -m pip install --quiet --disable-pip-version-check --no-compile $(2)
else
$(error INSTALLER=$(INSTALLER): use uv (the default) or pip)
endif
SITE_BYTECODE = $(PY) .ci/site-bytecode

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "no Python for JAX=$(JAX); pass PYTHON=..." >&2; exit 1; }
	$(call make_venv,$(PYTHON),$(VENV))
	$(call install,$(PY),-e ".[test]" $(JAX_PIN))
	$(SITE_BYTECODE)
	touch $@

venv: $(VENV)/.installed

# `make demo` installs only what the demo runs (the `demo` extra: Numba, Warp for its
# CPU device, matplotlib, scipy; no test tools, no Triton, no CUDA wheels) into the
# same virtualenv; `make test` adds the test extras to it.
$(VENV)/.installed-demo: pyproject.toml
	@test -n "$(PYTHON)" || { echo "no Python for JAX=$(JAX); pass PYTHON=..." >&2; exit 1; }
	test -x $(PY) || $(call make_venv,$(PYTHON),$(VENV))
	$(call install,$(PY),-e ".[demo]" $(JAX_PIN))
	$(SITE_BYTECODE)
	touch $@

# DEMO_ARGS: more options of `python -m polykernel.demo` (e.g. --processes 1: the run
# timed in this process only, a third of the time; .ci/gpu-check's budget needs it).
DEMO_ARGS ?=

demo: $(VENV)/.installed-demo
	mkdir -p -m 700 $(RUN_DIR)
	$(PY) $(BYTECODE)
	$(RUN_ENV) $(PY) -m polykernel.demo --output demo-output $(DEMO_ARGS)

# The suite runs in parallel on pytest-xdist workers, one per core and one more (a
# test file's tests stay on one worker: several share a child process per file), and
# prints the 25 slowest tests. The extra worker keeps the cores busy while another
# waits on a child process, a timeout or a sleep: on 2 cores (JAX 0.10, 2026-11-30)
# two workers kept them 93 % busy (351 s), three 98 % (338 s); a fourth started more
# than it filled (358 s). PYTEST_ARGS replaces these defaults (PYTEST_ARGS= runs
# serially).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))
PYTEST_ARGS ?= -n $(PYTEST_WORKERS) --dist loadfile --durations=25

test: $(VENV)/.installed
	$(PY) $(BYTECODE) tests/support
	$(VERSIONS)
	$(PY) -m pytest $(PYTEST_ARGS)

# Neither slow (real compilation, child processes) nor GPU tests: the quick loop.
test-fast: $(VENV)/.installed
	$(PY) $(BYTECODE) tests/support
	$(PY) -m pytest -m "not slow and not gpu" $(PYTEST_ARGS)

# GPU runs. Where a Python with a CUDA-enabled JAX and pytest is already there (the
# GPU machines we are lent have one, and no network), the suite runs from the source
# tree with it and installs nothing (.ci/gpu-python finds it; GPU_PYTHON=... names
# one) but what an install builds: the runtime library (hatch_build.py, run as a
# script). Elsewhere the GPU flavour of jax gets its own virtualenv, so `make test`
# stays CPU-only.
ifneq ($(filter test-gpu demo-gpu,$(MAKECMDGOALS)),)
GPU_PYTHON := $(shell .ci/gpu-python 2>/dev/null)
endif
ifneq ($(GPU_PYTHON),)
GPU_PY := PYTHONPATH=$(CURDIR)/src$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PYTHON)
GPU_DEPS :=
GPU_INSTALL := $(GPU_PYTHON) hatch_build.py
else
GPU_PY := $(VENV)-gpu/bin/python
GPU_DEPS := $(VENV)-gpu/.installed
GPU_INSTALL := true
endif

$(VENV)-gpu/.installed: pyproject.toml
	$(call make_venv,$(PYTHON),$(VENV)-gpu)
	$(call install,$(VENV)-gpu/bin/python,-e ".[test]" "jax[$(JAX_CUDA)]" $(JAX_PIN))
	$(VENV)-gpu/bin/python .ci/site-bytecode
	touch $@

# The demo on every platform JAX sees: the catalog's GPU kernels (numba_cuda, triton,
# pallas, warp where installed) are benchmarked beside the CPU ones.
demo-gpu: $(GPU_DEPS)
	mkdir -p -m 700 $(RUN_DIR)
	$(GPU_INSTALL)
	$(GPU_PY) $(BYTECODE)
	$(RUN_ENV) JAX_PLATFORMS=cpu,cuda $(GPU_PY) -m polykernel.demo --output demo-output \
		$(DEMO_ARGS)

test-gpu: $(GPU_DEPS)
	@echo "== test-gpu with $(GPU_PY)"
	$(GPU_INSTALL)
	$(GPU_PY) $(BYTECODE) tests/support
	POLYKERNEL_TEST_GPU=1 $(GPU_PY) -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(PY) -m ruff check src tests examples benchmarks

# pyright (basic mode, [tool.pyright] in pyproject.toml) on src/polykernel, against the
# packages of this JAX line's virtualenv. The pinned wheel bundles pyright itself and
# [nodejs] its runtime, both from PyPI: no npm registry needed.
PYRIGHT := pyright[nodejs]==1.1.414
typecheck: $(VENV)/.installed
	$(call install,$(PY),"$(PYRIGHT)")
	$(VENV)/bin/pyright --pythonpath $(PY)

# The documentation site. Its tools need neither polykernel nor JAX: mkdocstrings reads
# the docstrings by static analysis, and docs/hooks/results.py draws the measured
# tables and plots of docs/choosing-a-backend.md from docs/data/. `--strict` turns
# every warning (a broken link, a missing reference, a docstring griffe cannot parse)
# into a failure.
DOCS_PYTHON ?= python3
DOCS_VENV ?= .venv-docs

$(DOCS_VENV)/.installed: docs/requirements.txt
	$(call make_venv,$(DOCS_PYTHON),$(DOCS_VENV))
	$(call install,$(DOCS_VENV)/bin/python,-r docs/requirements.txt)
	touch $@

docs: $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 MPLBACKEND=Agg $(DOCS_VENV)/bin/python -m mkdocs build \
		--strict --site-dir site

clean:
	rm -rf .venv .venv-jax* .venv-docs $(RUN_DIR) demo-output site
