"""The students' nbgrader settings on the class's JupyterHub (JUPYTER_CONFIG_PATH of their servers): the class's
exchange, the course's id, the autograder's cell time limit for Validate, and submissions only the instructor reads."""

import importlib.util
import json
import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# HUB_DIR/config/student/ -> HUB_DIR (classhub.py lays it out; course.json holds the course's id)
_here = os.path.dirname(os.path.abspath(__file__))
_hub = os.path.dirname(os.path.dirname(_here))
with open(os.path.join(_hub, "config", "course.json")) as _f:
    c.CourseDirectory.course_id = json.load(_f)["course_id"]
c.Exchange.root = os.path.join(_hub, "exchange")
# Validate runs each cell with the autograder's time limit: the student view's own setting, from the students' course
load_subconfig(os.path.join(_hub, "course", "jupyter", "student", "nbgrader_config.py"))  # noqa: F821

# A submission readable by its student and the instructor's group only (nbgrader leaves it readable by all who can
# guess its folder's name): exchange_submit.py beside this file.
_spec = importlib.util.spec_from_file_location("lecturelib_hub_exchange_submit",
                                               os.path.join(_here, "exchange_submit.py"))
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
c.ExchangeFactory.submit = _module.PrivateSubmit
