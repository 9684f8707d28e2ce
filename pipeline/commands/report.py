"""flopwatch report: regenerate the static site from the results database."""

from __future__ import annotations

from pipeline.commands.common import add_repo_options, cache_dir, open_store, site_path, workdir
from pipeline.history.caches.points_cache import PointsCache

HELP = "write the static HTML report from stored results"


def add_arguments(p) -> None:
    add_repo_options(p)
    p.add_argument("--branch", help="order the history pages along this branch's first-parent line "
                                    "(default: by author date, which keeps commits of every branch)")


def main(args) -> int:
    from pipeline.commands import publish
    from pipeline.history import series

    repo, work = workdir(args)
    order = series.first_parent_shas(repo, args.branch) if args.branch else None
    with open_store(args, work) as store, PointsCache(publish.points_cache_path(cache_dir(args, work))) as cache:
        index = publish.write_site(store, site_path(args, work), order=order, cache=cache)
    print(f"report: {index}")
    return 0
