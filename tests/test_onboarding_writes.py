"""What `flopwatch new` and `init` write into a user's repository, and where: never through a
committed link that leads out of it, `/.flopwatch/` in its `.gitignore`, no second variant of a
name the project has, modules outside packages drafted by `init`, paths taken as the user's shell
gives them, and builds kept for the `run` after it."""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from pathlib import Path

import git
import pytest

from pipeline.cli import main as cli
from pipeline.onboarding.write import builds
from pipeline.project.config import load_config
from pipeline.project.manifest import load_variant
from pipeline.run import build_cache
from pipeline.run.plan import build_plan
from workers.backends.build import toolchains

HERE = Path(__file__).resolve().parent
TOOLS = toolchains()

# A new user's repository (docs review, "A new user's repository"): a function, its `_ref`, and a
# test comparing them.
OPS = '''import torch
import torch.nn.functional as F


def fused_silu_mul(a, b):
    return F.silu(a) * b


def fused_silu_mul_ref(a, b):
    return a * torch.sigmoid(a) * b
'''
TEST = '''import pytest
import torch

from {module} import fused_silu_mul, fused_silu_mul_ref


@pytest.mark.parametrize("n", [4096])
def test_fused(n):
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.testing.assert_close(fused_silu_mul(a, b), fused_silu_mul_ref(a, b))
'''


def _repo(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    g = git.Repo.init(root, initial_branch="main")
    g.index.add(list(files))
    g.index.commit("sources", author=git.Actor("Dev", "dev@example.com"))
    return root


def _user_repo(tmp_path: Path) -> Path:
    return _repo(tmp_path / "repo", {"ops.py": OPS, "tests/test_ops.py": TEST.format(module="ops")})


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if ".git" not in p.parts}


# -- writes stay inside the repository ------------------------------------------------------------

def test_new_refuses_a_draft_folder_that_is_a_link_out_of_the_repository(tmp_path, capsys):
    """flopwatch/vec_add -> ../../outside: the draft is refused naming the link, nothing is written
    outside, and the repository's other drafts are still written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = _repo(tmp_path / "repo", {
        "k/vec_add.cu": "__global__ void vec_add(const float* a, const float* b, float* c, int n) "
                        "{ int i = threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n",
        "k/scale.cu": "__global__ void scale(const float* x, float* y, int n) { y[0] = 2 * x[0]; }\n"})
    (repo / "flopwatch").mkdir()
    (repo / "flopwatch" / "vec_add").symlink_to("../../outside")
    code = cli(["new", "k", "--repo", str(repo), "--no-build", "--json"])
    rows = {r["variant"]: r for r in _json(capsys)["drafts"]}
    assert os.listdir(outside) == []
    assert rows["vec_add"]["state"] == "refused" and code == 1
    assert rows["vec_add"]["detail"].startswith(
        f"flopwatch/vec_add is a link to ../../outside ({outside}), outside the repository {repo}: nothing is written "
        "through it"), rows["vec_add"]
    assert rows["scale"]["state"] == "not built" and (repo / "flopwatch" / "scale" / "variant.toml").is_file()


def test_init_refuses_a_dangling_workflow_link_out_of_the_repository_and_writes_nothing(tmp_path, capsys):
    """.github/workflows/flopwatch.yml -> ../../../outside/wf.yml (dangling): `init` stops before
    writing anything, naming the link; the file outside is never created."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = _user_repo(tmp_path)
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / ".github" / "workflows" / "flopwatch.yml").symlink_to("../../../outside/wf.yml")
    before = _files(repo)
    code = cli(["init", "--repo", str(repo), "--no-build", "--json"])
    err = capsys.readouterr().err
    assert code == 2 and not (outside / "wf.yml").exists(), err
    assert (".github/workflows/flopwatch.yml is a link to ../../../outside/wf.yml "
            f"({outside / 'wf.yml'}), outside the repository {repo}: nothing is written through it") in err, err
    assert _files(repo) == before  # no draft, no flopwatch.toml, no .gitignore


def test_a_config_or_gitignore_linked_out_of_the_repository_stops_the_command(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = _user_repo(tmp_path)
    (repo / ".gitignore").symlink_to("../outside/ignore")
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 2
    assert ".gitignore is a link to ../outside/ignore" in capsys.readouterr().err
    (repo / ".gitignore").unlink()
    (repo / "flopwatch.toml").symlink_to("../outside/flopwatch.toml")
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 2
    assert "flopwatch.toml is a link to ../outside/flopwatch.toml" in capsys.readouterr().err
    assert os.listdir(outside) == [] and not (repo / "flopwatch").exists()


def test_a_draft_folder_linked_inside_the_repository_is_written_through(tmp_path, capsys):
    """A link that stays inside the repository is the repository's own business."""
    repo = _user_repo(tmp_path)
    (repo / "elsewhere").mkdir()
    (repo / "flopwatch").symlink_to("elsewhere")
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build", "--json"]) == 0
    assert _json(capsys)["drafts"][0]["state"] == "not built"
    assert (repo / "elsewhere" / "fused_silu_mul" / "variant.toml").is_file()



def test_a_build_cache_linked_out_of_the_repository_stops_a_build_but_a_chosen_one_is_used(tmp_path, capsys):
    """.flopwatch -> ../outside: the builds `new` keeps would land outside, so a building `new`
    stops before writing, naming the link; `--no-build` keeps nothing and goes on; a cache the
    user names with `--cache` is theirs to place, and the builds are kept there."""
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = _user_repo(tmp_path)
    (repo / ".flopwatch").symlink_to("../outside")
    assert cli(["new", "ops.py", "--repo", str(repo)]) == 2
    assert ".flopwatch is a link to ../outside" in capsys.readouterr().err
    assert os.listdir(outside) == [] and not (repo / "flopwatch").exists()
    chosen = tmp_path / "cache"
    assert cli(["new", "ops.py", "--repo", str(repo), "--cache", str(chosen), "--json"]) == 0
    assert _json(capsys)["drafts"][0]["state"] == "built"
    assert os.listdir(outside) == [] and len(os.listdir(chosen / "builds")) == 2  # the entry and its peer


def test_the_user_s_own_reference_is_the_check_and_the_built_in_op_its_peer(tmp_path, capsys):
    """`fused_silu_mul` beside its `fused_silu_mul_ref`, whose name also says the built-in swiglu:
    every line `new` prints says the `_ref` is the check and swiglu the peer — the draft's first
    line, the count of references, and the line of the `_ref` it does not draft."""
    repo = _user_repo(tmp_path)
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    text = (repo / "flopwatch" / "fused_silu_mul" / "variant.toml").read_text()
    assert text.startswith("# reference: ops.py:fused_silu_mul_ref (by name, ops.py:9)\n")
    assert '\npeer = { op = "swiglu", inputs = { a = "A", b = "B" } }  # timed as its peer: agrees' in text
    assert "1 entry drafted: 0 a built-in op, 1 the repository's reference" in out
    assert ("fused_silu_mul_ref: the check of fused_silu_mul (its [reference], by name); the built-in op swiglu is "
            "fused_silu_mul's peer") in out

# -- .flopwatch/ ignored ---------------------------------------------------------------------------

def test_init_adds_flopwatch_folder_to_gitignore_once_keeping_the_file(tmp_path, capsys):
    repo = _user_repo(tmp_path)
    (repo / ".gitignore").write_bytes(b"*.pyc\r\nbuild/")  # CRLF, no last newline
    assert cli(["init", "--repo", str(repo), "--no-build", "--no-workflow", "--json"]) == 0
    out = _json(capsys)
    assert (repo / ".gitignore").read_bytes() == b"*.pyc\r\nbuild/\r\n/.flopwatch/\r\n"
    assert ".gitignore: + /.flopwatch/ (flopwatch's results, build cache and checkouts)" in out["config"]
    assert cli(["init", "--repo", str(repo), "--no-build", "--no-workflow", "--json"]) == 1  # drafts exist
    assert (repo / ".gitignore").read_bytes() == b"*.pyc\r\nbuild/\r\n/.flopwatch/\r\n"  # never twice
    assert not any(line.startswith(".gitignore") for line in _json(capsys)["config"])
    # the run's own folder no longer shows as untracked
    (repo / ".flopwatch" / "cache").mkdir(parents=True)
    assert ".flopwatch/" not in git.Repo(repo).git.status("--porcelain")


def test_new_creating_flopwatch_toml_creates_gitignore_and_says_so(tmp_path, capsys):
    repo = _user_repo(tmp_path)
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 0
    assert "created with /.flopwatch/" in capsys.readouterr().out
    assert (repo / ".gitignore").read_text() == "/.flopwatch/\n"
    # a repository that has its configuration keeps its .gitignore as it is: `new` changes config only where it creates it
    other = _repo(tmp_path / "other", {"ops.py": OPS, "flopwatch.toml": "kernels = ['flopwatch']\n"})
    assert cli(["new", "ops.py", "--repo", str(other), "--no-build"]) == 0
    assert not (other / ".gitignore").exists()


# -- init drafts modules outside packages ---------------------------------------------------------

@pytest.mark.parametrize("module", ["ops.py", "fused/ops.py", "fused/silu.py"])
def test_init_drafts_a_module_outside_any_package(tmp_path, capsys, module):
    """A top-level ops.py, or a folder of modules without __init__.py: drafted by `init` as by
    `new` (named ops.py, or keeping `def foo_ref` beside `def foo`)."""
    dotted = module[:-3].replace("/", ".")
    repo = _repo(tmp_path / "repo", {module: OPS, "tests/test_ops.py": TEST.format(module=dotted)})
    assert cli(["init", "--repo", str(repo), "--no-build", "--no-workflow", "--json"]) == 0
    (row,) = _json(capsys)["drafts"]
    assert row["variant"] == "fused_silu_mul" and row["state"] == "not built"
    manifest = tomllib.loads((repo / "flopwatch" / "fused_silu_mul" / "variant.toml").read_text())
    assert manifest["binding"]["entry"].endswith(f"{module}:fused_silu_mul")


def test_init_leaves_a_lone_script_with_a_reference_of_code_found_elsewhere(tmp_path, capsys):
    """Outside a package, `def ref_kernel` beside no `def kernel` is a script's helper (a
    problem's reference.py), not an entry module; `init`'s message then names what it looks
    for, Python modules included, and points at `flopwatch new FILE`."""
    repo = _repo(tmp_path / "repo", {"problem/reference.py": "def ref_kernel(data):\n    return data\n\n\n"
                                                            "def generate_input(n):\n    return n\n"})
    assert cli(["init", "--repo", str(repo), "--no-build"]) == 2
    err = capsys.readouterr().err
    assert ("no __global__ kernel, pybind11 module, torch extension, KernelBench problem or Python entry module "
            "(functional.py, ops.py or interface.py, or a module keeping `def foo_ref` beside `def foo`)") in err
    assert "flopwatch new FILE" in err and not (repo / "flopwatch").exists()


# -- no second variant of a name -------------------------------------------------------------------

def test_new_refuses_a_second_variant_of_a_name_the_project_has(tmp_path, capsys):
    repo = _repo(tmp_path / "repo", {
        "ops.py": OPS + "\n\ndef fast_add(a, b):\n    return a + b\n", "tests/test_ops.py": TEST.format(module="ops")})
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build", "--json"]) == 0
    _json(capsys)
    shutil.rmtree(repo / "flopwatch" / "fast_add")  # fast_add only in the second folder: written there
    code = cli(["new", "--out", "drafts", "ops.py", "--repo", str(repo), "--no-build", "--json"])
    rows = {r["variant"]: r for r in _json(capsys)["drafts"]}
    assert code == 1 and rows["fused_silu_mul"]["state"] == "refused"
    assert rows["fused_silu_mul"]["detail"] == (
        "a variant named fused_silu_mul exists in flopwatch/fused_silu_mul; two variants of one name are both invalid: "
        "redraft it there (--out flopwatch --force), or rename that one (`name` in "
        "flopwatch/fused_silu_mul/variant.toml) and draft again")
    assert not (repo / "drafts" / "fused_silu_mul").exists()
    assert rows["fast_add"]["state"] == "not built" and (repo / "drafts" / "fast_add" / "variant.toml").is_file()
    # --force in the same folder rewrites the one variant of that name
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build", "--force", "--json"]) == 1  # fast_add now in drafts/
    rows = {r["variant"]: r for r in _json(capsys)["drafts"]}
    assert rows["fused_silu_mul"]["state"] == "not built" and rows["fast_add"]["state"] == "refused"


def test_drafts_refused_are_not_counted_as_drafted_nor_listed_as_needing_a_hand(tmp_path, capsys):
    """Docs review (2026-12-06, 973e79f): with every draft refused, `new` still printed "2 entries
    drafted" and a "still needs your hand" line for a file it had not written."""
    repo = _repo(tmp_path / "repo", {
        "ops.py": OPS + "\n\ndef fast_add(a, b):\n    return a + b\n", "tests/test_ops.py": TEST.format(module="ops")})
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 0
    first = capsys.readouterr().out
    assert "2 entries drafted" in first and "still needs your hand:" in first  # fast_add: no reference found
    assert cli(["new", "--out", "drafts", "ops.py", "--repo", str(repo), "--no-build"]) == 1
    out = " ".join(capsys.readouterr().out.split())  # the table folds long cells
    assert "0 entries drafted: 0 a built-in op, 0 the repository's reference, 0 unchecked (no reference found); " \
           "1 not drafted; 2 not written (refused, or there already: the table says which)" in out
    assert "still needs your hand" not in out and "timed at" not in out and not (repo / "drafts").exists()
    # drafts that are there already (left as they are without --force) are not written either
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "0 entries drafted" in out and "2 not written" in out and "still needs your hand" not in out


def test_a_hand_written_variant_s_name_is_taken_whatever_its_folder_is_called(tmp_path, capsys):
    repo = _user_repo(tmp_path)
    (repo / "kernels" / "mine").mkdir(parents=True)
    (repo / "kernels" / "mine" / "variant.toml").write_text('name = "fused_silu_mul"\nop = "swiglu"\n')
    assert cli(["new", "ops.py", "--repo", str(repo), "--no-build", "--json"]) == 1
    (row,) = _json(capsys)["drafts"]
    assert row["state"] == "refused" and row["detail"].endswith(
        "rename that one (`name` in kernels/mine/variant.toml) and draft again")


# -- paths as the user types them -------------------------------------------------------------------

def test_sources_are_taken_from_the_shell_s_folder_or_the_repository_s(tmp_path, capsys, monkeypatch):
    repo = _repo(tmp_path / "R", {"src/ops.py": OPS, "src/tests/test_ops.py": TEST.format(module="ops")})
    monkeypatch.chdir(tmp_path)
    assert cli(["new", "--repo", "R", "R/src/ops.py", "--no-build", "--json"]) == 0  # the shell's path
    assert [r["variant"] for r in _json(capsys)["drafts"]] == ["fused_silu_mul"]
    monkeypatch.chdir(repo / "src")
    for named in ("ops.py", "src/ops.py", str(repo / "src" / "ops.py")):  # the shell's, the repository's, absolute
        assert cli(["new", "--repo", str(repo), named, "--no-build", "--json", "--force"]) == 0, named
        (row,) = _json(capsys)["drafts"]
        assert (row["folder"], row["state"]) == ("flopwatch/fused_silu_mul", "not built")


def test_new_from_a_subfolder_drafts_into_the_repository_around_it_and_init_names_it(tmp_path, capsys, monkeypatch):
    """Docs review (2026-12-06, 973e79f): without `--repo`, `new` and `init` took the current folder
    for the repository: from a subfolder `new ops.py` was refused and `init` wrote flopwatch.toml
    into the subfolder. `new` drafts into the repository around the current folder, as `run`
    finds it; `init` names that repository and leaves the choice to the user."""
    repo = _repo(tmp_path / "R", {"src/ops.py": OPS, "src/tests/test_ops.py": TEST.format(module="ops"),
                                  "docs/README.md": "notes\n"})
    monkeypatch.chdir(repo / "src")
    for named in ("ops.py", "src/ops.py"):  # the shell's path, the repository's
        assert cli(["new", named, "--no-build", "--json", "--force"]) == 0, named
        (row,) = _json(capsys)["drafts"]
        assert row["folder"] == "flopwatch/fused_silu_mul"
        assert (repo / "flopwatch" / "fused_silu_mul" / "variant.toml").is_file()
    assert not (repo / "src" / "flopwatch").exists() and not (repo / "src" / "flopwatch.toml").exists()
    shutil.rmtree(repo / "flopwatch")
    (repo / "flopwatch.toml").unlink()
    # init drafts a whole repository (and its workflow): from a folder inside one it names the
    # repository and writes nothing (workflows review: a project in a home kept under git had
    # the home's root drafted), neither there nor in the folder
    monkeypatch.chdir(repo / "docs")
    assert cli(["init", "--no-build", "--no-workflow", "--json"]) == 2
    assert (f"{repo / 'docs'} is inside the git repository {repo}; init drafts a whole repository: run it there, "
            f"or `flopwatch init --repo {repo}`") in capsys.readouterr().err
    assert not (repo / "flopwatch.toml").exists() and not (repo / "docs" / "flopwatch.toml").exists()
    assert cli(["init", "--repo", str(repo), "--no-build", "--no-workflow", "--json"]) == 0
    assert (repo / "flopwatch.toml").is_file() and (repo / "flopwatch" / "fused_silu_mul").is_dir()
    assert not (repo / "docs" / "flopwatch.toml").exists() and not (repo / "docs" / "flopwatch").exists()


def test_a_source_outside_the_repository_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    repo = _user_repo(tmp_path)
    (tmp_path / "stray.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    assert cli(["new", "--repo", str(repo), "stray.py", "--no-build"]) == 2
    assert f"stray.py: {tmp_path / 'stray.py'} is outside the repository {repo}" in capsys.readouterr().err
    assert cli(["new", "--repo", str(repo), "nothing.py", "--no-build"]) == 2
    assert (f"nothing.py: no such file or folder (looked in the current folder {tmp_path} or the repository {repo})"
            in capsys.readouterr().err)
    assert not (repo / "flopwatch").exists()


# -- builds side by side, kept for the run -----------------------------------------------------------

def test_the_build_pool_follows_free_cores_and_memory():
    gib = 1 << 30
    assert builds.pool_size(20, cores=16, memory=128 * gib, load=1.0) == 16  # this command alone
    assert builds.pool_size(20, cores=16, memory=9 * gib, load=0.2) == 4  # 2 GiB a build
    assert builds.pool_size(3, cores=16, memory=128 * gib, load=0.0) == 3
    assert builds.pool_size(20, cores=16, memory=128 * gib, load=7.5) == 9  # cores the machine's other work holds
    assert builds.pool_size(5, cores=2, memory=128 * gib, load=6.0) == 1  # never none
    assert builds.pool_size(5, cores=16, memory=gib, load=0.0) == 1


@pytest.mark.slow
def test_new_says_each_build_and_the_run_after_it_builds_nothing(tmp_path, capsys):
    """A Python entry and its op's built-in peer: a line per build as it finishes, each kept in
    the build cache under the run's hash; drafting again takes them from there, and the `run`
    that follows builds nothing."""
    repo = _user_repo(tmp_path)
    assert cli(["new", "ops.py", "--repo", str(repo)]) == 0
    err = capsys.readouterr().err.splitlines()
    lines = [x for x in err if x.startswith("[")]
    assert len(lines) == 2 and lines[-1].startswith("[2/2]"), err  # the entry and its op's peer (swiglu)
    assert {x.split("]")[1].split(":")[0].strip() for x in lines} == {"fused_silu_mul",
                                                                     "peer.fused_silu_mul (built-in peer)"}
    assert all(x.split(": ")[1].startswith("built, ") and x.endswith(" s") for x in lines), lines
    code = cli(["run", "--repo", str(repo), "--db", str(tmp_path / "r.db"), "--budget", "0.1", "--no-report", "--json"])
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and (run["rebuilt"], run["from_cache"]) == (0, 2), run
    again = cli(["new", "ops.py", "--repo", str(repo), "--force", "--json"])
    rows = _json(capsys)["drafts"]
    assert again == 0 and rows[0]["from_cache"] and rows[0]["build_s"] is not None


KERNELS = {"k/vec_add.cu": "__global__ void vec_add(const float* a, const float* b, float* c, int n) "
                           "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n",
           "k/scale.cu": "__global__ void scale(const float* x, float* y, int n) "
                         "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n"}


@pytest.mark.slow
@pytest.mark.skipif(not TOOLS["cuda"].get("ident"), reason="needs nvcc")
def test_compiled_drafts_build_in_worker_processes_and_are_kept(tmp_path, capsys, monkeypatch):
    """CUDA kernels built in the pool's worker processes: each outcome on its draft, each build
    in the cache under the hash `run` looks up."""
    repo = _repo(tmp_path / "repo", KERNELS)
    monkeypatch.setattr(builds, "pool_size", lambda n, cores=None, memory=None, load=None: max(1, min(n, 2)))
    pools = []
    real = builds.ProcessPoolExecutor
    monkeypatch.setattr(builds, "ProcessPoolExecutor", lambda *a, **kw: pools.append(a) or real(*a, **kw))
    assert cli(["new", "k", "--repo", str(repo)]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[") and "built-in peer" not in x]
    assert pools == [(2,)], pools
    assert {x.split("] ")[1].split(",")[0] for x in lines} == {"vec_add: built", "scale: built"}, lines
    config = load_config(repo)
    tools = toolchains()
    for folder in ("flopwatch/vec_add", "flopwatch/scale"):
        variant = load_variant(repo, repo / folder / "variant.toml", config, {})
        plan = build_plan(repo, variant, config.include_dirs, tools["cuda"]["ident"])
        record, _ = build_cache.load(repo / ".flopwatch" / "cache" / "builds" / plan.build_hash)
        assert record.ok and record.variant == variant.name


SOFTMAX = '''import torch


class SoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.softmax(x, -1)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return y * (dy - (dy * y).sum(-1, keepdim=True))


def my_softmax(x):
    return SoftmaxFunction.apply(x)
'''
SOFTMAX_TEST = '''import torch

from mysoft import my_softmax


def test_it():
    x = torch.randn(4, 64)
    torch.testing.assert_close(my_softmax(x), torch.softmax(x, -1))
'''


@pytest.mark.slow
def test_the_run_after_new_builds_no_pass_of_an_autograd_entry_again(tmp_path, capsys):
    """An entry drafted in every pass: the run's backward peer (torch's softmax returning its
    output) is another build than the forward one (which writes into the harness's buffer), and
    `new` builds both, so the run of the backward pass finds every build in the cache."""
    repo = _repo(tmp_path / "repo", {"mysoft.py": SOFTMAX, "tests/test_mysoft.py": SOFTMAX_TEST})
    assert cli(["new", "mysoft.py", "--repo", str(repo)]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("[")]
    assert [re.match(r"\[\d/3\] (.*): built, ", x).group(1) for x in lines] == [
        "my_softmax", "peer.softmax (built-in peer)", "peer.softmax[mode=backward] (built-in peer)"], lines
    code = cli(["run", "--repo", str(repo), "--db", str(tmp_path / "r.db"), "--budget", "0.05", "--no-report",
                "--json", "--variant", "my_softmax[mode=backward]"])
    run = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and (run["rebuilt"], run["from_cache"]) == (0, 2), run
    assert {(r["variant"], r["status"]) for r in run["results"] if r["status"] != "skipped"} == {
        ("my_softmax[mode=backward]", "ok"), ("peer.softmax[mode=backward]", "ok")}
