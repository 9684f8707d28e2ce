"""The arguments of a call in a test, each read as far as the test tells it (`Arg`): a tensor it
makes (`torch.randn(B, T, H, dtype=dtype)`, through `.clone()`, `.transpose(1, 2)` and helpers
such as `make_tensor(*size)`; its dimensions named by the parametrize row's sizes), a constant,
a value of the row, a spread list of sample inputs (the largest row), a spread dict of keywords.
Nothing is imported or run."""

from __future__ import annotations

import ast
import operator

from pipeline.onboarding.source.py_values import dotted, own_returns
from pipeline.onboarding.source.pytest_file import PytestFile, strip
from pipeline.onboarding.source.records import Arg, TensorMade


def args_of(f: PytestFile, fn: ast.AST, call: ast.Call) -> tuple[tuple[Arg, ...], dict]:
    """(positional, keyword) arguments of a call in a test, each read as far as the test tells it."""
    args: list[Arg] = []
    for a in call.args:
        if isinstance(a, ast.Starred):
            rows = _spread(f, fn, a.value, call.lineno)
            if not rows:
                args.append(Arg(ast.unparse(a)))
                break
            # a loop over sample inputs: the largest row (the first is often the smallest edge case)
            read = [[arg_of(f, scope, e, getattr(e, "lineno", call.lineno)) for e, scope in row] for row in rows]
            args += max(read, key=_elements)
        else:
            args.append(arg_of(f, fn, a, call.lineno))
    kwargs = {}
    for k in call.keywords:
        if k.arg:
            kwargs[k.arg] = arg_of(f, fn, k.value, call.lineno)
        else:  # `**cfg` with `cfg = dict(tmax=8, rms_eps=1e-6)`: its keywords, as far as they are read
            for key, value in _spread_keywords(f, fn, k.value, call.lineno):
                kwargs.setdefault(key, arg_of(f, fn, value, call.lineno))
    return tuple(args), kwargs


def _spread_keywords(f: PytestFile, fn: ast.AST, node: ast.AST, line: int) -> list[tuple[str, ast.AST]]:
    """The keywords `**node` passes where the test writes them: a dict literal or `dict(...)`,
    directly or through a name bound to one."""
    if isinstance(node, ast.Name):
        bound = f.assigned(fn, node.id, line)
        if bound is None or bound[1] is not None or isinstance(bound[0], ast.Starred):
            return []
        node = bound[0]
    if isinstance(node, ast.Dict):
        return [(k.value, v) for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Call) and dotted(node.func) == "dict" and not node.args:
        return [(k.arg, k.value) for k in node.keywords if k.arg]
    return []


def _elements(row: list[Arg]) -> int:
    total = 0
    for a in row:
        n = 1
        for d in a.shape:
            n *= d if type(d) is int else a.sizes.get(d, 1)
        total += n if a.tensor else 0
    return total


def _spread(f: PytestFile, fn: ast.AST, node: ast.AST, line: int, depth: int = 0) -> list[list[tuple[ast.AST, ast.AST]]]:
    """The rows of elements `*node` may spread (each element with the function it is written
    in), where the test writes them: a list literal, a name bound to one, a loop over a list of
    such (`for args in self.sample_inputs(device)`: each row), a helper returning one, and
    slices of these (`*args[:2]`)."""
    if depth > 6:
        return []
    if isinstance(node, (ast.List, ast.Tuple)):
        return [[(e, fn) for e in node.elts]]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        s = node.slice
        bounds = [None if b is None else b.value if isinstance(b, ast.Constant) else
                  -b.operand.value if isinstance(b, ast.UnaryOp) and isinstance(b.operand, ast.Constant) else "?"
                  for b in (s.lower, s.upper)]
        if "?" in bounds:
            return []
        return [row[bounds[0]:bounds[1]] for row in _spread(f, fn, node.value, line, depth + 1)]
    if isinstance(node, ast.Name):
        bound = f.assigned(fn, node.id, line)
        if bound is None:
            return []
        value, index = bound
        if isinstance(value, ast.Starred):  # a loop variable: each element of the iterable
            out = []
            for row in _spread(f, fn, value.value, line, depth + 1):
                for element, scope in row:
                    out += _spread(f, scope, element, 10 ** 9, depth + 1)
            return out
        if index is not None:
            return []
        return _spread(f, fn, value, line, depth + 1)
    if isinstance(node, ast.Call):
        helper = f.helper(fn, node)
        if helper is not None:
            returned = [r.value for r in own_returns(helper)]
            if len(returned) == 1:
                return _spread(f, helper, returned[0], 10 ** 9, depth + 1)
    return []


def arg_of(f: PytestFile, fn: ast.AST, node: ast.AST, line: int, depth: int = 0) -> Arg:
    """One argument expression of a test, read as far as the test tells it."""
    text = ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return Arg(text, value=node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return Arg(text, value=-node.operand.value)
    if depth > 6:
        return Arg(text)
    stripped = strip(node)
    if isinstance(stripped, ast.BinOp) and isinstance(stripped.op, (ast.Mult, ast.Add)):  # torch.randn(D) * 0.02
        inner = arg_of(f, fn, stripped.left, line, depth + 1)
        if inner.tensor:
            return Arg(text, shape=inner.shape, sizes=inner.sizes, dtype=inner.dtype, tensor=True, varied=inner.varied)
    if isinstance(stripped, ast.BinOp) and type(stripped.op) in _ARITHMETIC:  # padding=K // 2 with K from the row
        left, right = (arg_of(f, fn, side, line, depth + 1) for side in (stripped.left, stripped.right))
        if all(type(v.value) in (int, float) for v in (left, right)):
            try:
                return Arg(text, value=_ARITHMETIC[type(stripped.op)](left.value, right.value))
            except (ArithmeticError, ValueError):
                pass
    if isinstance(stripped, ast.Name):
        made = _made(f, fn, stripped.id, line)
        if made is not None:
            return _tensor_arg(f, fn, text, *made)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            value = f.row_value(fn, stripped.id)
            if value is not None and not isinstance(value, str) or isinstance(value, str) and value.isidentifier():
                return Arg(text, value=value)
        bound = f.assigned(fn, stripped.id, line)
        if bound is not None and bound[1] is None and not isinstance(bound[0], ast.Starred):
            found = arg_of(f, fn, bound[0], bound[0].lineno if hasattr(bound[0], "lineno") else line, depth + 1)
            if found.known:
                return Arg(text, found.value, found.shape, found.sizes, found.dtype, found.tensor, found.varied)
        value = _module_constant(f, stripped.id)
        if value is not None:
            return Arg(text, value=value)
    if isinstance(stripped, ast.Call) and dotted(stripped.func) in ("torch.tensor", "torch.scalar_tensor") \
            and stripped.args and isinstance(stripped.args[0], ast.Constant) \
            and isinstance(stripped.args[0].value, (int, float)):  # torch.tensor(1.0): a 0-d tensor
        kw = {k.arg: k.value for k in stripped.keywords if k.arg}
        found = f.interp.module_values(kw["dtype"]) if "dtype" in kw else []
        return Arg(text, shape=(), dtype=found[0] if found else "fp32", tensor=True)
    if isinstance(stripped, ast.Call):
        made = _made_at(f, _unmoved(stripped))
        if made is not None:
            return _tensor_arg(f, fn, text, made, _moves(stripped))
        helper = f.helper(fn, stripped)
        if helper is not None:  # make_tensor(20): a helper making a tensor of its arguments' sizes
            shape = _helper_shape(f, helper, stripped)
            if shape:
                return Arg(text, shape=shape, dtype="fp32", tensor=True)
    return Arg(text)


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}


def _module_constant(f: PytestFile, name: str):
    for node in f.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            found = f.interp.module_values(node.value)
            return found[0] if len(found) == 1 and isinstance(found[0], (int, float)) else None
    return None


def _made(f: PytestFile, fn: ast.AST, name: str, line: int, depth: int = 0):
    """(the tensor the test made that `name` is, the axis moves applied to it since) — through
    `x1 = _input.clone()` and `q = torch.randn(b, s, h, d).transpose(1, 2)` — or None."""
    if depth > 6:
        return None
    lo, hi = getattr(fn, "lineno", 0), getattr(fn, "end_lineno", 10 ** 9)
    bound = f.assigned(fn, name, line)
    if bound is None:
        return None
    value, index = bound
    if isinstance(value, ast.Starred) or index is not None:
        return None
    moves = _moves(value)
    stripped = strip(_unmoved(value))
    if isinstance(stripped, ast.Name) and stripped.id != name:
        inner = _made(f, fn, stripped.id, value.lineno, depth + 1)
        return (inner[0], inner[1] + moves) if inner else None
    at = _made_at(f, stripped)
    if at is not None:
        return at, moves
    for t in reversed(f.tensors):  # the factory call is inside the assignment (`(torch.randn(...) * 2).cuda()`)
        if t.name == name and lo <= t.line <= hi and t.line <= line:
            return t, moves
    return None


def _moves(node: ast.AST) -> list[tuple[int, ...]]:
    """The axis permutations a chain of methods applies, innermost first: `.transpose(1, 2)`,
    `.permute(0, 2, 1, 3)`, `.T` (as (-1,): reversed)."""
    found = []
    while True:
        node = strip(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "permute") \
                and node.args and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args):
            found.append((node.func.attr, tuple(a.value for a in node.args)))
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            found.append((node.attr, ()))
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in \
                ("contiguous", "requires_grad_", "to", "clone", "detach", "cuda", "float", "half", "bfloat16"):
            node = node.func.value
        else:
            return list(reversed(found))


def _unmoved(node: ast.AST) -> ast.AST:
    """The expression under the chain of `_moves` and value-keeping methods."""
    while True:
        node = strip(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "permute"):
            node = node.func.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
            node = node.value
        else:
            return node


def _moved(dims: list, moves: list) -> list:
    dims = list(dims)
    for kind, args in moves:
        if kind == "transpose" and len(args) == 2 and all(-len(dims) <= a < len(dims) for a in args):
            a, b = args
            dims[a], dims[b] = dims[b], dims[a]
        elif kind == "permute" and sorted(a % len(dims) for a in args) == list(range(len(dims))):
            dims = [dims[a] for a in args]
        elif kind == "T":
            dims = dims[::-1]
        elif kind == "mT" and len(dims) >= 2:
            dims[-1], dims[-2] = dims[-2], dims[-1]
    return dims


def _made_at(f: PytestFile, call: ast.AST):
    if not isinstance(call, ast.Call):
        return None
    return next((t for t in f.tensors if t.line == call.lineno and t.factory.split(".")[-1] == dotted(call.func).split(".")[-1]),
                None)


def _tensor_arg(f: PytestFile, fn: ast.AST, text: str, made: TensorMade, moves: list = ()) -> Arg:
    """A tensor argument: its dims as the test's size names where it writes a parameter
    (`torch.randn(B, T, H)`), with their values from the parametrize row, in the order the
    test's transposes leave them."""
    if not made.shape:
        return Arg(text)  # made, but of sizes the test does not write out
    sizes = f.sizes_of(fn)
    names = _dim_names(f, made)
    names += [""] * (len(made.shape) - len(names))
    shape = []
    used = {}
    for value, name in _moved(list(zip(made.shape, names)), list(moves)):
        if name and name in sizes:
            shape.append(name)
            used[name] = sizes[name]
        elif type(value) is int:
            shape.append(value)
        else:
            shape.append(str(value))
    varied = f.varied_of(fn)
    return Arg(text, shape=tuple(shape), sizes=used, dtype=made.dtype, tensor=True,
               varied=tuple(n for n in used if n in varied))


def _dim_names(f: PytestFile, made: TensorMade) -> list[str]:
    """The names written as each dimension of the factory call that made `made` ("" where a
    dimension is an expression): `torch.randn(B, T, H)` → ["B", "T", "H"]."""
    for node in ast.walk(f.tree):
        if isinstance(node, ast.Call) and node.lineno == made.line and \
                dotted(node.func).split(".")[-1] == made.factory.split(".")[-1]:
            args = node.args
            if made.factory.endswith("randint"):
                args = args[2:] if len(args) >= 3 else args[1:]
            if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
                args = args[0].elts
            size = next((k.value for k in node.keywords if k.arg in ("size", "shape")), None)
            if size is not None:
                args = size.elts if isinstance(size, (ast.Tuple, ast.List)) else [size]
            return [a.id if isinstance(a, ast.Name) else "" for a in args]
    return []


def _helper_shape(f: PytestFile, helper: ast.FunctionDef, call: ast.Call) -> tuple:
    """`def make_tensor(*size): return torch.randn(size, ...)` called as `make_tensor(2, 3)`: (2, 3)."""
    vararg = helper.args.vararg.arg if helper.args.vararg else None
    for r in ast.walk(helper):
        if isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and \
                dotted(r.value.func).split(".")[-1] in ("randn", "rand", "ones", "zeros", "empty", "randn_like"):
            first = r.value.args[0] if r.value.args else None
            if vararg and isinstance(first, (ast.Name, ast.Starred)) and \
                    (first.id if isinstance(first, ast.Name) else dotted(first.value)) == vararg:
                dims = [a.value for a in call.args if isinstance(a, ast.Constant) and type(a.value) is int]
                return tuple(dims) if len(dims) == len(call.args) else ()
    return ()
