"""Jupyter server settings of `make instructor` (JUPYTER_CONFIG_PATH): the student's fix of the Notebook 7 view's
fonts (jupyter/student/jupyter_server_config.py) applies to the instructor's server too."""

import os

load_subconfig(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "student", "jupyter_server_config.py"))  # noqa: F821
