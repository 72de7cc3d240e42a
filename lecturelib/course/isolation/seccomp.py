"""The seccomp filter of the grading sandbox: system calls a graded kernel never needs fail with EPERM.

bubblewrap loads it (`bwrap --seccomp FD`) just before it starts the kernel. It is a classic BPF program,
written out here instruction by instruction (`struct sock_filter`, 8 bytes each), so that it needs no
library: it reads the architecture and the system call number of each call and answers with an error for:

* namespaces and mounts (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags BPF cannot read,
  answers ENOSYS so that the C library falls back to clone); mount and its new API, pivot_root, chroot;
* the machine's state: modules, kexec, reboot, swap, clocks, accounting, quotas, the kernel log;
* other processes' memory (ptrace, process_vm_readv/writev, kcmp, pidfd_getfd) and the kernel's larger
  attack surfaces: bpf, userfaultfd, perf_event_open, io_uring, keyrings, fanotify, file handles;
* SysV shared memory (shmget): memory that no per-process limit counts.

A call from another ABI (32-bit calls from a 64-bit process, x32) answers ENOSYS. Only x86_64 and aarch64
have tables here; elsewhere `program()` returns None and the sandbox runs without the filter (it says so).
"""

from __future__ import annotations

import errno
import platform
import struct

# <linux/audit.h>: the architecture word of seccomp_data
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000  # x86_64 system call numbers at or above this are the x32 ABI

# The system calls refused, by name (<asm/unistd_64.h> on x86_64, <asm-generic/unistd.h> on aarch64).
SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 308,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
        "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "quotactl_fd": 443,
        "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159, "syslog": 103,
        "vhangup": 153, "nfsservctl": 180, "lookup_dcookie": 212, "iopl": 172, "ioperm": 173, "uselib": 134,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
        "bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249, "fanotify_init": 300,
        "open_by_handle_at": 304, "name_to_handle_at": 303, "shmget": 29,
    },
    "aarch64": {
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "setns": 268,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
        "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60, "quotactl_fd": 443,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "syslog": 116,
        "vhangup": 58, "nfsservctl": 42, "lookup_dcookie": 18,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "pidfd_getfd": 438,
        "bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218, "fanotify_init": 262,
        "open_by_handle_at": 265, "name_to_handle_at": 264, "shmget": 194,
    },
}
CLONE = {"x86_64": 56, "aarch64": 220}
UNSHARE = {"x86_64": 272, "aarch64": 97}
CLONE3 = 435  # the same number on both
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET; unshare also refuses CLONE_NEWTIME (0x80),
# which for clone() is part of the exit signal in the low byte
NEW_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
NEW_TIME = 0x00000080

# classic BPF opcodes (<linux/filter.h>) and seccomp return values (<linux/seccomp.h>)
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits on little-endian machines)


def machine() -> str:
    """The architecture name this module knows the running machine by ('' when it has no table for it)."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name) if name else ""


def _assemble(code: list[tuple]) -> bytes:
    """Classic BPF from (opcode, k, true label, false label) and ("label", name) entries; jumps go forward only."""
    where, index = {}, 0
    for entry in code:
        if entry[0] == "label":
            where[entry[1]] = index
        else:
            index += 1
    out, index = [], 0
    for entry in code:
        if entry[0] == "label":
            continue
        op, k, *targets = entry
        jt, jf = (where[t] - index - 1 if t else 0 for t in (targets + [None, None])[:2])
        assert 0 <= jt < 256 and 0 <= jf < 256, "a BPF jump reaches at most 255 instructions ahead"
        out.append(struct.pack("=HBBI", op, jt, jf, k))
        index += 1
    return b"".join(out)


def program(arch: str | None = None) -> bytes | None:
    """The compiled filter for `arch` (default: this machine), or None where this module has no table."""
    arch = arch or machine()
    if arch not in SYSCALLS:
        return None
    code: list[tuple] = [(LD_W_ABS, ARCH), (JEQ_K, AUDIT_ARCH[arch], "native", "enosys"), ("label", "native"),
                         (LD_W_ABS, NR)]
    if arch == "x86_64":
        code.append((JGE_K, X32_BIT, "enosys", "native64"))
        code.append(("label", "native64"))
    code += [(JEQ_K, CLONE[arch], "clone", None), (JEQ_K, UNSHARE[arch], "unshare", None),
             (JEQ_K, CLONE3, "enosys", None)]
    code += [(JEQ_K, nr, "eperm", None) for nr in sorted(set(SYSCALLS[arch].values()))]
    code += [(RET_K, RET_ALLOW),
             ("label", "clone"), (LD_W_ABS, ARG0), (JSET_K, NEW_NAMESPACES, "eperm", "allow"),
             ("label", "unshare"), (LD_W_ABS, ARG0), (JSET_K, NEW_NAMESPACES | NEW_TIME, "eperm", "allow"),
             ("label", "allow"), (RET_K, RET_ALLOW),
             ("label", "eperm"), (RET_K, RET_ERRNO | errno.EPERM),
             ("label", "enosys"), (RET_K, RET_ERRNO | errno.ENOSYS)]
    return _assemble(code)
