# Two set-up commands: `make run` (serve the app, with the example manifest and the example
# DAG folder loaded) and `make test` (run the whole suite);
# `make test-fast` runs the suite less the tests that start real processes or a browser.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
MANIFEST ?= examples/dags.yaml
DAGS_FOLDER ?= examples/dags

.PHONY: run test test-fast install install-test demo lint clean screenshots docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Each install leaves a stamp in the venv and runs again only when pyproject.toml is newer
# (the editable install picks up code changes by itself): a second `make run` starts at once
# and does not make a running server reload. The test install covers the plain one. Both
# install the `airflow` extra: Airflow's parser and worker run the DAG files `make run` loads.
STAMP := $(VENV)/.installed
STAMP_TEST := $(VENV)/.installed-test

install: $(STAMP)

install-test: $(STAMP_TEST)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[airflow]"
	touch $@

$(STAMP_TEST): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,airflow,docs]"
	touch $@ $(STAMP)

run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py declare_dags $(MANIFEST)
	$(BIN)/python manage.py declare_dags --dags-folder $(DAGS_FOLDER)
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

demo: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py demo

# the README's pictures of the admin: headless Chromium (apt-get install chromium chromium-driver)
screenshots: install-test
	$(BIN)/python manage.py screenshots --out docs/screenshots

# the docs site (mkdocs.yml, docs/) into site/; --strict fails on a broken link or anchor
docs: install-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# One test process per core (pytest-xdist; TEST_WORKERS=0: all in one process), each with its
# own test database; tests spread by work stealing (their times differ a hundredfold). The 25
# slowest are listed at the end.
TEST_WORKERS ?= auto
PYTEST_RUN = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=25

test: install-test
	$(PYTEST_RUN) $(PYTEST_ARGS)

# every test not marked slow: no server, scheduler, worker, task or parser process, no browser
# (tests/lanes.py marks them; a test that starts one unmarked fails, in either lane)
test-fast: install-test
	$(PYTEST_RUN) -m "not slow" $(PYTEST_ARGS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python manage.py makemigrations --check --dry-run

clean:
	rm -rf $(VENV) .venv-sdk .pytest_cache
