"""The targets a recording watches, and, in the recording child, their replacement by wrappers.

A target is `package.module:name`:
- a function: the module's attribute is replaced, and so is every reference to the same function
  that modules of the repository imported before (`from pkg.ops import fn` run at package
  import), so the script's own `from pkg.mod import fn`, run later, gets the wrapper;
- an autograd Function class: its `apply` (what `LigerCrossEntropyFunction.apply(...)` and a
  functional entry forwarding to it call);
- an nn.Module class: its `forward` (what `LigerCrossEntropyLoss()(x, target)` runs).
A Function or Module subclass of the target is not the target: its calls pass through.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable

# The wrapper's hook: (target, kind, params, own_file, call, args, kwargs, owner) -> result, where
# `call(*args, **kwargs)` is the real thing and `owner` the module instance (kind `module`).
Hook = Callable[..., object]


def parse_target(target: str) -> tuple[str, str]:
    """(module, attribute) of `package.module:name` (pure); ValueError for any other form."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr or not all(p.isidentifier() for p in module.split(".")) \
            or not attr.isidentifier():
        raise ValueError(f"target {target!r}: expected \"package.module:name\" (a function, an autograd "
                         f"Function class or an nn.Module class)")
    return module, attr


def install(target: str, hook: Hook, roots: tuple[str, ...]) -> str:
    """Import the target and put a wrapper in its place that hands every call to `hook`; returns
    its kind (`function`, `autograd`, `module`). Raises what importing it raises, or
    TypeError for an object of no watched kind. `roots`: the resolved folders whose modules'
    references to a function are replaced too."""
    module_name, attr = parse_target(target)
    module = importlib.import_module(module_name)
    obj = getattr(module, attr)
    torch = sys.modules.get("torch")
    if inspect.isclass(obj) and torch is not None and issubclass(obj, torch.autograd.Function):
        _wrap_function_class(target, obj, hook)
        return "autograd"
    if inspect.isclass(obj) and torch is not None and issubclass(obj, torch.nn.Module):
        _wrap_module_class(target, obj, hook)
        return "module"
    if callable(obj) and not inspect.isclass(obj):
        wrapper = _wrap_callable(target, obj, hook)
        _replace_everywhere(obj, wrapper, roots)
        setattr(module, attr, wrapper)
        return "function"
    raise TypeError(f"{type(obj).__name__} is not a function, an autograd Function or an nn.Module class")


def _file_of(obj) -> str:
    try:
        return os.path.realpath(inspect.getfile(obj))
    except (TypeError, OSError):
        return ""


def _positional_names(fn, skip: int) -> tuple[str, ...]:
    try:
        params = list(inspect.signature(fn).parameters.values())[skip:]
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in params if p.kind in kinds)


def _wrap_callable(target: str, fn, hook: Hook):
    params, own = _positional_names(fn, 0), _file_of(fn)

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        return hook(target, "function", params, own, fn, args, kwargs, None)

    recorded.__flopwatch_recorded__ = fn
    return recorded


def _wrap_function_class(target: str, cls, hook: Hook) -> None:
    static = inspect.getattr_static(cls, "apply")  # a classmethod, Function's own unless redefined
    torch = sys.modules["torch"]
    # A Function with its own setup_context has a forward without ctx.
    with_ctx = getattr(cls.setup_context, "__func__", cls.setup_context) is \
        getattr(torch.autograd.Function.setup_context, "__func__", torch.autograd.Function.setup_context)
    params, own = _positional_names(cls.forward, 1 if with_ctx else 0), _file_of(cls)

    def apply(klass, *args, **kwargs):
        real = static.__get__(None, klass)
        if klass is not cls:
            return real(*args, **kwargs)
        return hook(target, "autograd", params, own, real, args, kwargs, None)

    cls.apply = classmethod(apply)


def _wrap_module_class(target: str, cls, hook: Hook) -> None:
    forward = cls.forward
    params, own = _positional_names(forward, 1), _file_of(cls)

    @functools.wraps(forward)
    def recorded(self, *args, **kwargs):
        if type(self) is not cls:
            return forward(self, *args, **kwargs)
        return hook(target, "module", params, own, functools.partial(forward, self), args, kwargs, self)

    cls.forward = recorded


def _replace_everywhere(original, wrapper, roots: tuple[str, ...]) -> None:
    """Every module imported from under `roots` that holds `original` as an attribute gets
    `wrapper` instead (what `from pkg.ops import fn` bound before the patch)."""
    prefixes = tuple(r.rstrip("/") + "/" for r in roots)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or not os.path.realpath(path).startswith(prefixes):
            continue
        for name, value in list(vars(module).items()):
            if value is original:
                setattr(module, name, wrapper)
