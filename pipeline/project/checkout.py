"""Commit pickup with gitpython: resolve a revision and materialise it into a cache folder,
never touching the checkout the user stands in."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

import git


class CheckoutError(ValueError):
    pass


# Where materialise lists the archive members it would not extract (symlinks out of the tree).
REFUSED = ".flopwatch-refused"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    author: str
    authored_at: str
    parents: tuple[str, ...]
    dirty: bool = False

    @property
    def short(self) -> str:
        return self.sha[:10] + ("+dirty" if self.dirty else "")


def open_repo(path: Path) -> git.Repo:
    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise CheckoutError(f"{path} is not inside a git repository") from None


def root_around(path: Path) -> Path:
    """The working tree of the git repository `path` lies in, as `open_repo` finds it; `path`
    itself where no repository is around it (`new` and `init` draft a folder not yet under git)."""
    try:
        return Path(git.Repo(path, search_parent_directories=True).working_tree_dir).resolve()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return path


def commit_info(repo: git.Repo, rev: str, dirty: bool = False) -> CommitInfo:
    if not rev or rev.startswith("-") or any(ch in rev for ch in "\0\n\r"):
        # git would read "--output=…" as an option, not a revision
        raise CheckoutError(f"not a revision: {rev!r}")
    try:
        c = repo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError):
        raise CheckoutError(f"unknown revision {rev!r} in {repo.working_tree_dir}") from None
    return CommitInfo(c.hexsha, c.summary if isinstance(c.summary, str) else c.summary.decode(),
                      f"{c.author.name} <{c.author.email}>", c.authored_datetime.isoformat(),
                      tuple(p.hexsha for p in c.parents), dirty)


# flopwatch's own folder in a repository: its store, build cache and checkouts (`--db`, `--cache`
# and their defaults, pipeline.commands.common).
OWN_FOLDER = ".flopwatch"


def working_tree(repo: git.Repo, own: tuple[Path, ...] = ()) -> tuple[Path, CommitInfo]:
    """The working tree as it is; the commit is HEAD, marked dirty when anything differs from it,
    except what flopwatch writes itself: its `.flopwatch/` folder and the other paths in `own`
    (a build cache or store file given inside the repository). Else the first run of a fresh
    clone, which creates `.flopwatch/`, and every run after it would be recorded `<sha>+dirty`
    and kept out of the history."""
    top = Path(repo.working_tree_dir)
    return top, commit_info(repo, "HEAD", changed_outside(repo, (top / OWN_FOLDER, *own)))


def changed_outside(repo: git.Repo, own: tuple[Path, ...]) -> bool:
    """Whether anything tracked is modified, or anything untracked and not ignored exists, outside
    the paths `own` (those outside the working tree are ignored)."""
    top = Path(repo.working_tree_dir).resolve()
    excluded = []
    for path in own:
        try:
            inside = Path(os.path.abspath(path)).resolve().relative_to(top)
        except ValueError:
            continue  # outside the working tree: git does not see it anyway
        if inside.parts:
            excluded.append(f":(top,exclude,literal){inside.as_posix()}")
    # Untracked folders reported as one line each (`normal`): a cache of thousands of files costs
    # git one directory read, not a walk.
    status = repo.git.status("--porcelain", "--untracked-files=normal", "--", ":(top)", *excluded)
    return bool(status.strip())


def materialise(repo: git.Repo, rev: str, cache: Path) -> tuple[Path, CommitInfo]:
    """Extract the tree of `rev` (git archive) into `cache/<sha>/`, reused when present."""
    info = commit_info(repo, rev)
    target = cache / info.sha
    if (target / ".flopwatch-complete").exists():
        return target, info
    if target.exists():
        shutil.rmtree(target)
    buf = io.BytesIO()
    repo.archive(buf, treeish=info.sha, format="tar")
    buf.seek(0)
    target.mkdir(parents=True)
    refused: list[str] = []

    def keep_inside(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
        # tarfile's "data" filter refuses links that point outside the tree, absolute paths and
        # device files; a refused member is left out and named, instead of failing the commit.
        try:
            return tarfile.data_filter(member, dest)
        except tarfile.FilterError as exc:
            refused.append(f"{member.name}: {exc}")
            return None

    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(target, filter=keep_inside)
    if refused:
        (target / REFUSED).write_text("\n".join(refused) + "\n")
    (target / ".flopwatch-complete").write_text(info.sha)
    return target, info


def refused_members(root: Path) -> dict[str, str]:
    """{path: why} of the members `materialise` left out of the tree at `root`."""
    path = root / REFUSED
    if not path.exists():
        return {}
    return dict(line.split(": ", 1) for line in path.read_text().splitlines() if ": " in line)


def first_parent_range(repo: git.Repo, good: str, bad: str) -> list[CommitInfo]:
    """Commits after `good` up to and including `bad`, oldest first, along first parents."""
    good_sha = commit_info(repo, good).sha
    out = []
    for c in repo.iter_commits(bad, first_parent=True):
        if c.hexsha == good_sha:
            return [commit_info(repo, x.hexsha) for x in reversed(out)]
        out.append(c)
    raise CheckoutError(f"{good} is not a first-parent ancestor of {bad}")


def off_default_branch(repo: git.Repo, revs: dict[str, str], env: dict | None = None) -> str | None:
    """In GitHub Actions, why one of `revs` ({"--good": rev, ...}) may not be built, else None.

    A CI job holds the nightly's secrets, store and machines, and a full clone holds every branch
    and tag: a job dispatched on the default branch could otherwise build an unreviewed branch's
    kernels. So every rev must be on the history of origin/<default branch> (the branch named in
    the event payload), as `git merge-base --is-ancestor` says. Outside Actions anything goes."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") != "true":
        return None
    try:
        event = json.loads(Path(env.get("GITHUB_EVENT_PATH", "")).read_text())
        branch = event["repository"]["default_branch"]
    except (OSError, ValueError, KeyError, TypeError):
        return "in GitHub Actions the default branch is read from $GITHUB_EVENT_PATH, which does not name it"
    tip = f"refs/remotes/origin/{branch}"
    try:
        repo.git.rev_parse("--verify", "--quiet", f"{tip}^{{commit}}")
    except git.GitCommandError:
        return f"origin/{branch} is not in the clone: fetch it (actions/checkout with fetch-depth: 0)"
    for option, rev in revs.items():
        sha = commit_info(repo, rev).sha
        if not repo.is_ancestor(sha, tip):
            return (f"{option} {rev} ({sha[:12]}) is not on the history of the default branch origin/{branch}: "
                    f"in CI only its commits are built")
    return None
