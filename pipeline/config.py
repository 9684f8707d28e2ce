"""Project configuration of the repository being benchmarked.

Read from `flopwatch.toml` at the repository root, or from `[tool.flopwatch]` in its
`pyproject.toml`; without either, variants live in `kernels/` and the built-in defaults apply.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# The smallest change that counts when no --threshold is given, per device kind of the series
# being judged: "compare" decides on paired samples (both builds alternated call by call in one
# process), "history" (detect, bisect, nightly) on separate runs, which carry the drift between
# runs as well. How each figure was measured, on which machine, and the false-alarm and
# detection rates behind it: docs/history.md, "Default thresholds per device kind".
DEFAULT_THRESHOLDS: dict[str, dict[str, float]] = {
    "cpu": {"compare": 0.03, "history": 0.05},   # measured on the 2-core CI VM (compare_noise.py)
    "cuda": {"compare": 0.005, "history": 0.01},  # H100: 0/28 false alarms, 28/29 planted 1% caught
    "rocm": {"compare": 0.03, "history": 0.05},  # not measured on AMD yet: the CPU values until then
}
# A device key of a kind not in the table (a new vendor) gets the most cautious entry.
_FALLBACK_KIND = "cpu"

# Seconds of sampling per job when --budget is not given. `run` and the head of `nightly` use
# the project's `[defaults] timing_budget_s`, else DEFAULT_BUDGET_S. Compare rounds and bisect
# probes (nightly's too) are short: compare decides on paired timing (PAIR_BUDGET_S per series,
# both builds alternated in one process) and bisect on repeated probes, not on one long run.
DEFAULT_BUDGET_S = 2.0
COMMAND_BUDGET_S = {"compare": 0.5, "bisect": 0.5}
PAIR_BUDGET_S = 2.0
# Per-job timeout (seconds) unless the manifest or --timeout says otherwise.
DEFAULT_TIMEOUT_S = 120.0


def describe_threshold_defaults(use: str) -> str:
    """"cpu 3%, cuda 0.5%, rocm 3%": the defaults of `use` as help texts and docs state them."""
    return ", ".join(f"{kind} {table[use] * 100:g}%" for kind, table in DEFAULT_THRESHOLDS.items())


def device_kind(device: str) -> str:
    """"cuda:NVIDIA H100 80GB HBM3" → "cuda"; a bare kind stays as it is."""
    return str(device).split(":", 1)[0].strip().lower()


def default_threshold(device: str, use: str) -> float:
    """The default threshold of a series on `device` (a device key or kind) for `use`
    ("compare" or "history")."""
    if use not in ("compare", "history"):
        raise ValueError(f"unknown threshold use {use!r}")
    table = DEFAULT_THRESHOLDS.get(device_kind(device), DEFAULT_THRESHOLDS[_FALLBACK_KIND])
    return table[use]


def describe_thresholds(by_kind: dict[str, float]) -> str:
    """"±1.0% (cuda), ±3.0% (cpu)" for the kinds present, or one figure when they agree."""
    if not by_kind:
        return "per device kind"
    values = set(by_kind.values())
    if len(values) == 1:
        return f"±{values.pop():.1%}"
    return ", ".join(f"±{v:.1%} ({k})" for k, v in sorted(by_kind.items(), key=lambda kv: (kv[1], kv[0])))


class ConfigError(ValueError):
    """A configuration file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class ProjectConfig:
    """Where variants live, named shape sets and defaults for one benchmarked repository."""

    kernel_dirs: tuple[str, ...] = ("kernels",)
    include_dirs: tuple[str, ...] = ()
    shape_sets: dict = field(default_factory=dict)
    timing_budget_s: float = DEFAULT_BUDGET_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    source: str = "defaults"


_KNOWN = {"kernels", "include_dirs", "shape_sets", "defaults"}
_KNOWN_DEFAULTS = {"timing_budget_s", "timeout_s"}


def load_config(root: Path) -> ProjectConfig:
    """Load the configuration of the repository checked out at `root`."""
    path = root / "flopwatch.toml"
    table: dict | None = None
    if path.exists():
        table = _read_toml(path)
        table = table.get("flopwatch", table)
    else:
        pyproject = root / "pyproject.toml"
        if pyproject.exists():
            table = _read_toml(pyproject).get("tool", {}).get("flopwatch")
            path = pyproject
    if table is None:
        return ProjectConfig()
    return _parse(table, path.name)


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid TOML: {exc}") from exc


def _parse(table: dict, where: str) -> ProjectConfig:
    unknown = set(table) - _KNOWN
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_KNOWN)}")
    kernels = table.get("kernels", ["kernels"])
    if isinstance(kernels, str):
        kernels = [kernels]
    if not isinstance(kernels, list) or not all(isinstance(k, str) for k in kernels):
        raise ConfigError(f"{where}: 'kernels' must be a folder or a list of folders")
    includes = table.get("include_dirs", [])
    if not isinstance(includes, list) or not all(isinstance(k, str) for k in includes):
        raise ConfigError(f"{where}: 'include_dirs' must be a list of repository-relative folders")
    for folder in [*kernels, *includes]:
        if Path(folder).is_absolute() or ".." in Path(folder).parts:
            raise ConfigError(f"{where}: folder {folder!r} must stay inside the repository")
    shape_sets = table.get("shape_sets", {})
    if not isinstance(shape_sets, dict):
        raise ConfigError(f"{where}: 'shape_sets' must be a table of name = [shapes]")
    defaults = table.get("defaults", {})
    unknown = set(defaults) - _KNOWN_DEFAULTS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [defaults]: {sorted(unknown)}")
    return ProjectConfig(
        kernel_dirs=tuple(kernels),
        include_dirs=tuple(includes),
        shape_sets=shape_sets,
        timing_budget_s=float(defaults.get("timing_budget_s", DEFAULT_BUDGET_S)),
        timeout_s=float(defaults.get("timeout_s", DEFAULT_TIMEOUT_S)),
        source=where,
    )
