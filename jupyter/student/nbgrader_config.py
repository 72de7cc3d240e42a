"""The student's nbgrader settings (`make lab`): Validate grades with the course's own configuration."""

import os

# JUPYTER_CONFIG_DIR points here for the student's JupyterLab, so this file is found wherever the server
# started. The course's nbgrader_config.py (two folders up) sets the cell timeout the autograder uses.
load_subconfig(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "nbgrader_config.py"))  # noqa: F821
