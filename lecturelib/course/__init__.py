"""The nbgrader course: build the release and solutions, check them, autograde, audit, feedback."""
