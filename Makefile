# Quick start: `make run` (install + server + real workload), `make test` (install + tests).
VENV ?= .venv
PY := $(VENV)/bin/python
DATA ?= ../shared/data/locomo-dev.json

.PHONY: install run test lint docs docs-serve bench bench-docs bench-perf serve wheel clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,docs]'
	touch $@

install: $(VENV)/.installed

run: install
	$(PY) benchmarks/demo.py --data $(DATA)

serve: install
	$(VENV)/bin/tribal-memory serve

test: install
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check tribal_memory tests benchmarks migrations scripts docs
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# The docs site (mkdocs.yml, docs/) into site/; tests/test_docs_site.py runs the same strict build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve

bench: install
	$(VENV)/bin/tribal-memory bench locomo $(DATA) --out benchmarks/results/locomo-dev.json

# Needs the Python 3.11 docs' reST sources: apt-get install python3.11-doc
bench-docs: install
	$(VENV)/bin/tribal-memory bench documents --out benchmarks/results/documents-python311.json

bench-perf: install
	$(VENV)/bin/tribal-memory bench perf --sizes 10000,100000 --out benchmarks/results/perf.json \
		--profile benchmarks/results/perf-profile-10k.txt

# The installable package: dist/tribal_memory-<version>-py3-none-any.whl (pip install / pipx install it).
wheel: install
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
