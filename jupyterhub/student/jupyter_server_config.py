"""Jupyter server settings of the students' servers on the class's JupyterHub (JUPYTER_CONFIG_PATH): the student
view of `make lab` (jupyter/student, carried by the students' course in HUB_DIR/course) with its fix of the Notebook 7
view's fonts; jupyter_server_config.json beside this file turns on the Assignment List."""

import os

# HUB_DIR/config/student/ -> HUB_DIR/course/jupyter/student/ (classhub.py lays both out)
_hub = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
load_subconfig(os.path.join(_hub, "course", "jupyter", "student", "jupyter_server_config.py"))  # noqa: F821
