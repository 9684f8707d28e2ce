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

from pipeline.fleet import local_ray
from pipeline.fleet.ray_access import ClusterError, resolve_address

# The commands that start or attach to a Ray as they open (`open_session` without defer_ray).
STARTS_RAY = ("run", "bisect", "nightly")
AHEAD_VARIABLE = "FLOPWATCH_HEAD_AHEAD"


def _option(args: list[str], name: str) -> str | None:
    """The value of `--name V` or `--name=V` on the command line (the last one), else None."""
    value = None
    for i, a in enumerate(args):
        if a.startswith(f"{name}="):
            value = a.split("=", 1)[1]
        elif a == name and i + 1 < len(args):
            value = args[i + 1]
    return value


def wanted(argv: Sequence[str], env: Mapping[str, str]) -> tuple[bool, int | None, float | None]:
    """(whether to start the head ahead, its --num-gpus, its idle seconds or None for the default)."""
    no = (False, None, None)
    if not argv or argv[0] not in STARTS_RAY or env.get(AHEAD_VARIABLE) == "0":
        return no
    args = list(argv[1:])
    if {"-h", "--help", "--no-ray-reuse"} & set(args):
        return no
    try:  # the same readings the command makes; what it would refuse starts nothing here
        if resolve_address(_option(args, "--ray-address"), env) is not None or "--ray-address" in args:
            return no
        reuse, idle_s = local_ray.kept_settings(env)
        gpus = _option(args, "--num-gpus")
        num_gpus = int(gpus) if gpus is not None else None
    except (ClusterError, ValueError):
        return no
    if not reuse:
        return no
    return True, num_gpus, idle_s if (env.get("FLOPWATCH_RAY_IDLE_S") or "").strip() else None


def start(argv: Sequence[str], env: Mapping[str, str] | None = None) -> bool:
    """Start the head ahead of the command when `wanted`; whether one was started. Never
    raises: a head that cannot start here is started (and its failure reported) by the command."""
    go, num_gpus, idle_s = wanted(argv, os.environ if env is None else env)
    if not go:
        return False
    try:
        return local_ray.start_ahead(num_gpus, local_ray.DEFAULT_IDLE_S if idle_s is None else idle_s)
    except Exception:  # noqa: BLE001 — the command starts it itself and says what fails
        return False
