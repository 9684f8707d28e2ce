"""Options and set-up shared by the subcommands that measure (run, compare, bisect, nightly)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pipeline.fleet import cluster, local_ray, slots
from pipeline.history.memory.threshold import DEFAULT as DEFAULT_MEMORY
from pipeline.history.memory.threshold import MemoryThreshold
from pipeline.history.memory.threshold import parse as parse_memory_threshold
from pipeline.history.verdicts import parse_threshold
from pipeline.project import checkout, config
from pipeline.run.driver_clock import DriverClock
from pipeline.run.progress import Progress
from pipeline.run.runflow import RunOptions, Session
from pipeline.store import Store, location
from pipeline.store.location import StoreLocation
from workers.measure.timing import METHODS


class UsageError(ValueError):
    """A bad command-line value; the CLI prints it and exits 2."""


def threshold(text: str | None) -> float | None:
    """`--threshold` of compare, detect, bisect and nightly ("3%", "0.03"); None when not given:
    then each series gets the default of its device kind (`pipeline.project.config.default_threshold`)."""
    if text is None:
        return None
    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise UsageError(f"--threshold: {exc}") from None


def add_store_options(p: argparse.ArgumentParser) -> None:
    """--repo and where its results are kept (--store / --db)."""
    p.add_argument("--repo", default=".", help="repository to benchmark (default: the one around the cwd)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--store", metavar="URL",
                       help="the results store: sqlite:///PATH, a file path, or postgresql://USER@HOST/DB "
                            "(default: $FLOPWATCH_STORE, else <repo>/.flopwatch/results.db)")
    where.add_argument("--db", metavar="PATH", help="a SQLite results file (the same as --store PATH)")


def add_repo_options(p: argparse.ArgumentParser) -> None:
    add_store_options(p)
    p.add_argument("--site", help="report folder (default: <repo>/.flopwatch/site)")


def threshold_help(use: str, what: str) -> str:
    """`--threshold` help with the defaults the code uses (pipeline/project/config.py)."""
    return (f"{what} (default: per device kind of the series, pipeline/project/config.py DEFAULT_THRESHOLDS: "
            f"{config.describe_threshold_defaults(use)})").replace("%", "%%")


def budget_help(command: str) -> str:
    """`--budget` help with the default the command uses (pipeline/project/config.py)."""
    project = f"flopwatch.toml [defaults] timing_budget_s, else {config.DEFAULT_BUDGET_S:g} s"
    if command in config.COMMAND_BUDGET_S:
        default = f"{config.COMMAND_BUDGET_S[command]:g} s"
    elif command == "nightly":
        default = f"the head: {project}; bisect probes: {config.COMMAND_BUDGET_S['bisect']:g} s"
    else:
        default = project
    return f"seconds of timing per job (default: {default})"


def add_measure_options(p: argparse.ArgumentParser, command: str = "run") -> None:
    add_repo_options(p)
    p.add_argument("--kernels", action="append", help="variant folder(s), repository-relative (default: config)")
    p.add_argument("--variant", action="append", default=[],
                   help="only these variants (repeatable); of a swept variant: NAME (every point), "
                        "NAME[AXIS=value,...] (the points with those values)")
    p.add_argument("--cache", metavar="DIR",
                   help="build cache folder (default: $FLOPWATCH_CACHE, else <repo>/.flopwatch/cache)")
    add_ray_address_option(p)
    p.add_argument("--no-ray-reuse", action="store_true",
                   help="start a local Ray for this command only, instead of attaching to flopwatch's own local "
                        "Ray kept between commands (also FLOPWATCH_RAY_REUSE=0)")
    p.add_argument("--num-gpus", type=int, help="GPUs to advertise on a local Ray (default: all torch sees)")
    p.add_argument("--budget", type=float, help=budget_help(command))
    p.add_argument("--timing-method", choices=METHODS, default=METHODS[0],
                   help="GPU timing rule: adaptive batches, warm-up and sample count (default), or the "
                        "fixed rule (1 s warm-up, 50 samples, batches of 10) to compare against")
    p.add_argument("--timeout", type=float,
                   help=f"per-job timeout in seconds (default: the manifest's timeout_s, else "
                        f"flopwatch.toml [defaults] timeout_s, else {config.DEFAULT_TIMEOUT_S:g} s)")
    p.add_argument("--threads", type=int,
                   help="host threads for torch in each job (default: CPU jobs all cores; GPU jobs the "
                        f"node's cores divided by its GPUs, at most {slots.GPU_JOB_MAX_THREADS})")
    p.add_argument("--profile", action="store_true",
                   help="run each timed GPU call once more under ncu / rocprofv3 and keep its counters")
    p.add_argument("--spawn-per-job", action="store_true",
                   help="start a fresh interpreter per job instead of forking it from the slot's warm runner "
                        "(slower; for measuring what the warm runner saves)")
    p.add_argument("--no-peer-check", action="store_true",
                   help="skip the peer check (one peer job re-timed on each other GPU of a node, its median held "
                        "against the node's fastest GPU)")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary instead of a table")


def add_memory_threshold_option(p: argparse.ArgumentParser) -> None:
    """--memory-threshold of compare, detect, bisect and nightly (`pipeline.history.memory.threshold`)."""
    p.add_argument("--memory-threshold", metavar="PCT,SIZE",
                   help=("the smallest peak memory growth that counts: more than this share of the smaller figure "
                         f"and more than this many bytes, e.g. 10%,4MiB (default {DEFAULT_MEMORY.text}; one part "
                         "alone keeps the other's default). Peak memory is deterministic: no test, one measurement "
                         "a side").replace("%", "%%"))


def memory_threshold(text: str | None) -> MemoryThreshold:
    """`--memory-threshold` as a MemoryThreshold (its default when not given)."""
    if text is None:
        return DEFAULT_MEMORY
    try:
        return parse_memory_threshold(text)
    except ValueError as exc:
        raise UsageError(f"--memory-threshold: {exc}") from None


def add_points_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--points", choices=("all", "best"), default="all",
                   help="swept variants ([params]): time every point (default; nightly always does), or only "
                        "each variant's best stored point, for a quick pull-request check (a variant with no "
                        "stored result yet has all its points timed)")


def add_ray_address_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray-address", metavar="HOST:PORT",
                   help="join the Ray cluster whose head listens there (default: $FLOPWATCH_RAY_ADDRESS, then "
                        "$RAY_ADDRESS; without any, a local Ray). A cluster with token authentication needs "
                        "RAY_AUTH_MODE=token and its token in this shell (README, Clusters)")


def ray_reuse(env=None) -> tuple[bool, float]:
    """Whether to use flopwatch's kept local Ray and after how many idle seconds it stops
    (`local_ray.kept_settings`); a setting that is neither is a usage error."""
    try:
        return cluster.local_ray.kept_settings(env)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def workdir(args) -> tuple[object, Path]:
    repo = checkout.open_repo(Path(args.repo).resolve())
    return repo, Path(repo.working_tree_dir) / ".flopwatch"


def store_location(args, work: Path | None = None) -> StoreLocation:
    """--store / --db, else $FLOPWATCH_STORE, else the repository's `.flopwatch/results.db`
    (only this last one needs the repository: `work` is looked up when not given)."""
    given = args.store if getattr(args, "store", None) is not None else getattr(args, "db", None)
    if given is None and not os.environ.get(location.STORE_ENV):
        work = work if work is not None else workdir(args)[1]
    return location.resolve(given, (work or Path(".flopwatch")) / location.DEFAULT_FILE)


def open_store(args, work: Path | None = None) -> Store:
    return Store(store_location(args, work))


def cache_dir(args, work: Path) -> Path:
    """--cache, else $FLOPWATCH_CACHE, else the repository's `.flopwatch/cache`."""
    return location.resolve_cache(getattr(args, "cache", None), work / "cache")


def site_path(args, work: Path) -> Path:
    return Path(args.site) if getattr(args, "site", None) else work / "site"


def run_options(args, command: str, resume: bool = False) -> RunOptions:
    wanted = getattr(args, "shape", None) or []
    wanted = [wanted] if isinstance(wanted, str) else wanted
    shapes = tuple(s.replace("x", "×") if "=" not in s else s for s in wanted)
    budget = args.budget if args.budget is not None else config.COMMAND_BUDGET_S.get(command)
    return RunOptions(kernel_dirs=tuple(args.kernels) if args.kernels else None, only=tuple(args.variant),
                      shapes=shapes, timing_method=getattr(args, "timing_method", METHODS[0]),
                      resume=resume, budget_s=budget, timeout_s=args.timeout, threads=args.threads,
                      profile=getattr(args, "profile", False), command=command,
                      spawn_per_job=getattr(args, "spawn_per_job", False),
                      peer_check=not getattr(args, "no_peer_check", False),
                      points=getattr(args, "points", "all"))


def open_session(args, work: Path, defer_ray: bool = False) -> Session:
    """The command's store, cluster and clock. `defer_ray`: for a command that may time nothing
    (compare), a local Ray that would have to be started for it starts only when a job must run."""
    clock = DriverClock()
    with clock.phase("store"):
        store = open_store(args, work)
    reuse, idle_s = ray_reuse()
    reuse = reuse and not args.no_ray_reuse

    def connect() -> cluster.ClusterInfo:
        return cluster.connect(args.ray_address, args.num_gpus, reuse=reuse, idle_s=idle_s)

    progress, cache = Progress(enabled=not args.json), cache_dir(args, work)
    try:
        if defer_ray and cluster.starts_local_ray(args.ray_address, args.num_gpus, reuse):
            return Session(store, work, None, progress, clock=clock, cache=cache, connect=connect,
                           local_resources=local_ray.planned_resources(args.num_gpus))
        with clock.phase("ray_start"):
            info = connect()
    except BaseException:
        store.close()
        raise
    return Session(store, work, info, progress, clock=clock, cache=cache)
