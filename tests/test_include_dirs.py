"""Node-side include folders: variables expand from the toolchain first, then the environment;
what is missing is named; the driver's fingerprint follows the checkout's content."""

from __future__ import annotations

from pathlib import Path

from workers.toolkit.include_dirs import expand, expand_one, fingerprint


def test_toolchain_variables_win_over_the_environment(tmp_path: Path):
    (tmp_path / "hk" / "include").mkdir(parents=True)
    (tmp_path / "hip").mkdir()
    out = expand(["${HIPKITTENS_ROOT}/include", "$HIP_INCLUDE_DIR"],
                 {"HIP_INCLUDE_DIR": str(tmp_path / "hip")},
                 {"HIPKITTENS_ROOT": str(tmp_path / "hk"), "HIP_INCLUDE_DIR": "/elsewhere"})
    assert out.problem == ""
    assert out.folders == (str(tmp_path / "hk" / "include"), str(tmp_path / "hip"))


def test_unset_variable_is_named():
    out = expand(["${HIPKITTENS_ROOT}/include"], {}, {"HOME": "/root"})
    assert out.folders == ()
    assert "$HIPKITTENS_ROOT" in out.problem and "not set" in out.problem
    assert expand_one("${A}/x/$B", {"A": "/a"}) == ("/a/x/$B", ["B"])


def test_missing_folder_is_named(tmp_path: Path):
    out = expand(["${HK}/include"], {}, {"HK": str(tmp_path / "nowhere")})
    assert out.folders == ()
    assert str(tmp_path / "nowhere" / "include") in out.problem and "does not exist" in out.problem


def test_fingerprint_follows_header_content(tmp_path: Path):
    inc = tmp_path / "include"
    inc.mkdir()
    (inc / "kittens.cuh").write_text("#pragma once\n")
    env = {"HK": str(tmp_path)}
    first = fingerprint(["${HK}/include"], env)
    assert fingerprint(["${HK}/include"], env) == first
    (inc / "kittens.cuh").write_text("#pragma once\n// changed\n")
    assert fingerprint(["${HK}/include"], env) != first
    # a folder this machine cannot expand still names the build by its text
    assert fingerprint(["${UNSET}/include"], env) != fingerprint(["${OTHER}/include"], env)
