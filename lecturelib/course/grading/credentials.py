"""The grading cluster's credentials: the course's own certificate authority, a certificate per role, and what each
role may ask of each server.

Every connection of the course's Dask cluster is mutual TLS: a peer is accepted only with a certificate that the
course's authority signed (`cluster/ca.pem`), and what it may then ask depends on the role its certificate names:

* the **coordinator** (`autograde --scheduler`: the instructor) may ask anything: submit tasks, run functions;
* the **scheduler** may ask anything of workers and nannies (it sends them tasks and the coordinator's `run`);
* a **worker** may register as a worker, report its tasks and fetch a task's data from another worker, nothing else:
  not register as a client, submit tasks or run functions; nor stand in for the scheduler (`check_scheduler`).

`guard(server)` installs that table in a Dask scheduler, worker or nanny (`dask_setup` makes this module a Dask
preload). `course scheduler` creates the authority and the certificates on first use (`create`): EC P-256 keys,
private files mode 0600 in a 0700 folder; the authority's key never needs to leave the machine that made it.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import inspect
import ipaddress
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

FOLDER = "cluster"  # at the course root, git-ignored
ROLES = ("scheduler", "worker", "coordinator")
CN_PREFIX = "lecturelib-"  # a certificate's common name: CN_PREFIX + its role
VALID_DAYS = 5 * 365  # every certificate; `rm -r cluster` and `course scheduler` make new ones (and revoke the old)
DEFAULT_PORT = 8786
# What a worker's certificate may ask of the scheduler (distributed 2026.8's ops): register a worker and its nanny,
# its heartbeat, unregister, where a task's data is, the log, leave gracefully. `register-worker` opens the stream
# of task reports; `register-client`, `update-graph`, `run_function`, `broadcast`, plugins... are the coordinator's.
WORKER_TO_SCHEDULER = frozenset({"register-worker", "register_nanny", "unregister", "heartbeat_worker", "who_has",
                                 "retire_workers", "log_event", "identity", "echo"})
WORKER_TO_WORKER = frozenset({"get_data", "identity", "echo", "ping"})  # a dependency's data, liveness
WORKER_TO_NANNY = frozenset({"close_gracefully"})  # a worker process asks its own nanny to end it
# server kind -> peer role -> the ops it may call (None: any)
ALLOWED: dict[str, dict[str, frozenset[str] | None]] = {
    "scheduler": {"coordinator": None, "worker": WORKER_TO_SCHEDULER},
    "worker": {"coordinator": None, "scheduler": None, "worker": WORKER_TO_WORKER},
    "nanny": {"coordinator": None, "scheduler": None, "worker": WORKER_TO_NANNY},
}
log = logging.getLogger("lecturelib.course.grading.credentials")


class CredentialsError(RuntimeError):
    """The certificates a command needs are not there (or a peer presented the wrong one)."""


def folder_of(root: Path, credentials: str | Path | None = None) -> Path:
    """Where the credentials are: `credentials` if given, else the course's cluster/."""
    return Path(credentials) if credentials else root / FOLDER


def cert_path(folder: Path, role: str) -> Path:
    """The certificate of `role` (or of the authority: role 'ca')."""
    return folder / f"{role}.pem"


def key_path(folder: Path, role: str) -> Path:
    """The private key of `role` (or of the authority: role 'ca')."""
    return folder / f"{role}.key"


def _write_private(path: Path, data: bytes) -> None:
    """A new file only its owner may read (0600 from its creation, never wider for a moment)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _names(host: str) -> list[Any]:
    """The scheduler certificate's subject alternative names: localhost, 127.0.0.1 and `host` (its machine's name
    when it listens on every interface)."""
    from cryptography import x509

    hosts = ["localhost", "127.0.0.1", *([host] if host and host not in ("0.0.0.0", "::") else [socket.getfqdn()])]
    names: list[Any] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return names


def _issue(folder: Path, role: str, host: str) -> None:
    """A key and a certificate for `role`, signed by the authority in `folder`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key = serialization.load_pem_private_key(key_path(folder, "ca").read_bytes(), password=None)
    ca = x509.load_pem_x509_certificate(cert_path(folder, "ca").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    # the coordinator only connects (clientAuth); the scheduler and workers also accept connections (serverAuth)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if role != "coordinator" else [])
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CN_PREFIX + role)]))
               .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_agreement=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False)  # type: ignore[arg-type]
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if role == "scheduler":
        builder = builder.add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    _write_private(key_path(folder, role), key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    cert_path(folder, role).write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _make_authority(folder: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    # a random serial in the name: two courses' authorities never share a subject
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"lecturelib course authority {os.urandom(6).hex()}")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, key_agreement=False, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write_private(key_path(folder, "ca"), key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                             serialization.NoEncryption()))
    cert_path(folder, "ca").write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _scheduler_names(folder: Path) -> set[str]:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_path(folder, "scheduler").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(v) for v in sans.get_values_for_type(x509.DNSName) + sans.get_values_for_type(x509.IPAddress)}


def create(folder: Path, host: str = "") -> list[str]:
    """The authority and every role's certificate in `folder`, made where missing (the scheduler's again when it
    does not name `host`); returns what was made."""
    made = []
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True)
        os.chmod(folder, 0o700)  # whatever the umask
    if not cert_path(folder, "ca").is_file():
        if not key_path(folder, "ca").exists() and any(cert_path(folder, r).exists() for r in ROLES):
            raise CredentialsError(f"{folder} holds certificates but not the authority that signed them: remove it, "
                                   f"or run `course scheduler` where the course's cluster/ was made")
        _make_authority(folder)
        made.append("ca")
    for role in ROLES:
        stale = role == "scheduler" and cert_path(folder, role).is_file() and host and host not in ("0.0.0.0", "::") \
            and host not in _scheduler_names(folder)
        if not (cert_path(folder, role).is_file() and key_path(folder, role).is_file()) or stale:
            if not key_path(folder, "ca").is_file():
                raise CredentialsError(f"no {role} certificate in {folder}, and not the authority's key to make one: "
                                       f"copy it from the machine where `course scheduler` made cluster/")
            _issue(folder, role, host)
            made.append(role)
    return made


def require_tls(address: str) -> None:
    """Raise CredentialsError, in one line, unless `address` is a tls:// one (the course's scheduler)."""
    if not address.startswith("tls://"):
        raise CredentialsError(f"{address} is not the course's scheduler: start it with `python -m lecturelib.course "
                               f"scheduler` (mutual TLS) and give its tls://HOST:PORT address")


def require(folder: Path, role: str) -> None:
    """Raise CredentialsError, in one line, unless `folder` holds the authority's certificate and `role`'s pair."""
    missing = [p.name for p in (cert_path(folder, "ca"), cert_path(folder, role), key_path(folder, role)) if not p.is_file()]
    if missing:
        raise CredentialsError(f"no {', '.join(missing)} in {folder}: copy ca.pem, {role}.pem and {role}.key from the "
                               f"cluster/ that `python -m lecturelib.course scheduler` made (or pass --credentials DIR)")


def security(folder: Path, *roles: str) -> Any:
    """A `distributed.security.Security` presenting the certificates of `roles` ('coordinator' is Dask's client role),
    trusting only the course's authority, encryption required."""
    from distributed.security import Security

    for role in roles:
        require(folder, role)
    dask_role = {"coordinator": "client", "scheduler": "scheduler", "worker": "worker"}
    files = {f"tls_{dask_role[r]}_{kind}": str(path(folder, r)) for r in roles
             for kind, path in (("cert", cert_path), ("key", key_path))}
    return Security(require_encryption=True, tls_ca_file=str(cert_path(folder, "ca")), **files)


def peer_role(comm: Any) -> str:
    """The role named by the certificate the peer of a Dask comm presented ('' without one: never over TLS)."""
    cert = (getattr(comm, "extra_info", None) or {}).get("peercert") or {}
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and isinstance(value, str) and value.startswith(CN_PREFIX):
                return value[len(CN_PREFIX):]
    return ""


def _refusal(kind: str, op: str, role: str) -> Any:
    from distributed.core import error_message

    why = (f"the course's {kind} refuses {op!r} from "
           + (f"a {role} certificate" if role else "a peer without a course certificate"))
    log.warning(why)
    return error_message(PermissionError(why), status="uncaught-error")  # what Dask raises at the caller


def _guarded(kind: str, op: str, handler: Callable[..., Any], allowed: dict[str, frozenset[str] | None]) -> Callable[..., Any]:
    """`handler`, called only for peers whose role may call `op` on a `kind`; it always receives the comm."""
    params = list(inspect.signature(handler).parameters.values())
    takes_comm = bool(params) and params[0].name == "comm"

    @functools.wraps(handler)
    def call(comm: Any, *args: Any, **kwargs: Any) -> Any:
        role = peer_role(comm)
        if role not in allowed or (allowed[role] is not None and op not in allowed[role]):  # type: ignore[operator]
            return _refusal(kind, op, role)
        return handler(comm, *args, **kwargs) if takes_comm else handler(*args, **kwargs)

    # Dask reads a handler's signature: the comm first (so it passes it), and `serializers` where the handler has it
    comm_param = inspect.Parameter("comm", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    call.__signature__ = inspect.Signature([comm_param, *(params[1:] if takes_comm else params)])  # type: ignore[attr-defined]
    return call


def server_kind(server: Any) -> str:
    """'scheduler', 'worker' or 'nanny'."""
    from distributed import Nanny, Scheduler, Worker

    for kind, cls in (("scheduler", Scheduler), ("worker", Worker), ("nanny", Nanny)):
        if isinstance(server, cls):
            return kind
    raise TypeError(f"not a Dask server: {type(server).__name__}")


def guard(server: Any) -> None:
    """Let each peer of `server` (a scheduler, worker or nanny) call only what its certificate's role may (ALLOWED);
    on a scheduler, a worker's stream cannot use a client's stream operations either."""
    kind = server_kind(server)
    if getattr(server, "_lecturelib_guarded", False):
        return
    for op, handler in list(server.handlers.items()):
        server.handlers[op] = _guarded(kind, op, handler, ALLOWED[kind])
    if kind == "scheduler":
        for op, handler in list(server.stream_handlers.items()):
            server.stream_handlers[op] = _client_stream_only(op, handler) if _is_client_stream_op(server, op) else handler
    server._lecturelib_guarded = True


def _is_client_stream_op(scheduler: Any, op: str) -> bool:
    # the scheduler merges the streams' handlers of workers and clients into one table: a client's are those taking
    # the `client` argument (update-graph, client-desires-keys, ...)
    return "client" in inspect.signature(scheduler.stream_handlers[op]).parameters


def _client_stream_only(op: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    def refused(kwargs: dict[str, Any]) -> bool:
        if "worker" in kwargs:  # the stream of a registered worker (its address): not a client's
            log.warning("the course's scheduler refuses %r from a worker's stream", op)
            return True
        return False

    if inspect.iscoroutinefunction(handler):  # Dask awaits a stream handler only when it is a coroutine function
        @functools.wraps(handler)
        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return None if refused(kwargs) else await handler(*args, **kwargs)

        return call_async

    @functools.wraps(handler)
    def call(*args: Any, **kwargs: Any) -> Any:
        return None if refused(kwargs) else handler(*args, **kwargs)

    return call


def dask_setup(server: Any) -> None:
    """Dask's preload hook (`--preload lecturelib.course.grading.credentials`, or a scheduler's `preload=`): guard
    it."""
    guard(server)


def check_scheduler(client: Any, address: str) -> None:
    """Raise CredentialsError unless the scheduler `client` reached presented the course's scheduler certificate
    (a worker's certificate cannot stand in for the scheduler)."""
    comm = getattr(getattr(client, "scheduler_comm", None), "comm", None)
    role = peer_role(comm)
    if role != "scheduler":
        raise CredentialsError(f"{address} presented " + (f"a {role} certificate" if role else "no course certificate")
                               + ", not the course scheduler's: start it with `python -m lecturelib.course scheduler`")


async def _serve(folder: Path, host: str, port: int, announce: Callable[[str], None]) -> None:
    import dask
    from distributed import Scheduler

    # no web page: Dask's dashboard and HTTP routes (worker logs, task names, a proxy) would answer anyone
    with dask.config.set({"distributed.scheduler.http.routes": []}):
        scheduler = Scheduler(host=host or None, port=port, protocol="tls", security=security(folder, "scheduler"),
                              dashboard=False, dashboard_address="127.0.0.1:0")
    guard(scheduler)  # before it listens: no connection is ever served unguarded
    async with scheduler:
        announce(scheduler.address)
        await scheduler.finished()


def serve(folder: Path, host: str = "", port: int = DEFAULT_PORT, announce: Callable[[str], None] = print) -> None:
    """Run the course's scheduler on HOST:PORT until it is stopped (Ctrl-C, SIGTERM): mutual TLS with the course's
    authority, every peer guarded by its certificate's role; `announce` gets its address once it listens."""
    try:
        asyncio.run(_serve(folder, host, port, announce))
    except KeyboardInterrupt:
        pass


WORKER_ENV = {"DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": "[]"}  # a worker's HTTP routes off: they would answer anyone
