"""Build and run one hostile variant as a slot does (`build_variant`, `execute_job`), without a
cluster: for the cases that concern one job or one build."""

from __future__ import annotations

from pathlib import Path

from pipeline.project.config import ProjectConfig
from pipeline.project.manifest import load_variant
from pipeline.run.plan import build_plan, jobs_for
from workers.backends.build import build_variant, toolchains
from workers.core.records import BuildResult, Result, Variant
from workers.job.runner import execute_job

ROOT = Path(__file__).resolve().parents[2]
KERNELS = Path("tests/hostile/kernels/gemm")


def variant(name: str) -> Variant:
    return load_variant(ROOT, ROOT / KERNELS / name / "variant.toml", ProjectConfig())


def build(v: Variant, timeout_s: float | None = None) -> tuple[BuildResult, dict]:
    ident = toolchains()[v.backend]["ident"]
    plan = build_plan(ROOT, v, (), ident)
    return build_variant(v, plan.bundle, plan.build_hash, list(plan.include_dirs), timeout_s)


def run(v: Variant, built: tuple[BuildResult, dict], launcher=None, **settings) -> Result:
    record, artifact = built
    assert record.ok, record.first_errors
    extra = {} if launcher is None else {"launcher": launcher}
    return execute_job(jobs_for([v])[0], v, record, artifact,
                       {"timing": {"budget_s": 0.05}, "threads": 1, "timeout_s": 120, **settings}, **extra)
