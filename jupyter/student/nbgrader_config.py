"""The student's nbgrader settings (`make lab`, `make test`): Validate runs each cell as the autograder does."""

# JUPYTER_CONFIG_DIR points here for the student's JupyterLab and `make test`, so this file is found wherever the
# server started. A cell may build a model or time a matmul sweep: the autograder's cell time limit, 300 s
# (the course's nbgrader_config.py, c.Execute.timeout; tests/test_jupyter_setup.py checks they agree), not
# nbgrader's 30 s. Self-contained: the student bundle has no course configuration.
c = get_config()  # noqa: F821 - provided by Jupyter when it loads this file
c.Execute.timeout = 300
