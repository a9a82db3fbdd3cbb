"""The sandboxed reward worker, started by ``rewards.sandbox.host`` as a fresh interpreter::

    python -I -B -X utf8 .../rewards/sandbox/child.py REQUEST_FD REPLY_FD

Self-contained on purpose: it imports the standard library and msgpack only, never the project, and it is exec'd,
never forked from the caller, so no state of the training process (tensors, credentials, open files) is in it.

It reads its config from REQUEST_FD, locks itself in, in this order, then compiles the user's source:

1. a private mount namespace whose root holds only the interpreter, stdlib, site-packages, system libraries and a
   size-limited tmpfs scratch (when the kernel allows one; otherwise the scratch is a host directory);
2. a uid of its own (``setgroups([])``, ``setresgid``, ``setresuid``) when started as root;
3. rlimits (address space, CPU, file size, open files, processes, core dumps, locked memory, message queues);
4. ``PR_SET_PDEATHSIG=SIGKILL`` (again after the uid change, which clears it) and a check that the parent is alive;
5. ``PR_SET_NO_NEW_PRIVS``;
6. Landlock: read-only interpreter and libraries, read-write scratch, no TCP, no signals or abstract UNIX sockets
   outside the sandbox;
7. a seccomp filter (classic BPF) denying sockets, process creation, exec, ptrace, namespaces, mounts, keyrings, BPF,
   io_uring, SysV IPC and more.

Then it serves one call per message. Everything after step 7 runs user code in this process, so nothing here is
trusted by the host: the host enforces the time limit, message sizes and the shape of every reply itself.
Messages are a 4-byte big-endian length and a msgpack body, both ways.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import inspect
import io
import linecache
import math
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback
import types

import msgpack

HEADER = struct.Struct(">I")
STATE_MODULE = "__reward__"

# --- raw syscalls -------------------------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]

NR_LANDLOCK_CREATE_RULESET, NR_LANDLOCK_ADD_RULE, NR_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # same on every arch
# (pivot_root, capset): glibc wraps neither. Elsewhere the private root and the capability drop are refused.
NR_PIVOT_ROOT, NR_CAPSET = {"x86_64": (155, 126), "aarch64": (41, 91)}.get(os.uname().machine, (None, None))

PR_SET_PDEATHSIG, PR_GET_SECCOMP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 21, 22, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def _fail(what: str):
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


def _syscall(nr: int, *args: int) -> int:
    ret = _libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
    if ret < 0:
        _fail(f"syscall {nr}")
    return ret


def _prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    ret = _libc.prctl(
        ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0)
    )
    if ret < 0:
        _fail(f"prctl({option})")
    return ret


# --- Landlock -----------------------------------------------------------------------------------------------------

FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
RULE_PATH_BENEATH = 1

READ_DIR = FS_READ_FILE | FS_READ_DIR
SCRATCH = (
    FS_READ_FILE
    | FS_READ_DIR
    | FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SYM
    | FS_REFER
    | FS_TRUNCATE
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    ret = _libc.syscall(
        ctypes.c_long(NR_LANDLOCK_CREATE_RULESET), ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(1)
    )  # LANDLOCK_CREATE_RULESET_VERSION
    return max(int(ret), 0)


def _handled_fs(abi: int) -> int:
    handled = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        handled |= FS_REFER
    if abi >= 3:
        handled |= FS_TRUNCATE
    if abi >= 5:
        handled |= FS_IOCTL_DEV
    return handled


def landlock_ruleset(abi: int, rules: list[tuple[int, int]]) -> int:
    """A ruleset fd allowing only ``rules`` ((O_PATH fd, access), ...); no TCP and scoped signals/sockets where the
    ABI has them."""
    handled = _handled_fs(abi)
    attr = _RulesetAttr(
        handled,
        NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct grew with the ABI; older kernels reject a bigger one
    ruleset = _syscall(NR_LANDLOCK_CREATE_RULESET, ctypes.addressof(attr), size, 0)
    try:
        for fd, access in rules:
            rule = _PathBeneathAttr(access & handled, fd)
            _syscall(NR_LANDLOCK_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.addressof(rule), 0)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def landlock_restrict(abi: int, rules: list[tuple[int, int]]) -> str:
    """Enforce ``landlock_ruleset(abi, rules)`` on this process; what it covers, as text."""
    ruleset = landlock_ruleset(abi, rules)
    try:
        _syscall(NR_LANDLOCK_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return "fs" + ("+net" if abi >= 4 else "") + ("+scope" if abi >= 6 else "")


# --- seccomp ------------------------------------------------------------------------------------------------------

AUDIT_ARCH_X86_64 = 0xC000003E
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM, ENOSYS = 1, 38
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
X32_SYSCALL_BIT = 0x40000000

# x86_64 numbers (asm/unistd_64.h), denied with EPERM so user code sees a clear PermissionError.
DENIED = {
    "socket": 41,
    "connect": 42,
    "accept": 43,
    "bind": 49,
    "listen": 50,
    "socketpair": 53,
    "accept4": 288,
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "execve": 59,
    "execveat": 322,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_open": 434,
    "pidfd_send_signal": 424,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "process_mrelease": 448,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_tree_attr": 467,
    "bpf": 321,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "quotactl": 179,
    "quotactl_fd": 443,
    "setuid": 105,
    "setgid": 106,
    "setreuid": 113,
    "setregid": 114,
    "setresuid": 117,
    "setresgid": 119,
    "setgroups": 116,
    "setfsuid": 122,
    "setfsgid": 123,
    "capset": 126,
    "personality": 135,
    "mknod": 133,
    "mknodat": 259,
    "uselib": 134,
    "modify_ldt": 154,
    "iopl": 172,
    "ioperm": 173,
    "syslog": 103,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "sethostname": 170,
    "setdomainname": 171,
    "vhangup": 153,
    "lookup_dcookie": 212,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "migrate_pages": 256,
    "move_pages": 279,
    "setpriority": 141,
    "ioprio_set": 251,
    "sched_setaffinity": 203,
    "sched_setparam": 142,
    "sched_setscheduler": 144,
    "sched_setattr": 314,
    "memfd_create": 319,
    "memfd_secret": 447,
    "seccomp": 317,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "mq_open": 240,
    # File metadata, which Landlock does not cover: on the host's uid (no private root) these would reach the
    # app's own files (make the database unreadable, stamp times, set xattrs).
    "chmod": 90,
    "fchmod": 91,
    "fchmodat": 268,
    "fchmodat2": 452,
    "chown": 92,
    "fchown": 93,
    "lchown": 94,
    "fchownat": 260,
    "utime": 132,
    "utimes": 235,
    "futimesat": 261,
    "utimensat": 280,
    "setxattr": 188,
    "lsetxattr": 189,
    "fsetxattr": 190,
    "getxattr": 191,
    "lgetxattr": 192,
    "fgetxattr": 193,
    "listxattr": 194,
    "llistxattr": 195,
    "flistxattr": 196,
    "removexattr": 197,
    "lremovexattr": 198,
    "fremovexattr": 199,
    "setxattrat": 463,
    "getxattrat": 464,
    "listxattrat": 465,
    "removexattrat": 466,
    "file_getattr": 468,
    "file_setattr": 469,
    # Watching the app's folders, and reading the mount table.
    "inotify_init": 253,
    "inotify_add_watch": 254,
    "inotify_rm_watch": 255,
    "inotify_init1": 294,
    "fanotify_init": 300,
    "fanotify_mark": 301,
    "statmount": 457,
    "listmount": 458,
    # Linux AIO: completions arrive outside any call.
    "io_setup": 206,
    "io_destroy": 207,
    "io_getevents": 208,
    "io_submit": 209,
    "io_cancel": 210,
    "io_pgetevents": 333,
    # Writeback of every dirty page on the host (sync), or of a whole file system (syncfs): fsync stays allowed.
    "sync": 162,
    "syncfs": 306,
    # Pipe buffers are kernel memory, outside RLIMIT_AS: vmsplice would pin the worker's pages in them after it
    # unmaps them (fcntl(F_SETPIPE_SZ) is denied below, so each pipe stays at its 64 KiB default).
    "vmsplice": 278,
}
NR_CLONE3, NR_PRCTL, NR_PRLIMIT64, NR_CLONE = 435, 157, 302, 56
# SIGCONT would undo the host's freeze between calls: denied where the syscall names the signal in an argument (the
# argument's index). timer_create's sigevent is a pointer, which seccomp cannot read: the host checks that instead.
SIGNAL_ARG = {
    "kill": (62, 1),
    "tkill": (200, 1),
    "tgkill": (234, 2),
    "rt_sigqueueinfo": (129, 1),
    "rt_tgsigqueueinfo": (297, 2),
}
# fcntl(fd, F_SETSIG, SIGCONT): SIGCONT as an fd's I/O signal; fcntl(F_SETPIPE_SZ): a pipe grown to 1 MiB pins that
# much kernel memory outside RLIMIT_AS, per pipe
NR_FCNTL, F_SETSIG, F_SETPIPE_SZ = 72, 10, 1031
CLONE_FORK = 0x01200011  # glibc's fork(): CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, nothing more


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(allow_fork: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions: kill on a foreign arch or x32, deny DENIED, allow the rest.
    ``allow_fork``: a plain fork (clone with exactly glibc's fork flags: no threads, no namespaces) is allowed, for
    the code-test template, which runs no user code itself; each test process it forks adds the full filter."""

    def ld(offset):
        return (BPF_LD_W_ABS, 0, 0, offset)

    def ret(action):
        return (BPF_RET_K, 0, 0, action)

    eperm, arg0 = RET_ERRNO | EPERM, 16  # seccomp_data: nr @0, arch @4, ip @8, args @16 (low 32 bits first)
    prog = [
        ld(4),
        (BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        ret(RET_KILL_PROCESS),
        ld(0),
        (BPF_JGE_K, 0, 1, X32_SYSCALL_BIT),
        ret(RET_KILL_PROCESS),
    ]
    # prctl(PR_SET_PDEATHSIG, sig) with any sig but SIGKILL would let the worker outlive the host (SIGKILL: a test
    # process of the code-test template asks for it); every other prctl is allowed.
    prog += [
        ld(0),
        (BPF_JEQ_K, 0, 6, NR_PRCTL),
        ld(arg0),
        (BPF_JEQ_K, 0, 3, PR_SET_PDEATHSIG),
        ld(arg0 + 8),
        (BPF_JEQ_K, 1, 0, signal.SIGKILL),
        ret(eperm),
        ret(RET_ALLOW),
    ]
    # prlimit64 on pid 0 (itself: glibc's setrlimit) only; a same-uid host must not be re-limited.
    prog += [ld(0), (BPF_JEQ_K, 0, 4, NR_PRLIMIT64), ld(arg0), (BPF_JEQ_K, 1, 0, 0), ret(eperm), ret(RET_ALLOW)]
    for nr, index in SIGNAL_ARG.values():  # no SIGCONT, to itself or anyone
        sig = arg0 + 8 * index
        prog += [ld(0), (BPF_JEQ_K, 0, 4, nr), ld(sig), (BPF_JEQ_K, 0, 1, signal.SIGCONT), ret(eperm), ret(RET_ALLOW)]
    # one block for fcntl (each block returns for its syscall): no F_SETPIPE_SZ, no F_SETSIG to SIGCONT
    prog += [
        ld(0),
        (BPF_JEQ_K, 0, 7, NR_FCNTL),
        ld(arg0 + 8),
        (BPF_JEQ_K, 3, 0, F_SETPIPE_SZ),
        (BPF_JEQ_K, 0, 3, F_SETSIG),
        ld(arg0 + 16),
        (BPF_JEQ_K, 0, 1, signal.SIGCONT),
        ret(eperm),
        ret(RET_ALLOW),
    ]
    if allow_fork:
        prog += [
            ld(0),
            (BPF_JEQ_K, 0, 4, NR_CLONE),
            ld(arg0),
            (BPF_JEQ_K, 0, 1, CLONE_FORK),
            ret(RET_ALLOW),
            ret(eperm),
        ]
    prog.append(ld(0))
    for nr in sorted(set(DENIED.values())):
        prog += [(BPF_JEQ_K, 0, 1, nr), ret(eperm)]
    prog += [(BPF_JEQ_K, 0, 1, NR_CLONE3), ret(RET_ERRNO | ENOSYS)]  # ENOSYS: glibc falls back to clone, denied
    prog.append(ret(RET_ALLOW))
    return prog


def seccomp_available() -> bool:
    return (
        _libc.prctl(
            ctypes.c_int(PR_GET_SECCOMP), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
        >= 0
    )


def seccomp_compiled(allow_fork: bool = False) -> tuple:
    """The filter as the kernel takes it: (sock_fprog, its instructions), both to be kept alive until installed."""
    prog = seccomp_program(allow_fork)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    return _SockFprog(len(prog), ctypes.cast(filters, ctypes.POINTER(_SockFilter))), filters


def seccomp_install(allow_fork: bool = False, compiled: tuple | None = None) -> None:
    fprog, _ = compiled or seccomp_compiled(allow_fork)
    _prctl(PR_SET_SECCOMP, 2, ctypes.addressof(fprog))  # SECCOMP_MODE_FILTER


# --- mounts and credentials ---------------------------------------------------------------------------------------

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MNT_DETACH = 2


def _mount(source, target, fstype, flags, data=None):
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        _fail(f"mount {target}")


def read_only_paths() -> list[str]:
    """What user code may read: the interpreter, stdlib, site-packages, system libraries, time zones."""
    import site

    paths = [
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        *site.getsitepackages(),
        os.path.dirname(os.__file__),
        "/usr/lib",
        "/lib",
        "/lib64",
        "/usr/lib64",
        "/usr/share/zoneinfo",
    ]
    seen, out = set(), []
    for p in paths:
        if p and p not in seen and os.path.isdir(p):
            seen.add(p)
            out.append(p)
    return out


DEVICES = {"/dev/null": FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE, "/dev/urandom": FS_READ_FILE}


def _kept_flags(path: str) -> int:
    """The source mount's flags a read-only remount must keep (a user namespace may not clear them)."""
    have = os.statvfs(path).f_flag
    return sum(
        ms
        for st, ms in (
            (os.ST_NOEXEC, MS_NOEXEC),
            (os.ST_NOATIME, MS_NOATIME),
            (os.ST_NODIRATIME, MS_NODIRATIME),
            (os.ST_RELATIME, MS_RELATIME),
        )
        if have & st
    )


def private_root(scratch: str, scratch_mb: int, uid: int | None, gid: int | None, ro_paths: list[str]) -> None:
    """Pivot into a tmpfs root that holds only ``ro_paths`` (bind-mounted read-only), the two devices and a
    ``scratch_mb`` tmpfs at ``scratch``; the rest of the host file system is not there at all. As root this needs a
    mount namespace only; otherwise a user namespace too. Raises OSError when the kernel or a container refuses."""
    if NR_PIVOT_ROOT is None:
        raise OSError(38, f"no pivot_root number for {os.uname().machine}")
    if uid is not None:
        if _libc.unshare(CLONE_NEWNS) != 0:
            _fail("unshare(CLONE_NEWNS)")
    else:
        real_uid, real_gid = os.geteuid(), os.getegid()
        if real_uid == 0 and not _effective_caps() & (1 << 31):
            raise OSError(1, "uid 0 may map itself into a user namespace only with CAP_SETFCAP")
        if _libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            _fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)")
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{real_uid} {real_uid} 1"),
            ("gid_map", f"{real_gid} {real_gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = scratch  # the host's scratch directory is only a mount point for the new root
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=1024,mode=0755")
    bound: list[str] = []
    for real, path in sorted((os.path.realpath(p), p) for p in ro_paths):  # parents before children
        if real != path:  # e.g. /lib -> usr/lib: recreate the link, bind its target
            link = root + path
            os.makedirs(os.path.dirname(link), mode=0o755, exist_ok=True)
            if not os.path.lexists(link):
                os.symlink(real, link)
        if any(real == b or real.startswith(b + "/") for b in bound):
            continue
        target = root + real
        os.makedirs(target, mode=0o755, exist_ok=True)
        _mount(real, target, None, MS_BIND | MS_REC)
        kept = _kept_flags(real)
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)
        bound.append(real)
    os.makedirs(root + "/dev", mode=0o755, exist_ok=True)
    for dev in DEVICES:
        open(root + dev, "w").close()
        _mount(dev, root + dev, None, MS_BIND)
    inner = root + scratch
    os.makedirs(inner, mode=0o755, exist_ok=True)
    owner = f",uid={uid},gid={gid}" if uid is not None else ""
    _mount(
        "tmpfs",
        inner,
        "tmpfs",
        MS_NOSUID | MS_NODEV,
        f"size={scratch_mb}m,nr_inodes={max(64, scratch_mb * 64)},mode=0700{owner}",
    )
    os.mkdir(root + "/.old")
    new_root, put_old = (
        ctypes.create_string_buffer(os.fsencode(root)),
        ctypes.create_string_buffer(os.fsencode(root + "/.old")),
    )  # referenced until the call returns
    _syscall(NR_PIVOT_ROOT, ctypes.addressof(new_root), ctypes.addressof(put_old))
    os.chdir("/")
    if _libc.umount2(b"/.old", MNT_DETACH) != 0:
        _fail("umount /.old")
    os.rmdir("/.old")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _effective_caps() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """No capabilities at all: for a worker that keeps its host's uid (root -> uid N already cleared them)."""
    if NR_CAPSET is None:
        raise OSError(38, f"no capset number for {os.uname().machine}")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
    _syscall(NR_CAPSET, ctypes.addressof(header), ctypes.addressof(data))
    _libc.prctl(
        ctypes.c_int(PR_CAP_AMBIENT),
        ctypes.c_ulong(PR_CAP_AMBIENT_CLEAR_ALL),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )


def set_limits(cfg: dict) -> None:
    mib = 1 << 20
    for res, soft, hard in (
        (resource.RLIMIT_AS, cfg["memory_mb"] * mib, None),
        (resource.RLIMIT_CPU, cfg["cpu_s"], cfg["cpu_s"] + 1),  # SIGXCPU at soft, SIGKILL at hard, even if ignored
        (resource.RLIMIT_FSIZE, cfg["scratch_mb"] * mib, None),
        (resource.RLIMIT_NOFILE, cfg["nofile"], None),
        (resource.RLIMIT_NPROC, cfg.get("nproc", 1), None),  # the code-test template forks one test at a time
        (resource.RLIMIT_CORE, 0, None),
        (resource.RLIMIT_MEMLOCK, 0, None),
        (resource.RLIMIT_MSGQUEUE, 0, None),
    ):
        resource.setrlimit(res, (soft, soft if hard is None else hard))


# --- the protocol -------------------------------------------------------------------------------------------------


class Channel:
    def __init__(self, rfd: int, wfd: int, max_message: int):
        self.rfd, self.wfd, self.max_message = rfd, wfd, max_message

    def _read_exact(self, n: int) -> bytearray | None:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = os.readv(self.rfd, [view[got:]])
            if k == 0:
                return None
            got += k
        return buf

    def receive(self):
        head = self._read_exact(HEADER.size)
        if head is None:
            return None
        (n,) = HEADER.unpack(head)
        if n > self.max_message:
            raise ValueError(f"request of {n} bytes is over the {self.max_message}-byte limit")
        body = self._read_exact(n)
        if body is None:
            return None
        return msgpack.unpackb(body, raw=False, strict_map_key=False)

    def send(self, message: dict) -> None:
        body = msgpack.packb(message, use_bin_type=True)
        if len(body) > self.max_message:
            body = msgpack.packb(
                {
                    "id": message.get("id"),
                    "ok": False,
                    "stdout": "",
                    "truncated": False,
                    "error": {
                        "kind": "ResultTooLarge",
                        "line": None,
                        "traceback": "",
                        "message": f"the reply would be {len(body)} bytes; the limit is {self.max_message}",
                    },
                },
                use_bin_type=True,
            )
        view, sent = memoryview(HEADER.pack(len(body)) + body), 0  # one buffer: usually one write(2)
        while sent < len(view):
            sent += os.write(self.wfd, view[sent:])


class Capture:
    """What ``print`` writes during a call, up to ``limit`` characters; the rest is counted as truncated."""

    encoding, errors = "utf-8", "strict"

    def __init__(self, limit: int):
        self.parts: list[str] = []
        self.size, self.limit, self.truncated = 0, limit, False

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self.limit - self.size
        if len(text) > room:
            self.truncated = True
            text = text[: max(room, 0)]
        if text:
            self.parts.append(text)
            self.size += len(text)
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def text(self) -> str:
        return "".join(self.parts)


class UserError(Exception):
    """An invalid result, reported with this kind instead of the exception's own type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def describe(exc: BaseException, filename: str) -> dict:
    """Kind, message, the line in the user's source (deepest frame there) and a short traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        line, message = exc.lineno, str(exc.msg)
    else:
        try:
            message = str(exc)
        except BaseException:  # a hostile __str__
            message = "<unprintable exception>"
    try:
        text = "".join(traceback.format_exception(exc))
    except BaseException:
        text = ""
    kind = exc.kind if isinstance(exc, UserError) else type(exc).__name__
    return {"kind": str(kind)[:200], "message": message[:4000], "line": line, "traceback": text[-8000:]}


class _PipeEnd:
    """One end of an ``os.pipe`` with the methods asyncio's self-pipe calls on a socket: the worker may not make
    sockets (seccomp), so its event loops wake themselves through a pipe instead of ``socket.socketpair()``."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def setblocking(self, flag: bool) -> None:
        os.set_blocking(self.fd, flag)

    def recv(self, n: int) -> bytes:
        return os.read(self.fd, n)

    def send(self, data: bytes) -> int:
        return os.write(self.fd, data)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def use_pipe_event_loops() -> None:
    """Make asyncio's event loops here (``asyncio.run``, ``new_event_loop``, the one async rewards run on) selector
    loops whose self-pipe is a pipe. Called once user code has imported asyncio, or an async function has run."""
    import asyncio

    if getattr(asyncio.get_event_loop_policy(), "pipe_loops", False):
        return

    class PipeLoop(asyncio.SelectorEventLoop):
        def _make_self_pipe(self):
            read, write = os.pipe()
            self._ssock, self._csock = _PipeEnd(read), _PipeEnd(write)
            self._ssock.setblocking(False)
            self._csock.setblocking(False)
            self._internal_fds += 1
            self._add_reader(self._ssock.fileno(), self._read_from_self)

    class PipePolicy(asyncio.DefaultEventLoopPolicy):
        _loop_factory = PipeLoop
        pipe_loops = True

    asyncio.set_event_loop_policy(PipePolicy())


_LOOP: list = []  # the worker's one event loop, made at its first coroutine


def driven(result):
    """An async function's result: its coroutine run to the end on the worker's event loop, one loop for the
    worker's life, as TRL runs async rewards on one loop for the trainer's (``start_event_loop_in_daemon``), so
    ``asyncio.sleep``, ``gather`` and timeouts work as they do in training."""
    if not inspect.iscoroutine(result):
        return result
    import asyncio

    use_pipe_event_loops()
    if not _LOOP or _LOOP[0].is_closed():
        _LOOP[:] = [asyncio.new_event_loop()]
    return _LOOP[0].run_until_complete(result)


def tool_text(value, limit: int) -> str:
    """What the model is shown of a tool's (or an environment method's) result: ``str(value)``, at most ``limit``
    characters."""
    text = value if type(value) is str else str(value)
    if type(text) is not str:  # a str subclass from a hostile __str__
        text = str.__str__(text)
    if len(text) > limit:
        raise UserError("ResultTooLarge", f"the tool returned {len(text)} characters; the limit is {limit}")
    return text


def plain_rewards(result, n: int) -> list:
    """One msgpack-able value per completion; numpy/torch scalars become floats. The host checks again."""
    result = driven(result)
    if not isinstance(result, (list, tuple)):
        raise UserError(
            "InvalidResult",
            f"the reward function returned a {type(result).__name__}; expected a list "
            "with one number or None per completion",
        )
    if len(result) != n:
        raise UserError("InvalidResult", f"the reward function returned {len(result)} values for {n} completions")
    out = []
    for i, v in enumerate(result):
        t = type(v)
        if v is None or t is bool or t is float or (t is int and -(1 << 63) <= v < (1 << 63)):
            out.append(v)
        elif not isinstance(v, (str, bytes, list, tuple, dict, set)) and hasattr(v, "__float__"):
            try:
                out.append(float(v))
            except (OverflowError, ValueError, TypeError) as exc:
                raise UserError("InvalidResult", f"rewards[{i}] ({t.__name__}) is not a number: {exc}") from None
        else:
            raise UserError(
                "InvalidResult", f"rewards[{i}] is a {t.__name__} ({repr(v)[:60]}); expected a finite number or None"
            )
    return out


def _scalar(value):
    return (
        value
        if value is None
        or type(value) in (bool, int, float, str)
        and (type(value) is not int or -(1 << 63) <= value < (1 << 63))
        else str(value)
    )


def step_scores_value(value, max_scores: int, max_split: int):
    """A ``step_scores`` value as the host takes it: None, or ``{"split": str, "scores": [float or None, ...]}``
    (plus ``"pattern": bool``) with at most ``max_scores`` finite scores (numpy/torch scalars become floats) and a
    split of at most ``max_split`` characters. Returns (value, None), or (None, why it is not one)."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        return None, f"is a {type(value).__name__}"
    keys = set(value)
    if not {"split", "scores"} <= keys or keys - {"split", "scores", "pattern"}:
        return None, f"has the keys {', '.join(sorted(repr(k)[:40] for k in keys)[:8])}, not split and scores"
    split, scores, pattern = value["split"], value["scores"], value.get("pattern", False)
    if type(split) is not str or len(split) > max_split:
        return None, f"has a split that is not a string of at most {max_split} characters"
    if type(pattern) is not bool:
        return None, "has a pattern that is not True or False"
    if not isinstance(scores, (list, tuple)) or len(scores) > max_scores:
        return None, f"has scores that are not a list of at most {max_scores}"
    out = []
    for i, v in enumerate(scores):
        if v is None:
            out.append(None)
            continue
        try:
            f = float(v) if not isinstance(v, (str, bytes)) else math.nan
        except (OverflowError, ValueError, TypeError):
            f = math.nan
        if not math.isfinite(f):
            return None, f"has scores[{i}] = {repr(v)[:60]}, not a finite number or None"
        out.append(f)
    kept = {"split": split, "scores": out}
    if "pattern" in value:
        kept["pattern"] = pattern
    return kept, None


def _disarm_timers() -> None:
    """No user code between calls: stop interval timers and their Python handlers (a C-level timer still meets the
    host's time limit on the next call)."""
    for timer, sig in (
        (signal.ITIMER_REAL, signal.SIGALRM),
        (signal.ITIMER_VIRTUAL, signal.SIGVTALRM),
        (signal.ITIMER_PROF, signal.SIGPROF),
    ):
        signal.setitimer(timer, 0)
        signal.signal(sig, signal.SIG_DFL)


class Worker:
    def __init__(self, channel: Channel, cfg: dict, func, filename: str):
        self.channel, self.cfg, self.func, self.filename = channel, cfg, func, filename

    def call(self, req: dict) -> dict:
        args = req["args"]
        completions = args["completions"]
        extra: dict = {}  # column -> its values: one record per column, however often it is logged
        metrics: list = []
        metric_names: set = set()
        names = self.cfg["log_names"]
        room = {"values": self.cfg["log_values"], "chars": self.cfg["log_chars"]}  # the host's caps, kept here too

        def spend(values: int, chars: int) -> bool:
            room["values"] -= values
            room["chars"] -= chars
            return room["values"] >= 0 and room["chars"] >= 0

        def log_extra(column, values):
            column = str(column)
            if column == self.cfg["step_column"]:  # per-step scores keep their structure (rewards/step_scores.py)
                converted = []
                for i, v in enumerate(values):
                    kept, why = step_scores_value(v, self.cfg["step_scores"], self.cfg["step_split_chars"])
                    if why is not None:
                        room["invalid"] = (
                            f"{self.cfg['name']}: log_extra({column!r}, values): values[{i}] {why}; each value must be "
                            f'None or {{"split": str, "scores": [at most {self.cfg["step_scores"]} finite numbers '
                            'or None]} (optionally "pattern": True)'
                        )
                        return
                    converted.append(kept)
                # a step-score value counts as two values plus one per step, its split as characters
                cost = (
                    sum(2 + len(v["scores"]) if v else 1 for v in converted),
                    sum(len(v["split"]) for v in converted if v),
                )
                record = [column, converted]
            else:
                record = [column, [_scalar(v) for v in values]]
                cost = len(record[1]), sum(len(v) for v in record[1] if type(v) is str)
            if len(record[0]) > self.cfg["log_name_chars"]:
                room["names"] = f"a log_extra column name of more than {self.cfg['log_name_chars']} characters"
            elif record[0] not in extra and len(extra) >= names:
                room["names"] = f"more than {names} log_extra columns"
            elif spend(cost[0], len(record[0]) + cost[1]):
                extra.setdefault(record[0], []).extend(record[1])

        def log_metric(name, value):
            record = [str(name), float(value)]
            if len(record[0]) > self.cfg["log_name_chars"]:
                room["names"] = f"a log_metric name of more than {self.cfg['log_name_chars']} characters"
            elif record[0] not in metric_names and len(metric_names) >= names:
                room["names"] = f"more than {names} log_metric names"
            elif spend(1, len(record[0])):
                metric_names.add(record[0])
                metrics.append(record)

        out = Capture(self.cfg["stdout_limit"])
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        try:
            result = self.func(
                prompts=args.get("prompts"),
                completions=completions,
                completion_ids=args.get("completion_ids"),
                trainer_state=types.SimpleNamespace(**(args.get("trainer_state") or {})),
                log_extra=log_extra,
                log_metric=log_metric,
                **(args.get("columns") or {}),
            )
            reply = {
                "ok": True,
                "rewards": plain_rewards(result, len(completions)),
                "extra": [[column, values] for column, values in extra.items()],
                "metrics": metrics,
            }
            if "invalid" in room:
                reply = {
                    "ok": False,
                    "error": {"kind": "InvalidResult", "line": None, "traceback": "", "message": room["invalid"]},
                }
            elif room["values"] < 0 or room["chars"] < 0 or "names" in room:
                too_much = room.get("names") or (
                    f"more than {self.cfg['log_values']} values or {self.cfg['log_chars']} characters"
                )
                reply = {
                    "ok": False,
                    "error": {
                        "kind": "LogTooLarge",
                        "line": None,
                        "traceback": "",
                        "message": f"{self.cfg['name']}: log_extra / log_metric recorded {too_much} in one call",
                    },
                }
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker stays up
            reply = {"ok": False, "error": describe(exc, self.filename)}
        finally:
            sys.stdout, sys.stderr = saved
            _disarm_timers()
        reply.update(id=req["id"], stdout=out.text(), truncated=out.truncated)
        return reply

    def invoke(self, req: dict) -> dict:
        """A tool call (TRL's ``tools``): the function called with the model's arguments; its result as text, as TRL
        makes it (``str(result)``), within ``result_chars``."""
        out = Capture(self.cfg["stdout_limit"])
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        try:
            arguments = req["arguments"]
            reply = {"ok": True, "result": tool_text(driven(self.func(**arguments)), self.cfg["result_chars"])}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker stays up
            reply = {"ok": False, "error": describe(exc, self.filename)}
        finally:
            sys.stdout, sys.stderr = saved
            _disarm_timers()
        reply["id"] = req["id"]
        return reply

    MAX_INSTANCES = 4096

    def environment(self, req: dict) -> dict:
        """An environment (TRL's ``environment_factory``): this worker holds instances of the user's class by id.
        ``reset`` makes the instance where there is none (the first rollout, or after a restart) and returns None or
        text; ``call`` runs a public method with the model's arguments (its result as text, as for a tool);
        ``reward`` is get_reward's number (or None); ``drop`` forgets the instance."""
        out = Capture(self.cfg["stdout_limit"])
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        instances = self.__dict__.setdefault("instances", {})
        try:
            action, key = req["action"], req["instance"]
            result = None
            if action == "drop":
                instances.pop(key, None)
            elif action == "reset":
                if key not in instances:
                    if len(instances) >= self.MAX_INSTANCES:
                        raise UserError("TooManyInstances", f"more than {self.MAX_INSTANCES} environment instances")
                    instances[key] = self.func()
                result = driven(instances[key].reset(**req["arguments"]))
                if result is not None and type(result) is not str:
                    raise UserError(
                        "InvalidResult",
                        "reset must return None or a str (text appended to the last user "
                        f"message), not {type(result).__name__}",
                    )
            elif key not in instances:
                raise UserError(
                    "LostInstance",
                    "this rollout's environment instance is gone (its sandbox worker was "
                    "restarted after a fault); it comes back at the next reset",
                )
            elif action == "reward":
                result = driven(instances[key].get_reward())
                if result is not None:
                    if type(result) is bool or not isinstance(result, (int, float)):
                        raise UserError("InvalidReward", f"get_reward must return a float, not {type(result).__name__}")
                    result = float(result)
            else:
                method = req["method"]
                if method.startswith("_") or method in ("reset", "get_reward") or method not in self.cfg["methods"]:
                    raise UserError("UnknownMethod", f"the environment has no tool {method!r}")
                result = tool_text(
                    driven(getattr(instances[key], method)(**req["arguments"])), self.cfg["result_chars"]
                )
            reply = {"ok": True, "result": result}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the worker stays up
            reply = {"ok": False, "error": describe(exc, self.filename)}
        finally:
            sys.stdout, sys.stderr = saved
            _disarm_timers()
        reply["id"] = req["id"]
        return reply

    def serve(self) -> None:
        while True:
            req = self.channel.receive()
            if req is None or req.get("op") == "close":
                return
            op = req.get("op")
            self.channel.send(
                self.invoke(req) if op == "tool" else self.environment(req) if op == "environment" else self.call(req)
            )


def lock_in(cfg: dict) -> dict:
    """Apply the isolation in the documented order; returns what was applied. Raises on anything missing unless
    ``allow_weak`` (then the gap is listed under ``weak``)."""
    weak, report = [], {"weak": []}
    allow_weak = cfg["allow_weak"]
    scratch, uid, gid = cfg["scratch"], cfg["uid"], cfg["gid"]

    def missing(what: str):
        if not allow_weak:
            raise PermissionError(what)
        weak.append(what)

    abi = landlock_abi()
    ro_paths = read_only_paths()
    report["private_mounts"] = False
    if cfg["private_mounts"] is not False:
        try:
            private_root(scratch, cfg["scratch_mb"], uid, gid, ro_paths)
            report["private_mounts"] = True
        except OSError as exc:
            if cfg["private_mounts"]:
                raise PermissionError(f"a private mount namespace was required: {exc}") from None
            report["private_mounts_error"] = str(exc)[:500]
            _libc.umount2(os.fsencode(scratch), MNT_DETACH)  # uncover the host directory if the tmpfs got mounted
    if not report["private_mounts"]:
        # The host's file system stays in view (through Landlock): user code could stat it, and with the host's
        # uid reach the app's own files in ways Landlock does not cover. Only in weak mode.
        missing("no private mount root: " + report.get("private_mounts_error", "private mounts are off"))
    if not report["private_mounts"] and uid is not None:
        os.chown(scratch, uid, gid)
    os.chdir(scratch)

    # Landlock rules name inodes: open them now, while the paths are reachable (as root, before the uid change).
    rules = []
    for path in ro_paths:
        rules.append((os.open(path, os.O_PATH | os.O_CLOEXEC), READ_DIR))
    for dev, access in DEVICES.items():
        rules.append((os.open(dev, os.O_PATH | os.O_CLOEXEC), access))
    rules.append((os.open(scratch, os.O_PATH | os.O_CLOEXEC), SCRATCH))

    if uid is not None:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
            raise PermissionError(f"could not switch to uid {uid}")
        for path in ro_paths:
            if not os.access(path, os.R_OK | os.X_OK):
                raise PermissionError(
                    f"{path} is not readable by the sandbox uid {uid}; install Python where every "
                    "user can read it, or give the worker CAP_SYS_ADMIN for a private root"
                )
    else:
        drop_capabilities()  # a capless root, or root of the user namespace made for the private root
    report["uid"] = os.getuid()

    set_limits(cfg)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the uid change cleared the one set at start
    if os.getppid() != cfg["ppid"]:
        os._exit(0)  # the host died before this point: no one to serve
    _prctl(PR_SET_NO_NEW_PRIVS, 1)

    report["landlock_abi"] = abi
    report["landlock"] = None
    if abi == 0:
        missing("Landlock is not available")
    else:
        report["landlock"] = landlock_restrict(abi, rules)
        if abi < 6:
            (missing if uid is None else weak.append)(
                f"Landlock ABI {abi} < 6: signals and abstract UNIX sockets are not scoped"
            )
    for fd, _ in rules:
        os.close(fd)

    report["seccomp"] = False
    if os.uname().machine != "x86_64":
        missing(f"the seccomp filter is written for x86_64, not {os.uname().machine}")
    elif not seccomp_available():
        missing("seccomp is not available")
    else:
        seccomp_install(allow_fork=cfg.get("mode") == "tests")
        report["seccomp"] = True
    report["weak"] = weak
    return report


# --- code tests -----------------------------------------------------------------------------------------------------


class TestRunner:
    """The code-test template: locked in like a reward worker, it runs no user code itself and holds the verdicts.

    Before the first request it forks a *spawner*, which never sees a batch: for each test the template tells the
    spawner which slot to use, the spawner forks the test process from its own pristine memory, and the test process
    closes every descriptor but its slot's two pipes (its job in, its frames out), confines itself further (its own
    CPU and memory limits, a nested Landlock domain with nothing writable that cannot signal the template or the
    spawner, the full seccomp filter: no more forks) and only then reads its job: its own code (and an output
    test's stdin), never an assert or an expected output. The template writes the job, reads what the process
    writes and judges it itself: the output compared here; an assert run here by ``Judge`` (an interpreter of the
    test's ``ast`` on plain data, bounded in steps and sizes), which asks the process only for the values of the
    expressions that need the code. The spawner reaps each process and reports its exit status. The template keeps
    the wall-clock limit, never blocks on a test process, and kills what overruns (through the spawner)."""

    OUTPUT_LIMIT = 1 << 16
    # bytes of one frame (its stdout's UTF-8 and a verdict, or one value), and what an output test's process may write
    # in all; an assert test's may write 16 times that (its answers to the judge)
    FRAME_LIMIT = 4 * OUTPUT_LIMIT + 4096
    CMD = struct.Struct("<iiiid")  # to the spawner: op, slot, seq, memory_mb, time_s
    REPORT = struct.Struct("<iiii")  # from the spawner: slot, seq, wait status (or -errno: could not fork), 0
    SPAWN, KILL = 1, 2

    def __init__(self, channel: Channel, cfg: dict, abi: int):
        self.channel, self.cfg, self.abi = channel, cfg, abi
        self.template = os.getpid()
        # Built once, enforced by each test process: a nested Landlock domain (Landlock does not check O_PATH opens,
        # so the read-only paths can be named again after lock_in) and the full seccomp filter.
        rules = [(os.open(p, os.O_PATH | os.O_CLOEXEC), READ_DIR) for p in read_only_paths()]
        rules += [
            (os.open(dev, os.O_PATH | os.O_CLOEXEC), FS_READ_FILE | (access & FS_WRITE_FILE))
            for dev, access in DEVICES.items()
        ]
        self.ruleset = landlock_ruleset(abi, rules) if abi else -1
        for fd, _ in rules:
            os.close(fd)
        self.seccomp = (
            seccomp_compiled(allow_fork=False) if os.uname().machine == "x86_64" and seccomp_available() else None
        )
        self.seq = 0
        self.slots = []  # per slot: (job read end, job write end, frames read end, frames write end)
        for _ in range(max(1, int(cfg.get("parallel", 1)))):
            jr, jw = os.pipe2(os.O_CLOEXEC)
            fr, fw = os.pipe2(os.O_CLOEXEC)
            self.slots.append((jr, jw, fr, fw))
        cr, self.ctl = os.pipe2(os.O_CLOEXEC)
        self.reports, rw = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()  # before any batch is in memory: what the spawner forks holds no other test's data
        if pid == 0:
            try:
                self.spawner(cr, rw)
            finally:
                os._exit(1)
        self.spawner_pid = pid
        os.close(cr)
        os.close(rw)
        for _jr, jw, fr, fw in self.slots:  # the template keeps the job's read end too: to drain what is left
            os.close(fw)
            os.set_blocking(jw, False)
            os.set_blocking(fr, False)
        os.set_blocking(self.reports, False)

    # --- the spawner: forked once, before any batch; runs no user code --------------------------------------------

    def spawner(self, cr: int, rw: int) -> None:
        import gc

        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != self.template:
            os._exit(1)
        os.close(self.channel.rfd)
        os.close(self.channel.wfd)
        os.close(self.ctl)
        os.close(self.reports)
        for _jr, jw, fr, _fw in self.slots:
            os.close(jw)
            os.close(fr)
        self.spawner_pid = os.getpid()
        wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        gc.freeze()
        live: dict[int, tuple[int, int]] = {}  # pid -> (slot, seq)
        buf = bytearray()
        poller = select.poll()
        poller.register(cr, select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == wake_r:
                    while True:
                        try:
                            if not os.read(wake_r, 512):
                                break
                        except BlockingIOError:
                            break
                    continue
                chunk = os.read(cr, self.CMD.size * 64)
                if not chunk:  # the template is gone
                    os._exit(0)
                buf += chunk
                while len(buf) >= self.CMD.size:
                    op, slot, seq, memory_mb, time_s = self.CMD.unpack_from(buf)
                    del buf[: self.CMD.size]
                    if op == self.SPAWN:
                        try:
                            pid = os.fork()
                        except OSError as exc:
                            os.write(rw, self.REPORT.pack(slot, seq, -max(exc.errno or 1, 1), 0))
                            continue
                        if pid == 0:
                            self.test_process(slot, time_s, memory_mb)  # never returns
                        live[pid] = (slot, seq)
                    elif op == self.KILL:
                        for pid, at in live.items():
                            if at == (slot, seq):
                                os.kill(pid, signal.SIGKILL)
            while live:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                if pid in live:
                    slot, seq = live.pop(pid)
                    os.write(rw, self.REPORT.pack(slot, seq, status, 0))

    def test_process(self, slot: int, time_s: float, memory_mb: int) -> None:
        """In the test process, forked by the spawner: keep only this slot's two pipes, confine, run its job."""
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            jr, _jw, _fr, fw = self.slots[slot]
            os.set_blocking(jr, True)  # shared with the slot's earlier processes: one may have changed them
            os.set_blocking(fw, True)
            self.confine(time_s, memory_mb)
            low = 3  # 0-2 are /dev/null
            for keep in sorted((jr, fw)):
                os.closerange(low, keep)
                low = keep + 1
            os.closerange(low, 1 << 16)
            job = _read_frame(jr)
            run_test(job["code"], job["test"], self.OUTPUT_LIMIT, jr, fw)
        except BaseException as exc:
            try:
                _write_frame(fw, {"error": _short(exc)})
            except BaseException:
                pass
        finally:
            os._exit(0)

    def confine(self, time_s: float, memory_mb: int) -> None:
        mib = 1 << 20
        cpu = max(1, math.ceil(time_s))
        hard = cpu + 1
        _, most = resource.getrlimit(resource.RLIMIT_CPU)  # the template's own hard limit caps its tests'
        if most != resource.RLIM_INFINITY:
            cpu, hard = min(cpu, max(most - 1, 1)), min(hard, most)
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * mib, memory_mb * mib))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != self.spawner_pid:  # the spawner died before that: no one to report to
            os._exit(1)
        if self.ruleset >= 0:  # nested: nothing writable, no signals to the template or the spawner
            _syscall(NR_LANDLOCK_RESTRICT_SELF, self.ruleset, 0)
            os.close(self.ruleset)
        if self.seccomp is not None:
            seccomp_install(compiled=self.seccomp)

    # --- the template -------------------------------------------------------------------------------------------

    def serve(self) -> None:
        import gc

        gc.freeze()  # what the template holds stays shared: no copy-on-write from collections
        while True:
            req = self.channel.receive()
            if req is None or req.get("op") == "close":
                return
            self.channel.send(
                {
                    "id": req["id"],
                    "ok": True,
                    "results": self.run_all(
                        req["jobs"], float(req["time_s"]), int(req["memory_mb"]), details=req.get("details") is True
                    ),
                }
            )

    def run_all(self, jobs: list[dict], time_s: float, memory_mb: int, details: bool = False) -> list[list[dict]]:
        """Every test of every job, one test process per free slot, each with its own deadline. A job one of whose
        test processes attacked the judge fails all its tests, each marked so. ``details`` (the code_tests bench):
        each result also carries ``time_s``, the test process's seconds from spawn to reaping, and ``stdout``, what
        an output test's process printed (as it sent it; "" for an assert test). Neither changes a verdict."""
        pending = [(j, t) for j, job in enumerate(jobs) for t in range(len(job["tests"]))]
        pending.reverse()
        results: list[list] = [[None] * len(job["tests"]) for job in jobs]
        free = list(range(len(self.slots)))
        running: dict[int, dict] = {}  # slot -> the test process's state
        reports = bytearray()
        while pending or running:
            while pending and free:
                slot, (j, t) = free.pop(), pending.pop()
                running[slot] = self.start(slot, jobs[j], (j, t), time_s, memory_mb)
                running[slot]["started"] = time.monotonic()
            poller = select.poll()
            poller.register(self.reports, select.POLLIN)
            for slot, proc in running.items():
                poller.register(self.slots[slot][2], select.POLLIN)
                if proc["out"]:
                    poller.register(self.slots[slot][1], select.POLLOUT)
            wait = min(p["deadline"] for p in running.values()) - time.monotonic()
            ready = dict(poller.poll(max(0, math.ceil(wait * 1000))))
            for slot, proc in running.items():
                if ready.get(self.slots[slot][2]):
                    self.receive(proc)
                if proc["out"] and ready.get(self.slots[slot][1]):
                    self.send(proc)
                if time.monotonic() >= proc["deadline"]:  # killed; and again a second later if still unreaped
                    proc["timed_out"] = True
                    proc["deadline"] = time.monotonic() + 1.0
                    self.kill(proc)
            if ready.get(self.reports):
                try:
                    chunk = os.read(self.reports, self.REPORT.size * 64)
                except BlockingIOError:
                    chunk = None
                if chunk == b"":
                    raise RuntimeError("the code-test spawner is gone")
                reports += chunk or b""
                while len(reports) >= self.REPORT.size:
                    slot, seq, status, _ = self.REPORT.unpack_from(reports)
                    del reports[: self.REPORT.size]
                    proc = running.get(slot)
                    if proc is None or proc["seq"] != seq:
                        continue
                    del running[slot]
                    free.append(slot)
                    j, t = proc["at"]
                    try:
                        results[j][t] = self.finish(proc, status, time_s)
                    except Exception as exc:  # a row's fault stays that row's: the batch is answered
                        results[j][t] = {"passed": False, "error": f"the judge could not read its end: {_short(exc)}"}
                    if details:
                        results[j][t]["details"] = self.details(proc)
        for row in results:
            attack = next((r["attack"] for r in row if "attack" in r), None)
            for t, r in enumerate(row):
                row[t] = (
                    {"passed": False, "error": f"attacked the judge: {attack}"[:500]}
                    if attack
                    else {"passed": r["passed"], "error": r["error"]}
                )
                if details:
                    row[t].update(r.get("details") or {"stdout": "", "time_s": 0.0})
        return results

    def details(self, proc: dict) -> dict:
        verdict = proc["verdict"] if isinstance(proc["verdict"], dict) else {}
        stdout = verdict.get("stdout", "") if not proc["attack"] else ""
        return {"stdout": stdout[: self.OUTPUT_LIMIT], "time_s": max(0.0, time.monotonic() - proc["started"])}

    def start(self, slot: int, job: dict, at: tuple[int, int], time_s: float, memory_mb: int) -> dict:
        """Ask the spawner for a test process in ``slot`` and queue its job: its code and its test, no expected
        output."""
        self.seq += 1
        test = job["tests"][at[1]]
        mine = {"assert": None} if "assert" in test else {"stdin": test.get("stdin", "")}  # the assert comes later
        proc = {
            "at": at,
            "slot": slot,
            "seq": self.seq,
            "test": test,
            "out": bytearray(_frame({"code": job["code"], "test": mine})),
            "data": bytearray(),
            "received": 0,
            "judge": None,  # an assert test's Judge.run(), once its code has run
            "asked": None,  # what the judge is waiting for from the process
            "decided": None,  # an assert test's verdict, the judge's alone
            "verdict": None,
            "attack": None,
            "timed_out": False,
            "deadline": time.monotonic() + time_s,
        }
        os.write(self.ctl, self.CMD.pack(self.SPAWN, slot, self.seq, memory_mb, time_s))
        self.send(proc)
        return proc

    def kill(self, proc: dict) -> None:
        os.write(self.ctl, self.CMD.pack(self.KILL, proc["slot"], proc["seq"], 0, 0.0))

    def send(self, proc: dict) -> None:
        try:
            sent = os.write(self.slots[proc["slot"]][1], proc["out"])
        except BlockingIOError:
            return
        del proc["out"][:sent]

    def receive(self, proc: dict) -> None:
        """Read what the test process wrote (never blocking) and take each complete frame."""
        fd = self.slots[proc["slot"]][2]
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            proc["received"] += len(chunk)
            if proc["attack"] or proc["decided"]:
                continue
            if proc["received"] > self.FRAME_LIMIT * (16 if "assert" in proc["test"] else 1):
                if proc["asked"] is not None:  # answering the judge: many large values fail the test, no attack
                    proc["decided"] = {"passed": False, "error": "the test's values took more than the judge reads"}
                    self.kill(proc)
                else:
                    self.flag(proc, "wrote more to the judge's pipe than a test's output")
                continue
            proc["data"] += chunk
            while len(proc["data"]) >= HEADER.size and not proc["attack"] and not proc["decided"]:
                (n,) = HEADER.unpack_from(proc["data"])
                if n > self.FRAME_LIMIT:
                    self.flag(proc, "wrote a frame larger than a test's output to the judge's pipe")
                    break
                if len(proc["data"]) < HEADER.size + n:
                    break
                body = bytes(proc["data"][HEADER.size : HEADER.size + n])
                del proc["data"][: HEADER.size + n]
                try:
                    frame = msgpack.unpackb(body, raw=False)
                except Exception:
                    frame = None
                self.take(proc, frame)

    def take(self, proc: dict, frame) -> None:
        """One frame from a test process. An output test's: its verdict ``{"stdout", "error"}``, whose output the
        template compares. An assert test's: ``{"error"}`` (its code raised), or ``{"ran": True}`` (its code has run:
        the judge starts), then one ``{"value"}`` or ``{"error"}`` for each expression the judge asks for. Anything
        else is an attack on the judge."""
        if type(frame) is not dict:
            return self.flag(proc, "wrote something other than its frames to the judge's pipe")
        if proc["verdict"] is not None:
            return self.flag(proc, "wrote again after its verdict")
        has_error = frame.keys() == {"error"} and type(frame["error"]) is str and frame["error"] != ""
        if "assert" not in proc["test"]:
            if (
                frame.keys() != {"error", "stdout"}
                or type(frame["error"]) is not str
                or type(frame["stdout"]) is not str
            ):
                return self.flag(proc, "sent a verdict with missing or unexpected fields")
            proc["verdict"] = frame
        elif proc["judge"] is None:
            if frame == {"ran": True}:
                proc["judge"] = Judge(proc["test"]["assert"]).run()
                return self.advance(proc, None)
            if not has_error:
                return self.flag(proc, "sent a frame out of turn")
            proc["decided"] = {"passed": False, "error": frame["error"][:500]}
            self.kill(proc)
        elif proc["asked"] is None:
            self.flag(proc, "sent a value nobody asked for")
        elif frame.keys() == {"value"}:
            try:
                value = from_data(frame["value"])
            except Exception as exc:
                return self.advance(proc, error=f"sent a value the judge cannot read ({_short(exc)})")
            self.advance(proc, value)
        elif has_error:
            self.advance(proc, error=frame["error"][:500])
        else:
            self.flag(proc, "sent a value with missing or unexpected fields")

    def advance(self, proc: dict, value=None, error: str | None = None) -> None:
        """Give the judge what the process sent; send the process the judge's next question, or decide."""
        proc["asked"] = None
        try:
            asked = proc["judge"].send(value) if error is None else proc["judge"].throw(Failed(error))
        except StopIteration:
            proc["decided"] = {"passed": True, "error": ""}
        except Failed as failed:
            proc["decided"] = {"passed": False, "error": str(failed)[:500]}
        except Exception as exc:  # the test's own error: a TypeError comparing, a ZeroDivisionError...
            proc["decided"] = {"passed": False, "error": _short(exc)}
        else:
            proc["asked"] = asked
            proc["out"] += _frame(asked)
            return self.send(proc)
        proc["judge"].close()
        self.kill(proc)  # nothing it does now counts

    def flag(self, proc: dict, why: str) -> None:
        if not proc["attack"]:
            proc["attack"] = why
            proc["data"].clear()
            self.kill(proc)

    def finish(self, proc: dict, status: int, time_s: float) -> dict:
        """Judge a reaped test process from what the template saw: its exit status and its frames."""
        jr, _jw, fr, _fw = self.slots[proc["slot"]]
        self.receive(proc)  # the rest of what it wrote: nothing else writes this pipe
        while select.select([jr], [], [], 0)[0]:  # what it left unread of its job: for no one else to read
            os.read(jr, 1 << 16)
        if proc["attack"]:
            return {"passed": False, "error": "", "attack": proc["attack"]}
        if proc["decided"] is not None:
            return proc["decided"]
        if status < 0:
            return {"passed": False, "error": f"could not start a test process: {os.strerror(-status)}"}
        if proc["timed_out"]:
            return {"passed": False, "error": f"timed out after {time_s:g} s"}
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            why = "its CPU limit" if sig in (signal.SIGXCPU, signal.SIGKILL) else signal_name(sig)
            return {"passed": False, "error": f"killed by {why}"}
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        verdict = proc["verdict"]
        if code != 0:
            return {"passed": False, "error": f"exited with status {code} before its verdict"}
        if proc["data"]:
            return {"passed": False, "error": "", "attack": "left an unfinished frame on the judge's pipe"}
        if "assert" in proc["test"]:  # not decided: the process ended before the judge had what it asked for
            if proc["judge"] is None:
                return {"passed": False, "error": "the process ended before its test ran"}
            return {"passed": False, "error": "the process ended before its test was judged"}
        if verdict is None:
            return {"passed": False, "error": "the test process ended without a verdict"}
        if verdict["error"]:
            return {"passed": False, "error": verdict["error"][:500]}
        if same_output(verdict["stdout"], proc["test"].get("stdout", "")):
            return {"passed": True, "error": ""}
        return {"passed": False, "error": "wrong output: " + repr(verdict["stdout"][:200])}


def signal_name(sig: int) -> str:
    """``SIGSEGV``, or ``signal 40`` for one Python has no name for (the real-time signals)."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# --- the assert judge: in the template, on plain data only ----------------------------------------------------------
#
# An assert test's verdict is decided here, never in the test process: the template interprets the test itself
# (comparisons, arithmetic, `and`/`or`, literals, comprehensions and a few pure functions: the judge's own `len`,
# `sorted`, `math.isclose`...) and asks the test process only for the values of the expressions that need the
# completion's code (``add(1, 2)``, ``RESULT``), one at a time, as plain data. The process never holds the test,
# the expected values or a verdict; whatever it runs, it can only choose the values of its own expressions.


class Failed(Exception):
    """The test failed; the message is its error."""


JUDGE_STEPS = 200_000  # expression nodes the judge evaluates for one test
JUDGE_LEAVES = 10_000  # values one test may ask its process for
JUDGE_SIZE = 1 << 20  # elements, or bits / 8, one operation of the judge may build
MAX_TEST_CHARS = 1 << 16  # characters of one test's source
DATA_DEPTH = 100  # nesting of a value crossing between a test process and its judge
_TAGS = {list: "l", tuple: "t", set: "s", frozenset: "f"}
_UNTAG = {"l": list, "t": tuple, "s": set, "f": frozenset}


def to_data(value, depth: int = 0):
    """``value`` as msgpack-able plain data, containers tagged (a tuple stays a tuple): what crosses between a test
    process and the judge. numpy values become their ``tolist()``, other numbers their int, float or complex;
    anything else is a TypeError."""
    if depth > DATA_DEPTH:
        raise ValueError("a value nested too deeply for the judge")
    kind = type(value)
    if value is None or kind in (bool, float, str):
        return value
    if kind is int:
        return value if -(1 << 63) <= value < (1 << 63) else ["i", str(value)]
    if kind is bytes:
        return ["b", value]
    if kind is complex:
        return ["c", value.real, value.imag]
    if kind in _TAGS:
        return [_TAGS[kind], [to_data(v, depth + 1) for v in value]]
    if kind is dict:
        return ["d", [[to_data(k, depth + 1), to_data(v, depth + 1)] for k, v in value.items()]]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return to_data(value.tolist(), depth + 1)
    for base in (bool, str, bytes, int, float, complex, tuple, list, dict, set, frozenset):
        if isinstance(value, base):
            return to_data(base(value), depth + 1)
    import numbers

    for abc, base in ((numbers.Integral, int), (numbers.Real, float), (numbers.Complex, complex)):
        if isinstance(value, abc):
            return to_data(base(value), depth + 1)
    raise TypeError(
        f"a {kind.__name__} is not a value the judge can compare (numbers, text, bytes, None and "
        "lists, tuples, sets and dicts of them)"
    )


def from_data(data, depth: int = 0):
    """What ``to_data`` made, back as a value; ValueError (or TypeError: an unhashable set element) otherwise."""
    if depth > DATA_DEPTH:
        raise ValueError("nested too deeply")
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list and len(data) in (2, 3) and type(data[0]) is str:
        tag, rest = data[0], data[1:]
        if tag == "i" and len(rest) == 1 and type(rest[0]) is str:
            return int(rest[0])  # at most sys.int_max_str_digits digits
        if tag == "b" and len(rest) == 1 and type(rest[0]) is bytes:
            return rest[0]
        if tag == "c" and len(rest) == 2 and all(type(x) is float for x in rest):
            return complex(*rest)
        if tag in _UNTAG and len(rest) == 1 and type(rest[0]) is list:
            return _UNTAG[tag](from_data(v, depth + 1) for v in rest[0])
        if tag == "d" and len(rest) == 1 and type(rest[0]) is list:
            pairs = rest[0]
            if all(type(p) is list and len(p) == 2 for p in pairs):
                return {from_data(k, depth + 1): from_data(v, depth + 1) for k, v in pairs}
    raise ValueError("not a value")


def _pow(base, exp, mod=None):
    if mod is None and isinstance(base, int) and isinstance(exp, int) and exp > 0:
        if base.bit_length() * exp > 8 * JUDGE_SIZE:
            raise Failed("the test builds an integer too large for the judge")
        return base**exp
    return pow(base, exp, mod)


def _range(*args):
    r = range(*args)
    if len(r) > JUDGE_SIZE:
        raise Failed("the test builds a range too long for the judge")
    return r


def _sum(values, start=0):
    if not isinstance(start, (int, float, complex)):
        raise Failed("the judge sums numbers only")
    return sum(values, start)


def _round(number, ndigits=None):
    if ndigits is not None and not -400 <= ndigits <= 400:
        raise Failed("the test rounds to more digits than the judge does")
    return round(number) if ndigits is None else round(number, ndigits)


def _factorial(n):
    if n > 10_000:
        raise Failed("the test asks the judge for too large a factorial")
    return math.factorial(n)


MATH = types.SimpleNamespace(
    factorial=_factorial,
    pow=math.pow,
    **{
        name: getattr(math, name)
        for name in (
            "isclose sqrt isqrt floor ceil trunc fabs copysign isnan isinf isfinite inf nan pi e tau log log2 log10 "
            "exp gcd sin cos tan asin acos atan atan2 hypot fsum dist degrees radians"
        ).split()
    },
)
# The names a test may use that the judge answers itself (whatever the code defines under the same name).
JUDGE_NAMES = {
    "abs": abs, "all": all, "any": any, "bin": bin, "bool": bool, "bytes": bytes, "chr": chr, "complex": complex,
    "dict": dict, "divmod": divmod, "enumerate": enumerate, "float": float, "frozenset": frozenset, "hex": hex,
    "int": int, "isinstance": isinstance, "len": len, "list": list, "max": max, "min": min, "oct": oct, "ord": ord,
    "pow": _pow, "range": _range, "repr": repr, "reversed": reversed, "round": _round, "set": set, "sorted": sorted,
    "str": str, "sum": _sum, "tuple": tuple, "type": type, "zip": zip, "math": MATH,
}  # fmt: skip
# Methods of plain values the judge calls (none builds more than its inputs hold).
JUDGE_METHODS = {
    str: set(
        "split rsplit strip lstrip rstrip lower upper casefold title capitalize swapcase startswith endswith count "
        "find rfind index rindex join splitlines isdigit isalpha isalnum isspace islower isupper isdecimal "
        "isnumeric".split()
    ),
    bytes: {"decode", "split", "strip", "lower", "upper", "startswith", "endswith", "count", "find", "index"},
    list: {"count", "index"},
    tuple: {"count", "index"},
    dict: {"keys", "values", "items", "get"},
    set: {"issubset", "issuperset", "union", "intersection", "difference", "isdisjoint"},
    frozenset: {"issubset", "issuperset", "union", "intersection", "difference", "isdisjoint"},
}
_BINARY = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: _pow, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.BitAnd: lambda a, b: a & b,
}  # fmt: skip
_UNARY = {ast.Not: lambda a: not a, ast.USub: lambda a: -a, ast.UAdd: lambda a: +a, ast.Invert: lambda a: ~a}
_COMPARE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: _is(a, b), ast.IsNot: lambda a, b: not _is(a, b),
}  # fmt: skip


def _is(a, b) -> bool:
    """``a is b`` for values that crossed as data, which keep no identity: None, True and False are themselves; an
    int or a str is its equal of the same type (what the code's ``x is 1`` meant); any other pair is two objects."""
    return a is b or (type(a) is type(b) and type(a) in (int, str) and a == b)


def _checked_binary(op: type, a, b):
    """``a op b``, refused where it would build more than the judge gives one operation: every value the judge holds
    is then within JUDGE_SIZE elements (or 8 * JUDGE_SIZE bits), so that an addition is bounded too."""
    if op is ast.Mult:
        for seq, n in ((a, b), (b, a)):
            if isinstance(seq, (str, bytes, list, tuple)) and isinstance(n, int) and len(seq) * n > JUDGE_SIZE:
                raise Failed("the test builds a sequence too long for the judge")
        if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > 8 * JUDGE_SIZE:
            raise Failed("the test builds an integer too large for the judge")
    if op is ast.LShift and isinstance(b, int) and b > 8 * JUDGE_SIZE:
        raise Failed("the test builds an integer too large for the judge")
    if op is ast.Mod and isinstance(a, (str, bytes)):
        raise Failed("the judge does not format text with %")
    return _sized(_BINARY[op](a, b))


def _sized(value):
    if isinstance(value, (str, bytes, list, tuple, set, frozenset, dict)) and len(value) > JUDGE_SIZE:
        raise Failed("the test builds a sequence too long for the judge")
    if isinstance(value, int) and value.bit_length() > 8 * JUDGE_SIZE:
        raise Failed("the test builds an integer too large for the judge")
    return value


def _join(separator):
    def join(items):
        items = list(items)
        if len(separator) * len(items) > JUDGE_SIZE:
            raise Failed("the test builds a sequence too long for the judge")
        return separator.join(items)

    return join


class Judge:
    """Runs one assert test (its source) as a generator: it yields ``{"eval": source, "bind": {name: data}}`` for
    each value it needs from the test process and is sent that value back (or thrown a Failed with the process's
    error); it returns when every assert held and raises Failed (or any exception: the test's error) otherwise."""

    def __init__(self, source: str):
        self.source, self.steps, self.leaves = source, 0, 0

    def run(self):
        if len(self.source) > MAX_TEST_CHARS:
            raise Failed(f"the test is longer than the judge reads ({MAX_TEST_CHARS} characters)")
        try:
            tree = ast.parse(self.source, "<test>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise Failed(f"the test is not Python the judge can read: {_short(exc)}") from None
        yield from self.block(tree.body, {})

    def tick(self) -> None:
        self.steps += 1
        if self.steps > JUDGE_STEPS:
            raise Failed(f"the test needs more than {JUDGE_STEPS} steps of the judge")

    # statements: asserts, and what a test writes around them

    def block(self, body: list, env: dict):
        for stmt in body:
            self.tick()
            kind = type(stmt)
            if kind is ast.Assert:
                if not (yield from self.value(stmt.test, env)):
                    message = "" if stmt.msg is None else str((yield from self.value(stmt.msg, env)))[:400]
                    raise Failed(f"AssertionError: {message}")
            elif kind is ast.Pass:
                pass
            elif kind is ast.Expr:
                yield from self.value(stmt.value, env)
            elif kind is ast.Assign:
                value = yield from self.value(stmt.value, env)
                for target in stmt.targets:
                    self.bind(target, value, env)
            elif kind is ast.For and not stmt.orelse:
                for item in (yield from self.value(stmt.iter, env)):
                    self.bind(stmt.target, item, env)
                    yield from self.block(stmt.body, env)
            elif kind is ast.If:
                yield from self.block(stmt.body if (yield from self.value(stmt.test, env)) else stmt.orelse, env)
            elif kind in (ast.Import, ast.ImportFrom):  # the code's business: run in its process
                yield from self.ask(stmt, env, statement=True)
            else:
                raise Failed(
                    f"the judge runs asserts (and pass, if, for, imports, plain assignments), not {kind.__name__}"
                )

    def bind(self, target, value, env: dict) -> None:
        if type(target) is ast.Name:
            env[target.id] = value
        elif type(target) in (ast.Tuple, ast.List) and all(type(t) is ast.Name for t in target.elts):
            values = list(value)
            if len(values) != len(target.elts):
                raise Failed(f"ValueError: cannot unpack {len(values)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, values, strict=True):
                env[t.id] = v
        else:
            raise Failed(f"the judge assigns to names only, not to {type(target).__name__}")

    # expressions

    def needs_code(self, node, env: dict) -> bool:
        """Whether ``node`` names anything the judge does not hold: then its process evaluates it."""
        return any(type(n) is ast.Name and n.id not in env and n.id not in JUDGE_NAMES for n in ast.walk(node))

    def ask(self, node, env: dict, statement: bool = False):
        self.leaves += 1
        if self.leaves > JUDGE_LEAVES:
            raise Failed(f"the test asks its process for more than {JUDGE_LEAVES} values")
        names = {n.id for n in ast.walk(node) if type(n) is ast.Name and n.id in env}
        try:
            bind = {name: to_data(env[name]) for name in sorted(names)}
        except (TypeError, ValueError) as exc:
            raise Failed(f"the judge cannot send a value to the test process: {_short(exc)}") from None
        return (yield {"exec" if statement else "eval": ast.unparse(node), "bind": bind})

    def value(self, node, env: dict):
        self.tick()
        kind = type(node)
        if kind is ast.Constant:
            return node.value
        if kind is ast.Name:
            if node.id in env:
                return env[node.id]
            if node.id in JUDGE_NAMES:
                return JUDGE_NAMES[node.id]
            return (yield from self.ask(node, env))
        if kind in (ast.List, ast.Tuple, ast.Set) and not any(type(e) is ast.Starred for e in node.elts):
            items = []
            for element in node.elts:
                items.append((yield from self.value(element, env)))
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[kind](items)
        if kind is ast.Dict and None not in node.keys:
            out = {}
            for k, v in zip(node.keys, node.values, strict=True):
                key = yield from self.value(k, env)
                out[key] = yield from self.value(v, env)
            return out
        if kind is ast.BoolOp:
            result = None
            for operand in node.values:
                result = yield from self.value(operand, env)
                if bool(result) is (type(node.op) is ast.Or):
                    return result
            return result
        if kind is ast.UnaryOp:
            return _UNARY[type(node.op)]((yield from self.value(node.operand, env)))
        if kind is ast.BinOp:
            left = yield from self.value(node.left, env)
            return _checked_binary(type(node.op), left, (yield from self.value(node.right, env)))
        if kind is ast.Compare:
            left = yield from self.value(node.left, env)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = yield from self.value(comparator, env)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if kind is ast.IfExp:
            chosen = node.body if (yield from self.value(node.test, env)) else node.orelse
            return (yield from self.value(chosen, env))
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            return (yield from self.comprehension(node, env))
        if kind is ast.Subscript and not self.needs_code(node.value, env):
            container = yield from self.value(node.value, env)
            return container[(yield from self.value(node.slice, env))]
        if kind is ast.Slice:
            parts = []
            for part in (node.lower, node.upper, node.step):
                parts.append(None if part is None else (yield from self.value(part, env)))
            return slice(*parts)
        if kind is ast.Attribute and type(node.value) is ast.Name and node.value.id not in env:
            if node.value.id == "math" and not node.attr.startswith("_") and hasattr(MATH, node.attr):
                return getattr(MATH, node.attr)
        if (
            kind is ast.Call
            and not any(type(a) is ast.Starred for a in node.args)
            and None not in (k.arg for k in node.keywords)
        ):
            function = yield from self.callee(node.func, env)
            if function is not None:
                args, kwargs = [], {}
                for a in node.args:
                    args.append((yield from self.value(a, env)))
                for k in node.keywords:
                    kwargs[k.arg] = yield from self.value(k.value, env)
                if function is bytes and args and isinstance(args[0], int) and args[0] > JUDGE_SIZE:
                    raise Failed("the test builds a sequence too long for the judge")
                return _sized(function(*args, **kwargs))
        if self.needs_code(node, env):
            return (yield from self.ask(node, env))
        raise Failed(f"the judge cannot evaluate {ast.unparse(node)[:100]!r}")

    def callee(self, func, env: dict):
        """The judge's own function a call names, or None (the call is the code's)."""
        if type(func) is ast.Name and func.id not in env and func.id in JUDGE_NAMES:
            return JUDGE_NAMES[func.id]
        if type(func) is ast.Attribute and not self.needs_code(func.value, env):
            if type(func.value) is ast.Name and func.value.id == "math" and func.value.id not in env:
                return getattr(MATH, func.attr, None) if not func.attr.startswith("_") else None
            receiver = yield from self.value(func.value, env)
            if func.attr in JUDGE_METHODS.get(type(receiver), ()):
                return _join(receiver) if func.attr == "join" else getattr(receiver, func.attr)
            raise Failed(f"the judge does not call {type(receiver).__name__}.{func.attr}")
        return None

    def comprehension(self, node, env: dict):
        out = []

        def loops(generators, scope):
            if not generators:
                if type(node) is ast.DictComp:
                    key = yield from self.value(node.key, scope)
                    out.append((key, (yield from self.value(node.value, scope))))
                else:
                    out.append((yield from self.value(node.elt, scope)))
                if len(out) > JUDGE_SIZE:
                    raise Failed("the test builds a sequence too long for the judge")
                return
            first = generators[0]
            if first.is_async:
                raise Failed("the judge does not await")
            for item in (yield from self.value(first.iter, scope)):
                inner = dict(scope)
                self.bind(first.target, item, inner)
                kept = True
                for condition in first.ifs:
                    if not (yield from self.value(condition, inner)):
                        kept = False
                        break
                if kept:
                    yield from loops(generators[1:], inner)

        yield from loops(node.generators, env)
        return {ast.ListComp: list, ast.GeneratorExp: list, ast.SetComp: set, ast.DictComp: dict}[type(node)](out)


def _frame(message: dict) -> bytes:
    body = msgpack.packb(message, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def _write_frame(fd: int, message: dict) -> None:
    view, sent = memoryview(_frame(message)), 0
    while sent < len(view):
        sent += os.write(fd, view[sent:])


def _read_frame(fd: int) -> dict:
    def exact(n):
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                raise EOFError("the judge closed the job pipe")
            buf += chunk
        return bytes(buf)

    (n,) = HEADER.unpack(exact(HEADER.size))
    return msgpack.unpackb(exact(n), raw=False)


def _short(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:
        return type(exc).__name__


class _Output(io.StringIO):
    """stdout of a test, kept up to ``limit`` characters."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, text):
        if self.tell() < self.limit:
            super().write(str(text)[: self.limit - self.tell()])
        return len(text)


def same_output(got: str, expected: str) -> bool:
    """Output as competitive-programming judges compare it: line by line, trailing spaces and blank lines aside."""

    def lines(text):
        out = [line.rstrip() for line in str(text).strip().splitlines()]
        return out

    return lines(got) == lines(expected)


def run_test(code: str, test: dict, limit: int, job_fd: int, frame_fd: int) -> None:
    """In the test process: run the completion's code, then feed stdin and send back stdout (an output test), or
    answer the judge's questions (an assert test).

    Output tests send ``{"stdout", "error"}``: the template compares the output itself. Assert tests send
    ``{"error"}`` if the code raised, else ``{"ran": True}``; then the template's judge, which holds the test, asks
    for the value of each expression that needs the code (``{"eval", "bind"}``: its source, and the values of the
    judge's names in it) or has it run an import (``{"exec", "bind"}``), and this process answers ``{"value"}`` (plain
    data, ``to_data``) or ``{"error"}``. Nothing here decides a verdict: the code may replace any of it."""
    frame_limit = 4 * limit + 4096

    def send(message: dict) -> None:
        body = msgpack.packb(message, use_bin_type=True)
        if len(body) > frame_limit:
            body = msgpack.packb({"error": f"a value of {len(body)} bytes; the judge takes {frame_limit}"})
        view, sent = memoryview(HEADER.pack(len(body)) + body), 0
        while sent < len(view):
            sent += os.write(frame_fd, view[sent:])

    out = _Output(limit)
    sys.stdout = sys.stderr = out
    sys.stdin = io.StringIO(test.get("stdin", ""))
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    is_assert, error = "assert" in test, ""
    try:
        exec(compile(code, "<completion>", "exec"), namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0) or is_assert:
            error = f"exited with {exc.code!r}"
    except BaseException as exc:
        error = _short(exc)
    if not is_assert:
        return send({"stdout": out.getvalue(), "error": error})
    if error:
        return send({"error": error})
    os.set_blocking(job_fd, True)  # the code may have changed it
    send({"ran": True})
    while True:
        try:
            asked = _read_frame(job_fd)
        except EOFError:
            return
        try:
            scope = {**namespace, **{k: from_data(v) for k, v in asked["bind"].items()}} if asked["bind"] else namespace
            if "exec" in asked:
                exec(compile(asked["exec"], "<test>", "exec"), scope)
                reply = {"value": None}
            else:
                reply = {"value": to_data(eval(compile(asked["eval"], "<test>", "eval"), scope))}
        except SystemExit as exc:
            reply = {"error": f"exited with {exc.code!r}"}
        except BaseException as exc:
            reply = {"error": _short(exc) or "failed"}
        send(reply)


def load(source: str, name: str, mode: str = "reward") -> tuple[object, str]:
    filename = f"<reward:{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show user lines
    code = compile(source, filename, "exec", dont_inherit=True)
    module = types.ModuleType(STATE_MODULE)
    module.__dict__["__builtins__"] = builtins
    sys.modules[STATE_MODULE] = module  # dataclasses and pickle look classes up by module name
    exec(code, module.__dict__)
    func = module.__dict__.get(name)
    if isinstance(func, type) and mode == "reward":  # an environment is a class (TRL's environment_factory)
        raise UserError(
            "MissingFunction",
            f"{name!r} is a class, and a reward is called with the completions: end the source with an instance "
            f"(`{name.lower()} = {name}(...)`, a class with __call__) and name the reward after it",
        )
    if not callable(func):
        raise UserError("MissingFunction", f"the source defines no function named {name!r}" + _defined(module, name))
    return func, filename


def _defined(module: types.ModuleType, name: str) -> str:
    """What the source does define, for a name it lacks: its functions and classes, and how to make a reward of a
    factory (a closure, as TRL's docs build rewards that take settings) or a class."""
    made = [
        n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == STATE_MODULE
    ]
    if not made:
        return ""
    first = made[0]
    return (
        f" (it defines {', '.join(made[:8])}{' and more' if len(made) > 8 else ''}): name the reward after one, or, "
        f"for a function that makes the reward (a closure) or a class, end the source with `{name} = {first}(...)`"
    )


def main(argv: list[str]) -> int:
    """Two messages before serving: ``{"locked", "isolation"}`` once locked in and before any user code has run
    (the only message the host may take at its word, and it checks that against /proc), then whether the source
    loaded."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    channel = Channel(int(argv[1]), int(argv[2]), 8 << 20)  # the config: a source of at most a few MiB
    cfg = channel.receive()
    if cfg is None:
        return 0
    channel.max_message = cfg["max_message"]
    try:
        isolation = lock_in(cfg)
    except BaseException as exc:
        channel.send(
            {
                "ok": False,
                "unavailable": True,
                "error": {
                    "kind": "SandboxUnavailable",
                    "line": None,
                    "traceback": traceback.format_exc()[-4000:],
                    "message": f"{type(exc).__name__}: {exc}"[:4000],
                },
            }
        )
        return 1
    channel.send({"locked": True, "isolation": isolation})
    if cfg.get("mode") == "tests":  # the code-test template: user code runs only in the processes it forks
        runner = TestRunner(channel, cfg, isolation["landlock_abi"] if isolation["landlock"] else 0)
        channel.send({"ok": True, "stdout": ""})
        runner.serve()
        return 0
    # From here on user code runs in this process.
    out = Capture(cfg["stdout_limit"])
    sys.stdout = sys.stderr = out
    try:
        func, filename = load(cfg["source"], cfg["name"], cfg["mode"])
    except BaseException as exc:
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        channel.send({"ok": False, "stdout": out.text(), "error": describe(exc, f"<reward:{cfg['name']}>")})
        return 1
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if "asyncio" in sys.modules:  # the source uses asyncio: asyncio.run() in a plain function needs a loop it can make
        use_pipe_event_loops()
    channel.send({"ok": True, "stdout": out.text()})
    Worker(channel, cfg, func, filename).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
