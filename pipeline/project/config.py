"""Project configuration of the repository being benchmarked.

Read from `flopwatch.toml` at the repository root, or from `[tool.flopwatch]` in its
`pyproject.toml`; without either, variants live in `kernels/` and the built-in defaults apply.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.project.defaults import DEFAULT_BUDGET_S, DEFAULT_TIMEOUT_S

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
COMMAND_BUDGET_S = {"compare": 0.5, "bisect": 0.5}
PAIR_BUDGET_S = 2.0


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


@dataclass(frozen=True)
class Limits:
    """What one job or one build may use. Set here, by whoever runs flopwatch, and never by the
    benchmarked repository (its flopwatch.toml and manifests are untrusted input). What happens
    when one is hit is in docs/measurement.md, "Containment"."""

    # Everything a job's processes write, all files together (each file is also capped at
    # `workers.isolation.sandbox.MAX_FILE_BYTES`); over it the job is stopped and ends `crashed`.
    job_write_bytes: int = 1 << 30
    # One build, every compiler step and analysis tool together; over it the build's processes
    # are killed and its jobs end `build_failed`, the limit named.
    build_timeout_s: float = 900.0

    def to_dict(self) -> dict:
        return {"job_write_bytes": self.job_write_bytes, "build_timeout_s": self.build_timeout_s}


LIMITS = Limits()


class ConfigError(ValueError):
    """A configuration file is malformed; the message names the file and the key, one line per
    mistake."""


@dataclass(frozen=True)
class ProjectConfig:
    """Where variants live, named shape sets and defaults for one benchmarked repository."""

    kernel_dirs: tuple[str, ...] = ("kernels",)
    include_dirs: tuple[str, ...] = ()
    shape_sets: dict = field(default_factory=dict)
    timing_budget_s: float = DEFAULT_BUDGET_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    source: str = "defaults"


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
    """Structure and types by the declared format (`pipeline.project.schema.ProjectFile`), then what a
    type cannot say: folders stay inside the repository."""
    from pydantic import ValidationError

    from pipeline.project.schema import ProjectFile, problems

    # Every mistake at once, one line each, as a variant.toml's (`manifest.ManifestError`): a file
    # with two mistakes is not fixed one command at a time.
    found: list[tuple[str, str]] = []
    f = None
    try:
        f = ProjectFile.model_validate(table)
    except ValidationError as exc:
        found += problems(exc, ProjectFile)
    for key in ("kernels", "include_dirs"):
        value = table.get(key)
        for folder in [value] if isinstance(value, str) else value if isinstance(value, list) else []:
            if isinstance(folder, str) and (Path(folder).is_absolute() or ".." in Path(folder).parts):
                found.append((key, f"folder {folder!r} must stay inside the repository"))
    if found:
        raise ConfigError("\n".join(dict.fromkeys(f"{where}: {key}: {message}" for key, message in found)))
    kernels = [f.kernels] if isinstance(f.kernels, str) else list(f.kernels)
    return ProjectConfig(
        kernel_dirs=tuple(kernels),
        include_dirs=tuple(f.include_dirs),
        shape_sets={name: list(shapes) for name, shapes in f.shape_sets.items()},
        timing_budget_s=f.defaults.timing_budget_s,
        timeout_s=f.defaults.timeout_s,
        source=where,
    )
