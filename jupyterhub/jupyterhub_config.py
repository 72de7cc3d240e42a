"""JupyterHub of one class on this machine: `make hub` (jupyterhub/classhub.py) copies this file into
HUB_DIR/config/ and describes the class in HUB_DIR/state/class.json.

Students log in with their own password (class_authenticator.py) and get a server of their own, run as their
system account in their home: the course's Python and kernel (HUB_DIR/venv, lecturelib from the students' course),
the student view with the Assignment List, no Formgrader and no instructor tools (student/). The instructor gets a
server at the course root, run with the course's own .venv, with Formgrader and every nbgrader tool, as
`make instructor` opens it.
"""

import json
import os
import pwd
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent  # HUB_DIR/config
HUB = HERE.parent
sys.path.insert(0, str(HERE))
from class_authenticator import ClassAuthenticator  # noqa: E402 - beside this file, found through the line above
from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid  # noqa: E402

CLASS = json.loads((HUB / "state" / "class.json").read_text())
INSTRUCTOR: str = CLASS["instructor"]
COURSE_ROOT = Path(CLASS["course_root"])
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

# Where it listens: the proxy on IP:PORT (127.0.0.1 unless `make hub HUB_IP=...`); the hub's own API and the proxy's
# REST API on loopback only (the proxy's needs the token the hub gives it).
c.JupyterHub.bind_url = f"http://{CLASS['ip']}:{CLASS['port']}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = CLASS["hub_api_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{CLASS['proxy_api_port']}"
c.ConfigurableHTTPProxy.command = [str(HUB / "venv" / "bin" / "configurable-http-proxy")]
c.JupyterHub.db_url = f"sqlite:///{HUB / 'state' / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(HUB / "state" / "jupyterhub_cookie_secret")

# Who may log in: the class (the roster's students and the instructor), each with their own password; no one else,
# not even an account the hub's database remembers from an earlier roster.
c.JupyterHub.authenticator_class = ClassAuthenticator
c.ClassAuthenticator.password_file = str(HUB / "state" / "passwords.json")
c.Authenticator.allowed_users = {*CLASS["students"], INSTRUCTOR}
c.Authenticator.allow_existing_users = False
c.Authenticator.admin_users = set()  # a hub admin could open every student's server: nobody needs to



class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner, but each server starts in its own folder (notebook_dir), not in the account's home: the
    instructor's in the course root, where nbgrader (Formgrader, the terminal's commands) finds the course's
    nbgrader_config.py, as `make instructor` starts there."""

    def make_preexec_fn(self, name: str):  # noqa: ANN201 - JupyterHub's signature
        become = set_user_setuid(name, chdir=False)
        folder = self.notebook_dir

        def preexec() -> None:
            become()
            os.chdir(folder)

        return preexec


# Each server runs as its user's system account (the hub runs as root), with only the environment set below (no
# variable of the hub's own leaks in).
c.JupyterHub.spawner_class = ClassSpawner
c.LocalProcessSpawner.env_keep = ["LANG", "LC_ALL"]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180  # a server imports JupyterLab and nbgrader: tens of seconds on a busy 2-core machine
c.Spawner.http_timeout = 180


def per_user(spawner) -> None:  # noqa: ANN001 - JupyterHub's Spawner
    """The instructor's server: the course root and the course's .venv, Formgrader included; a student's: their
    home, the course's Python in HUB_DIR/venv and the student view (student/ beside this file)."""
    name = spawner.user.name
    if name == INSTRUCTOR:
        venv = COURSE_ROOT / ".venv"
        spawner.notebook_dir = str(COURSE_ROOT)
        env = {"JUPYTER_CONFIG_PATH": str(COURSE_ROOT / "jupyter" / "instructor"),  # as `make instructor`
               "JUPYTER_PATH": str(COURSE_ROOT / "jupyter" / "share")}  # local MathJax in Formgrader's pages
    else:
        venv = HUB / "venv"
        spawner.notebook_dir = pwd.getpwnam(name).pw_dir
        env = {"JUPYTER_CONFIG_PATH": str(HERE / "student")}
    spawner.cmd = [str(venv / "bin" / "jupyterhub-singleuser")]
    # the terminal's `python`, `nbgrader` and `jupyter` are the course's
    spawner.environment = {**spawner.environment, **env, "PATH": f"{venv / 'bin'}{os.pathsep}{SYSTEM_PATH}"}


c.Spawner.pre_spawn_hook = per_user
