# The book's commands. `make book` and `make test` are the two a newcomer needs;
# both create the virtual environment .venv on first use.
#
#   make book      build the site into _build/html (zero warnings allowed)
#   make test      run the whole suite: notebooks (nbval), helper package, site
#   make torch     add PyTorch (requirements-torch.txt) for the PyTorch chapter
#   make lab       JupyterLab on the notebooks
#   make serve     serve the built site on http://127.0.0.1:$(PORT)
#   make outputs   re-execute every notebook in place (after an edit)
#   make figures   regenerate the diagrams in figures/ (byte for byte)
#   make clean     remove the built site; `make distclean` also removes .venv
#
# Offline classroom install: `make book WHEELHOUSE=wheelhouse` installs from a
# folder of wheels made once with `pip download -r requirements.txt -d wheelhouse`.

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
PYTEST_NB := --nbval --nbval-current-env --nbval-sanitize-with tests/sanitize.cfg

# Kernels started by nbconvert and nbval must find the venv's python first.
export PATH := $(abspath $(BIN)):$(PATH)
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test lab serve outputs figures clean distclean venv torch

venv: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
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

book: $(STAMP)
	$(BIN)/jupyter-book build . -W -n --keep-going
	@echo
	@echo "The site is in _build/html. Open file://$(CURDIR)/_build/html/index.html or run: make serve"

test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist loadfile $(PYTEST_NB)

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=$(CURDIR) chapters

serve:
	@test -f _build/html/index.html || { echo "No built site: run 'make book' first."; exit 1; }
	@echo "Serving the site on http://127.0.0.1:$(PORT) (Ctrl-C to stop)"
	$(or $(wildcard $(BIN)/python),$(PYTHON)) -m http.server $(PORT) --bind 127.0.0.1 --directory _build/html

outputs: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	  --ExecutePreprocessor.timeout=600 \
	  --ExecutePreprocessor.record_timing=False \
	  $(NOTEBOOKS)
	$(BIN)/python -m attnbook.nbtools tidy $(NOTEBOOKS)

figures: $(STAMP)
	$(BIN)/python -m attnbook.diagrams figures

clean:
	rm -rf _build

distclean: clean
	rm -rf $(VENV)
