"""Variant manifests and project configuration: good ones load, bad ones name file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.project.config import ConfigError, ProjectConfig, load_config
from pipeline.project.discovery import discover
from pipeline.project.manifest import ManifestError, load_variant

GOOD = """
name = "v"
op = "gemm"
backend = "cpp"
sources = ["k.cpp"]
dtypes = ["fp32"]
shapes = [[64, 32, 16], {M = 8, N = 8, K = 8}]
[binding]
kind = "c"
entry = "gemm"
[build]
flags = ["-O2"]
openmp = true
[tolerance]
rtol = 1e-4
"""


def _variant(tmp_path: Path, text: str, name: str = "v") -> Path:
    folder = tmp_path / "kernels" / "gemm" / name
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text("// kernel\n")
    (folder / "variant.toml").write_text(text)
    return folder / "variant.toml"


def test_good_manifest_loads_every_field(tmp_path):
    v = load_variant(tmp_path, _variant(tmp_path, GOOD), ProjectConfig())
    assert (v.name, v.op, v.backend, v.layout, v.folder) == ("v", "gemm", "cpp", "nt", "kernels/gemm/v")
    assert [s.dims for s in v.shapes] == [{"M": 64, "N": 32, "K": 16}, {"M": 8, "N": 8, "K": 8}]
    assert v.flags == ("-O2",) and v.openmp and v.rtol == 1e-4 and v.devices == ("cpu",)
    assert v.binding.kind == "c" and v.binding.entry == "gemm"


@pytest.mark.parametrize("change, key, words", [
    (("op = \"gemm\"", "op = \"conv\""), "op", "'conv' is not one of ['attention', 'attention_causal', 'copy'"),
    (("op = \"gemm\"", "op = \"gemn\""), "op", "did you mean 'gemm'?"),
    (("dtypes = [\"fp32\"]", "dtypes = [\"fp8\"]"), "dtypes[0]", 'got "fp8"'),
    (("sources = [\"k.cpp\"]", "sources = [\"../../../../etc/passwd\"]"), "sources", "outside the repository"),
    (("sources = [\"k.cpp\"]", "sources = [\"/etc/passwd\"]"), "sources", "absolute path"),
    (("sources = [\"k.cpp\"]", "sources = [\"missing.cpp\"]"), "sources", "does not exist"),
    (("shapes = [[64, 32, 16], {M = 8, N = 8, K = 8}]", "shapes = \"nope\""), "shapes", "unknown shape set 'nope'"),
    (("shapes = [[64, 32, 16], {M = 8, N = 8, K = 8}]", "shapes = [[64, 32]]"), "shapes[0]", "not a gemm shape"),
    (("kind = \"c\"", "kind = \"python\""), "binding.kind", "not a binding of the cpp back end"),
    (("name = \"v\"", "name = \"v\"\ncolour = 1"), "colour", "unknown key"),
    (("rtol = 1e-4", "rtol = \"tight\""), "tolerance.rtol", 'expected a number, got "tight" (a string)'),
])
def test_bad_manifest_names_file_and_key(tmp_path, change, key, words):
    path = _variant(tmp_path, GOOD.replace(*change))
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, path, ProjectConfig())
    assert err.value.path == "kernels/gemm/v/variant.toml"
    assert err.value.key == key
    assert str(err.value).startswith(f"kernels/gemm/v/variant.toml: {key}: ")
    assert words in str(err.value)


def test_a_missing_source_is_named_from_the_manifest_with_the_file_meant(tmp_path):
    """Docs review (2026-12-06): "sources: file 'gemm_blockd.cpp' does not exist in missing/"
    named the folder relative to the kernels folder and no likely file. The manifest's path from
    the repository root leads the line; the nearest file of the folder follows."""
    folder = tmp_path / "kernels" / "gemm" / "missing"
    (folder / "src").mkdir(parents=True)
    (folder / "gemm_blocked.cpp").write_text("// kernel\n")
    (folder / "src" / "tile.cpp").write_text("// kernel\n")
    (folder / "variant.toml").write_text(GOOD.replace('sources = ["k.cpp"]', 'sources = ["gemm_blockd.cpp"]'))
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert valid == [] and [bad.error for bad in invalid] == [
        "kernels/gemm/missing/variant.toml: sources: file 'gemm_blockd.cpp' does not exist; did you mean "
        "'gemm_blocked.cpp'?"]
    (folder / "variant.toml").write_text(GOOD.replace('sources = ["k.cpp"]', 'sources = ["src/tiles.cpp"]'))
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, folder / "variant.toml", ProjectConfig())
    assert str(err.value) == ("kernels/gemm/missing/variant.toml: sources: file 'src/tiles.cpp' does not exist; "
                              "did you mean 'src/tile.cpp'?")
    (folder / "variant.toml").write_text(GOOD.replace('sources = ["k.cpp"]', 'sources = ["other.cu"]'))
    with pytest.raises(ManifestError) as err:
        load_variant(tmp_path, folder / "variant.toml", ProjectConfig())
    assert str(err.value) == "kernels/gemm/missing/variant.toml: sources: file 'other.cu' does not exist"


def test_toml_syntax_error_is_reported_with_the_file(tmp_path):
    path = _variant(tmp_path, "name = \n")
    with pytest.raises(ManifestError, match="kernels/gemm/v/variant.toml: \\(syntax\\)"):
        load_variant(tmp_path, path, ProjectConfig())


def test_one_broken_manifest_does_not_hide_the_others(tmp_path):
    _variant(tmp_path, GOOD, "good")
    _variant(tmp_path, GOOD.replace('name = "v"', 'name = "bad"').replace('op = "gemm"', 'op = 3'), "bad")
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert [v.name for v in valid] == ["v"]
    assert [i.name for i in invalid] == ["bad"] and "op" in invalid[0].error


def test_two_variants_of_one_name_are_both_invalid_naming_both_folders(tmp_path):
    # A new folder that sorts first must not take over the existing series of that name.
    _variant(tmp_path, GOOD, "existing")
    _variant(tmp_path, GOOD, "a_new")
    valid, invalid = discover(tmp_path, ProjectConfig())
    assert valid == []
    errors = {bad.manifest: bad.error for bad in invalid}
    new, old = "kernels/gemm/a_new/variant.toml", "kernels/gemm/existing/variant.toml"
    assert errors == {new: f"{new}: name: 'v' is also the name of {old}; rename one (a series is known by its name)",
                      old: f"{old}: name: 'v' is also the name of {new}; rename one (a series is known by its name)"}


def test_config_from_flopwatch_toml_and_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.flopwatch]\nkernels = \"src/kernels\"\n[tool.flopwatch.shape_sets]\nsmall = [[8, 8, 8]]\n")
    cfg = load_config(tmp_path)
    assert cfg.kernel_dirs == ("src/kernels",) and cfg.shape_sets == {"small": [[8, 8, 8]]}
    (tmp_path / "flopwatch.toml").write_text("kernels = [\"k\"]\n[defaults]\ntiming_budget_s = 0.5\n")
    cfg = load_config(tmp_path)  # flopwatch.toml wins over pyproject
    assert cfg.kernel_dirs == ("k",) and cfg.timing_budget_s == 0.5
    assert load_config(tmp_path / "nowhere") == ProjectConfig()


@pytest.mark.parametrize("text, words", [
    ("kernels = [\"../outside\"]\n", "flopwatch.toml: kernels: folder '../outside' must stay inside the repository"),
    ("colour = 1\n", "flopwatch.toml: colour: unknown key"),
    ("[defaults]\nbudget = 1\n", "flopwatch.toml: defaults.budget: unknown key (known in [defaults]: "),
    ("[defaults]\ntimeout = 1\n", "did you mean 'timeout_s'?"),
    ("[defaults]\ntimeout_s = -5\n", "flopwatch.toml: defaults.timeout_s: expected a number greater than 0, got -5"),
    ("[shape_sets]\nsmall = [[8, true, 8]]\n",
     "flopwatch.toml: shape_sets.small[0][1]: expected an integer, got true (a boolean)"),
    ("kernels = 3\n", "flopwatch.toml: kernels: expected a folder or a list of folders, got 3"),
])
def test_bad_config_is_a_config_error(tmp_path, text, words):
    (tmp_path / "flopwatch.toml").write_text(text)
    with pytest.raises(ConfigError, match="flopwatch.toml") as err:
        load_config(tmp_path)
    assert words in str(err.value)


def test_every_mistake_of_flopwatch_toml_is_reported_at_once(tmp_path, capsys):
    """Docs review (2026-12-06): `kernals` with `include_dirs = "kernels/include"` reported only
    `kernals`; `timeout_s = -5` with it only include_dirs. variant.toml reports every one."""
    (tmp_path / "flopwatch.toml").write_text('kernals = ["kernels"]\ninclude_dirs = "kernels/include"\n'
                                             'shape_sets = {small = [[8, 8]]}\n[defaults]\ntimeout_s = -5\n'
                                             '[extra]\nx = 1\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    lines = str(err.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["kernals", "extra", "include_dirs", "defaults.timeout_s"], lines
    assert lines[0].startswith("flopwatch.toml: kernals: unknown key; did you mean 'kernels'?")
    assert "expected a number greater than 0, got -5" in lines[3]
    # The folder rule beside the format's: both said.
    (tmp_path / "flopwatch.toml").write_text('kernels = ["../outside"]\n[defaults]\ntimeout_s = 0\n')
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path)
    assert [line.split(": ")[1] for line in str(err.value).splitlines()] == ["defaults.timeout_s", "kernels"]
    # On the command line: one `flopwatch: error:` line per mistake, exit 2.
    import git

    from pipeline import cli

    git.Repo.init(tmp_path)
    assert cli.main(["ls", "--repo", str(tmp_path)]) == 2
    printed = capsys.readouterr().err.strip().splitlines()
    assert len(printed) == 2 and all(line.startswith("flopwatch: error: flopwatch.toml: ") for line in printed), printed


def test_bundled_suite_is_valid(repo_root):
    valid, invalid = discover(repo_root, load_config(repo_root))
    names = {v.name for v in valid}
    assert not invalid, invalid
    assert {"cpp_naive", "cpp_blocked", "cpp_blocked_omp", "torch_ref"} <= names


def test_broken_set_has_exactly_one_invalid_manifest(repo_root):
    valid, invalid = discover(repo_root, load_config(repo_root), ("tests/broken_kernels",))
    assert [i.name for i in invalid] == ["broken_manifest"]
    assert "sources" in invalid[0].error and "outside the repository" in invalid[0].error
    assert len(valid) == 8


def test_a_manifest_with_several_mistakes_reports_each_on_its_own_line(tmp_path, capsys):
    import io

    from rich.console import Console

    import git

    from pipeline.cli import main as cli
    from pipeline.run.summary import print_table

    _variant(tmp_path, GOOD.replace("flags =", "flgs =").replace('["fp32"]', '["fp8"]').replace("1e-4", '"tight"'))
    valid, [bad] = discover(tmp_path, ProjectConfig())
    f = "kernels/gemm/v/variant.toml"
    assert bad.error.splitlines() == [
        f"{f}: build.flgs: unknown key; did you mean 'flags'? (known in [build]: flags, include_dirs, makefile, openmp)",
        f"{f}: dtypes[0]: expected one of fp32, fp16, bf16, got \"fp8\" (a string)",
        f"{f}: tolerance.rtol: expected a number, got \"tight\" (a string)"]
    # The run's table and `ls` keep the lines: the last mistake is not cut off.
    out = io.StringIO()
    print_table([{"variant": "v", "op": "", "backend": "", "shape": "", "dtype": "", "device": "", "status": "invalid",
                  "diagnostic": bad.error}], Console(file=out, width=400), "run")
    assert all(any(line.split(": ", 1)[1] in row for row in out.getvalue().splitlines()) for line in bad.error.splitlines())
    git.Repo.init(tmp_path)
    assert cli(["ls", "--repo", str(tmp_path)]) == 1
    shown = capsys.readouterr().out
    assert "tolerance.rtol: expected a number" in shown and "dtypes[0]: expected one of" in shown
