"""A class on JupyterHub on one machine (`sudo make hub`, run from the instructor's checkout): accounts from the
roster, a password each, the students' course and Python, nbgrader's exchange, then JupyterHub in the foreground
(Ctrl-C stops it and every server it started).

What it lays out in HUB_DIR (root's; /srv/resource-accounting unless --hub-dir), every run bringing it up to date:

    venv/      the course's Python for the students' servers and the hub: the checkout's .venv, files hard-linked
               where root owns them and copied where it does not (so that root never runs a file the instructor
               can change), its lecturelib replaced by course/'s
    course/    the students' course (`python -m lecturelib.course bundle`): lecturelib without `course`, no hidden
               test, no solution
    config/    jupyterhub_config.py, class_authenticator.py and student/ (the students' Jupyter and nbgrader
               settings) from this folder, and course.json (the course's id)
    exchange/  nbgrader's exchange (1777, as /tmp); exchange/COURSE_ID is the instructor's (2755: inbound/ and the
               submissions get the instructor's own group); the course root's `exchange` links here
    state/     root only: class.json (who, where), passwords.json (scrypt hashes), the hub's database and cookie secret

Accounts: each roster id becomes a system account (home 0700, no login password: the hub's password is not the
machine's) unless it exists as an ordinary account already; the instructor's account must own the course root.
"""

from __future__ import annotations

import argparse
import ast
import csv
import grp
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from class_authenticator import hash_password, new_password, read_passwords, write_passwords  # noqa: E402

HERE = Path(__file__).resolve().parent
# A name that useradd, JupyterHub (which lower-cases) and nbgrader's exchange (`+` separates its fields) all keep as is.
ACCOUNT = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
COMMENT = "Resource Accounting student (make hub)"  # the GECOS field of the accounts this file creates
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HUB_FILES = ("jupyterhub_config.py", "class_authenticator.py")
LECTURELIB_PTH = "lecturelib-course.pth"  # the line in the students' venv that puts course/'s lecturelib on sys.path


class ClassError(RuntimeError):
    """The class cannot be set up as asked: the message says what to change."""


@dataclass(frozen=True)
class Class:
    """One class on this machine, as the hub's configuration reads it (HUB_DIR/state/class.json)."""

    course_id: str
    instructor: str
    students: list[str]
    course_root: str
    ip: str
    port: int
    proxy_api_port: int
    hub_api_port: int


# ---------------------------------------------------------------------------------------------------------
# the roster and the accounts


def read_roster(path: Path) -> list[str]:
    """The student ids of a roster CSV (`nbgrader db student import`'s: an `id` column), each usable as an account."""
    if not path.is_file():
        raise ClassError(f"no roster at {path}: a CSV with the columns id,first_name,last_name,email,lms_user_id "
                         "(README, Instructor guide), or ROSTER=path")
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    ids = [(row.get("id") or "").strip() for row in rows]
    bad = [i for i in ids if not ACCOUNT.fullmatch(i)]
    if bad:
        raise ClassError(f"roster ids that cannot be accounts on this machine: {', '.join(map(repr, bad[:10]))} (a "
                         "lower-case letter, then lower-case letters, digits, '.', '_' or '-', at most 32)")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ClassError(f"roster ids listed twice: {', '.join(twice)}")
    if not ids:
        raise ClassError(f"the roster {path} lists no student")
    return ids


def ordinary_uids() -> range:
    """The user ids of ordinary (not system) accounts here: /etc/login.defs' UID_MIN..UID_MAX (1000..60000)."""
    found = {"UID_MIN": 1000, "UID_MAX": 60000}
    try:
        for line in Path("/etc/login.defs").read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in found and parts[1].isdigit():
                found[parts[0]] = int(parts[1])
    except OSError:
        pass
    return range(found["UID_MIN"], found["UID_MAX"] + 1)


def ensure_student(name: str, homes: Path | None) -> bool:
    """Make the student's account (True) unless an ordinary account of that name exists (False); refuse a system
    account's name (root, daemon, www-data ...): its server would run with that account's rights."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        cmd = ["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", "--comment", COMMENT]
        cmd += ["--base-dir", str(homes)] if homes else []
        done = subprocess.run([*cmd, name], capture_output=True, text=True)
        if done.returncode != 0:
            raise ClassError(f"useradd {name} failed: {done.stderr.strip()}")
        os.chmod(pwd.getpwnam(name).pw_dir, 0o700)  # no other student reads this home (Debian's default is 0755)
        return True
    if entry.pw_uid not in ordinary_uids():
        raise ClassError(f"the roster id {name!r} is the system account of uid {entry.pw_uid}: rename the student")
    return False


def check_instructor(name: str, course_root: Path, students: list[str]) -> pwd.struct_passwd:
    """The instructor's account: an ordinary one, owner of the course root, not on the roster."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ClassError(f"no account {name!r} here: the instructor's account must exist and own the course root "
                         f"(INSTRUCTOR=name)") from None
    if entry.pw_uid not in ordinary_uids():
        raise ClassError(f"the instructor {name!r} (uid {entry.pw_uid}) is not an ordinary account: run make hub from "
                         "a checkout that the instructor's own account owns (INSTRUCTOR=name)")
    if name in students:
        raise ClassError(f"the instructor {name!r} is on the roster as a student")
    if course_root.stat().st_uid != entry.pw_uid:
        owner = pwd.getpwuid(course_root.stat().st_uid).pw_name
        raise ClassError(f"the course root {course_root} belongs to {owner}, not to the instructor {name}: Formgrader "
                         "writes the gradebook there as the instructor")
    return entry


def ensure_passwords(path: Path, names: list[str], renew: list[str]) -> dict[str, str]:
    """Give every name without a stored password (and every name of `renew`) a new one; drop the hashes of names no
    longer in the class. Returns the new passwords, name -> password (only their hashes are kept)."""
    hashes = {n: h for n, h in read_passwords(path).items() if n in names}
    new = {n: new_password() for n in names if n not in hashes or n in renew}
    hashes.update({n: hash_password(p) for n, p in new.items()})
    write_passwords(path, hashes)
    return new


# ---------------------------------------------------------------------------------------------------------
# the students' course and Python


def _world_readable(path: Path) -> None:
    """Every file readable and every folder searchable by everyone (the bundle keeps the checkout's modes)."""
    for folder, subs, names in os.walk(path):
        os.chmod(folder, stat.S_IMODE(os.stat(folder).st_mode) | 0o555)
        for name in names:
            p = os.path.join(folder, name)
            if not os.path.islink(p):
                os.chmod(p, stat.S_IMODE(os.stat(p).st_mode) | 0o444)


def students_course(course_root: Path, dest: Path) -> None:
    """The students' course in `dest` (`course bundle`: what students get without the hub), readable by everyone."""
    from lecturelib.course.release.bundle import BundleError, bundle
    from lecturelib.course.layout import Course

    try:
        bundle(Course(course_root), dest)
    except BundleError as e:
        raise ClassError(f"the students' course could not be built: {e}") from None
    _world_readable(dest)


def _rewritten(data: bytes, src: Path, dest: Path) -> bytes | None:
    """A script of the venv's bin/ with the source venv's path (its `#!` line, activate's VIRTUAL_ENV) made the
    destination's; None when it names neither form of the source's path."""
    out = data
    for old in {str(src), os.path.realpath(src)}:
        out = out.replace(old.encode() + b"/", str(dest).encode() + b"/").replace(
            b'"' + old.encode() + b'"', b'"' + str(dest).encode() + b'"')
    return out if out != data else None


def _runnable_by_all(path: str) -> bool:
    """Whether every account may run `path`: it and every folder above it open to others."""
    folders = [os.path.dirname(path)]
    while folders[-1] != "/":
        folders.append(os.path.dirname(folders[-1]))
    return os.stat(path).st_mode & stat.S_IXOTH != 0 and all(os.stat(f).st_mode & stat.S_IXOTH for f in folders)


def check_python(venv: Path) -> None:
    """Refuse a venv whose interpreter some account may not run (a pyenv Python under /root): the students' servers
    run it, and so does the instructor's grading, so that a submission is checked and graded by one Python."""
    python = os.path.realpath(venv / "bin" / "python")
    if not _runnable_by_all(python):
        raise ClassError(f"the course's {venv} runs {python}, which other accounts may not run: make it again with a "
                         f"Python every account may run (rm -rf .venv && make setup PYTHON=/usr/bin/python3.11, as the "
                         f"instructor)")


def clone_venv(src: Path, dest: Path, lecturelib_parent: Path) -> tuple[int, int]:
    """Make `dest` the venv `src` (on the same interpreter) with its own paths, and with `lecturelib` imported from
    `lecturelib_parent` (src's own, editable one left out); returns (files linked, files copied) this time. A file
    root owns and only root may change is hard-linked (no space, no time); any other is copied, root's, so that root
    never runs a file another account can change. Files already up to date are left; files src no longer has are
    removed."""
    src, dest = Path(os.path.abspath(src)), Path(os.path.abspath(dest))
    real_src = os.path.realpath(src)
    linked = copied = 0
    seen: set[str] = set()

    def write(out: Path, data: bytes, mode: int) -> None:
        nonlocal copied
        if not (out.is_file() and not out.is_symlink() and os.lstat(out).st_nlink == 1 and out.read_bytes() == data):
            _remove(out)
            out.write_bytes(data)
            copied += 1
        os.chmod(out, mode)

    for folder, subs, names in os.walk(real_src):
        rel = os.path.relpath(folder, real_src)
        subs[:] = [s for s in subs if not (s.startswith("lecturelib-") and s.endswith(".dist-info"))]
        out_folder = dest / rel
        out_folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.chmod(out_folder, 0o755)
        seen.add(os.path.normpath(out_folder))
        for name in [*names, *(s for s in subs if os.path.islink(os.path.join(folder, s)))]:
            if name == LECTURELIB_PTH or name.startswith("__editable__") and "lecturelib" in name:
                continue  # src's own lecturelib (editable, or a clone's): dest imports lecturelib_parent's instead
            path, out = os.path.join(folder, name), out_folder / name
            seen.add(os.path.normpath(out))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                if os.path.isabs(target) and (target + "/").startswith(real_src + "/"):
                    target = str(dest / os.path.relpath(target, real_src))
                if not (out.is_symlink() and os.readlink(out) == target):
                    _remove(out)
                    out.symlink_to(target)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if rel == "bin" and st.st_size < 2**16:
                script = _rewritten(Path(path).read_bytes(), src, dest)
                if script is not None:
                    write(out, script, (st.st_mode & 0o755) | 0o444)
                    continue
            root_only = st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if root_only and st.st_mode & stat.S_IROTH and st.st_dev == os.stat(dest).st_dev:
                if not (out.exists() and os.lstat(out).st_ino == st.st_ino):
                    _remove(out)
                    os.link(path, out)
                    linked += 1
                continue
            now = os.lstat(out) if os.path.lexists(out) else None
            if not (now and stat.S_ISREG(now.st_mode) and now.st_uid == 0 and now.st_size == st.st_size
                    and now.st_mtime_ns == st.st_mtime_ns and now.st_nlink == 1):
                _remove(out)
                shutil.copy2(path, out)
                copied += 1
            os.chmod(out, (st.st_mode & 0o755) | 0o444)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([str(dest / "bin" / "python"), "-c", where], capture_output=True, text=True,
                             check=True).stdout.strip()
    pth = Path(purelib) / LECTURELIB_PTH
    if not pth.is_relative_to(dest):
        raise ClassError(f"{dest}/bin/python does not run as a venv (its site-packages: {purelib})")
    write(pth, f"{lecturelib_parent}\n".encode(), 0o644)
    seen.add(os.path.normpath(pth))
    for folder, subs, names in os.walk(dest, topdown=False):  # what src no longer has (an uninstalled package)
        for name in [*names, *subs]:
            p = os.path.join(folder, name)
            if os.path.normpath(p) not in seen:
                _remove(Path(p))
    return linked, copied


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


# ---------------------------------------------------------------------------------------------------------
# the exchange and the hub's own files


def exchange(hub: Path, course_id: str, instructor: pwd.struct_passwd, students: list[str], course_root: Path) -> None:
    """nbgrader's exchange: HUB_DIR/exchange (1777: everyone may add, nobody may remove another's entry), with the
    course's folder the instructor's, of the instructor's own group (setgid: release_assignment's inbound/ inherits
    it, and so do the submissions). The course root's `exchange` (nbgrader_config.py's c.Exchange.root) links there."""
    root = hub / "exchange"
    root.mkdir(exist_ok=True)
    os.chown(root, 0, 0)
    os.chmod(root, 0o1777)  # nbgrader wants 0777; the sticky bit keeps a student from renaming the course's folder
    members = {u.pw_name for u in pwd.getpwall() if u.pw_gid == instructor.pw_gid}
    members |= set(grp.getgrgid(instructor.pw_gid).gr_mem)
    shared = sorted(members & set(students))
    if shared:
        raise ClassError(f"students in the instructor's group {grp.getgrgid(instructor.pw_gid).gr_name} "
                         f"({', '.join(shared)}) could read every submission: give the instructor a group of their own")
    course = root / course_id
    if not course.exists():
        course.mkdir()
        os.chown(course, instructor.pw_uid, instructor.pw_gid)
        os.chmod(course, 0o2755)
    elif course.is_symlink() or course.stat().st_uid != instructor.pw_uid:
        raise ClassError(f"{course} is not the instructor's: remove it (another account made it), then make hub again")
    link = course_root / "exchange"
    if link.is_symlink() and Path(os.readlink(link)) == root:
        return
    if link.is_dir() and not link.is_symlink() and not any(link.iterdir()):
        link.rmdir()  # `make instructor`'s empty exchange/
    if os.path.lexists(link):
        raise ClassError(f"{link} holds an exchange of its own: move it away, so that the course uses the hub's")
    link.symlink_to(root)
    os.lchown(link, instructor.pw_uid, instructor.pw_gid)


def read_course_id(course_root: Path) -> str:
    """The literal that the course's nbgrader_config.py assigns to c.CourseDirectory.course_id (read, not run)."""
    tree = ast.parse((course_root / "nbgrader_config.py").read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and ast.unparse(node.targets[0]) == "c.CourseDirectory.course_id"
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    raise ClassError(f"{course_root}/nbgrader_config.py sets no c.CourseDirectory.course_id to a string")


def install_config(hub: Path, course_id: str) -> None:
    """This folder's hub configuration and the students' settings in HUB_DIR/config, root's, readable by all."""
    config = hub / "config"
    config.mkdir(exist_ok=True)
    for name in HUB_FILES:
        shutil.copy2(HERE / name, config / name)
    _remove(config / "student")
    shutil.copytree(HERE / "student", config / "student", ignore=shutil.ignore_patterns("__pycache__"))
    (config / "course.json").write_text(json.dumps({"course_id": course_id}) + "\n")
    _world_readable(config)


def prepare(course_root: Path, roster: Path, instructor_name: str, hub: Path, homes: Path | None, ip: str, port: int,
            proxy_api_port: int, hub_api_port: int, renew: list[str]) -> tuple[Class, dict[str, str], list[str]]:
    """Lay out HUB_DIR for the class (see the module's docstring); returns the class, its new passwords, and notes."""
    if os.geteuid() != 0:
        raise ClassError("make hub creates accounts and starts servers as them: run it as root (sudo make hub)")
    course_root, hub = course_root.resolve(), Path(os.path.abspath(hub))
    if hub.is_relative_to(course_root) or course_root.is_relative_to(hub):
        raise ClassError(f"HUB_DIR {hub} and the course root {course_root} must be apart: students read HUB_DIR, "
                         "never the course root")
    if not (course_root / ".venv" / "bin" / "jupyterhub-singleuser").is_file():
        raise ClassError(f"no course environment with JupyterHub in {course_root}/.venv: run make setup there first "
                         "(as the instructor)")
    if not (course_root / "notebooks").is_dir():
        raise ClassError(f"no release in {course_root}/notebooks: build it first (.venv/bin/python -m lecturelib.course "
                         "build)")
    notes: list[str] = []
    students = read_roster(roster)
    instructor = check_instructor(instructor_name, course_root, students)
    check_python(course_root / ".venv")
    python = course_root / ".venv" / "bin" / "python"
    done = subprocess.run([str(python), "-c", "import jupyterhub, lecturelib"], user=instructor.pw_uid,
                          group=instructor.pw_gid, extra_groups=[], cwd="/", capture_output=True, text=True)
    if done.returncode != 0:  # the instructor's server runs it (a venv on a pyenv Python under /root could not)
        raise ClassError(f"the instructor {instructor_name} cannot run the course's {python}: "
                         f"{(done.stderr.strip().splitlines() or ['exit ' + str(done.returncode)])[-1]}")
    course_id = read_course_id(course_root)
    mode = stat.S_IMODE(course_root.stat().st_mode)
    if mode & 0o007:
        os.chmod(course_root, mode & ~0o007)  # source/ holds every hidden test: no student may enter the course root
        notes.append(f"made the course root {course_root} private to its owner and group (chmod o-rwx)")
    made = [s for s in students if ensure_student(s, homes)]
    if made:
        notes.append(f"made {len(made)} student account{'s' if len(made) != 1 else ''}: {', '.join(made)}")
    hub.mkdir(mode=0o755, parents=True, exist_ok=True)
    for folder in [hub, *hub.parents]:
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            raise ClassError(f"students cannot reach {hub}: {folder} is closed to them (chmod o+x {folder}, or another "
                             "HUB_DIR)")
    os.chown(hub, 0, 0)
    os.chmod(hub, 0o755)
    state = hub / "state"
    state.mkdir(mode=0o700, exist_ok=True)
    os.chown(state, 0, 0)
    os.chmod(state, 0o700)
    new = ensure_passwords(state / "passwords.json", [instructor_name, *students], renew)
    students_course(course_root, hub / "course")
    linked, copied = clone_venv(course_root / ".venv", hub / "venv", hub / "course")
    if copied > 1000:
        notes.append(f"copied {copied} files of {course_root}/.venv into {hub}/venv (the instructor's account owns "
                     "them; later runs copy only what changed)")
    install_config(hub, course_id)
    exchange(hub, course_id, instructor, students, course_root)
    the_class = Class(course_id, instructor_name, students, str(course_root), ip, port, proxy_api_port, hub_api_port)
    (state / "class.json").write_text(json.dumps(asdict(the_class), indent=1) + "\n")
    return the_class, new, notes


def start(hub: Path) -> None:
    """Become JupyterHub (this process: Ctrl-C or SIGTERM stops it, and it stops every server and its proxy)."""
    hub = Path(os.path.abspath(hub))
    exe = hub / "venv" / "bin" / "jupyterhub"
    env = {"PATH": f"{hub / 'venv' / 'bin'}{os.pathsep}{SYSTEM_PATH}", "LANG": os.environ.get("LANG", "C.UTF-8")}
    os.chdir(hub / "state")
    sys.stdout.flush()
    os.execve(exe, [str(exe), "-f", str(hub / "config" / "jupyterhub_config.py"), "--JupyterHub.upgrade_db=True"],
              env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jupyterhub/classhub.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--roster", type=Path, default=Path("roster.csv"), help="the roster CSV (default %(default)s)")
    parser.add_argument("--instructor", default="", help="the instructor's account (default: the course root's owner)")
    parser.add_argument("--course-root", type=Path, default=Path.cwd(), help="the course (default: here)")
    parser.add_argument("--hub-dir", type=Path, default=Path("/srv/resource-accounting"),
                        help="where the hub and the students' environment live (default %(default)s)")
    parser.add_argument("--homes", type=Path, help="the folder new students' homes go into (default: useradd's, /home)")
    parser.add_argument("--ip", default="127.0.0.1", help="the address students connect to (default %(default)s: this "
                                                          "machine only)")
    parser.add_argument("--port", type=int, default=8000, help="its port (default %(default)s)")
    parser.add_argument("--proxy-api-port", type=int, default=8001, help="the proxy's REST API on 127.0.0.1 (default "
                                                                         "%(default)s)")
    parser.add_argument("--hub-api-port", type=int, default=8081,
                        help="the hub's API on 127.0.0.1 (default %(default)s)")
    parser.add_argument("--new-password", action="append", default=[], metavar="NAME",
                        help="give NAME a new password (repeatable); the old one stops working")
    parser.add_argument("--prepare-only", action="store_true", help="lay out HUB_DIR and the accounts, start nothing")
    args = parser.parse_args(argv)
    root = args.course_root.resolve()
    instructor = args.instructor or pwd.getpwuid(root.stat().st_uid).pw_name
    try:
        the_class, new, notes = prepare(root, args.roster, instructor, args.hub_dir, args.homes, args.ip, args.port,
                                        args.proxy_api_port, args.hub_api_port, args.new_password)
    except ClassError as e:
        print(f"make hub: {e}", file=sys.stderr)
        return 2
    for note in notes:
        print(note)
    url = f"http://{'127.0.0.1' if args.ip in ('', '0.0.0.0') else args.ip}:{args.port}/"
    print(f"the class {the_class.course_id}: {len(the_class.students)} students, instructor {the_class.instructor}; "
          f"JupyterHub at {url}")
    if args.ip not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: {args.ip} is reachable from other machines over plain HTTP: put TLS in front of it (README, "
              "Running the course on JupyterHub)")
    if new:
        print("new passwords (only their hashes are kept: hand each to its owner now; --new-password NAME makes "
              "another):")
        for name, password in new.items():
            print(f"  {'instructor' if name == the_class.instructor else 'student':<10} {name:<32} {password}")
    if args.prepare_only:
        return 0
    start(args.hub_dir)
    return 0  # not reached: start() becomes JupyterHub


if __name__ == "__main__":
    sys.exit(main())
