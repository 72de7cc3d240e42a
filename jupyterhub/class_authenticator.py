"""The class's own password accounts for JupyterHub: each member of the class has a password of their own, kept only
as a salted scrypt hash; nobody else can log in (jupyterhub/classhub.py makes the accounts and the passwords)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from jupyterhub.auth import Authenticator
from traitlets import Unicode

# scrypt's cost: 16 MiB of memory and about 50 ms of one core a try (RFC 7914's interactive-login setting)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
# what a new password is made of: no 0/o, 1/l/i lookalikes, so that it can be read off a printed list
ALPHABET = "23456789abcdefghjkmnpqrstuvwxyz"
GROUPS, GROUP_CHARS = 4, 4  # xxxx-xxxx-xxxx-xxxx: 16 characters of 31, 79 bits


def new_password() -> str:
    """A random password, 79 bits, in four groups of four characters that cannot be mistaken for one another."""
    return "-".join("".join(secrets.choice(ALPHABET) for _ in range(GROUP_CHARS)) for _ in range(GROUPS))


def hash_password(password: str) -> str:
    """`scrypt$N$R$P$SALT$HASH` (hex) of `password` with a new random salt."""
    salt = os.urandom(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=32)
    return f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether `password` is the one `stored` (from hash_password) was made from; False for anything malformed."""
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        again = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p),
                               dklen=len(bytes.fromhex(digest)))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(again.hex(), digest)


def read_passwords(path: Path) -> dict[str, str]:
    """The stored hashes, name -> hash ({} where there is no file yet)."""
    return json.loads(path.read_text()) if path.is_file() else {}


def write_passwords(path: Path, hashes: dict[str, str]) -> None:
    """Replace the stored hashes at once, readable by root only."""
    tmp = path.with_name(path.name + ".new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dict(sorted(hashes.items())), f, indent=1)
    os.replace(tmp, path)


class ClassAuthenticator(Authenticator):
    """Logs in a member of the class whose password matches their stored hash; anyone else, or an empty
    password, is refused (c.ClassAuthenticator.password_file: name -> hash, written by classhub.py)."""

    password_file = Unicode(help="JSON file: user name -> scrypt hash of their password (root-only)").tag(config=True)

    async def authenticate(self, handler: Any, data: dict[str, Any]) -> str | None:
        if not isinstance(data, dict):
            return None
        name = self.normalize_username(str(data.get("username") or ""))
        password = str(data.get("password") or "")
        stored = read_passwords(Path(self.password_file)).get(name)
        if not password or stored is None:
            return None
        # scrypt costs ~50 ms of CPU: in a thread, so that the hub keeps serving everyone else meanwhile
        return name if await asyncio.to_thread(verify_password, password, stored) else None
