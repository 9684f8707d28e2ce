"""The declared manifest formats (`pipeline/project/schema.py`): the published JSON Schemas and key
tables are what the models generate, the schemas accept every bundled manifest and refuse the
mistakes the models refuse, and the examples in docs/variants.md follow the format."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError

from pipeline.project import schema_docs
from pipeline.project.schema import ProjectFile, VariantManifest, problem

ROOT = Path(__file__).resolve().parent.parent
MINIMAL = {"name": "v", "op": "gemm", "backend": "cpp", "sources": ["k.cpp"], "dtypes": ["fp32"],
           "shapes": [[64, 64, 64]], "binding": {"kind": "c", "entry": "gemm"}}


def _validator(which: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((ROOT / schema_docs.schema_path(which)).read_text()))


def test_published_schemas_and_key_tables_are_current():
    assert schema_docs.stale(ROOT) == [], "run: python -m pipeline.project.schema_docs --write"


def test_every_bundled_manifest_passes_both_the_models_and_the_published_schema():
    manifests = sorted([*ROOT.glob("kernels/*/*/variant.toml"), *ROOT.glob("tests/broken_kernels*/*/*/variant.toml")])
    assert len(manifests) > 20
    validator = _validator("variant")
    for path in manifests:
        data = tomllib.loads(path.read_text())
        VariantManifest.model_validate(data)
        assert list(validator.iter_errors(data)) == [], path
    config = tomllib.loads((ROOT / "flopwatch.toml").read_text())
    ProjectFile.model_validate(config)
    assert list(_validator("flopwatch").iter_errors(config)) == []


MISTAKES = [
    ({"shapes": [[True, 64, 64]]}, "shapes[0][0]", "expected an integer, got true (a boolean)"),
    ({"timeout_s": -5}, "timeout_s", "expected a number greater than 0, got -5"),
    ({"build": {"openmp": "false"}}, "build.openmp", 'expected true or false, got "false" (a string)'),
    ({"build": {"flgs": ["-O3"]}}, "build.flgs", "unknown key; did you mean 'flags'?"),
    ({"binding": {"kind": "c", "entyr": "gemm"}}, "binding.entyr", "unknown key; did you mean 'entry'?"),
    ({"tolerance": {"rtl": 1e-3}}, "tolerance.rtl", "unknown key; did you mean 'rtol'?"),
    ({"backend": "cuad"}, "backend", "did you mean 'cuda'?"),
    ({"dtypes": []}, "dtypes", "expected a non-empty list, got []"),
    ({"shapes": 5}, "shapes", "expected a shape-set name or a non-empty list of shapes, got 5"),
    ({"binding": {"kind": "raw", "entry": "k", "grid": [1], "block": [16, True]}}, "binding.block[1]",
     "expected a positive integer or an expression of the sizes, got true (a boolean)"),
    ({"triton": {"kernel": "k", "num_warps": 0}}, "triton.num_warps", "expected a number greater than 0, got 0"),
]


@pytest.mark.parametrize("change, key, words", MISTAKES, ids=[m[1] for m in MISTAKES])
def test_each_mistake_is_refused_by_the_model_and_by_the_published_schema(change, key, words):
    data = {**MINIMAL, **change}
    with pytest.raises(ValidationError) as err:
        VariantManifest.model_validate(data)
    got_key, message = problem(err.value, VariantManifest)
    assert got_key == key and words in message
    assert list(_validator("variant").iter_errors(data)), "the published schema accepts what the model refuses"


def test_an_unknown_key_lists_the_keys_of_its_own_table():
    with pytest.raises(ValidationError) as err:
        VariantManifest.model_validate({**MINIMAL, "tolerance": {"rtl": 1e-3}})
    assert problem(err.value, VariantManifest)[1].endswith("(known in [tolerance]: atol, rtol)")


def _toml_blocks(doc: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", doc, flags=re.S)


def _section(lines: list[str], i: int) -> int:
    """Index of the table header above line `i` (-1: the top level)."""
    return next((j for j in range(i, -1, -1) if lines[j].startswith("[")), -1)


def _alternatives(example: str) -> list[str]:
    """The example with each commented-out `# key = value` line in force: in place of the same
    key of its table where there is one, else uncommented where it stands."""
    lines = example.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^# ([a-z_]+) = (.*?)(\s+#.*)?$", line)
        if not m:
            continue
        key, alt = m.group(1), f"{m.group(1)} = {m.group(2)}"
        variant = list(lines)
        same = [j for j, other in enumerate(lines) if other.startswith(f"{key} =") and _section(lines, j) == _section(lines, i)]
        if same:
            variant[same[0]] = alt
            del variant[i]
        else:
            variant[i] = alt
        out.append("\n".join(variant))
    return out


def test_the_examples_in_docs_variants_md_follow_the_format():
    blocks = _toml_blocks((ROOT / "docs" / "variants.md").read_text())
    manifest = next(b for b in blocks if b.startswith("name = "))
    project = next(b for b in blocks if b.startswith("kernels = "))
    VariantManifest.model_validate(tomllib.loads(manifest))
    alternatives = _alternatives(manifest)
    assert len(alternatives) >= 5  # shapes, output_dtype, module, grid, block
    for text in alternatives:
        VariantManifest.model_validate(tomllib.loads(text))
    ProjectFile.model_validate(tomllib.loads(project))
