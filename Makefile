# The two commands a new user needs (see README): `make test` and `make lab`; instructors also `make instructor`,
# `make quick` (the inner loop) and `make bundle` (the students' course).
# Everything is installed into .venv from requirements.txt; the machine needs only Python 3.11, 3.12 or 3.13.

# The interpreter: PYTHON=... if given, else the first of python3.11, python3.12, python3.13 that runs here.
# (3.11 first: CI tests it, and the course machines keep a CPU build of torch for it on disk.)
PYTHON ?= $(firstword $(foreach p,python3.11 python3.12 python3.13,$(shell $(p) -c "" 2>/dev/null && echo $(p))))
# TORCH_INDEX=https://download.pytorch.org/whl/cpu installs PyTorch's CPU-only build (no CUDA wheels).
TORCH_INDEX ?=
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TORCH_PIN := $(shell grep -o '^torch==[^ ]*' requirements.txt)

# Every recipe runs with the venv's programs first on PATH (nbgrader calls `alembic` by name): no activation needed.
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: lab instructor test quick bundle setup FORCE
setup: $(STAMP)

# Setup runs again when requirements.txt or pyproject.toml differ from what was installed (the stamp keeps a copy of
# both), not when they are merely newer: a copy of the same files (a new download unpacked over this folder, a git
# checkout) reinstalls nothing.
INSTALLED := $(shell cat requirements.txt pyproject.toml 2>/dev/null | cmp -s - $(STAMP) && echo same)
# uv installs (lecturelib/install.py: pip installs uv, pip's configuration is passed on, pip itself should uv fail):
# 10 s where pip takes 91 s here, the same packages. Then compileall compiles the venv's modules on every core. (A
# machine with PYTHONDONTWRITEBYTECODE set would otherwise compile every module in every process importing it.)
$(STAMP): $(if $(INSTALLED),,FORCE)
	@test -n "$(PYTHON)" || { echo "make: no python3.11, python3.12 or python3.13 runs here; install one, or run: make PYTHON=/path/to/python3.12 $(MAKECMDGOALS)"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_INDEX),$(PY) lecturelib/install.py --index-url $(TORCH_INDEX) $(TORCH_PIN))
	$(PY) lecturelib/install.py -r requirements.txt
	$(PY) lecturelib/install.py --no-deps --no-build-isolation -e .
	$(PY) -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)"
	cat requirements.txt pyproject.toml > $(STAMP)
FORCE:

# Students: JupyterLab on work/, their own copy of the release (notebooks/): made on the first `make lab`, never
# overwritten (lecturelib/workspace.py: notebooks the course adds are copied in, a changed notebook is kept), with
# the student's view only (jupyter/student: Validate, no instructor tools). It keeps the terminal until Ctrl-C.
lab: $(STAMP)
	$(PY) -m lecturelib.workspace notebooks work
	JUPYTER_CONFIG_DIR=$(CURDIR)/jupyter/student $(VENV)/bin/jupyter lab --notebook-dir=work $(ALLOW_ROOT)

# Instructors: JupyterLab at the course root with Formgrader; MathJax served locally (jupyter/share); no news pop-up
# (jupyter/instructor, added to the user's own Jupyter configuration).
instructor: $(STAMP)
	mkdir -p exchange
	JUPYTER_PATH=$(CURDIR)/jupyter/share JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter/instructor$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH)) \
	    $(VENV)/bin/jupyter lab --notebook-dir=. $(ALLOW_ROOT)

# Everyone and CI: the whole suite (lecturelib, notebooks, the autograding round trip) on both cores; lecturelib
# compiled first (every kernel, CLI call and nbgrader run of the suite imports it).
test: $(STAMP)
	$(PY) -m compileall -q -j 0 lecturelib
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# The inner loop: lecturelib's own tests and one notebook's autograding round trip (NB=..., default below), on both
# cores; not the browser, the course machinery's other tests, or the solutions under nbval.
NB ?= 00_building_blocks
QUICK_TESTS := $(filter-out tests/test_browser.py tests/test_course_%.py,$(wildcard tests/test_*.py)) tests/test_course_roundtrip.py
quick: $(STAMP)
	$(PY) -m compileall -q -j 0 lecturelib
	LECTURELIB_ROUNDTRIP=$(NB) $(PY) -m pytest -n 2 --dist loadfile --durations=5 $(QUICK_TESTS)

# The students' course (README, "The students' course"): dist/student by default, or OUT=folder.
OUT ?= dist/student
bundle: $(STAMP)
	$(PY) -m lecturelib.course bundle $(OUT)

# A class on JupyterHub on this machine (README, "Running the course on JupyterHub"): as root, from the instructor's
# checkout after `make setup`: accounts from ROSTER, a password each (printed once), the students' course and Python
# in HUB_DIR, then JupyterHub in the foreground on HUB_IP:HUB_PORT (127.0.0.1: this machine only) until Ctrl-C.
# INSTRUCTOR: the account that owns this checkout; HUB_ARGS: more options (`.venv/bin/python jupyterhub/classhub.py -h`).
ROSTER ?= roster.csv
INSTRUCTOR ?= $(shell stat -c %U .)
HUB_DIR ?= /srv/resource-accounting
HUB_IP ?= 127.0.0.1
HUB_PORT ?= 8000
HUB_ARGS ?=
.PHONY: hub
hub:
	@test -f $(STAMP) || { echo "make hub: no course environment in $(VENV) yet: run make setup first (as $(INSTRUCTOR))"; exit 2; }
	$(PY) jupyterhub/classhub.py --roster $(ROSTER) --instructor $(INSTRUCTOR) --hub-dir $(HUB_DIR) --ip $(HUB_IP) --port $(HUB_PORT) $(HUB_ARGS)
