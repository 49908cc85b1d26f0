"""Every rule of the worker's confinement, each stopping an attack that no other rule stops.

`test_confinement.py` attacks the layers together. Here each attack runs three times in a fresh
interpreter, with only its own layer applied (seccomp without Landlock, Landlock without seccomp,
the resource limits alone): it must be refused; with no layer (the control) it must work; and
with its layer applied but its one rule taken away it must work again, which shows that this rule,
and no other, is what refused it. `test_every_rule_has_an_attack` keeps it so: each group of
refused system calls, each call whose arguments decide, each Landlock right and scope and each
resource limit the code applies must have an attack here (or, for what is an allowance, ordinary
work that fails without it), so a rule added without one fails the suite.

Attacks on other processes aim at a victim this module starts, never at the test's own process.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codeward.executors.local import confinement, seccomp_filter
from tests.executors.local.test_confinement import ATTACK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the layers are Linux's")

SRC = Path(confinement.__file__).resolve().parents[3]
MISSING = confinement.missing_layers() if sys.platform.startswith("linux") else {}
ABI = confinement._landlock_abi() if sys.platform.startswith("linux") else 0
#: The file size limit the attacks run under: small, so that passing it costs nothing.
FILE_BYTES = 1 << 20

SCRIPT = """
import ctypes, errno, fcntl, os, resource, socket, stat, struct, sys
from pathlib import Path
import pyseccomp as sc
from codeward.executors.local import confinement, seccomp_filter
WRITABLE, OUTSIDE, VICTIM = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(name, *args):
    number = sc.resolve_syscall(sc.Arch.NATIVE, name)
    if number < 0:
        raise NotImplementedError(f"no {{name}} here")
    result = libc.syscall(number, *args)
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, f"{{name}}: {{os.strerror(code)}}")
    return result

{setup}
{weaken}
if "rlimits" in LAYERS:
    confinement._apply_rlimits(1 << 30, {file_bytes})
if "landlock" in LAYERS:
    confinement._apply_landlock(confinement.interpreter_read_paths(), [WRITABLE])
if "seccomp" in LAYERS:
    seccomp_filter.build_filter(os.getpid()).load()
"""

#: Changes one seccomp rule: the calls in OPEN are allowed whatever their arguments, the commands
#: in COMMANDS are allowed where the filter refuses them, the calls in CLOSED are no longer allowed,
#: and with the default open every call nobody listed is allowed. The filter is built by the code
#: under test, through this subclass.
WEAKENED_FILTER = """
OPEN = {{sc.resolve_syscall(sc.Arch.NATIVE, name) for name in {names!r}}}
CLOSED = {{sc.resolve_syscall(sc.Arch.NATIVE, name) for name in {closed!r}}}
COMMANDS = {{(sc.resolve_syscall(sc.Arch.NATIVE, name), command) for name, command in {commands!r}}}
class Weakened(sc.SyscallFilter):
    def __init__(self, action):
        super().__init__(sc.ALLOW if {default_open} else action)
        self.opened = set()
    def add_rule(self, action, number, *args):
        if ({default_open} or number in CLOSED) and action == sc.ALLOW:
            return  # allowed already, as every call is; or no longer
        if number in OPEN:
            if number not in self.opened:
                super().add_rule(sc.ALLOW, number)
                self.opened.add(number)
            return
        if args and (number, args[0]._data_b) in COMMANDS:
            action = sc.ALLOW
        super().add_rule(action, number, *args)
    def load(self):
        for number in OPEN - self.opened:
            if number >= 0:
                super().add_rule(sc.ALLOW, number)
        super().load()
sc.SyscallFilter = Weakened
"""

#: Takes a filesystem right out of those the ruleset handles; a path granted nothing else is skipped.
LANDLOCK_WITHOUT = """
handled, allow = confinement._handled_fs, confinement._allow
confinement._handled_fs = lambda abi: handled(abi) & ~{right}
def _allow(ruleset, path, rights):
    try:
        allow(ruleset, path, rights)
    except OSError as exc:
        if exc.errno != errno.ENOMSG:  # a rule that grants nothing
            raise
confinement._allow = _allow
"""


@dataclass(frozen=True)
class Attack:
    """`body` does harm unless `rule` of `layer` stops it; refused, it raises `refused`."""

    name: str
    layer: str
    rule: str
    body: str
    refused: str = "PermissionError"
    #: What the control gives: "ok", or the error of a call that reached the kernel and was
    #: turned down there for its arguments (a command this machine has no device for).
    harm: str = "ok"
    setup: str = ""


def _seccomp(name: str, rule: str, body: str, **more: str) -> Attack:
    return Attack(name, "seccomp", rule, body, **more)


def _allowance(name: str, rule: str, body: str, **more: str) -> Attack:
    """Work the filter allows: without its group, the call answers ENOSYS, as one nobody listed."""
    return Attack(name, "seccomp", rule, body, refused="OSError", **more)


def _landlock(name: str, rule: str, body: str, **more: str) -> Attack:
    return Attack(name, "landlock", rule, body, **more)


def _rlimit(name: str, rule: str, body: str, **more: str) -> Attack:
    return Attack(name, "rlimits", rule, body, **more)


#: Kernel objects an attack makes that outlive it, printed so that the test removes them.
MADE = 'print("MADE", {kind!r}, {made})'
SYSV = "ident = call({call!r}, 0, {size}0o1600)\n" + MADE

ATTACKS = [
    # seccomp: the groups of calls refused by name
    _seccomp("run_a_program", "programs", 'os.execv(sys.executable, [sys.executable, "-c", "print(\'OUTCOME ok\')"])'),
    _seccomp("open_a_socket", "sockets", "socket.socket(socket.AF_INET).close()"),
    _seccomp("trace_another_process", "other processes", "call('ptrace', 0x4206, VICTIM, 0, 0)"),  # PTRACE_SEIZE
    _seccomp("new_user_namespace", "namespaces and mounts", "call('unshare', 0x10000000)"),  # CLONE_NEWUSER
    _seccomp(
        "read_the_kernel_log",
        "the kernel",
        "buffer = ctypes.create_string_buffer(4096)\ncall('syslog', 3, buffer, 4096)",  # SYSLOG_ACTION_READ_ALL
    ),
    _seccomp("userfaultfd", "kernel queues", "os.close(call('userfaultfd', os.O_CLOEXEC))"),
    _seccomp(
        "io_uring",
        "kernel queues",
        "params = ctypes.create_string_buffer(120)\nos.close(call('io_uring_setup', 8, params))",
    ),
    _seccomp(
        "a_file_by_handle",
        "files by handle",
        "handle = ctypes.create_string_buffer(8 + 128)\nstruct.pack_into('I', handle, 0, 128)\n"
        "mount = ctypes.c_int()\n"
        "call('name_to_handle_at', -100, str(OUTSIDE / 'secret.txt').encode(), handle, ctypes.byref(mount), 0)",
    ),
    _seccomp(
        "limits_by_the_old_call",
        "limits",
        "limit = (ctypes.c_ulong * 2)(*resource.getrlimit(resource.RLIMIT_NOFILE))\n"
        "call('setrlimit', resource.RLIMIT_NOFILE, limit)",
    ),
    _seccomp("memfd", "memory outside RLIMIT_DATA", 'os.close(os.memfd_create("held"))'),
    _seccomp(
        "sysv_shared_memory",
        "memory outside RLIMIT_DATA",
        SYSV.format(call="shmget", size="1 << 20, ", kind="shm", made="ident"),
    ),
    _seccomp(
        "sysv_message_queue",
        "SysV messages and semaphores",
        SYSV.format(call="msgget", size="", kind="msg", made="ident"),
    ),
    _seccomp(
        "a_landlock_ruleset",
        "the other layers",
        "attr = struct.pack('QQQ', 1, 0, 0)\nos.close(call('landlock_create_ruleset', attr, 8, 0))",
    ),
    _seccomp("chmod_outside", "modes, owners, times and links", 'os.chmod(OUTSIDE / "secret.txt", 0o666)'),
    _seccomp("link_outside", "modes, owners, times and links", 'os.link(OUTSIDE / "secret.txt", WRITABLE / "x")'),
    _seccomp(
        "extended_attribute",
        "extended attributes",
        'f = WRITABLE / "f"\nf.write_text("x")\nos.setxattr(f, "user.codeward", b"1")',
    ),
    _seccomp(
        "lock_a_readable_file",
        "locks",
        "with open(os.__file__) as f:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
    ),
    # seccomp: the calls whose arguments decide
    _seccomp("fork", "clone", "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)"),
    _seccomp("signal_another_process", "signals to the worker only", "os.kill(VICTIM, 0)"),
    _seccomp(
        "schedule_another_process",
        "scheduling of the worker only",
        "os.sched_setaffinity(VICTIM, os.sched_getaffinity(VICTIM))",
    ),
    _seccomp(
        "renice_another_process",
        "setpriority",
        "os.setpriority(os.PRIO_PROCESS, VICTIM, os.getpriority(os.PRIO_PROCESS, VICTIM))",
    ),
    _seccomp("io_priority_of_another_process", "ioprio_set", "call('ioprio_set', 1, VICTIM, (2 << 13) | 4)"),
    _seccomp("shared_anonymous_memory", "mmap", "import mmap\nmmap.mmap(-1, 1 << 20).close()"),
    _seccomp(
        "the_kernel_signals_another_process",
        "fcntl F_SETOWN",
        "r, w = os.pipe()\nfcntl.fcntl(r, fcntl.F_SETOWN, VICTIM)",
    ),
    _seccomp("the_kernel_picks_the_signal", "fcntl F_SETSIG", "r, w = os.pipe()\nfcntl.fcntl(r, 10, 9)"),
    _seccomp(
        "the_kernel_signals_another_process_ex",
        "fcntl F_SETOWN_EX",
        "r, w = os.pipe()\nfcntl.fcntl(r, 15, struct.pack('ii', 1, VICTIM))",
    ),
    _seccomp(
        "type_into_a_terminal",
        "ioctl TIOCSTI",
        "import termios\nfcntl.ioctl(TERMINAL, termios.TIOCSTI, b'x')",
        setup="_, TERMINAL = os.openpty()",
    ),
    _seccomp(
        "the_console",
        "ioctl TIOCLINUX",
        "fcntl.ioctl(TERMINAL, 0x541C, b'\\x0b')",
        setup="_, TERMINAL = os.openpty()",
        harm="OSError",
    ),
    _seccomp("outlive_the_host", "prctl PR_SET_PDEATHSIG", "call('prctl', 1, 0, 0, 0, 0)"),
    _seccomp("dumpable", "prctl PR_SET_DUMPABLE", "call('prctl', 4, 1, 0, 0, 0)"),
    _seccomp("seccomp_by_prctl", "prctl PR_SET_SECCOMP", "call('prctl', 22, 0, 0, 0, 0)", harm="OSError"),
    _seccomp("capability_bounding_set", "prctl PR_CAPBSET_DROP", "call('prctl', 24, 27, 0, 0, 0)"),
    _seccomp("no_new_privs_again", "prctl PR_SET_NO_NEW_PRIVS", "call('prctl', 38, 1, 0, 0, 0)"),
    _seccomp("child_subreaper", "prctl PR_SET_CHILD_SUBREAPER", "call('prctl', 36, 1, 0, 0, 0)"),
    _seccomp(
        "memory_map_fields",
        "prctl PR_SET_MM",
        "size = ctypes.c_uint()\ncall('prctl', 35, 14, ctypes.byref(size), 0, 0)",  # PR_SET_MM_MAP_SIZE
        harm="OSError",
    ),
    _seccomp(
        "lower_another_process_limits",
        "prlimit64",
        "resource.prlimit(VICTIM, resource.RLIMIT_NOFILE, (20, 20))",
    ),
    _seccomp(
        "clone3",
        "unlisted",
        "clone_args = (ctypes.c_uint64 * 11)()\nclone_args[4] = 17\n"  # exit_signal SIGCHLD
        "pid = call('clone3', clone_args, ctypes.sizeof(clone_args))\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)",
        refused="OSError",
    ),
    # Landlock, without seccomp: each right the ruleset handles, each scope
    _landlock(
        "execute",
        "execute",
        "import subprocess\nsubprocess.run([sys.executable, '-I', '-S', '-c', 'pass'], check=True)",
    ),
    _landlock("write_a_file", "write_file", 'open(OUTSIDE / "secret.txt", "a").close()'),
    _landlock("read_a_file", "read_file", 'open(OUTSIDE / "secret.txt").read()'),
    _landlock("read_a_folder", "read_dir", "os.listdir(OUTSIDE)"),
    _landlock("remove_a_folder", "remove_dir", 'os.rmdir(OUTSIDE / "empty")'),
    _landlock("remove_a_file", "remove_file", 'os.unlink(OUTSIDE / "secret.txt")'),
    _landlock("make_a_char_device", "make_char", 'os.mknod(OUTSIDE / "c", stat.S_IFCHR | 0o600, os.makedev(1, 3))'),
    _landlock("make_a_folder", "make_dir", 'os.mkdir(OUTSIDE / "d")'),
    _landlock("make_a_file", "make_reg", 'os.mknod(OUTSIDE / "new")'),
    _landlock(
        "make_a_socket",
        "make_sock",
        'with socket.socket(socket.AF_UNIX) as s:\n    s.bind(str(OUTSIDE / "s"))',
    ),
    _landlock("make_a_fifo", "make_fifo", 'os.mkfifo(OUTSIDE / "f")'),
    _landlock("make_a_block_device", "make_block", 'os.mknod(OUTSIDE / "b", stat.S_IFBLK | 0o600, os.makedev(7, 0))'),
    _landlock("make_a_symlink", "make_sym", 'os.symlink("x", OUTSIDE / "l")'),
    _landlock("truncate_a_file", "truncate", 'os.truncate(OUTSIDE / "secret.txt", 0)'),
    _landlock(
        "a_device_ioctl",
        "ioctl_dev",
        "with open('/dev/urandom', 'rb') as f:\n    fcntl.ioctl(f, 0x80045200, b'\\0' * 4)",  # RNDGETENTCNT
    ),
    _landlock(
        "bind_a_port",
        "bind_tcp",
        "with socket.socket() as s:\n    s.bind(('127.0.0.1', 0))",
    ),
    _landlock(
        "connect_to_a_port",
        "connect_tcp",
        "socket.create_connection(LISTENER.getsockname(), timeout=5).close()",
        setup="LISTENER = socket.create_server(('127.0.0.1', 0))",
    ),
    _landlock(
        "abstract_unix_socket",
        "abstract_unix_socket",
        "with socket.socket(socket.AF_UNIX) as s:\n    s.connect(ABSTRACT)",
        setup="ABSTRACT = f'\\0codeward-walls-{os.getpid()}'\n"
        "LISTENER = socket.socket(socket.AF_UNIX)\nLISTENER.bind(ABSTRACT)\nLISTENER.listen()",
    ),
    _landlock("signal_another_process", "signal", "os.kill(VICTIM, 0)"),
    # the resource limits alone
    _rlimit("three_gigabytes", "RLIMIT_DATA", '(0).to_bytes(3_000_000_000, "big")', refused="MemoryError"),
    _rlimit(
        "a_large_file",
        "RLIMIT_FSIZE",
        f'with open(WRITABLE / "big", "wb") as f:\n    f.write(bytes({2 * FILE_BYTES}))',
        refused="OSError",
    ),
    _rlimit(
        "many_open_files",
        "RLIMIT_NOFILE",
        "held = [os.open('/dev/null', os.O_RDONLY) for _ in range(1000)]",
        refused="OSError",
    ),
    _rlimit(
        "a_core_dump",
        "RLIMIT_CORE",
        "pid = os.fork()\nif pid == 0:\n    os.abort()\ndumped = os.WCOREDUMP(os.waitpid(pid, 0)[1])\n"
        "for core in WRITABLE.glob('core*'):\n    core.unlink()\nif not dumped:\n    raise ValueError('no core dumped')",
        refused="ValueError",
        setup="resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2)",
    ),
]

#: Ordinary work that an allowance makes possible: taken away, the work fails (or the process
#: cannot even say how it ended, for the descriptors its output goes through).
WORK = [
    _allowance(
        "resize_a_mapping", "allows memory", "MAPPING.resize(8192)", setup="import mmap\nMAPPING = mmap.mmap(-1, 4096)"
    ),
    _allowance("the_processors_it_may_use", "allows threads", "os.sched_getaffinity(0)"),
    _allowance(
        "handle_a_signal",
        "allows signals",
        "signal.signal(signal.SIGUSR1, lambda *_: None)\nos.kill(os.getpid(), signal.SIGUSR1)",
        setup="import signal",
    ),
    _allowance("sleep", "allows time", "time.sleep(0.001)", setup="import time"),
    _allowance("the_machine_s_name", "allows who and where", "os.uname()"),
    _allowance("a_pipe", "allows descriptors", "r, w = os.pipe()\nos.write(w, b'x')\nassert os.read(r, 1) == b'x'"),
    _allowance(
        "talk_to_the_host",
        "allows the channel",
        "CHANNEL[0].send(b'x')\nassert CHANNEL[1].recv(1) == b'x'",
        setup="CHANNEL = socket.socketpair()",
    ),
    _allowance("a_file_of_its_own", "allows paths", '(WRITABLE / "own").write_text("x")'),
    _landlock(
        "move_a_file_between_own_folders",
        "refer",
        '(WRITABLE / "a").mkdir(exist_ok=True)\n(WRITABLE / "b").mkdir(exist_ok=True)\n(WRITABLE / "a" / "f").write_text("x")\n'
        'os.rename(WRITABLE / "a" / "f", WRITABLE / "b" / "f")',
        refused="OSError",  # EXDEV: as on a kernel whose Landlock cannot tell a move within the folder
    ),
]

LANDLOCK_RIGHTS = {
    "execute": confinement.EXECUTE,
    "write_file": confinement.WRITE_FILE,
    "read_file": confinement.READ_FILE,
    "read_dir": confinement.READ_DIR,
    "remove_dir": confinement.REMOVE_DIR,
    "remove_file": confinement.REMOVE_FILE,
    "make_char": 1 << 6,
    "make_dir": confinement.MAKE_DIR,
    "make_reg": confinement.MAKE_REG,
    "make_sock": 1 << 9,
    "make_fifo": 1 << 10,
    "make_block": 1 << 11,
    "make_sym": 1 << 12,
    "refer": confinement.REFER,
    "truncate": confinement.TRUNCATE,
    "ioctl_dev": confinement.IOCTL_DEV,
}
#: Network rights (ABI 4) and scopes (ABI 6), by the ruleset field that handles them.
LANDLOCK_NET = {"bind_tcp": 1, "connect_tcp": 2}
LANDLOCK_SCOPES = {"abstract_unix_socket": 1, "signal": 2}
LIMITS = ("RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")


#: The calls a process needs to end: never taken away, or taking a group away would hang the test.
ENDING = ("exit", "exit_group")


def _seccomp_rules() -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, int], ...]]]:
    """Each rule of the filter, with the calls and the commands taking it away opens (or closes,
    for an allowance)."""
    rules: dict[str, tuple[tuple[str, ...], tuple[tuple[str, int], ...]]] = {
        group: (names, ()) for group, names in seccomp_filter.REFUSED.items()
    }
    rules |= {
        f"allows {group}": (tuple(name for name in names if name not in ENDING), ())
        for group, names in seccomp_filter.ALLOWED.items()
    }
    rules["clone"] = (("clone",), ())
    rules["signals to the worker only"] = (seccomp_filter.SELF_ONLY, ())
    rules["scheduling of the worker only"] = (seccomp_filter.SELF_AS_ZERO, ())
    rules |= {name: ((name,), ()) for name in ("setpriority", "ioprio_set", "mmap", "prlimit64")}
    names = {"fcntl": ("F_SETOWN", "F_SETSIG", "F_SETOWN_EX"), "ioctl": ("TIOCSTI", "TIOCLINUX")}
    names["prctl"] = ("PR_SET_PDEATHSIG", "PR_SET_DUMPABLE", "PR_SET_SECCOMP", "PR_CAPBSET_DROP")
    names["prctl"] += ("PR_SET_NO_NEW_PRIVS", "PR_SET_CHILD_SUBREAPER", "PR_SET_MM")
    for call, commands in seccomp_filter.DANGEROUS_COMMANDS.items():
        assert len(commands) == len(names[call]), f"name the new {call} command the filter refuses"
        for command, name in zip(commands, names[call], strict=True):
            rules[f"{call} {name}"] = ((), ((call, command),))
    rules["unlisted"] = ((), ())
    return rules


SECCOMP_RULES = _seccomp_rules()


def _applied_landlock_rules() -> set[str]:
    """The rights and scopes the ruleset handles on this kernel."""
    handled = confinement._handled_fs(ABI) if ABI > 0 else 0
    rules = {name for name, right in LANDLOCK_RIGHTS.items() if handled & right}
    if ABI >= 4:
        rules |= set(LANDLOCK_NET)
    if ABI >= 6:
        rules |= set(LANDLOCK_SCOPES)
    return rules


def _weaken(attack: Attack) -> str:
    """Code that takes the attack's rule, and only it, out of its layer before the layer applies."""
    if attack.layer == "seccomp":
        names, commands = SECCOMP_RULES[attack.rule]
        closed = names if attack.rule.startswith("allows ") else ()
        opened = () if closed else names
        return WEAKENED_FILTER.format(
            names=opened, closed=closed, commands=commands, default_open=attack.rule == "unlisted"
        )
    if attack.layer == "landlock":
        if attack.rule in LANDLOCK_NET:
            return f"confinement._NET_TCP &= ~{LANDLOCK_NET[attack.rule]}"
        if attack.rule in LANDLOCK_SCOPES:
            return f"confinement._SCOPES &= ~{LANDLOCK_SCOPES[attack.rule]}"
        return LANDLOCK_WITHOUT.format(right=LANDLOCK_RIGHTS[attack.rule])
    return (
        "set_limit = resource.setrlimit\n"
        f"resource.setrlimit = lambda which, value: None if which == resource.{attack.rule} else set_limit(which, value)"
    )


@pytest.fixture(scope="module")
def victim() -> Iterator[int]:
    """A process of the test's own that attacks on other processes aim at."""
    process = subprocess.Popen(["sleep", "600"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def run(tmp_path: Path, victim: int, attack: Attack, *, layers: tuple[str, ...], weakened: bool = False) -> str:
    """The attack's outcome in a fresh interpreter with only `layers` applied: "ok", or the error's name."""
    writable, outside = tmp_path / "writable", tmp_path / "outside"
    for folder in (writable, outside, outside / "empty"):
        folder.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("secret")
    setup = f"LAYERS = {layers!r}\n{attack.setup}"
    code = (SCRIPT + ATTACK).format(
        setup=setup,
        weaken=_weaken(attack) if weakened else "",
        file_bytes=FILE_BYTES,
        body=textwrap.indent(attack.body, "    "),
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", code, str(writable), str(outside), str(victim)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=writable,
    )
    _remove_made(done.stdout)
    lines = [line.split() for line in done.stdout.splitlines() if line.startswith("OUTCOME")]
    return " ".join(lines[-1][1:]) if lines else f"nothing said: {done.stdout[-500:]}{done.stderr[-1500:]}"


def _remove_made(stdout: str) -> None:
    """Remove the SysV objects an attack made: they would outlive it on the machine."""
    libc = ctypes.CDLL(None, use_errno=True)
    for line in stdout.splitlines():
        if line.startswith("MADE "):
            _, kind, ident = line.split()
            {"shm": libc.shmctl, "msg": libc.msgctl}[kind](int(ident), 0, None)  # IPC_RMID


def _needs(layer: str) -> None:
    if layer in MISSING:
        pytest.skip(f"this machine cannot apply {layer}: {MISSING[layer]}")


def _outcome(text: str) -> str:
    return text.split()[0]


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_the_attack_does_harm_without_confinement(tmp_path: Path, victim: int, attack: Attack) -> None:
    if attack.rule == "limits" and "setrlimit" not in _known_calls():
        pytest.skip("this architecture has no setrlimit call: glibc uses prlimit64")
    assert _outcome(run(tmp_path, victim, attack, layers=())) == attack.harm


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_its_layer_alone_refuses_the_attack(tmp_path: Path, victim: int, attack: Attack) -> None:
    _needs(attack.layer)
    _needs_rule(attack)
    outcome = run(tmp_path, victim, attack, layers=(attack.layer,))
    assert _outcome(outcome) == attack.refused, outcome


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_without_its_rule_the_layer_lets_the_attack_through(tmp_path: Path, victim: int, attack: Attack) -> None:
    _needs(attack.layer)
    _needs_rule(attack)
    outcome = run(tmp_path, victim, attack, layers=(attack.layer,), weakened=True)
    assert _outcome(outcome) == attack.harm, outcome


@pytest.mark.parametrize("work", WORK, ids=[work.name for work in WORK])
def test_ordinary_work_needs_its_allowance(tmp_path: Path, victim: int, work: Attack) -> None:
    _needs(work.layer)
    _needs_rule(work)
    assert run(tmp_path, victim, work, layers=(work.layer,)) == "ok"
    without = run(tmp_path, victim, work, layers=(work.layer,), weakened=True)
    assert _outcome(without) in (work.refused, "nothing"), without


def test_every_rule_has_an_attack() -> None:
    """A rule added to a layer without an attack that it alone stops fails here, by name."""
    covered = {(attack.layer, attack.rule) for attack in ATTACKS + WORK}
    rules = {("seccomp", rule) for rule in SECCOMP_RULES}
    rules |= {("landlock", rule) for rule in _applied_landlock_rules()}
    rules |= {("rlimits", limit) for limit in LIMITS}
    assert not rules - covered, f"rules no attack here exercises: {sorted(rules - covered)}"
    assert not covered - rules - _not_applied_here(), f"attacks on rules the layers lack: {sorted(covered - rules)}"


def test_the_limits_named_are_the_limits_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    applied: list[int] = []
    monkeypatch.setattr(resource, "setrlimit", lambda which, value: applied.append(which))
    confinement._apply_rlimits(1 << 30, FILE_BYTES)
    assert sorted(applied) == sorted(getattr(resource, name) for name in LIMITS)


def _not_applied_here() -> set[tuple[str, str]]:
    """Landlock rights this kernel's ABI does not know, whose attacks skip."""
    every = set(LANDLOCK_RIGHTS) | set(LANDLOCK_NET) | set(LANDLOCK_SCOPES)
    return {("landlock", name) for name in every - _applied_landlock_rules()}


def _needs_rule(attack: Attack) -> None:
    if (attack.layer, attack.rule) in _not_applied_here():
        pytest.skip(f"this kernel's Landlock (ABI {ABI}) has no {attack.rule} right")
    if attack.rule == "limits" and "setrlimit" not in _known_calls():
        pytest.skip("this architecture has no setrlimit call: glibc uses prlimit64")


def _known_calls() -> set[str]:
    import pyseccomp as sc

    return {name for name in ("setrlimit",) if sc.resolve_syscall(sc.Arch.NATIVE, name) >= 0}
