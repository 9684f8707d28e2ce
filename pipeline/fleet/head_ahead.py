"""Starting flopwatch's local Ray head before a command's own imports.

On a machine where no head is up, the first command's path to its first job begins with the
head's start: its interpreter, then `ray.init` (4-5 s on a 4-GPU node), then the device slots.
The command's own start (the interpreter and flopwatch's imports, 1.4 s there) need not come
first. So `flopwatch` reads its command line here, with the standard library and
`pipeline.fleet.local_ray`'s driver side only, and when the command will attach to flopwatch's
kept local Ray, it starts that head now (`local_ray.start_ahead`); `local_ray.acquire` waits for
it later as for a head it started itself.

Only where the command would start the head anyway: `run`, `bisect` and `nightly` (they start
Ray as they open; `compare` starts it only for a job it must run), no cluster address given
(`--ray-address`, FLOPWATCH_RAY_ADDRESS, RAY_ADDRESS), flopwatch's local Ray kept
(FLOPWATCH_RAY_REUSE not off, no `--no-ray-reuse`), and not asking for help. Anything unusual
(an option this reading does not know, a setting it cannot read) starts nothing here: the
command then does as before and reports what is wrong itself. A head started for a command
that then fails (a wrong option) idles out as any other. FLOPWATCH_HEAD_AHEAD=0 starts nothing
here (to measure what it saves).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

# The commands that start or attach to a Ray as they open (`open_session` without defer_ray).
STARTS_RAY = ("run", "bisect", "nightly")
AHEAD_VARIABLE = "FLOPWATCH_HEAD_AHEAD"
ADDRESS_VARIABLES = ("FLOPWATCH_RAY_ADDRESS", "RAY_ADDRESS")  # as `ray_access.resolve_address` reads them


def wanted(argv: Sequence[str], env: Mapping[str, str]) -> tuple[bool, int | None, float | None]:
    """(whether to start the head ahead, its --num-gpus, its idle seconds or None for the default)."""
    if not argv or argv[0] not in STARTS_RAY or env.get(AHEAD_VARIABLE) == "0":
        return False, None, None
    args = list(argv[1:])
    if {"-h", "--help", "--no-ray-reuse"} & set(args):
        return False, None, None
    if any(a == "--ray-address" or a.startswith("--ray-address=") for a in args):
        return False, None, None
    if any((env.get(name) or "").strip() not in ("", "local") for name in ADDRESS_VARIABLES):
        return False, None, None
    if env.get("FLOPWATCH_RAY_REUSE", "1").strip().lower() not in ("1", "yes", "true", "on"):
        return False, None, None
    num_gpus = None
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--num-gpus=") else (
            args[i + 1] if a == "--num-gpus" and i + 1 < len(args) else None)
        if value is not None:
            try:
                num_gpus = int(value)
            except ValueError:
                return False, None, None  # the command's own parser says what is wrong
    idle = (env.get("FLOPWATCH_RAY_IDLE_S") or "").strip()
    try:
        idle_s = float(idle) if idle else None
    except ValueError:
        return False, None, None
    if idle_s is not None and not idle_s > 0:
        return False, None, None
    return True, num_gpus, idle_s


def start(argv: Sequence[str], env: Mapping[str, str] | None = None) -> bool:
    """Start the head ahead of the command when `wanted`; whether one was started. Never
    raises: a head that cannot start here is started (and its failure reported) by the command."""
    env = os.environ if env is None else env
    go, num_gpus, idle_s = wanted(argv, env)
    if not go:
        return False
    from pipeline.fleet import local_ray

    try:
        if idle_s is None:
            return local_ray.start_ahead(num_gpus)
        return local_ray.start_ahead(num_gpus, idle_s)
    except Exception:  # noqa: BLE001 — the command starts it itself and says what fails
        return False
