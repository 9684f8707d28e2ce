"""A test's own statements as an entry's reference (pipeline.onboarding.conventions.sliced_from_tests, decide.sliced_reference), the keyword
arguments and rtol the comparing test passes, and inputs of a dtype of their own: drafted from
fixture repositories of the shapes Liger-Kernel's mHC and multi-token-attention tests have
(written for these tests), then the generated reference run against the entry."""

from __future__ import annotations

import importlib.util
import sys
import tomllib

import pytest

from pipeline.onboarding.onboard import python_drafts
from pipeline.onboarding.source.repo import RepoFiles

torch = pytest.importorskip("torch")

MIX = '''import torch
import torch.nn.functional as F


def fast_pre(x, w):
    return (x * w.unsqueeze(-1).to(x.dtype)).sum(dim=-2).float()


def fast_conv(x, weight, bias=None, padding: int = 0):
    return F.conv1d(x, weight, bias, padding=padding)


def fast_sinkhorn(x, *, steps: int = 20, eps: float = 1e-6):
    m = torch.softmax(x, dim=-1)
    for _ in range(steps):
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
        m = m / (m.sum(dim=-1, keepdim=True) + eps)
    return m


def fast_scale(x):
    return x * 2
'''

MIX_TEST = '''import pytest
import torch
import torch.nn.functional as F

from mylib.mix import fast_conv, fast_pre, fast_scale, fast_sinkhorn

SHAPES = [(2, 4, 3, 8), (1, 2, 2, 4)]
DTYPES = [(torch.float16, 2e-2)]


class TorchConv(torch.nn.Module):
    def __init__(self, C, K, bias, dtype, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(C, C, K, dtype=dtype, device=device))
        self.bias = torch.nn.Parameter(torch.empty(C, dtype=dtype, device=device)) if bias else None
        self.K = K

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, padding=self.K // 2)


def sinkhorn_ref(x, *, steps, eps):
    m = torch.softmax(x, dim=-1)
    for _ in range(steps):
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
        m = m / (m.sum(dim=-1, keepdim=True) + eps)
    return m


@pytest.mark.parametrize("B, T, H, C", SHAPES)
@pytest.mark.parametrize("dtype, tol", DTYPES + [(torch.float32, 1e-5)])
def test_pre(B, T, H, C, dtype, tol):
    x1 = torch.randn(B, T, H, C, dtype=dtype)
    w1 = torch.rand(B, T, H, dtype=torch.float32)
    out = fast_pre(x1, w1)
    x2 = x1.detach().clone()
    w2 = w1.detach().clone()
    expected = (x2.float() * w2.unsqueeze(-1)).sum(dim=-2)
    torch.testing.assert_close(out.float(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("B, C, L, K", [(2, 4, 16, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_conv(B, C, L, K, bias):
    x = torch.randn(B, C, L)
    ref = TorchConv(C=C, K=K, bias=bias, dtype=torch.float32, device="cpu")
    weight = torch.randn(C, C, K)
    if bias:
        b = torch.randn(C)
        b1 = b.clone()
    else:
        b1 = None
    with torch.no_grad():
        ref.weight.copy_(weight)
        if bias:
            ref.bias.copy_(b)
    out = fast_conv(x.clone(), weight.clone(), b1, padding=K // 2)
    expected = ref(x)
    out.sum().backward() if out.requires_grad else None
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("N, M", [(6, 5)])
def test_sinkhorn(N, M):
    x = torch.randn(N, M)
    cfg = dict(steps=3, eps=1e-4)
    torch.testing.assert_close(fast_sinkhorn(x, **cfg), sinkhorn_ref(x, **cfg))


def test_scale_is_not_zero():
    x = torch.randn(4, 8)
    y = fast_scale(x)
    torch.testing.assert_close(y - y, torch.zeros_like(y))
'''


@pytest.fixture(scope="module")
def drafted(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    files = {"mylib/__init__.py": "", "mylib/mix.py": MIX, "tests/__init__.py": "", "tests/test_mix.py": MIX_TEST}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo = RepoFiles.from_texts(files)
    drafts, _ = python_drafts(repo, "mylib/mix.py", "flopwatch", set(), True, [])
    return root, {d.name: d for d in drafts}


def _line(text: str) -> int:
    """The line of the fixture test file that starts with `text` (after its indent)."""
    return next(i for i, line in enumerate(MIX_TEST.splitlines(), 1) if line.strip().startswith(text))


def _toml(draft) -> dict:
    return tomllib.loads(draft.files["variant.toml"])


def _reference(root, draft):
    """The generated reference.py imported as the job's child would, from the repository root."""
    path = root / "flopwatch" / draft.name / "reference.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(draft.files["reference.py"])
    sys.path.insert(0, str(root))
    try:
        spec = importlib.util.spec_from_file_location(f"ref_{draft.name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.reference
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n == "tests" or n.startswith(("tests.", "mylib"))]:
            del sys.modules[name]


def test_an_inline_expected_value_becomes_the_reference_with_the_tests_dtypes_and_rtol(drafted):
    root, drafts = drafted
    draft = drafts["fast_pre"]
    m = _toml(draft)
    line = _line("torch.testing.assert_close(out.float(), expected")
    assert draft.files["variant.toml"].startswith(f"# reference: tests/test_mix.py:{line} (its own statements, in "
                                                  "reference.py, compared by assert_close)")
    assert m["reference"]["call"] == "reference.py:reference"
    assert m["reference"]["found"] == "test" and m["reference"]["where"] == f"tests/test_mix.py:{line}"
    # x in the job's dtype (the first row's fp16), w as the test makes it whatever that is
    assert m["dtypes"] == ["fp16"]
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["B", "T", "H", "C"]},
                                        {"name": "w", "shape": ["B", "T", "H"], "dtype": "fp32"}]
    # the test's rtol, above flopwatch's fp16 default, at the test's own size; the scaled sizes at the dtype's
    assert m["check"][0]["rtol"] == 0.02 and "tolerance" not in m
    text = draft.files["reference.py"]
    assert "def reference(x, w):" in text and "x2 = x" in text and "w2 = w" in text
    assert "expected = (x2.float() * w2.unsqueeze(-1)).sum(dim=-2)" in text
    assert "torch.randn" not in text  # the inputs are the job's, never the test's own draws
    reference = _reference(root, draft)
    x, w = torch.randn(2, 4, 3, 8, dtype=torch.float64), torch.rand(2, 4, 3, dtype=torch.float64)
    torch.testing.assert_close(reference(x, w), (x.float() * w.unsqueeze(-1)).sum(dim=-2))


def test_a_module_the_test_builds_and_loads_is_the_reference_on_the_branch_the_first_row_takes(drafted):
    root, drafts = drafted
    draft = drafts["fast_conv"]
    m = _toml(draft)
    assert m["reference"]["call"] == "reference.py:reference" and m["reference"]["where"] == \
        f"tests/test_mix.py:{_line('torch.testing.assert_close(out, expected)')}"
    # `b1` under `if bias:` (the first row's True), not the `b1 = None` of its else; padding = K // 2
    assert m["reference"]["inputs"] == [{"name": "x", "shape": ["B", "C", "L"]},
                                        {"name": "weight", "shape": ["C", "C", "K"]},
                                        {"name": "bias", "shape": ["C"]}, {"name": "padding", "value": 1}]
    assert draft.guessed == ()
    text = draft.files["reference.py"]
    assert "from tests.test_mix import TorchConv" in text
    assert "C = x.shape[1]" in text and "K = weight.shape[2]" in text  # sizes follow the inputs' shapes
    assert "bias = True" in text and "b = bias_in" in text  # the flag and the tensor keep apart
    assert "with torch.no_grad():" in text and "ref.bias.copy_(b)" in text
    assert "backward" not in text and "fast_conv(" not in text
    reference = _reference(root, draft)
    x, weight, bias = torch.randn(3, 5, 12), torch.randn(5, 5, 3), torch.randn(5)
    torch.testing.assert_close(reference(x, weight, bias, 1),
                               torch.nn.functional.conv1d(x, weight, bias, padding=1))


def test_the_keyword_arguments_the_test_spreads_go_to_the_entry_and_its_named_reference(drafted):
    _, drafts = drafted
    m = _toml(drafts["fast_sinkhorn"])
    assert m["reference"]["call"] == "../../tests/test_mix.py:sinkhorn_ref"
    assert m["binding"]["kwargs"] == {"steps": 3, "eps": 1e-4}
    assert m["reference"]["kwargs"] == {"steps": 3, "eps": 1e-4}


def test_a_comparison_of_the_entrys_output_with_itself_names_no_reference(drafted):
    _, drafts = drafted
    m = _toml(drafts["fast_scale"])
    assert m["reference"]["check"] == "none" and "reference.py" not in drafts["fast_scale"].files


def test_reference_inputs_of_their_own_dtype_and_a_wider_returned_output():
    from types import SimpleNamespace

    from workers.job import child
    from workers.ops.reference import ReferenceOp, load

    spec = ReferenceOp(name="pre", call="torch.add", dims=("N",), sizes={"N": 8},
                       inputs=({"name": "x", "shape": ["N"]}, {"name": "w", "shape": ["N"], "dtype": "fp32"}))
    op = load(spec)
    made = op.make_inputs({"N": 8}, torch.float16, "default", "cpu", torch.Generator().manual_seed(0))
    assert made["x"].dtype == torch.float16 and made["w"].dtype == torch.float32
    variant = SimpleNamespace(output_dtype=None, op="pre", binding=SimpleNamespace(entry="m:f"))
    for returned, problem in ((torch.zeros(8, dtype=torch.float32), None),
                              (torch.zeros(8, dtype=torch.bfloat16), "expected float16")):
        armed = SimpleNamespace(ref=torch.zeros(8, dtype=torch.float64), returned_problem=None, g=None)
        child.take_returned(armed, returned, op, variant, torch.float16)
        assert (armed.returned_problem is None) if problem is None else problem in armed.returned_problem
