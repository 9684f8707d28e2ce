"""Passes end to end on the CPU, through `flopwatch run` and `flopwatch compare` on a repository
written here: an autograd entry declared with modes = ["forward", "backward", "full"] is a
series per pass, each beside the built-in peer's same pass, its backward checked against the
reference's gradients; a commit that slows only its backward is caught in `backward` and `full`
and not in `forward`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from suite_repo import init_repo

from pipeline import cli

pytestmark = pytest.mark.slow

ENTRY = """import torch


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, eps):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, w, rstd)
        return x * rstd * w

    @staticmethod
    def backward(ctx, dy):
        x, w, rstd = ctx.saved_tensors
        for _ in range(REPEAT):  # a backward that does its work REPEAT times (the same result)
            xhat = x * rstd
            g = dy * w
            dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
            dw = (dy * xhat).sum(0)
        return dx, dw, None


def rms_norm(x, w, eps):
    return RMSNorm.apply(x, w, eps)
"""

MANIFEST = """name = "auto_rms"
op = "rms_norm"
backend = "python"
dtypes = ["fp32"]
shapes = [[512, 2048]]
modes = ["forward", "backward", "full"]

[binding]
kind = "python"
entry = "rms.py:rms_norm"
returns = true
"""


def _commit(root: Path, repeat: int, subject: str) -> str:
    folder = root / "kernels" / "auto_rms"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "variant.toml").write_text(MANIFEST)
    (folder / "rms.py").write_text(ENTRY.replace("REPEAT", str(repeat)))
    (root / "flopwatch.toml").write_text('kernels = ["kernels"]\n')
    (root / ".gitignore").write_text(".flopwatch/\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", subject], cwd=root, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("modes")
    init_repo(root)
    base = _commit(root, 1, "an autograd RMS norm measured in three passes")
    head = _commit(root, 6, "Recompute the backward's terms (a backward-only slowdown)")
    return root, base, head


def test_each_pass_is_a_series_beside_the_peers_same_pass(repo, capsys, tmp_path):
    root, base, _ = repo
    code = cli.main(["run", base, "--repo", str(root), "--db", str(tmp_path / "r.db"), "--budget", "0.2",
                     "--no-report", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["rebuilt"] == 2  # one build for the entry's three passes, one for the peer's
    rows = {r["variant"]: r for r in out["results"]}
    assert set(rows) == {"auto_rms", "auto_rms[mode=backward]", "auto_rms[mode=full]", "peer.rms_norm",
                         "peer.rms_norm[mode=backward]", "peer.rms_norm[mode=full]"}
    for name in ("auto_rms", "auto_rms[mode=backward]", "auto_rms[mode=full]"):
        r = rows[name]
        assert r["status"] == "ok" and r["pct_of_peer"], r
        assert r["timing"]["mode"] == (name.partition("=")[2].rstrip("]") or "forward")
        assert r["peak_mem_bytes"] is None and r["launch_bound"] is False  # a CPU has no counters, no floor
    grads = [c for c in rows["auto_rms[mode=backward]"]["correctness"]["checks"] if c.get("pass") == "backward"]
    assert grads and grads[0]["passed"] and set(grads[0]["gradients"]) == {"X", "W"}
    assert rows["peer.rms_norm[mode=full]"]["peer"] and rows["peer.rms_norm[mode=full]"]["status"] == "ok"


def test_a_backward_only_slowdown_is_caught_in_backward_and_full_not_in_forward(repo, capsys, tmp_path):
    root, base, head = repo
    # 50% (the backward does its work six times over): the unchanged forward is then not at the
    # mercy of a loaded 2-core machine's noise, as at the CPU's 5% default
    code = cli.main(["compare", base, head, "--repo", str(root), "--db", str(tmp_path / "c.db"), "--budget", "0.2",
                     "--threshold", "50%", "--no-report", "--json"])
    out = json.loads(capsys.readouterr().out)
    kinds = {r["variant"]: r["kind"] for r in out["rows"]}
    assert kinds["auto_rms[mode=backward]"] == "slower", kinds
    assert kinds["auto_rms[mode=full]"] == "slower", kinds
    assert kinds["auto_rms"] != "slower", kinds  # the forward did not change
    assert code == 1


def test_bisect_takes_a_forward_series_by_its_plain_name_beside_its_passes(repo, capsys, tmp_path):
    """`--variant auto_rms` names the forward series (its passes are named apart): bisect runs
    it alone, and the unchanged forward does not reproduce; its backward does."""
    root, base, head = repo
    # 50%: what this test is about is which series `--variant` names, not how small a step
    # bisect sees. At the CPU's 5% default, the unchanged forward "reproduced" once on the
    # 2-core CI machine under load; the backward does its work six times over.
    argv = ["bisect", "--good", base, "--bad", head, "--repo", str(root), "--db", str(tmp_path / "b.db"),
            "--budget", "0.2", "--threshold", "50%", "--no-report", "--json"]
    code = cli.main([*argv, "--variant", "auto_rms"])
    forward = json.loads(capsys.readouterr().out)
    assert code == 0 and not forward["outcome"]["reproduced"], forward
    assert forward["outcome"]["message"].startswith("did not reproduce"), forward  # both ends measured
    assert forward["outcome"]["measurements"] >= 2
    code = cli.main([*argv, "--variant", "auto_rms[mode=backward]"])
    backward = json.loads(capsys.readouterr().out)
    assert code == 1 and backward["outcome"]["first_bad"] == head, backward
