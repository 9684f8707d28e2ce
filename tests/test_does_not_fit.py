"""A point the compiler refuses for a device limit (shared memory, LDS, registers, stack) is
`does_not_fit` with the compiler's line, not `build_failed`: not a failure in the run's exit
status, the terminal table, the commit page, the axes view or compare; a real compile error
still fails. The compiler output is real (tests/fixtures/compiler_limits/PROVENANCE.md)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from rich.console import Console

from pipeline.history import compare as cmp
from pipeline.run import summary
from reports import axes
from reports.site import write_commit_page
from workers.core import status
from workers.core.params import point_name
from workers.core.records import Binding, BuildResult, Job, Result, Shape, Variant
from workers.toolkit.build_hints import resource_limit

LOGS = Path(__file__).parent / "fixtures" / "compiler_limits"
SHAPE = "M=4096,N=4096,K=4096"
PTXAS = ("ptxas error   : Entry function '_Z23gemm_tiled_swept_kernelILb0EEvPKtS1_Pfiii' uses too much shared "
         "data (0x44000 bytes, 0x38c00 max)")


@pytest.mark.parametrize("log, line", [
    ("nvcc_sm90a_shared_data.txt", "uses too much shared data (0x44000 bytes, 0x38c00 max)"),
    ("clang19_gfx942_lds.txt", "error: local memory (69632) exceeds limit (65536) in 'void gemm_bf16_tiled_swept<true>"),
    ("clang19_gfx942_stack_frame.txt", "stack frame size (16777232) exceeds limit (131056)"),
    ("nvcc_sm90a_param_space.txt", "Formal parameter space overflowed (80008 bytes required, max 32764 bytes allowed)"),
])
def test_the_compilers_resource_limit_lines_are_read_as_not_fitting(log, line):
    found = resource_limit((LOGS / log).read_text())
    assert line in found
    assert "exceeds limit" in found or "too much" in found or "overflowed" in found
    # The two instantiations' lines are both kept, the count line ("2 errors generated") is not.
    assert "generated" not in found and len(found.splitlines()) == len(set(found.splitlines()))


@pytest.mark.parametrize("log", ["nvcc_sm90a_undeclared.txt", "clang19_gfx942_sgpr_stack_inline_asm.txt"])
def test_a_real_compile_error_is_not_read_as_not_fitting(log):
    # The second log has two limit errors and one that is not ("register not available on this
    # GPU", an inline-asm mistake): a build with any real error stays build_failed.
    assert resource_limit((LOGS / log).read_text()) == ""


class _Session:
    """What `_precheck` reads of a run's session: no device of any kind here."""

    devices: dict = {}
    toolchains: dict = {}

    def has_kind(self, kind: str) -> bool:
        return False


def test_the_run_stores_does_not_fit_with_the_compilers_line_and_a_real_error_as_build_failed():
    from pipeline.run.runflow import _precheck

    variant = Variant(name="tiles[BM=64,BK=64]", op="gemm", backend="hip", folder="kernels/gemm/tiles",
                      sources=("k.hip",), binding=Binding(kind="c", entry="f"), dtypes=("fp32",), shapes=())
    job = Job(variant=variant.name, op="gemm", shape=Shape({"M": 64, "N": 64, "K": 64}), dtype="fp32",
              device_kind="rocm")
    for log, expected in (("clang19_gfx942_lds.txt", status.DOES_NOT_FIT),
                          ("nvcc_sm90a_undeclared.txt", status.BUILD_FAILED)):
        build = BuildResult(variant.name, "h", False, "hip:19", (LOGS / log).read_text(), "first errors")
        result = _precheck(_Session(), variant, job, build)
        assert result.status == expected, log
        assert result.diagnostic.startswith("kernels/gemm/hip_tiled_swept/gemm_tiled_swept.hip:81:1: error: local "
                                            "memory (69632) exceeds limit (65536)") if expected == status.DOES_NOT_FIT \
            else result.diagnostic == "first errors"


def _row(variant: str, st: str, tflops: float | None = None, diagnostic: str = "", shape: str = SHAPE) -> dict:
    flops = 2 * 4096**3
    seconds = flops / (tflops * 1e12) if tflops else None
    return dataclasses.asdict(Result(variant=variant, op="gemm", backend="cuda", shape=shape, dtype="bf16",
                                     device="cuda:NVIDIA H100", status=st, median_s=seconds, ci_low_s=seconds,
                                     ci_high_s=seconds, flops=flops, diagnostic=diagnostic))


def _sweep() -> list[dict]:
    rows = [_row(point_name("tiled", {"TILE": t, "BK": b}), status.OK, 100 + t / 4 + b)
            for t in (128, 256) for b in (32, 64) if (t, b) != (256, 64)]
    for shape in (SHAPE, "M=8192,N=8192,K=8192"):
        rows.append(_row("tiled[TILE=256,BK=64]", status.DOES_NOT_FIT, diagnostic=PTXAS, shape=shape))
    return summary.sort_rows(summary.with_peer(rows))


def test_a_run_whose_only_misses_do_not_fit_exits_0_and_a_real_failure_still_exits_1():
    rows = _sweep()
    assert summary.exit_code(rows) == 0
    assert summary.exit_code(rows + [_row("other", status.BUILD_FAILED, diagnostic="error: x")]) == 1


def test_the_terminal_table_shows_does_not_fit_dimmed_once_per_point_with_the_compilers_line():
    out = io.StringIO()
    summary.print_table(_sweep(), Console(file=out, width=300, color_system="truecolor", force_terminal=True), "run")
    text = out.getvalue()
    assert text.count("does_not_fit") == 1 and "2 shapes" in text  # both shapes on one line
    assert "uses too much shared data (0x44000 bytes, 0x38c00 max)" in text
    line = next(line for line in text.splitlines() if "does_not_fit" in line)
    assert "\x1b[2m" in line and "\x1b[31m" not in line  # dim, not the failures' red


def test_the_axes_view_shows_the_point_as_not_fitting_not_as_failed(tmp_path):
    rows = [r for r in _sweep() if r["shape"] == SHAPE]
    [t] = axes.tables(rows)
    cell = t.cells[1][1]
    assert cell.point == "TILE=256,BK=64" and cell.text == "does not fit" and not cell.failed and not cell.fits
    assert "uses too much shared data" in cell.why and t.n_failed == 0 and t.n_unfit == 1
    page = write_commit_page(tmp_path, {"sha": "a" * 40, "subject": "s", "author": "a", "authored_at": "2026"}, rows)
    html = page.read_text()
    view = html[html.index('<h2 id="axes">'):]
    assert 'class="axes-cell does-not-fit"' in view and "1 of 4 points do not fit the device" in view
    assert "points did not measure" not in view
    table = html[:html.index('<h2 id="axes">')]
    assert '<td class="status-does_not_fit">does_not_fit<div class="muted small">ptxas error' in html
    assert 'class="fail"' not in table  # no failure panel, no red status cell


def _side(st: str, diagnostic: str = "") -> cmp.Side:
    samples = tuple(1e-3 * (1 + 0.001 * i) for i in range(20)) if st == status.OK else ()
    return cmp.Side(st, samples, flops=2 * 4096**3, diagnostic=diagnostic)


def test_compare_never_calls_not_fitting_a_regression_or_newly_failing():
    key = ("tiled[TILE=256,BK=64]", SHAPE, "bf16", "cuda:NVIDIA H100")
    fit, unfit = _side(status.OK), _side(status.DOES_NOT_FIT, PTXAS)
    cases = {(unfit, unfit): cmp.DOES_NOT_FIT, (unfit, fit): cmp.NOT_RUN_AT_BASE, (fit, unfit): cmp.NOT_RUN_AT_HEAD,
             (_side(status.BUILD_FAILED, "error: x"), unfit): cmp.NOT_RUN_AT_HEAD}
    for (b, h), kind in cases.items():
        [row] = cmp.compare_sides({key: b}, {key: h}, 0.03)
        report = cmp.Report("a" * 40, "base", "b" * 40, "head", 0.03, 1, (row,))
        assert row.kind == kind and not report.regressions and cmp.exit_status(report) == 0
        assert "does not fit the device" in row.reason and "uses too much shared data" in row.reason
        assert not report.not_run  # not counted as "not run here"
    [row] = cmp.unchanged_rows({key: {"variant": key[0], "shape": SHAPE, "dtype": "bf16", "device": key[3],
                                      "status": status.DOES_NOT_FIT, "diagnostic": PTXAS}}, {}, 0.03)
    assert row.kind == cmp.DOES_NOT_FIT
