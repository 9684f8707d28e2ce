"""flopwatch new: draft a variant.toml for every kernel of the given source files, build each
draft once here, and say what still needs the user's hand."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.commands.common import UsageError
from pipeline.onboarding import bench_runs, onboard
from pipeline.onboarding.decide.scaling import local_gpu
from pipeline.onboarding.source.c_text import SOURCE_SUFFIXES
from pipeline.onboarding.source.records import Plan
from pipeline.onboarding.source.repo import RepoFiles
from pipeline.onboarding.write import builds, existing, gitignore, launch_check, project
from pipeline.onboarding.write.inside import OutsideRepository, within
from pipeline.project import checkout
from pipeline.project.config import load_config
from pipeline.run.summary import cell
from pipeline.store import location

HELP = ("draft a variant.toml per kernel of the given sources (__global__ kernels, pybind11 modules, torch extensions, "
        "KernelBench problems and solutions, kernel-challenge submissions, a module's functional entries) and build "
        "each once")


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", help="kernel source files (C++/CUDA/HIP, or Python) or folders, inside the "
                                            "repository: as the shell gives them (from the current folder, or "
                                            "absolute), or from the repository's root")
    add_common(p)


def add_common(p) -> None:
    p.add_argument("--repo", default=".", help="the repository (default: the one around the current folder; a "
                                               "folder not under git: that folder)")
    p.add_argument("--out", default="flopwatch", help="folder for the drafts, inside the repository: relative to it, or "
                                                       "an absolute path in it (default: flopwatch)")
    p.add_argument("--force", action="store_true", help="overwrite drafts that exist")
    p.add_argument("--no-build", action="store_true", help="write the drafts without building them")
    p.add_argument("--cache", metavar="DIR", help="build cache the drafts' builds are kept in, for the run after "
                                                  "(default: $FLOPWATCH_CACHE, else <repo>/.flopwatch/cache)")
    p.add_argument("--record-budget", type=float, default=bench_runs.RECORD_BUDGET_S, metavar="SECONDS",
                   help="wall time the benchmark scripts run under the recorder may take together, to give the "
                        "drafts their sizes (0: run none; an entry left unrecorded takes its test's sizes, scaled) "
                        f"(default: {bench_runs.RECORD_BUDGET_S:g})")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


def main(args) -> int:
    root = checkout.root_around(Path(args.repo).resolve())
    try:
        files = onboard.source_files(root, args.paths, Path.cwd())
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if not files:
        raise UsageError(f"no kernel sources ({', '.join(SOURCE_SUFFIXES)}) in {args.paths}")
    repo = RepoFiles.at(root, out_folder(root, args.out))
    with bench_runs.recording_budget(args.record_budget):
        planned = onboard.plan_new(repo, files)
    return draft_and_report(root, planned, args)


def out_folder(root: Path, text: str) -> str:
    """`--out` as the repository-relative folder the drafts go to. An absolute path is taken as
    written, not as a folder of that name inside the repository; one outside the repository is
    refused: `kernels` in flopwatch.toml names repository folders, and drafts are committed with
    the kernels they measure."""
    full = Path(text) if Path(text).is_absolute() else root / text
    try:
        rel = full.resolve().relative_to(root)
    except ValueError:
        try:
            within(root, full.relative_to(root))
        except (ValueError, OutsideRepository) as exc:  # a committed link leads out: name it
            if getattr(exc, "link", ""):
                raise UsageError(f"--out {text}: {exc}") from None
        raise UsageError(f"--out {text}: outside the repository {root}; the drafts must be in it (flopwatch.toml's "
                         "`kernels` lists repository folders): give a folder inside it") from None
    if rel == Path("."):
        raise UsageError(f"--out {text}: the repository's own folder; give a folder inside it (default: flopwatch)")
    return rel.as_posix()


def draft_and_report(root: Path, planned: Plan, args, init: bool = False) -> int:
    """Write the drafts, add them to flopwatch.toml, build each once and report; `init`: the
    workflow too (unless --no-workflow), and `/.flopwatch/` in .gitignore (`new` adds it where it
    creates flopwatch.toml)."""
    out_dir = out_folder(root, args.out)
    config_path, cache = resolved_writes(root, args, init)
    creates_config = not config_path.exists()
    extra = [project.write_workflow(root)] if init and not args.no_workflow else []
    ignored = [gitignore.ignore_own_folder(root)] if init else []
    said = list(planned.notes)
    undrafted = [{"entry": s.entry, "reason": s.reason} for s in planned.skipped]
    if not planned.drafts:
        if args.json:
            print(json.dumps({"drafts": [], "config": [x for x in ignored if x], "notes": said, "other": list(extra),
                              "undrafted": undrafted}))
        for line in [*said, *(f"not drafted: {u['entry']}: {u['reason']}" for u in undrafted)]:
            print(f"flopwatch new: {line}", file=sys.stderr)
        print(f"flopwatch new: no __global__ kernel, pybind11 module, torch extension, problem or functional entry "
              f"to draft in {len(planned.files)} file(s)", file=sys.stderr)
        return 1
    names = existing.variant_names(root, [*load_config(root).kernel_dirs, out_dir])
    done = project.write(root, list(planned.drafts), args.force, names)
    folders = [d for draft in planned.drafts for d in draft.include_dirs]
    changes = project.update_config(root, out_dir, folders) if any(x.written for x in done) else []
    if creates_config and config_path.exists():
        ignored.append(gitignore.ignore_own_folder(root))
    changes += [x for x in ignored if x]
    if not args.no_build:
        builds.build_all(root, done, cache, None if args.json else _say)
    bound = launch_check.launch_bound([x.draft for x in done if x.written], local_gpu())
    rows = [{"variant": x.draft.name, "folder": x.draft.folder, "op": x.draft.op or "?", "state": x.state,
             "reference": x.draft.reference, "sizes": x.draft.sizes, "peer": x.draft.peer,
             "detail": project.summary(x) if x.written else "; ".join(x.notes), "todo": list(x.draft.todo),
             "guessed": list(x.draft.guessed),
             "build_s": x.build.seconds if x.build else None, "from_cache": bool(x.build and x.build.cached),
             "launch_bound": bound[x.draft.folder].line() if x.draft.folder in bound and x.written else ""}
            for x in done]
    if args.json:
        print(json.dumps({"drafts": rows, "config": changes, "notes": said, "other": list(extra),
                          "undrafted": undrafted}))
    else:
        _print(rows, [*said, *changes, *extra], undrafted)
    return 0 if all(r["state"] in ("built", "skipped", "not built") for r in rows) else 1


def resolved_writes(root: Path, args, init: bool) -> tuple[Path, Path | None]:
    """Every file the command writes besides the drafts, resolved inside the repository before
    anything is written (each draft is resolved as it is written): the config file, .gitignore,
    the workflow, the build cache where it is the repository's own. Returns (the config file,
    the build cache root: None with --no-build). A committed link leading out of the repository
    stops the command, naming the link."""
    try:
        config_path = project.config_file(root)
        if init or not config_path.exists():
            within(root, ".gitignore")
        if init and not args.no_workflow:
            within(root, project.WORKFLOW_FILE)
        if args.no_build:
            return config_path, None
        if args.cache or os.environ.get(location.CACHE_ENV):  # a folder the user chose, wherever it is
            return config_path, location.resolve_cache(args.cache, root / ".flopwatch" / "cache")
        return config_path, within(root, ".flopwatch/cache")
    except OutsideRepository as exc:
        raise UsageError(str(exc)) from None


def _say(line: str) -> None:
    """A build's line as it finishes: on stderr, so that a long `new` shows where it is."""
    print(line, file=sys.stderr, flush=True)


# Draft states of a draft that was not written this time: its table row says why.
NOT_WRITTEN = ("refused", "exists")


def _reference_counts(rows: list[dict], undrafted: list[dict]) -> str:
    """One line: how the module's entries written here are checked ("27 entries drafted: 16 a
    built-in op, 4 the repository's reference, 7 unchecked; 1 not drafted"), and how many drafts
    were not written (refused, or already there without --force)."""
    entries = [r for r in rows if r["reference"] and r["state"] not in NOT_WRITTEN]
    builtin = sum(r["reference"].startswith("built-in op") for r in entries)
    none = sum(r["reference"].startswith("none found") for r in entries)
    kept = [r for r in rows if r["reference"] and r["state"] in NOT_WRITTEN]
    left = f"; {len(kept)} not written (refused, or there already: the table says which)" if kept else ""
    return (f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'} drafted: {builtin} a built-in op, {len(entries) - builtin - none} the "
            f"repository's reference, {none} unchecked (no reference found); {len(undrafted)} not drafted{left}")


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
    sized = [r for r in rows if r.get("sizes") and r["state"] not in NOT_WRITTEN]
    if sized:
        console.print(cell("timed at (where each draft's sizes come from):"))
        for r in sized:
            console.print(cell(f"  {r['variant']}: {r['sizes']}"))
    for r in rows:
        if r.get("launch_bound"):
            console.print(cell(f"warning: {r['launch_bound']}"))
    if undrafted:
        console.print(cell(f"not drafted ({len(undrafted)}):"))
        for u in undrafted:
            console.print(cell(f"  {u['entry']}: {u['reason']}"))
    for change in changes:
        console.print(cell(change))
    todo = [(r["folder"], t) for r in rows if r["state"] not in NOT_WRITTEN for t in r["todo"]]
    if todo:
        console.print(cell("still needs your hand:"))
        for folder, t in todo:
            console.print(cell(f"  {folder}/variant.toml: {t}"))
