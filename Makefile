# Two commands for a fresh machine with Python 3.10+:
#   make lab    set up .venv (once) and open the series in JupyterLab (中文版: make lab EDITION=zh,
#               or any LANG=zh_*)
#   make test   set up .venv (once) and run the whole test suite (unit tests + nbval)
# and, for the real-browser suite (needs Debian's chromium, see tests/e2e/README.md):
#   make e2e    add Playwright to .venv (once) and run every notebook in JupyterLab in Chromium
# Re-running either does not reinstall unless a requirements file or pyproject.toml changed.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
E2E_STAMP := $(VENV)/.installed-e2e
CHROMIUM ?= /usr/bin/chromium
# Extra arguments for `jupyter lab` (tests/test_lab.py passes --no-browser, a port and a token).
LAB_ARGS ?=

# JupyterLab settings for everyone using this environment, installed by the set-up: no "get
# notified about official Jupyter news?" prompt over the notebook, no update check, and no
# extension manager asking PyPI (the series needs no extensions beyond its pinned ones).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
define OVERRIDES_JSON
{
  "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false},
  "@jupyterlab/extensionmanager-extension:plugin": {"enabled": false}
}
endef
export OVERRIDES_JSON

# The kernel must be the one in .venv, never a user-level "python3" kernelspec from elsewhere.
export JUPYTER_PREFER_ENV_PATH := 1
# An inherited MPLBACKEND=Agg would turn inline plots off (the notebooks set %matplotlib inline).
unexport MPLBACKEND

.PHONY: lab test e2e lint notebooks clean help
.DEFAULT_GOAL := help

help:
	@echo "make lab        set up .venv and open JupyterLab on notebooks/ (EDITION=zh: notebooks/zh/)"
	@echo "make test       set up .venv and run unit tests + nbval over every notebook"
	@echo "make e2e        run every notebook in JupyterLab in headless Chromium (tests/e2e)"
	@echo "make notebooks  re-execute every notebook in place (restart and run all)"
	@echo "make clean      remove .venv and caches"

$(STAMP): requirements.txt requirements-test.txt pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("Python 3.10+ is required, found " + sys.version.split()[0]) if sys.version_info < (3, 10) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt -e .
	touch $@

$(LAB_OVERRIDES): $(STAMP) Makefile
	mkdir -p $(dir $@)
	printf '%s\n' "$$OVERRIDES_JSON" > $@

# Playwright drives Debian's chromium; it never downloads a browser of its own.
$(E2E_STAMP): $(STAMP) requirements-e2e.txt
	$(BIN)/python -m pip install --quiet -r requirements-e2e.txt
	touch $@

# Jupyter refuses to start as root unless told to, and Docker images and many class servers run
# as root: there, say so and pass --allow-root.
# The edition `make lab` opens: the Chinese one (notebooks/zh/, 中文版) where LANG says Chinese
# (zh_CN.UTF-8, zh_TW.UTF-8, ...) or with `make lab EDITION=zh`; `EDITION=en` opens the English.
EDITION ?= $(if $(filter zh%,$(LANG)),zh,en)
LAB_DIR := $(if $(filter zh,$(EDITION)),notebooks/zh/,notebooks/)
lab: $(STAMP) $(LAB_OVERRIDES)
	@if [ "$$(id -u)" = 0 ]; then echo "make lab: running as root (as Docker images and many" \
	  "class servers do); JupyterLab starts as root only with --allow-root, so it gets it"; fi
	$(BIN)/jupyter lab $(LAB_DIR) $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(LAB_ARGS)

# One pytest worker per logical CPU, at most 4; a notebook's cells, and a test file with a
# module-scoped fixture, stay together in one worker, every other test is spread on its own
# (--dist loadgroup, as conftest.py schedules it). TEST_WORKERS=0 runs everything in this
# process. Each worker, and the kernels it starts, gets one BLAS thread unless the caller chose a
# number: two workers with a thread per core each would oversubscribe the cores, and OpenBLAS
# threads that wait for a core spin (on 2 cores `make test` took 7 minutes instead of 2.3).
TEST_WORKERS ?= logical --maxprocesses 4
test: export OPENBLAS_NUM_THREADS ?= 1
# Bytecode is cached under .venv, never beside the sources, and even where PYTHONDONTWRITEBYTECODE
# is set (as in many Docker images): otherwise every worker, kernel and grading child compiles
# helpers/ again, and pytest rewrites the asserts of every test module and plugin again.
test: export PYTHONPYCACHEPREFIX ?= $(abspath $(VENV))/pycache
test: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP) $(LAB_OVERRIDES)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

e2e: $(E2E_STAMP)
	@test -x $(CHROMIUM) || { echo "no $(CHROMIUM): apt-get install -y chromium fonts-dejavu-core"; exit 1; }
	E2E_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -m e2e tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check .

notebooks: $(STAMP)
	$(BIN)/python tests/regenerate.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache test-artifacts
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
