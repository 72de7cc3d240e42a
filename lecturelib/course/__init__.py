"""The nbgrader course: build the release and solutions, check them, bundle the students' course, autograde, audit,
show graders the references, feedback, grades for the LMS."""
