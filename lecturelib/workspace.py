"""The student's own copy of the course: `make lab` opens work/, a copy of the release (notebooks/) that the
course never overwrites.

The first `make lab` copies every file of notebooks/ into work/. Each later one copies in what is new (a notebook
the course added) and leaves the rest alone: a notebook you changed is yours. When the course updates a notebook
you have not touched, the new version replaces it; when you have changed it, yours stays and one line says where
the new release is, to compare and copy from (once per update). A notebook you deleted from work/ comes back as
released. work/.release.json remembers what was copied, to tell your changes from the course's.

`python -m lecturelib.workspace [RELEASE] [WORK]` (default notebooks work) does this and prints what it did.
Copies of notebooks get this interpreter's Python version in their `language_info`, as the kernel of this
environment reports it: an untouched notebook then opens unmodified in JupyterLab.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

STATE = ".release.json"
SKIP = (".ipynb_checkpoints", "__pycache__")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def for_this_python(data: bytes, name: str) -> bytes:
    """A release file as it is copied: a notebook gets this interpreter's version in language_info."""
    if not name.endswith(".ipynb"):
        return data
    try:
        nb = json.loads(data)
        info = nb["metadata"]["language_info"]
    except (ValueError, KeyError, TypeError):
        return data
    if not isinstance(info, dict) or info.get("name") != "python" or info.get("version") == platform.python_version():
        return data
    info["version"] = platform.python_version()
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def release_files(release: Path) -> list[Path]:
    """Every file of the release, relative to it (not Jupyter's checkpoints or hidden files)."""
    return sorted(p.relative_to(release) for p in release.rglob("*")
                  if p.is_file() and not any(part in SKIP or part.startswith(".") for part in p.relative_to(release).parts))


def sync(release: Path, work: Path) -> list[str]:
    """Bring `work` up to date with `release` without overwriting anything the student changed; what it did."""
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / STATE
    try:
        state: dict[str, dict[str, str | None]] = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    said = []
    for rel in release_files(release):
        key, source, target = rel.as_posix(), release / rel, work / rel
        data = source.read_bytes()
        new = _digest(data)
        copy = for_this_python(data, rel.name)
        known = state.get(key)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(copy)
            state[key] = {"release": new, "copy": _digest(copy), "told": None}
            said.append(f"copied {release.name}/{key} to {work.name}/{key}" + (" (again: it was deleted)" if known else ""))
            continue
        mine = _digest(target.read_bytes())
        if known is None:  # a file that was there before the first sync: the student's
            state[key] = {"release": new, "copy": mine if mine == _digest(copy) else None, "told": None}
        elif known["release"] == new or known.get("told") == new:
            continue  # nothing new from the course, or the student was told already
        elif mine == known["copy"]:  # untouched since it was copied: take the course's update
            target.write_bytes(copy)
            state[key] = {"release": new, "copy": _digest(copy), "told": None}
            said.append(f"updated {work.name}/{key}: the course changed it and you had not")
        else:
            known["told"] = new
            said.append(f"kept your {work.name}/{key}: the course updated {release.name}/{key} since your copy was "
                        f"made; compare the two and copy what you need (your file is never overwritten)")
    state_path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return said


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    release, work = (Path(a) for a in (args + ["notebooks", "work"][len(args):])[:2])
    if not release.is_dir():
        print(f"no {release}/ to copy from", file=sys.stderr)
        return 2
    for line in sync(release, work):
        print(line)
    print(f"your notebooks are in {work}/ (yours: the course never overwrites them); the release stays in {release}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
