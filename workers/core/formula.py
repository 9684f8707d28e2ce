"""A small, safe arithmetic evaluator for expressions written in data files (metric formulas,
launch geometry). Python's ``ast`` parses; only numbers, names, + - * /, //, unary minus,
parentheses and calls of functions the caller allows are evaluated. No ``eval``.

Dotted names are single variables: ``l1tex__t_sector_hit_rate.pct`` looks up that whole string,
which is how Nsight Compute names its metrics."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
}


class ExpressionError(ValueError):
    """An expression that is malformed, uses a forbidden construct or an unknown name."""


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def parse(text: str) -> ast.expr:
    """Parse an expression, raising ExpressionError on a syntax error."""
    try:
        return ast.parse(text.strip(), mode="eval").body
    except SyntaxError as err:
        raise ExpressionError(f"cannot parse {text!r}: {err.msg}") from None


def names(text: str) -> list[str]:
    """The variable names an expression reads, in first-use order (function names excluded)."""
    found: list[str] = []

    def walk(node: ast.AST) -> None:
        if (name := _dotted(node)) is not None:
            found.append(name)
        elif isinstance(node, ast.Call):
            for arg in node.args:
                walk(arg)
        else:
            for child in ast.iter_child_nodes(node):
                walk(child)

    walk(parse(text))
    return list(dict.fromkeys(found))


def evaluate(text: str, variables: Mapping[str, float],
             functions: Mapping[str, Callable[..., float]] | None = None) -> float:
    """Value of ``text`` with ``variables``; raises ExpressionError for anything else
    (unknown name, attribute access on a non-name, keyword arguments, comparisons ...)."""
    functions = functions or {}

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if (name := _dotted(node)) is not None:
            if name not in variables:
                raise ExpressionError(f"unknown name {name!r} in {text!r}")
            return variables[name]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            if node.func.id not in functions:
                raise ExpressionError(f"unknown function {node.func.id!r} in {text!r}")
            return functions[node.func.id](*(value(a) for a in node.args))
        raise ExpressionError(f"not allowed in {text!r}: {ast.dump(node)[:60]}")

    return value(parse(text))
