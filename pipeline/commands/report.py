"""flopwatch report: regenerate the static site from the results database."""

from __future__ import annotations

from pipeline.commands.common import add_repo_options, db_path, site_path, workdir
from pipeline.store import Store

HELP = "write the static HTML report from stored results"


def add_arguments(p) -> None:
    add_repo_options(p)


def main(args) -> int:
    from reports.site import write_site

    _, work = workdir(args)
    with Store(db_path(args, work)) as store:
        index = write_site(store, site_path(args, work))
    print(f"report: {index}")
    return 0
