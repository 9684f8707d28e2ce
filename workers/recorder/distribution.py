"""The repository's own distribution, as `importlib.metadata` would know it once installed.

Benchmark scripts ask for it (`LIGER_KERNEL_VERSION = version("liger-kernel")` in Liger-Kernel's
benchmark/scripts/utils.py) and die on a checkout that was never `pip install`ed. The recording
child puts a stand-in on its own `sys.path`: a folder holding `<name>-<version>.dist-info` with
the name and version read from the repository's packaging files, never run. Nothing is
installed and nothing outside the child sees it.
"""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from pathlib import Path

# Where the packaging files give no version (a dynamic one, from git tags or a build hook).
UNKNOWN_VERSION = "0+unknown"


def read_distribution(repo: Path) -> tuple[str, str, str] | None:
    """(name, version, the file they came from) of the repository's distribution, from
    pyproject.toml's `[project]`, else setup.cfg's `[metadata]`, else the literal `name=` /
    `version=` of setup.py's `setup(...)` call; None where none names it. A name without a
    version gets `UNKNOWN_VERSION`."""
    found: list[tuple[str | None, str | None, str]] = []
    pyproject = repo / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text(errors="replace")).get("project") or {}
        except tomllib.TOMLDecodeError:
            project = {}
        found.append((_text(project.get("name")), _text(project.get("version")), "pyproject.toml"))
    setup_cfg = repo / "setup.cfg"
    if setup_cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(setup_cfg.read_text(errors="replace"))
            meta = parser["metadata"] if parser.has_section("metadata") else {}
        except configparser.Error:
            meta = {}
        version = meta.get("version")
        found.append((_text(meta.get("name")), None if version and version.startswith(("attr:", "file:"))
                      else _text(version), "setup.cfg"))
    setup_py = repo / "setup.py"
    if setup_py.is_file():
        found.append((*_setup_py_literals(setup_py.read_text(errors="replace")), "setup.py"))
    for name, version, origin in found:
        if name:
            if not version:  # the name from one file, the version from another (pyproject + setup.py)
                version = next((v for n, v, _ in found if v and n in (None, name)), None)
            return name, version or UNKNOWN_VERSION, origin
    return None


def _text(value) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _setup_py_literals(text: str) -> tuple[str | None, str | None]:
    """The string literals passed as `name=` and `version=` to a `setup(...)` call (pure)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup":
            got = {k.arg: k.value.value for k in node.keywords
                   if k.arg in ("name", "version") and isinstance(k.value, ast.Constant)
                   and isinstance(k.value.value, str)}
            return _text(got.get("name")), _text(got.get("version"))
    return None, None


def normalized(name: str) -> str:
    """The name as a dist-info folder spells it (PEP 503 normalised, `_` for separators)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def write_dist_info(folder: Path, name: str, version: str) -> Path:
    """A `<name>-<version>.dist-info` with a METADATA file under `folder`, which the caller puts
    on `sys.path`; returns the dist-info folder."""
    dist = folder / f"{normalized(name)}-{version}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return dist
