"""flopwatch new: draft a variant.toml for every kernel of the given source files, build each
draft once here, and say what still needs the user's hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.commands.common import UsageError
from pipeline.onboarding import onboard
from pipeline.run.summary import cell

HELP = ("draft a variant.toml per kernel of the given sources (__global__ kernels, pybind11 modules, torch extensions, "
        "KernelBench problems and solutions, a module's functional entries) and build each once")


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", help="kernel source files (C++/CUDA/HIP, or Python) or folders, inside the "
                                            "repository")
    add_common(p)


def add_common(p) -> None:
    p.add_argument("--repo", default=".", help="the repository (default: the current folder)")
    p.add_argument("--out", default="flopwatch", help="folder for the drafts, inside the repository: relative to it, or "
                                                       "an absolute path in it (default: flopwatch)")
    p.add_argument("--force", action="store_true", help="overwrite drafts that exist")
    p.add_argument("--no-build", action="store_true", help="write the drafts without building them")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


def main(args) -> int:
    root = Path(args.repo).resolve()
    try:
        files = onboard.source_files(root, args.paths)
    except FileNotFoundError as exc:
        raise UsageError(str(exc)) from None
    if not files:
        raise UsageError(f"no kernel sources ({', '.join(onboard.kernel_scan.SOURCE_SUFFIXES)}) in {args.paths}")
    return draft_and_report(root, files, args)


def out_folder(root: Path, text: str) -> str:
    """`--out` as the repository-relative folder the drafts go to. An absolute path is taken as
    written, not as a folder of that name inside the repository; one outside the repository is
    refused: `kernels` in flopwatch.toml names repository folders, and drafts are committed with
    the kernels they measure."""
    full = Path(text) if Path(text).is_absolute() else root / text
    try:
        rel = full.resolve().relative_to(root)
    except ValueError:
        raise UsageError(f"--out {text}: outside the repository {root}; the drafts must be in it (flopwatch.toml's "
                         "`kernels` lists repository folders): give a folder inside it") from None
    if rel == Path("."):
        raise UsageError(f"--out {text}: the repository's own folder; give a folder inside it (default: flopwatch)")
    return rel.as_posix()


def draft_and_report(root: Path, files: list[Path], args, extra: list[str] = (), py_files: list[str] | None = None,
                     functional: bool | set[str] = True) -> int:
    """Draft, write, build and report. `py_files`: the Python files whose entries to draft
    (default: the .py files among `files`, and the files that build the extensions whose
    sources are among them)."""
    out_dir = out_folder(root, args.out)
    extensions = onboard.torch_extension_sources(root, out_dir)
    native = [f for f in files if f.suffix != ".py"]
    planned = onboard.plan(root, native, out_dir, skip_files=set(extensions)) if native else onboard.Plan([])
    if py_files is None:
        asked = [f.relative_to(root).as_posix() for f in files]
        py_files = [r for r in asked if r.endswith(".py")]
        py_files += sorted({extensions[r].rsplit(":", 1)[0] for r in asked if r in extensions} - set(py_files))
    taken = {d.name for d in planned.drafts}
    python = onboard.python_plan(root, py_files, out_dir, taken, functional)
    planned = onboard.Plan([*planned.drafts, *python.drafts], [*planned.notes, *python.notes])
    said = [*planned.notes, *_extension_lines(root, files, extensions)]
    undrafted = [{"entry": s.entry, "reason": s.reason} for s in python.skipped]
    if not planned.drafts:
        if args.json:
            print(json.dumps({"drafts": [], "config": [], "notes": said, "other": list(extra), "undrafted": undrafted}))
        for line in [*said, *(f"not drafted: {u['entry']}: {u['reason']}" for u in undrafted)]:
            print(f"flopwatch new: {line}", file=sys.stderr)
        print(f"flopwatch new: no __global__ kernel, pybind11 module, torch extension, problem or functional entry "
              f"to draft in {len(files)} file(s)", file=sys.stderr)
        return 1
    done = onboard.write(root, planned.drafts, args.force)
    folders = [d for draft in planned.drafts for d in draft.include_dirs]
    changes = onboard.update_config(root, out_dir, folders) if any(x.written for x in done) else []
    if not args.no_build:
        onboard.build_all(root, done)
    rows = [{"variant": x.draft.name, "folder": x.draft.folder, "op": x.draft.op or "?", "state": x.state,
             "reference": _reference_line(x.draft),
             "detail": onboard.summary(x) if x.written else "; ".join(x.notes), "todo": list(x.draft.todo),
             "guessed": list(x.draft.guessed)}
            for x in done]
    if args.json:
        print(json.dumps({"drafts": rows, "config": changes, "notes": said, "other": list(extra),
                          "undrafted": undrafted}))
    else:
        _print(rows, [*said, *changes, *extra], undrafted)
    return 0 if all(r["state"] in ("built", "skipped", "not built") for r in rows) else 1


def _extension_lines(root: Path, files: list[Path], extensions: dict[str, str]) -> list[str]:
    """One line per torch extension whose sources were asked for: drafted as the extension's
    module functions, built as the repository builds it."""
    by_origin: dict[str, list[str]] = {}
    for f in files:
        rel = f.relative_to(root).as_posix()
        if rel in extensions:
            by_origin.setdefault(extensions[rel], []).append(rel)
    return [f"{', '.join(sources)}: a torch extension built by {origin} (torch.utils.cpp_extension): drafted as "
            f'backend = "torch" variants of the functions its module exports or the TORCH_LIBRARY operators it '
            f'registers ([[extensions]] from = "{origin.rsplit(":", 1)[0]}"); its __global__ kernels are measured '
            f"through them, not as kernels of their own"
            for origin, sources in by_origin.items()]


def _reference_line(draft) -> str:
    """What a draft is checked against, from its first line (`# reference: ...`); "" for drafts
    of kernels, whose op is their reference."""
    first = draft.files.get("variant.toml", "").split("\n", 1)[0]
    return first.removeprefix("# reference: ") if first.startswith("# reference: ") else ""


def _reference_counts(rows: list[dict], undrafted: list[dict]) -> str:
    """One line: how the module's entries are checked ("27 entries drafted: 16 a built-in op, 4
    the repository's reference, 7 unchecked; 1 not drafted")."""
    entries = [r for r in rows if r["reference"]]
    builtin = sum(r["reference"].startswith("built-in op") for r in entries)
    none = sum(r["reference"].startswith("none found") for r in entries)
    return (f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} drafted: {builtin} a built-in op, {len(entries) - builtin - none} the "
            f"repository's reference, {none} unchecked (no reference found); {len(undrafted)} not drafted")


def _print(rows: list[dict], changes: list[str], undrafted: list[dict] = ()) -> None:
    console = Console(width=None if sys.stdout.isatty() else 140)
    table = Table(title="drafted variants", title_justify="left")
    checked = any(r["reference"] for r in rows)
    for col in ("variant", "op", *(("checked against",) if checked else ()), "state", "guessed",
                "build here / what is wrong"):
        table.add_column(col, overflow="fold")
    for r in rows:
        style = {"built": None, "skipped": "dim"}.get(r["state"], "red")
        table.add_row(cell(r["variant"]), cell(r["op"]), *((cell(r["reference"] or "-"),) if checked else ()),
                      r["state"], cell(", ".join(r["guessed"]) or "-"), cell(r["detail"][:300]), style=style)
    console.print(table)
    if checked:
        console.print(cell(_reference_counts(rows, undrafted)))
    if undrafted:
        console.print(cell(f"not drafted ({len(undrafted)}):"))
        for u in undrafted:
            console.print(cell(f"  {u['entry']}: {u['reason']}"))
    for change in changes:
        console.print(cell(change))
    todo = [(r["folder"], t) for r in rows for t in r["todo"]]
    if todo:
        console.print(cell("still needs your hand:"))
        for folder, t in todo:
            console.print(cell(f"  {folder}/variant.toml: {t}"))
