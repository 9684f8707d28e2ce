"""Project configuration of the repository being benchmarked.

Read from `flopwatch.toml` at the repository root, or from `[tool.flopwatch]` in its
`pyproject.toml`; without either, variants live in `kernels/` and the built-in defaults apply.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    """A configuration file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class ProjectConfig:
    """Where variants live, named shape sets and defaults for one benchmarked repository."""

    kernel_dirs: tuple[str, ...] = ("kernels",)
    include_dirs: tuple[str, ...] = ()
    shape_sets: dict = field(default_factory=dict)
    timing_budget_s: float = 2.0
    timeout_s: float = 120.0
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
        timing_budget_s=float(defaults.get("timing_budget_s", 2.0)),
        timeout_s=float(defaults.get("timeout_s", 120.0)),
        source=where,
    )
