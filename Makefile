# The two commands a new user needs (see README): `make lab` and `make test`.
# Everything is installed into .venv from requirements.txt; nothing on the machine is assumed but python3.11.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: lab test setup
setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Students: JupyterLab on the released notebooks, nbgrader's Validate button included.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

# Everyone and CI: the whole suite (lecturelib, notebooks, the autograding round trip) on both cores.
test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile
