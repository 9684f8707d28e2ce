"""The tensors a Python file makes with a torch, numpy or cupy factory, read by the
interpreter of `pipeline.onboarding.source.py_eval` (never run): `torch.randn(M, K,
dtype=torch.bfloat16)`, `.half()`, `.to(torch.float16)`, `.astype(...)`, `torch.empty_like(x)`.
A script's tensors and a test's (its parameters filled from the first parametrize row) are
read the same way."""

from __future__ import annotations

import ast

from pipeline.onboarding.source.py_values import DTYPE_NAMES, TENSOR_MODULES, DType, Frame, Seq, dotted
from pipeline.onboarding.source.records import TensorMade

# Factories and the dtype they make when none is given (torch's default dtype is float32;
# numpy's and cupy's random and zeros make float64).
FACTORIES = {"randn": "fp32", "rand": "fp32", "empty": "fp32", "zeros": "fp32", "ones": "fp32", "full": "fp32",
             "randint": "int64", "normal": "fp32", "uniform": "fp32", "standard_normal": "float64",
             "random": "float64", "empty_like": "", "zeros_like": "", "ones_like": "", "randn_like": "",
             "rand_like": "", "full_like": ""}
NUMPY_DEFAULT = "float64"
CONVERSIONS = {"half": "fp16", "float": "fp32", "bfloat16": "bf16", "double": "float64", "int": "int32",
               "long": "int64", "bool": "bool"}


def tensors_made(interp, given: dict[int, dict[str, ast.AST]] | None = None) -> list[TensorMade]:
    """Every tensor the file makes with a torch, numpy or cupy factory, in source order.

    given: for a function (keyed by the line of its `def`), its parameters bound to expressions
    of the module read in the module's scope — what pytest passes a test from the first row of
    its `@pytest.mark.parametrize` — so that `torch.randn(B, T, H, dtype=dtype)` in the test
    gets its sizes and dtype. The expressions must be nodes of `interp.tree`."""
    if not given:
        return interp.reading(lambda: _tensors(interp), [])

    def read() -> list[TensorMade]:
        module = Frame(interp.tree)
        functions = [n for n in ast.walk(interp.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        interp.given = {node: {name: interp.values(expr, module) for name, expr in params.items()}
                        for node in functions if (params := given.get(node.lineno))}
        return _tensors(interp)

    try:
        return interp.reading(read, [])
    finally:
        interp.given = {}


def _tensors(interp) -> list[TensorMade]:
    made: list[TensorMade] = []
    by_name: dict[str, TensorMade] = {}
    for node in sorted((n for n in ast.walk(interp.tree) if isinstance(n, ast.Call)),
                       key=lambda n: (n.lineno, n.col_offset)):
        frame = interp.frame_of(node)
        qualified = interp.qualified(node.func, frame)
        module, _, rest = qualified.partition(".")
        factory = rest.split(".")[-1]
        if module not in TENSOR_MODULES or factory not in FACTORIES or not rest:
            continue
        shape, dtypes, explicit = _factory(interp, node, frame, module, factory, by_name)
        top, dtypes, explicit = _conversions(interp, node, frame, dtypes, explicit)
        name = _target(interp, top)
        for dtype in dtypes or [""]:
            record = TensorMade(name=name, shape=shape, dtype=dtype, explicit=explicit, factory=qualified,
                                line=node.lineno)
            made.append(record)
            if name:
                by_name[name] = record
    return made


def _factory(interp, node: ast.Call, frame: Frame, module: str, factory: str,
             made: dict[str, TensorMade]) -> tuple[tuple, list[str], bool]:
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    dtypes = dtypes_of(interp, kw.get("dtype"), frame)
    explicit = bool(dtypes)
    if factory.endswith("_like"):
        source = made.get(dotted(node.args[0])) if node.args else None
        shape = source.shape if source else ()
        if not dtypes and source:
            dtypes, explicit = [source.dtype], source.explicit
        return shape, dtypes, explicit
    dims: list[ast.AST] = []
    size = kw.get("size", kw.get("shape"))
    args = node.args
    if factory in ("randint",):
        args = args[2:] if len(args) >= 3 else args[1:] if len(args) == 2 and isinstance(args[1], ast.Tuple) else []
    if factory in ("full",):
        args = args[:1]
    if factory in ("normal", "uniform") and module != "torch":
        size = size or (args[2] if len(args) > 2 else None)
        args = []
    if size is not None:
        dims = list(size.elts) if isinstance(size, (ast.Tuple, ast.List)) else [size]
    elif len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        dims = list(args[0].elts)
    elif len(args) == 1 and isinstance(args[0], (ast.Name, ast.Starred)):  # randn(shape), randn(*shape)
        inner = args[0].value if isinstance(args[0], ast.Starred) else args[0]
        elements = interp.elements(inner, frame)
        dims = [e for e, _ in elements] if elements is not None else [args[0]]
        if elements is None:  # a tuple the name holds (a test's parametrized `shape`): its sizes
            held = [v for v in interp.values(inner, frame) if isinstance(v, Seq)]
            if len(held) == 1 and all(type(i) is int for i in held[0].items):
                dims = [ast.Constant(i) for i in held[0].items]
    else:
        dims = list(args)
    shape = tuple(_dim(interp, d, frame) for d in dims if not isinstance(d, ast.Starred))
    if not dtypes:
        default = FACTORIES[factory] if module == "torch" else NUMPY_DEFAULT
        if module != "torch" and factory == "randint":
            default = "int64"
        dtypes = [default] if default else []
    return shape, dtypes, explicit


def _dim(interp, node: ast.AST, frame: Frame) -> int | str:
    value = interp.one_int(node, frame)
    return value if value is not None else ast.unparse(node)


def dtypes_of(interp, node: ast.AST | None, frame: Frame) -> list[str]:
    """The dtypes (flopwatch's names) an expression may be."""
    if node is None:
        return []
    out = []
    for v in interp.values(node, frame):
        name = v.name if isinstance(v, DType) else DTYPE_NAMES.get(v) if isinstance(v, str) else None
        if name and name not in out:
            out.append(name)
    return out


def _conversions(interp, node: ast.AST, frame: Frame, dtypes: list[str], explicit: bool):
    """Walk up `.half()`, `.to(torch.bfloat16)`, `.astype(np.float16)`, `.cuda()`: the outermost
    call of the chain, and the dtype it ends with."""
    current = node
    while True:
        attribute = interp.parent.get(current)
        call = interp.parent.get(attribute) if isinstance(attribute, ast.Attribute) else None
        if not (isinstance(call, ast.Call) and call.func is attribute):
            # torch.randn(...) / 10 and torch.randn(K, N).T are the same tensor, as made
            if isinstance(attribute, ast.BinOp) or isinstance(attribute, ast.Attribute) \
                    and attribute.attr in ("T", "mT", "data"):
                current = attribute
                continue
            return current, dtypes, explicit
        method = attribute.attr
        if method in CONVERSIONS and not call.args:
            dtypes, explicit = [CONVERSIONS[method]], True
        elif method in ("to", "astype", "type", "view"):
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            candidates = [kw.get("dtype"), *call.args]
            for c in candidates:
                found = dtypes_of(interp, c, frame)
                if found:
                    dtypes, explicit = found, True
                    break
        current = call


def _target(interp, node: ast.AST) -> str:
    parent = interp.parent.get(node)
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return dotted(targets[0])
    if isinstance(parent, ast.Tuple):
        assign = interp.parent.get(parent)
        if isinstance(assign, ast.Assign) and isinstance(assign.targets[0], ast.Tuple) \
                and len(assign.targets[0].elts) == len(parent.elts):
            return dotted(assign.targets[0].elts[parent.elts.index(node)])
    if isinstance(parent, ast.NamedExpr):
        return parent.target.id
    return ""
