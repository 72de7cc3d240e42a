"""nbgrader's submit for the class's JupyterHub: the submission is readable by its student and by the inbound folder's
group (the instructor's own group) and nobody else."""

import os
import tempfile

from nbgrader.exchange.default.submit import ExchangeSubmit

FILE_MODE = 0o640  # the student reads and writes, the instructor's group reads (collect), others nothing
FOLDER_MODE = 0o770  # the instructor's group may also remove it (nbgrader's own 0777 lets anyone who knows its name)


class PrivateSubmit(ExchangeSubmit):
    """nbgrader 0.9.6's submit, then the submission in inbound/ closed to other students (c.ExchangeFactory.submit).

    nbgrader leaves each file world-readable in a world-writable folder and relies on its name (student, time and 72
    random bits) staying unknown, since inbound/ cannot be listed; here a student who learns the name still cannot
    read or change it. inbound/ is setgid, so what is made in it belongs to the instructor's group, but nbgrader's
    copy gives the submission's folder the mode of the student's own (dropping setgid) before it writes
    timestamp.txt and submission_secret.txt: those are made again in inbound/ and moved into place."""

    def copy_files(self) -> None:
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        group = os.stat(self.inbound_path).st_gid
        for folder, subs, names in os.walk(dest):
            for name in names:
                path = os.path.join(folder, name)
                if os.lstat(path).st_gid != group:
                    self._regroup(path)
                os.chmod(path, FILE_MODE)
            for sub in subs:
                os.chmod(os.path.join(folder, sub), FOLDER_MODE)
        os.chmod(dest, FOLDER_MODE)

    def _regroup(self, path: str) -> None:
        """Give `path` inbound/'s group: a copy made in inbound/ (which it inherits there), renamed over it."""
        with open(path, "rb") as f:
            data = f.read()
        fd, tmp = tempfile.mkstemp(dir=self.inbound_path, prefix=".submit-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
