# Two commands do all set-up on a fresh machine with Python 3.11+ and make:
#   make release   install, build the synthetic data set, run a quarterly release
#                  (privacy store: ./demo-store/, created on the first run)
#   make test      install, run the test suite (make test-fast: the unit tests only)
#   make docs      build the documentation site into site/ (make docs-serve: serve it)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
DATA   ?= data/synthetic
RELEASE_ID ?= $(shell date -u +%Y%m%dT%H%M%SZ)
OUT    ?= releases/$(RELEASE_ID)
STORE  ?= demo-store
SEED_KEY ?= demo-seed.key

.PHONY: release test test-fast install clean bench mypy-baseline docs docs-serve

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "pseo-das needs Python 3.11+"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	$(BIN)/prefect server database upgrade -y > /dev/null  # migrate Prefect's local database once
	touch $@

$(DATA)/graduates.parquet: pseo_das/synth.py pseo_das/synth_ipeds.py pseo_das/ipeds_layout.py pseo_das/reference/state_coverage.csv | $(VENV)/.installed
	$(BIN)/pseo-das synth --out $(DATA)

$(SEED_KEY): | $(VENV)/.installed
	$(BIN)/pseo-das key new $(SEED_KEY)

release: $(VENV)/.installed $(DATA)/graduates.parquet $(SEED_KEY)
	@echo "make release: demo privacy store $(STORE)/ (measurements and lifetime budget of the demo releases), demo seed key $(SEED_KEY)"
	$(BIN)/pseo-das release --data $(DATA) --out $(OUT) --release-id $(RELEASE_ID) --store $(STORE) --init-store --seed-key $(SEED_KEY)

# pytest-xdist workers (WORKERS=0: one process); a group of tests sharing a fixture that makes
# releases runs on one worker (tests/conftest.py, docs/develop/tests.md)
WORKERS ?= 2
PARALLEL = -n $(WORKERS) --dist loadgroup

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(PARALLEL)

test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow" $(PARALLEL)

# rewrite tests/mypy_baseline.txt: mypy's errors in the package installed from the wheel
mypy-baseline: $(VENV)/.installed
	PSEO_DAS_MYPY_BASELINE=write $(BIN)/python -m pytest -q tests/test_installed_package.py -k mypy

docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

docs-serve: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_release.py

clean:
	rm -rf $(VENV) data releases audit audit_reports demo-store demo-seed.key study study-quick flows-study .pytest_cache pseo_das.egg-info build dist site
