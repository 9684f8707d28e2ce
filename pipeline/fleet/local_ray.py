"""flopwatch's own local Ray head, kept between commands so that the next one attaches to it
instead of starting Ray again.

Starting a local Ray took ~10 s of a command on a 2-core machine and attaching to a running one
well under a second (docs/benchmarks.md, "Driver start-up"). So the first command without a
cluster address starts a small server process (`serve` below) that owns a local Ray head, and
later commands of the same user attach to it; it stops Ray and exits once no command has been
attached for `idle_s` seconds. `--no-ray-reuse` (or FLOPWATCH_RAY_REUSE=0) gives a command a
private local Ray instead, stopped when it ends. Before its `ray.init` the head starts its slots'
warm runners (`workers.job.seed`), so that their imports run beside Ray's start instead of after
it; FLOPWATCH_RUNNER_SEEDS=0 in its environment starts none (`plant_seeds`). It probes the node's
toolchains into their disk cache beside Ray's start too (`probe_toolchains_ahead`).

What keeps a stale or foreign head from being used:
- Its folder is <base>/<key>, the key a hash of the user id, the Python interpreter, the Ray
  version, the source of flopwatch's driver and node code, and --num-gpus. A head started by
  other code, another interpreter or other GPU settings is never found; after a code change
  the next command starts a new head and the old one idles out.
- The base and the folder must be directories owned by this user, not symlinks, with no
  access for group or others; anything else is refused with a one-line error.
- The record of a head (head.json) is believed only while its process is alive and is this
  module's `serve` for the same key.
- The head runs with Ray's token authentication, with a random token of its own in
  <folder>/token (mode 600): a driver can attach only by reading that file. Ray 2.60 has no
  setting that keeps its ports on the loopback interface, so the token is what keeps other
  users and machines out. A private local Ray (`--no-ray-reuse`) gets the same: a fresh token
  in a folder of its own under the base (`private_token_folder`), token mode on before its
  `ray.init` whatever RAY_AUTH_MODE the shell has; a Ray that cannot enforce a token is refused
  (`require_token_auth`).

Who is attached is told by file locks, which the kernel drops when a process dies, however it
dies: every attached command holds a shared lock on <folder>/in-use, and the head counts as idle
while it can take an exclusive one. A command checks for a head and starts one under
<folder>/start.lock, so two commands started together start one head between them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.fleet import nvidia_driver
from pipeline.fleet.code_key import code_digest, own_digest  # noqa: F401 (code_digest: read here by tests)
from pipeline.fleet.ray_access import ClusterError, parse_address, tcp_problem
from pipeline.fleet.slot_resources import CPU_RESOURCE, GPU_RESOURCE
from workers.core.process_age import process_age_s
from workers.job.runner import SECRET_VARIABLES, child_env
from workers.job.runner_process import ENV_SOCKET

DEFAULT_IDLE_S = 600.0
# Ray's own start waits up to 120 s for its GCS on a slow machine; the head needs a little more.
START_TIMEOUT_S = 180.0
# How often the head looks for attached commands and checks that its Ray still answers.
POLL_S = 1.0
HEALTH_EVERY_S = 10.0
MODULE = "pipeline.fleet.local_ray"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]
RECORD, TOKEN, IN_USE, START_LOCK, LOG = "head.json", "token", "in-use", "start.lock", "head.log"
STARTING = "starting.json"  # {"pid", "key"} of a head started ahead of its command, until its record is written
# Ray's temp dir, a sub-folder: Ray makes its temp dir world-writable (mode 777), and inside the
# head's folder (700) that opens nothing.
RAY_TEMP = "r"
PRESTART_VARIABLE = "RAY_prestart_worker_first_driver"  # Ray's own setting, read from the environment


@dataclass(frozen=True)
class HeadRecord:
    """What a running head wrote about itself once its Ray was up."""

    key: str
    pid: int
    address: str  # host:port of the head's GCS
    idle_s: float
    started_at: float  # epoch seconds
    resources: dict
    # Where the head's own start went, in seconds: "python" (interpreter and imports),
    # "resources" (what to advertise), "ray_init" (Ray's processes up), and how many runner
    # "seeds" it started before Ray and "slots" it began readying for the first command;
    # "launched_at", the epoch its process started.
    startup: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> HeadRecord | None:
        try:
            data = json.loads(text)
            return HeadRecord(key=str(data["key"]), pid=int(data["pid"]), address=str(data["address"]),
                              idle_s=float(data["idle_s"]), started_at=float(data["started_at"]),
                              resources=dict(data["resources"]), startup=dict(data.get("startup") or {}))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Lease:
    """This command's hold on a head: while `in_use` is open (with its shared lock), the head
    does not count as idle."""

    folder: Path
    record: HeadRecord
    started: bool  # True when this command started the head
    in_use: object  # the open file that carries the shared lock
    ahead: bool = False  # started before the command's imports (`start_ahead`)

    @property
    def token_path(self) -> Path:
        return self.folder / TOKEN

    def release(self) -> None:
        self.in_use.close()


def base_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the heads' folders live: $FLOPWATCH_LOCAL_RAY_DIR, else $XDG_RUNTIME_DIR/flopwatch,
    else /tmp/flopwatch-<uid>. Short on purpose: Ray's socket paths under it must stay within
    the 107 bytes of a Unix socket name."""
    env = os.environ if env is None else env
    if env.get("FLOPWATCH_LOCAL_RAY_DIR"):
        return Path(env["FLOPWATCH_LOCAL_RAY_DIR"])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "flopwatch"
    return Path("/tmp") / f"flopwatch-{os.getuid()}"


def folder_problem(mode: int, owner: int, uid: int) -> str | None:
    """Why a folder with this lstat mode and owner must not hold a head of user `uid`."""
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(mode):
        return "is not a directory"
    if owner != uid:
        return f"belongs to uid {owner}, not to this user ({uid})"
    if mode & 0o077:
        return f"is open to group or others (mode {stat.S_IMODE(mode):03o}, needs 700)"
    return None


def private_folder(path: Path) -> Path:
    """`path` as a directory only this user can enter, created if missing; ClusterError if it
    exists and is anything else."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ClusterError(f"cannot create {path} for flopwatch's local Ray: {exc.strerror}") from None
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise ClusterError(f"cannot use {path} for flopwatch's local Ray: {exc.strerror}") from None
    problem = folder_problem(st.st_mode, st.st_uid, os.getuid())
    if problem:
        raise ClusterError(f"refusing to use {path} for flopwatch's local Ray: it {problem}; remove it, set "
                           f"FLOPWATCH_LOCAL_RAY_DIR to a folder of your own, or run with --no-ray-reuse (a private "
                           f"Ray of the command's own, in a fresh folder)")
    return path


def head_key(num_gpus: int | None, *, uid: int | None = None, python: str = sys.executable,
             ray_version: str | None = None, code: str | None = None) -> str:
    """The folder name of the head that suits this command (see the module docstring)."""
    if ray_version is None:
        ray_version = installed_ray_version()
    parts = [os.getuid() if uid is None else uid, python, ray_version, code or own_digest(), num_gpus]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12]


def kept_settings(env: Mapping[str, str] | None = None) -> tuple[bool, float]:
    """Whether to use flopwatch's kept local Ray (FLOPWATCH_RAY_REUSE, default on) and after how
    many idle seconds it stops (FLOPWATCH_RAY_IDLE_S, default 600). ValueError, in one line,
    for a setting that is neither."""
    env = os.environ if env is None else env
    reuse = env.get("FLOPWATCH_RAY_REUSE", "1").strip().lower()
    if reuse not in ("0", "1", "no", "yes", "false", "true", "off", "on"):
        raise ValueError(f"FLOPWATCH_RAY_REUSE={env['FLOPWATCH_RAY_REUSE']!r}: use 1 or 0")
    text = env.get("FLOPWATCH_RAY_IDLE_S", "").strip()
    try:
        idle_s = float(text) if text else DEFAULT_IDLE_S
    except ValueError:
        idle_s = -1.0
    if not idle_s > 0:
        raise ValueError(f"FLOPWATCH_RAY_IDLE_S={text!r}: give the idle seconds after which flopwatch's local "
                         f"Ray stops, e.g. 600")
    return reuse in ("1", "yes", "true", "on"), idle_s


def installed_ray_version() -> str:
    """Ray's version without importing Ray (0.3-0.8 s): a head can be started before the
    command's own imports (`pipeline.fleet.head_ahead`); the same answer for every caller."""
    try:
        return importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        import ray

        return ray.__version__


def serve_command(folder: Path, key: str, num_gpus: int | None, idle_s: float,
                  python: str = sys.executable) -> list[str]:
    """The command line of a head's server process."""
    argv = [python, "-m", MODULE, "serve", "--folder", str(folder), "--key", key, "--idle-s", f"{idle_s:g}"]
    return argv + (["--num-gpus", str(num_gpus)] if num_gpus is not None else [])


def head_env(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """The server's environment: token authentication with the head's own token file only, no
    cluster address to wander off to, no CI token for its workers to inherit, and flopwatch
    importable."""
    dropped = ("RAY_ADDRESS", "FLOPWATCH_RAY_ADDRESS", *SECRET_VARIABLES)  # SECRET_VARIABLES has RAY_AUTH_TOKEN
    out = {k: v for k, v in env.items() if k not in dropped}
    out["RAY_AUTH_MODE"] = "token"
    out["RAY_AUTH_TOKEN_PATH"] = str(folder / TOKEN)
    out.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Ray starts one idle worker per core when the first driver (the head's own) registers: 64
    # Python processes on a 64-core node, importing Ray right beside the slots that start then
    # and import torch, for builds that have not been asked for. The slots' actors, the builds
    # and the probes start the workers they need (docs/benchmarks.md, "A fresh node's first
    # command": 1.1-1.2 s less before the first job on 4x H100).
    out.setdefault(PRESTART_VARIABLE, "0")
    out["PYTHONPATH"] = str(PACKAGE_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return out


def read_record(folder: Path) -> HeadRecord | None:
    try:
        return HeadRecord.from_json((folder / RECORD).read_text())
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def is_serving(record: HeadRecord) -> bool:
    """Whether the record's process is alive and is `serve` of the record's key (not a
    process that took over the pid after the head died)."""
    return _is_server(record.pid, record.key)


def _is_server(pid: int, key: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MODULE.encode() in argv and b"serve" in argv and key.encode() in argv


def fresh_token(folder: Path) -> Path:
    """A new random token in `folder`/token, mode 600: one that leaked from an earlier Ray
    opens nothing now."""
    path = folder / TOKEN
    _write_private(path, secrets.token_hex(32))
    return path


def private_token_folder(base: Path | None = None) -> Path:
    """A new folder (mode 700) under the heads' base holding a fresh token, for a private local
    Ray of one command; the caller removes it when that Ray stops. Not Ray's default token file:
    Ray writes ~/.ray/auth_token with the user's umask (644 seen), readable by other users
    wherever the home is traversable."""
    try:
        parent = private_folder(base or base_dir())
    except ClusterError:
        if base is not None or os.environ.get("FLOPWATCH_LOCAL_RAY_DIR"):
            raise  # a folder the caller chose: theirs to fix
        # The default folder has a name anyone can take first (/tmp/flopwatch-<uid>): a Ray of
        # one command needs no name a later command finds, so it goes to a fresh folder instead.
        parent = None
    # A name no longer than a kept head's folder (12 characters): Ray's socket paths below it
    # must stay within the 107 bytes of a Unix socket name.
    folder = Path(tempfile.mkdtemp(prefix="p" if parent else "flopwatch-p", dir=parent))
    fresh_token(folder)
    return folder


def require_token_auth() -> None:
    """ClusterError, in one line, where the installed Ray cannot enforce a token (before 2.52):
    a local Ray started there would take any process that reaches its ports, from any machine."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # noqa: F401 — what token mode needs
    except ImportError:
        raise ClusterError(f"Ray {installed_ray_version()} has no token authentication, and a local Ray without "
                           f"it takes work from any machine that reaches its ports; install ray>=2.52 (pip install "
                           f"'ray>=2.52'), or join a cluster of your own with --ray-address") from None


def _write_private(path: Path, text: str) -> None:
    """Replace `path` atomically with a file of mode 600."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, how)
        yield


# --- the driver's side -------------------------------------------------------------------

_children: list[subprocess.Popen] = []  # started heads, kept referenced: they outlive this command


def acquire(num_gpus: int | None, idle_s: float = DEFAULT_IDLE_S, base: Path | None = None,
            announce: Callable[[str], None] = lambda line: None) -> Lease:
    """Attach to the head that suits this command, or start it; hold it until `release`."""
    key = head_key(num_gpus)
    folder = private_folder(private_folder(base or base_dir()) / key)
    in_use = open(folder / IN_USE, "a")  # noqa: SIM115 (held for the whole command)
    try:
        with _locked(folder / START_LOCK, fcntl.LOCK_EX):
            fcntl.flock(in_use, fcntl.LOCK_SH)
            record = read_record(folder)
            if record is not None and record.key == key and is_serving(record):
                return Lease(folder, record, False, in_use)
            if record is not None:
                announce(f"flopwatch's local Ray of pid {record.pid} is gone; starting a new one")
                (folder / RECORD).unlink(missing_ok=True)
            ahead = _starting(folder, key)
            if ahead is not None:  # started ahead of this command's imports (`start_ahead`)
                return Lease(folder, _wait_for_record(folder, ahead), True, in_use, ahead=True)
            return Lease(folder, _start(folder, key, num_gpus, idle_s), True, in_use)
    except BaseException:
        in_use.close()
        raise


def start_ahead(num_gpus: int | None, idle_s: float = DEFAULT_IDLE_S, base: Path | None = None) -> bool:
    """Start the head that `acquire` will attach to, without waiting for it: on a fresh machine
    the head's start (its interpreter, then `ray.init`, 4-5 s) is the first step of the path to
    the first job, and the command's own start (its imports: 1.4 s on a 4-GPU node) need not
    come before it (`pipeline.fleet.head_ahead`). `acquire` then waits for this head's record
    as for one it started itself. False, and nothing started, when a head is serving or being
    started already."""
    key = head_key(num_gpus)
    folder = private_folder(private_folder(base or base_dir()) / key)
    with _locked(folder / START_LOCK, fcntl.LOCK_EX):
        record = read_record(folder)
        if (record is not None and record.key == key and is_serving(record)) or _starting(folder, key) is not None:
            return False
        proc = _spawn(folder, key, num_gpus, idle_s)
        _write_private(folder / STARTING, json.dumps({"pid": proc.pid, "key": key}))
        return True


def _starting(folder: Path, key: str) -> int | None:
    """The pid of a head of `key` started ahead and not yet recorded, if it is still starting;
    a note of one that is gone is removed."""
    try:
        note = json.loads((folder / STARTING).read_text())
        pid = int(note["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if note.get("key") == key and _is_server(pid, key):
        return pid
    (folder / STARTING).unlink(missing_ok=True)
    return None


def serving_head(num_gpus: int | None, base: Path | None = None) -> HeadRecord | None:
    """The head `acquire` would attach to, when it is up; None when `acquire` would start one.
    Only reads: nothing is created, locked or started."""
    key = head_key(num_gpus)
    record = read_record((base or base_dir()) / key)
    return record if record is not None and record.key == key and is_serving(record) else None


def _start(folder: Path, key: str, num_gpus: int | None, idle_s: float) -> HeadRecord:
    return _wait_for_record(folder, _spawn(folder, key, num_gpus, idle_s).pid)


def _spawn(folder: Path, key: str, num_gpus: int | None, idle_s: float) -> subprocess.Popen:
    with open(folder / LOG, "ab") as log:
        proc = subprocess.Popen(serve_command(folder, key, num_gpus, idle_s), env=head_env(os.environ, folder),
                                cwd=folder, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)  # not in the command's process group: outlives it
    _children.append(proc)
    return proc


def _wait_for_record(folder: Path, pid: int) -> HeadRecord:
    """The record of the head of process `pid` once its Ray is up; ClusterError (with the last
    line of its log) when it ends first or takes longer than START_TIMEOUT_S."""
    proc = next((c for c in _children if c.pid == pid), None)  # ours: its exit status can be read
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        record = read_record(folder)
        if record is not None and record.pid == pid:
            (folder / STARTING).unlink(missing_ok=True)
            return record
        ended = proc.poll() is not None if proc is not None else not Path(f"/proc/{pid}").exists()
        if ended:
            (folder / STARTING).unlink(missing_ok=True)
            code = f"exit {proc.returncode}" if proc is not None else "it ended"
            raise ClusterError(f"flopwatch's local Ray did not start ({code}): "
                               f"{_last_line(folder / LOG)} (log: {folder / LOG})")
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            raise ClusterError(f"flopwatch's local Ray did not start within {START_TIMEOUT_S:g} s "
                               f"(log: {folder / LOG})")
        time.sleep(0.05)


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"


def use_head_token(token_path: Path) -> dict[str, str | None]:
    """Make this process's Ray use the head's token file and nothing else; returns the
    variables' previous values for `restore_auth`."""
    wanted = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_path), "RAY_AUTH_TOKEN": None}
    previous = {name: os.environ.get(name) for name in wanted}
    _set_env(wanted)
    return previous


def restore_auth(previous: Mapping[str, str | None]) -> None:
    _set_env(previous)


def _set_env(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    # Ray reads RAY_AUTH_MODE into its config once, when `ray` is imported, and caches the
    # token it loaded; ray.init refreshes both the same way when it turns token mode on for a
    # new local cluster (ray/_private/authentication/authentication_token_setup.py, Ray 2.52+).
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def heads(base: Path | None = None) -> list[tuple[Path, HeadRecord]]:
    """The heads of this user under `base` whose server is running."""
    root = base or base_dir()
    if not root.is_dir():
        return []
    private_folder(root)
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        record = read_record(folder)
        if record is not None and is_serving(record):
            found.append((folder, record))
    return found


def attached(folder: Path) -> bool:
    """Whether some command holds the head in `folder` right now."""
    with open(folder / IN_USE, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


# --- the head's side -----------------------------------------------------------------------


def torch_build(version_file: Path | None = None) -> dict | None:
    """{"cuda": ..., "hip": ...} of the installed torch's build, read from its `version.py`
    without importing torch (seconds on a fresh GPU node); None where that cannot be read."""
    import ast
    import importlib.util

    try:
        if version_file is None:
            spec = importlib.util.find_spec("torch")
            version_file = Path(list(spec.submodule_search_locations)[0]) / "version.py"
        tree = ast.parse(version_file.read_text())
        found = {}
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and node.value is not None:
                found[target.id] = ast.literal_eval(node.value)
    except (AttributeError, TypeError, IndexError, OSError, SyntaxError, ValueError):
        return None
    return found if "cuda" in found else None


def gpu_without_torch(build: dict | None = None) -> tuple[str | None, int] | None:
    """(GPU kind, count) as the local Ray will advertise them, without importing torch: the kind
    from torch's build (`torch_build`), the count as Ray's own GPU resource counts them, within
    CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES: for NVIDIA from the kernel driver's list
    (`nvidia_driver.gpu_count`: no NVML, no Ray import), else through Ray's accelerator manager
    (NVML or the AMD driver). None where either is unknown or no GPU answers for a GPU build:
    `advertised_resources` asks torch then."""
    build = torch_build() if build is None else build
    if build is None:
        return None
    kind = "rocm" if build.get("hip") else "cuda" if build.get("cuda") else None
    if kind is None:
        return None, 0  # a CPU build of torch: no GPU slot, whatever the machine has
    count = nvidia_driver.gpu_count() if kind == "cuda" else None
    if count is None:
        try:
            if kind == "cuda":
                from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager as manager
            else:
                from ray._private.accelerators.amd_gpu import AMDGPUAcceleratorManager as manager
            visible = manager.get_current_process_visible_accelerator_ids()
            count = len(visible) if visible is not None else int(manager.get_current_node_num_accelerators())
        except Exception:
            return None
    return (kind, count) if count > 0 else None


def advertised_resources(num_gpus: int | None) -> tuple[dict, int | None]:
    """What a local Ray advertises: one CPU slot, and this machine's GPUs (all it has unless
    `num_gpus`) under the flopwatch resource of their kind. Known without importing torch or
    Ray where `gpu_without_torch` can tell (a head's start on a fresh GPU node paid torch's
    import and a CUDA initialisation for this, then NVML's attach); else from torch."""
    from workers.measure import device

    resources = {CPU_RESOURCE: 1}
    fast = gpu_without_torch()
    if fast is not None:
        gpu, count = fast
        if gpu:
            resources[GPU_RESOURCE[gpu]] = num_gpus if num_gpus is not None else count
            return resources, num_gpus if num_gpus is not None else count
        return resources, num_gpus
    gpu = device.gpu_kind()
    gpus = num_gpus
    if gpu:
        import torch

        gpus = num_gpus if num_gpus is not None else torch.cuda.device_count()
        resources[GPU_RESOURCE[gpu]] = gpus
    return resources, gpus


def planned_resources(num_gpus: int | None) -> dict:
    """What `ray.cluster_resources()` will show once a local Ray is up, as far as device slots
    are counted (`slots.slot_count`): the flopwatch resources and Ray's own GPU count."""
    resources, gpus = advertised_resources(num_gpus)
    return {**resources, "GPU": float(gpus or 0)}


def wait_until_idle(folder: Path, idle_s: float, stop: threading.Event, healthy: Callable[[], bool],
                    on_idle: Callable[[], None], clock: Callable[[], float] = time.monotonic,
                    poll_s: float = POLL_S) -> str:
    """Return "idle" once no command has been attached for `idle_s` (calling `on_idle` while
    still holding the exclusive lock, so that no command attaches to a head that is stopping),
    "unhealthy" when `healthy()` says Ray is gone, "stopped" when `stop` is set."""
    idle_since: float | None = None
    last_health = clock()
    with open(folder / IN_USE, "a") as handle:
        while not stop.wait(poll_s):
            if clock() - last_health >= HEALTH_EVERY_S:
                last_health = clock()
                if not healthy():
                    return "unhealthy"
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                idle_since = None
                continue
            try:
                idle_since = clock() if idle_since is None else idle_since
                if clock() - idle_since >= idle_s:
                    on_idle()
                    return "idle"
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    return "stopped"


def prepare_slots(resources: dict) -> list:
    """Start this Ray's kept device slots and ready them (warm runner, device probe, toolchains)
    right after the head is up, beside the first command's own start: the first command then
    finds its slots starting or ready instead of starting them one kind after the other once
    it has joined (15-18 s of probe on a 4-GPU node, issue 39). Every kind at once; the device
    probe on each kind's first slot (the one a driver asks), the toolchains on the first slot of
    the first kind. Returns the calls in flight (a failing probe is left for the driver's own
    call to report)."""
    from pipeline.fleet import slots

    pool = slots.SlotPool(resources, persistent=True)
    kinds = [k for k in ("cpu", "cuda", "rocm") if slots.slot_count(resources, k) >= 1]
    calls = []
    for n, (kind, made) in enumerate(pool.kept_slots(kinds, readying=True).items()):
        for i, slot in enumerate(made):
            calls.append(slot.actor.prepare.remote(probe=i == 0, toolchains=n == 0 and i == 0))
    return calls


PREPARE_ENV = "FLOPWATCH_HEAD_PREPARE"  # "0": the head starts no slots; the first command starts them


def plant_seeds(folder: Path, gpus: int | None) -> int:
    """Start the runners of this head's slots now, before `ray.init` (`workers.job.seed`): one
    per slot it will ready (its GPUs and the CPU slot), their imports beside Ray's start. Their
    socket is named to the slots' actors in this process's environment, which `ray.init` hands
    to Ray's processes and they to their workers. Returns how many were started: none with
    FLOPWATCH_RUNNER_SEEDS=0, or where they cannot be (the slots spawn their runners as before)."""
    from workers.job import seed

    os.environ.pop(ENV_SOCKET, None)
    if not seed.wanted(os.environ):
        return 0
    # A slot's runner's environment, as far as its imports read it: the slot's (`runner.child_env`),
    # with the OMP_NUM_THREADS=1 Ray gives an actor that holds no CPU where it is unset
    # (ray._private.utils.set_omp_num_threads_if_unset); OpenMP reads it as torch loads.
    env = {**child_env(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    path = folder / seed.SOCKET
    try:
        planted = seed.plant(path, (gpus or 0) + 1, own_digest(), env, triton=bool(gpus))
    except OSError as exc:  # a socket path too long for its folder, no processes left, ...
        print(f"flopwatch's local Ray started no runner seeds: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    os.environ[ENV_SOCKET] = str(path)
    return len(planted)


def probe_toolchains_ahead() -> threading.Thread | None:
    """Probe the node's toolchains now, in a thread beside Ray's start, into their disk cache
    (`build.cached_toolchains`): the slot that answers them later reads that entry instead of
    probing once its actor is up. On a fresh 4-GPU node the probe (every compiler asked for its
    version, from a cold disk) took 4 s after the CPU slot's actor was up and was the last
    answer the first command waited for. None where the head readies no slots
    (FLOPWATCH_HEAD_PREPARE=0): the first command probes as before."""
    if os.environ.get(PREPARE_ENV) == "0":
        return None

    def probe() -> None:
        from workers.backends import build

        try:
            build.cached_toolchains()
        except Exception:  # noqa: BLE001 — the slot probes for itself and reports what fails
            pass

    thread = threading.Thread(target=probe, name="flopwatch-toolchains-ahead", daemon=True)
    thread.start()
    return thread


def serve(folder: Path, key: str, num_gpus: int | None, idle_s: float) -> str:
    """The head's server: start its slots' runners (`plant_seeds`), start Ray with token
    authentication, record it, ready the device slots for the first command, wait until idle, stop.

    On a fresh node the order is the point: the runners (torch's import, seconds) start first,
    from a GPU count the kernel driver answers at once; NVML's attach of the GPUs runs in a
    thread beside Ray's import, the toolchains' probe beside `ray.init`; the head then keeps
    the GPUs attached while it serves (`nvidia_driver.hold_in_background`)."""
    age = process_age_s() or 0.0
    # launched_at (epoch): where a driver's account of this start begins (`cluster.head_account`);
    # a head started ahead of its command's imports began before that command's connect.
    startup = {"python": round(age, 3), "launched_at": round(time.time() - age, 3)}
    folder = private_folder(folder)
    fresh_token(folder)
    held = nvidia_driver.hold_in_background()
    began = time.perf_counter()
    resources, gpus = advertised_resources(num_gpus)
    startup["resources"] = round(time.perf_counter() - began, 3)
    startup["seeds"] = plant_seeds(folder, gpus)
    began = time.perf_counter()
    import ray

    startup["ray_import"] = round(time.perf_counter() - began, 3)
    # After Ray's import, not beside it: a cold probe imports torch and triton in this process,
    # and two imports share one interpreter lock; `ray.init` mostly waits on Ray's processes.
    probe_toolchains_ahead()
    began = time.perf_counter()
    context = ray.init(address="local", _temp_dir=str(folder / RAY_TEMP), namespace="flopwatch", resources=resources,
                       num_gpus=gpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    startup["ray_init"] = round(time.perf_counter() - began, 3)
    if "attach_s" in held:
        startup["gpus_attached"] = held["attach_s"]
    address = context.address_info["gcs_address"]
    cluster_resources = ray.cluster_resources()
    readying = []
    if os.environ.get(PREPARE_ENV) != "0":
        try:
            readying = prepare_slots(cluster_resources)
        except Exception as exc:  # the first command starts its slots itself, as before
            print(f"flopwatch's local Ray could not ready its slots: {type(exc).__name__}: {exc}", file=sys.stderr)
    startup["slots"] = len(readying)
    record = HeadRecord(key, os.getpid(), address, idle_s, time.time(), cluster_resources, startup)
    gcs = parse_address(address, "the head")

    def forget() -> None:
        if (current := read_record(folder)) is not None and current.pid == os.getpid():
            (folder / RECORD).unlink(missing_ok=True)

    # After ray.init, which sets its own SIGTERM handler (sys.exit): a signal now ends the wait below.
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _write_private(folder / RECORD, record.to_json())
    try:
        why = wait_until_idle(folder, idle_s, stop, healthy=lambda: tcp_problem(gcs, 5.0) is None, on_idle=forget)
    finally:
        forget()
        ray.shutdown()
    print(f"flopwatch's local Ray stopped: {why}", file=sys.stderr)
    return why


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="flopwatch's local Ray head (started by flopwatch)")
    sub = p.add_subparsers(dest="action", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--folder", required=True, type=Path)
    s.add_argument("--key", required=True)
    s.add_argument("--idle-s", required=True, type=float)
    s.add_argument("--num-gpus", type=int)
    args = p.parse_args(argv)
    serve(args.folder, args.key, args.num_gpus, args.idle_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
