# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEMO   ?= ./demo
PYTEST_ARGS ?=

.PHONY: help venv install java demo test test-heavy lint format bench bench-peers clean

help:
	@echo "make demo        create .venv, install, run the flagship study on a generated panel (local Spark + Ray)"
	@echo "make test        create/update .venv, install .[test,cluster,continuous,bench], run the test suite (reduced replicate counts; the benchmark smoke test too)"
	@echo "make test-heavy  the same, plus the specs' exact per-cell statements at full replicate counts"
	@echo "make lint        ruff check + format check + mypy"

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall whenever pyproject.toml changes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(PY) -m pip install --quiet -e ".[test,cluster,continuous,bench]"
	@touch $(STAMP)

venv install: $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { echo "Java 17 is required by pyspark and was not found."; \
	  echo "Install it: sudo apt-get install -y openjdk-17-jre-headless (Debian/Ubuntu), brew install openjdk@17 (macOS),"; \
	  echo "then make sure 'java -version' reports 17 or newer (or set JAVA_HOME)."; exit 1; }
	@java -version 2>&1 | head -1 | grep -Eq '"(1[7-9]|[2-9][0-9])[."]' || { echo "Java 17+ is required by pyspark; found: $$(java -version 2>&1 | head -1)"; \
	  echo "Install it: sudo apt-get install -y openjdk-17-jre-headless, or point JAVA_HOME at a JDK 17."; exit 1; }

demo: $(STAMP) java
	@$(VENV)/bin/judgecal generate --items 4000 --judges 15 --seed 7 --overwrite $(DEMO)/panel >/dev/null
	@$(VENV)/bin/judgecal run inclusion --conf conf/demo.yaml --set data=$(DEMO)/panel --set replicates=50 --output $(DEMO)/results

test: $(STAMP) java
	$(PY) -m pytest $(PYTEST_ARGS)

test-heavy: $(STAMP) java
	JUDGECAL_FULL=1 $(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check judgecal_dist tests benchmarks jobs
	$(VENV)/bin/ruff format --check judgecal_dist tests benchmarks jobs
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format judgecal_dist tests benchmarks jobs
	$(VENV)/bin/ruff check --fix judgecal_dist tests benchmarks jobs

# The peers of benchmarks/label_llmbar.py that need another Python: GLIDE (glide-py needs Python >= 3.12 and
# scipy >= 1.18.1; the project is 3.11) in its own benchmark-only environment, which the benchmark calls as a
# subprocess (benchmarks/peers/glide_runner.py, arrays by .npz). python3.12 from PATH, else pyenv's 3.12.
PEERS_PYTHON ?= python3.12
PEERS_VENV   := .venv-peers
GLIDE_PIN    := glide-py==0.11.0

bench-peers:
	@py="$(PEERS_PYTHON)"; \
	if ! "$$py" -c 'import sys' >/dev/null 2>&1 && command -v pyenv >/dev/null 2>&1; then \
	  v=$$(pyenv versions --bare | grep -E '^3\.12(\.[0-9]+)?$$' | tail -1); \
	  [ -n "$$v" ] && py="$$(pyenv root)/versions/$$v/bin/python3.12"; \
	fi; \
	"$$py" -c 'import sys; assert sys.version_info[:2] >= (3, 12)' >/dev/null 2>&1 || { \
	  echo "python3.12 not found (GLIDE needs Python >= 3.12): install it (e.g. pyenv install 3.12) or set PEERS_PYTHON"; exit 1; }; \
	[ -x $(PEERS_VENV)/bin/python ] || "$$py" -m venv $(PEERS_VENV); \
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip; \
	$(PEERS_VENV)/bin/python -m pip install --quiet "$(GLIDE_PIN)" numpy; \
	$(PEERS_VENV)/bin/python -c 'import glide; print("bench-peers: glide-py", glide.__version__, "in $(PEERS_VENV)")'

clean:
	rm -rf $(VENV) $(DEMO) results .pytest_cache
