# Two entry points a fresh machine needs: `make demo` and `make test`.
# Everything else (the virtualenv, the package, the dev tools) installs itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck unit bench install clean

# The template's example Python migrations (catalog-repo-template/migrations-example) are
# installed too: validating the template needs their registered names.
EXAMPLE := catalog-repo-template/migrations-example

$(STAMP): pyproject.toml $(EXAMPLE)/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "reconciler needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]' -e $(EXAMPLE)
	@touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/reconciler demo

lint: install
	$(BIN)/ruff check reconciler tests bench
	$(BIN)/ruff format --check reconciler tests bench

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest -n 2

test: lint typecheck unit

bench: install
	$(BIN)/python bench/catalog.py
	$(BIN)/python bench/git.py
	$(BIN)/python bench/apply.py
	$(BIN)/python bench/daemon.py
	$(BIN)/python bench/scale.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
