# The book's commands. `make book` and `make test` are the two a newcomer needs;
# both create the virtual environment .venv on first use.
#
#   make book      build the site into _build/html (zero warnings allowed)
#   make test      run the whole suite: notebooks (nbval), helper package, site; then the
#                  notebooks again with NumPy's SIMD dispatch off (another machine's rounding)
#   make torch     add PyTorch and transformers (requirements-torch.txt): the PyTorch
#                  chapter and the tests against Hugging Face's attention modules
#   make triton    add Triton (requirements-triton.txt; after make torch): the pages that
#                  write FlashAttention as Triton kernels (17d, 17e), run on the CPU in
#                  Triton's interpreter, timed only on a GPU
#   make lab       JupyterLab on the notebooks
#   make serve     serve the built site on http://127.0.0.1:$(PORT)
#   make outputs   re-execute every notebook in place (after an edit); first puts each
#                  chapter in shape (bootstrap cell, slide metadata: attnbook.nbtools prepare)
#   make slides    export every chapter as reveal.js slides into slides/ (Chinese: slides/zh/), self-sufficient
#                  offline (reveal.js, MathJax 2 served from slides/assets/: npm ci installs
#                  them from package-lock.json); SOLUTIONS=yes adds each solution on a sub-slide
#   make pdf       print the built site to A4 PDFs in pdf/ (Chinese: pdf/zh/): one per chapter
#                  page and one for the whole book, a student set (no solutions) and a teacher's
#                  set (solutions); it says at the end how many PDFs, their size, each book's pages
#   make assets    npm ci: the front-end files the slides use (node_modules/)
#   make student   the student kit in student/: chapters without solutions, its own README,
#                  requirements and Makefile (`make lab` in it); CHAPTERS="01 02" for some
#                  chapters; the kit's own exercises are sealed in its answer key unless KEY=1
#   make student-lab  JupyterLab on student/ (what a student sees)
#   make figures   regenerate the diagrams in figures/ (byte for byte), the Chinese ones in
#                  figures/zh/ (drawn in the web font of _static/fonts: after make font)
#   make repository URL=https://github.com/OWNER/NAME REF=v1.0
#                  publish: the book's repository in _config.yml and in every chapter's
#                  set-up cell, without re-executing; the launch buttons open the new tag REF
#                  (never a branch), Colab installs attnbook from this commit; then commit and
#                  tag that commit REF. `make repository URL=` unsets it
#   make translations  after editing English prose: brings every locale/zh/<page>.po in line
#                  (a changed paragraph keeps its old Chinese, marked fuzzy) and writes the
#                  Chinese book zh/ from the English notebooks and the translations; then
#                  `python -m attnbook.i18n check` lists what to translate (README: Translating)
#   make font      the Chinese web font _static/fonts/ (Noto Sans SC cut to the characters the
#                  site uses, in unicode-range slices, and the style sheet naming them), after
#                  translations added characters (`make test` says when); needs Debian's
#                  fonts-noto-cjk to run (or NOTO_CJK=/path/to/NotoSansCJK-Regular.ttc)
#   make clean     remove the built site, slides/, pdf/ and student/; `make distclean` also
#                  .venv and node_modules/
#
# Offline classroom install: `make book WHEELHOUSE=wheelhouse` installs from a
# folder of wheels made once with `pip download -r requirements.txt -d wheelhouse`.
# `make slides` needs node_modules/ (`make assets`, once, online; or offline
# from npm's cache with `make assets NPM_OFFLINE=yes`).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000
WHEELHOUSE ?=
PIP_OPTS := $(if $(WHEELHOUSE),--no-index --find-links $(abspath $(WHEELHOUSE)),)
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard chapters/*.ipynb))
ZH_NOTEBOOKS := $(sort $(wildcard zh/chapters/*.ipynb))  # generated: make translations
# A cell that hangs fails after 300 s, naming the notebook and cell. The slowest cells, chapter
# 22b's three recall races (30 small models each), take 15-35 s of CPU; on 2 cores shared with
# the rest of the suite one took 87 s, so 60 s was too tight for a slower machine.
PYTEST_NB := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg --nbval-cell-timeout=300

# Kernels started by nbconvert and nbval must find the venv's python first.
export PATH := $(abspath $(BIN)):$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

# Nothing from the reader's home: where $HOME is missing or not writable (a container, a
# shared lab account), matplotlib, IPython and Jupyter keep their files under _build/home
# instead (matplotlib would warn on stderr, which fails a notebook; Jupyter would stop).
ifneq ($(shell [ -d "$$HOME" ] && [ -w "$$HOME" ] && echo ok),ok)
export MPLCONFIGDIR := $(CURDIR)/_build/home/matplotlib
export IPYTHONDIR := $(CURDIR)/_build/home/ipython
export JUPYTER_RUNTIME_DIR := $(CURDIR)/_build/home/jupyter-runtime
endif

.PHONY: book test lab serve outputs slides pdf assets student student-lab figures clean distclean \
	venv torch triton repository translations font env

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "The book needs \
	Python 3.11 or newer (NumPy 2.4, whose outputs the chapters store, has no wheels for \
	older ones); $(PYTHON) is $$($(PYTHON) -V 2>&1). Run: make PYTHON=python3.12 ..."; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_OPTS) --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install $(PIP_OPTS) --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $@

# Optional: PyTorch, for chapters/10_pytorch.ipynb (without it, `make test` skips that chapter).
TORCH_STAMP := $(VENV)/.installed-torch
torch: $(TORCH_STAMP)

$(TORCH_STAMP): requirements-torch.txt | $(STAMP)
	$(BIN)/python -m pip install $(PIP_OPTS) --quiet --disable-pip-version-check -r requirements-torch.txt
	@touch $@

# Optional: Triton, for chapters/17d_triton_forward.ipynb and 17e_triton_backward.ipynb (without
# it, `make test` skips them and their tests). It needs torch, so it comes after `make torch`.
TRITON_STAMP := $(VENV)/.installed-triton
triton: $(TRITON_STAMP)

$(TRITON_STAMP): requirements-triton.txt $(TORCH_STAMP)
	$(BIN)/python -m pip install $(PIP_OPTS) --quiet --disable-pip-version-check -r requirements-triton.txt
	@touch $@

# The site is rebuilt from scratch (no stale pages, no warning hidden by an incremental
# build) whenever any file it is built from changed: every file of the book except the
# tests, the virtual environment, what the commands make, and the files the build never
# reads (README.md is excluded in _config.yml). Its log and exit code are kept beside it;
# `make test` checks that very site (tests/conftest.py, built_site).
SITE_INPUTS := $(shell find . \( -name .git -o -name .venv -o -name _build -o -name tests \
	-o -name student -o -name slides -o -name pdf -o -name node_modules -o -name wheelhouse \
	-o -name __pycache__ -o -path ./package.json -o -path ./package-lock.json \
	-o -name .ipynb_checkpoints -o -name .pytest_cache -o -name .hypothesis -o -name '*.egg-info' \
	-o -name .ci -o -name .github \
	-o -path ./README.md -o -path ./conftest.py \) -prune -o -type f -print)
SITE := _build/html/.built

$(SITE): $(STAMP) $(SITE_INPUTS)
	$(BIN)/python -m attnbook.build_site . || true
	mkdir -p _build/html && touch $@

book: $(SITE)
	@rc=$$(cat _build/book.returncode); if [ "$$rc" != 0 ]; then \
	    echo "The build failed or warned (exit code $$rc): see _build/book.log"; exit 1; fi
	@echo
	@echo "The site is in _build/html (the Chinese edition in _build/html/zh)."
	@echo "Open file://$(CURDIR)/_build/html/index.html or run: make serve"

# The tests check the site in _build/html (built first if out of date; a build that warned
# fails tests/site/test_site.py, and every other test still runs). A run starts some 25 Python
# processes (workers, kernels); each reuses the bytecode the first one compiled (attnbook,
# the rewritten test modules, in __pycache__/, ignored by git), even where the environment
# sets PYTHONDONTWRITEBYTECODE: recompiling in each costs about 4 CPU-seconds per run.
#
# Then the notebooks run a second time with NumPy's SIMD dispatch off (NPY_DISABLE_CPU_FEATURES
# naming every extension NumPy dispatches to here: `python -m attnbook.nbtools simd-off`), as on
# a reader's machine with another processor: every stored output must hold both ways.
test: $(STAMP) $(SITE) $(if $(shell command -v npm),$(NODE_STAMP))
	PYTHONDONTWRITEBYTECODE= ATTNBOOK_SITE=$(CURDIR)/_build $(BIN)/python -m pytest -n auto --dist loadfile $(PYTEST_NB) --durations=10
	@off=$$($(BIN)/python -m attnbook.nbtools simd-off); \
	if [ -z "$$off" ]; then echo "NumPy dispatches to no SIMD extension beyond its baseline here:" \
	    "the notebooks' second pass would repeat the first, so it is skipped"; \
	else echo "== the notebooks again, with NumPy's SIMD dispatch off: NPY_DISABLE_CPU_FEATURES=$$off"; \
	NPY_DISABLE_CPU_FEATURES="$$off" PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n auto \
	    --dist loadfile -p no:cacheprovider -q $(PYTEST_NB) chapters; fi

# What make gives the tools it runs (the PATH, and where the home's files go when $$HOME is
# not writable): `make env`.
env:
	@echo "PATH starts with $(abspath $(BIN))"
	@echo "MPLCONFIGDIR=$${MPLCONFIGDIR-}"
	@echo "IPYTHONDIR=$${IPYTHONDIR-}"
	@echo "JUPYTER_RUNTIME_DIR=$${JUPYTER_RUNTIME_DIR-}"
	@echo "NPY_DISABLE_CPU_FEATURES for the second pass: $$($(or $(wildcard $(BIN)/python),$(PYTHON)) -m attnbook.nbtools simd-off 2>/dev/null)"

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) chapters

serve:
	@test -f _build/html/index.html || { echo "No built site: run 'make book' first."; exit 1; }
	@echo "Serving the site on http://127.0.0.1:$(PORT) (Ctrl-C to stop)"
	$(or $(wildcard $(BIN)/python),$(PYTHON)) -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

translations: $(STAMP)
	$(BIN)/python -m attnbook.i18n update
	$(BIN)/python -m attnbook.i18n build

font: $(STAMP)
	$(BIN)/python -m attnbook.i18n font

outputs: $(STAMP)
	$(BIN)/python -m attnbook.nbtools prepare $(NOTEBOOKS)
	$(BIN)/python -m attnbook.nbtools execute $(NOTEBOOKS)
	$(BIN)/python -m attnbook.nbtools tidy $(NOTEBOOKS)
	$(BIN)/python -m attnbook.i18n build

# Front-end files for the classroom exports, pinned in package-lock.json (npm's registry):
# reveal.js 4.0.2 (the version nbconvert's template is written for), MathJax 2.7.9,
# require.js and jQuery for the decks.
NODE_STAMP := node_modules/.installed
NPM_OFFLINE ?=
assets: $(NODE_STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "make $@ needs npm (Debian: apt-get install npm)"; exit 1; }
	npm ci --no-audit --no-fund $(if $(NPM_OFFLINE),--offline)
	@touch $@

SOLUTIONS ?=
slides: $(STAMP) $(NODE_STAMP)
	rm -rf slides
	$(BIN)/python -m attnbook.slides_export slides $(NOTEBOOKS) $(if $(SOLUTIONS),--solutions)
	$(BIN)/python -m attnbook.slides_export slides/zh $(ZH_NOTEBOOKS) $(if $(SOLUTIONS),--solutions)
	@echo "Open slides/<chapter>.slides.html (Chinese: slides/zh/) in a browser (file:// or http): nothing comes from the internet."
	@echo "Copy the whole slides/ folder (the decks need slides/assets/ and slides/zh/assets/)."
	@echo "make slides wrote $$(ls slides/*.slides.html | wc -l) English and $$(ls slides/zh/*.slides.html | wc -l)" \
	    "Chinese decks: $$(du -sh slides | cut -f1) in all, of which the assets" \
	    "(reveal.js, MathJax 2, require.js, jQuery) $$(du -shc slides/assets slides/zh/assets | tail -1 | cut -f1)"

# The PDFs are printed from the built site by Debian's chromium (CHROMIUM=/path to another),
# both editions (the Chinese into pdf/zh/), their Chinese in the site's own web font
# (_static/fonts/): no CJK font need be installed.
pdf: book
	rm -rf pdf
	$(BIN)/python -m attnbook.handouts _build/html pdf

CHAPTERS ?=
KEY ?=
KIT_NOTEBOOKS := $(if $(CHAPTERS),$(sort $(foreach c,$(CHAPTERS),$(wildcard chapters/$(c)*.ipynb))),$(NOTEBOOKS))

student: $(STAMP)
	@test -n "$(KIT_NOTEBOOKS)" || { echo "No chapter matches CHAPTERS=$(CHAPTERS)"; exit 1; }
	rm -rf student
	$(BIN)/python -m attnbook.nbtools student student $(if $(KEY),--key,) $(KIT_NOTEBOOKS)
	@echo "The student kit is in student/: copy the whole folder; on each machine run make lab in it"

student-lab: $(STAMP)
	@test -f student/README.md || { echo "No student kit: run 'make student' first."; exit 1; }
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR)/student

figures: $(STAMP)
	$(BIN)/python -m attnbook.diagrams figures

# The Binder and Colab buttons open tag REF of URL, and every chapter's set-up cell installs
# the helper package in Colab from this clone's HEAD commit; with no URL, nothing (_config.yml).
URL ?=
REF ?=
repository: $(STAMP)
	$(BIN)/python -m attnbook.nbtools repository "$(URL)" "$(REF)" $(NOTEBOOKS)
	$(BIN)/python -m attnbook.i18n build

clean:
	rm -rf _build slides pdf student

distclean: clean
	rm -rf $(VENV) node_modules
