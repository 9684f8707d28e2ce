"""One recorded call as plain values: what each argument was (`Arg`), where the script made
the call, and the signature two calls must share to count as the same size.

`summarize` runs in the recording child on live objects; it looks tensors up through
`sys.modules` and imports nothing, so the driver can read the records without torch. Everything
else here is pure.
"""

from __future__ import annotations

import json
import numbers
import sys
from dataclasses import dataclass

# A tuple or list is summarised item by item up to this length and nesting (shapes, pairs of
# tensors); a longer or deeper one is kept as its type name.
MAX_ITEMS = 16
MAX_DEPTH = 2
# A string argument is kept up to this many characters (a mode name, not a document).
MAX_TEXT = 200
# A module's parameters, buffers and plain attributes kept per call, in their own order.
MAX_STATE = 32


@dataclass(frozen=True)
class Arg:
    """One argument of a recorded call.

    kind: `tensor` (shape, dtype without the `torch.` prefix, device, requires_grad), `value`
    (`value` is the number, bool, string or None passed; a torch dtype or device as its text),
    `sequence` (a tuple or list: `items`), or `other` (only the type's name in `type`).
    """

    kind: str
    type: str
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool | None = None
    value: int | float | bool | str | None = None
    items: tuple[Arg, ...] = ()

    def to_dict(self) -> dict:
        out: dict = {"kind": self.kind, "type": self.type}
        if self.kind == "tensor":
            out.update(shape=list(self.shape or ()), dtype=self.dtype, device=self.device,
                       requires_grad=self.requires_grad)
        elif self.kind == "value":
            out["value"] = self.value
        elif self.kind == "sequence":
            out["items"] = [a.to_dict() for a in self.items]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Arg:
        shape = data.get("shape")
        return cls(kind=data["kind"], type=data.get("type", ""),
                   shape=tuple(int(d) for d in shape) if shape is not None else None,
                   dtype=data.get("dtype"), device=data.get("device"), requires_grad=data.get("requires_grad"),
                   value=data.get("value"), items=tuple(cls.from_dict(a) for a in data.get("items") or ()))

    def text(self) -> str:
        """Short form for a log line: `Tensor[4096, 128256] float32`, `-100`, `'mean'`."""
        if self.kind == "tensor":
            return f"Tensor[{', '.join(map(str, self.shape or ()))}] {self.dtype}"
        if self.kind == "value":
            return repr(self.value)
        if self.kind == "sequence":
            inner = ", ".join(a.text() for a in self.items)
            return f"({inner})" if self.type == "tuple" else f"[{inner}]"
        return f"<{self.type}>"


@dataclass(frozen=True)
class CallRecord:
    """The first call of one signature that the script made to a target.

    target: as given (`pkg.mod:name`); kind: `function`, `autograd` (an autograd Function: its
    `apply`) or `module` (an nn.Module class: its `forward`). site: where the script made the
    call, `path:line` relative to the repository (the innermost frame in the script itself, else
    the innermost in the repository outside the target's own file; "" when neither is on the
    stack). args / kwargs: as passed (for `module`, without `self`; the module's parameters,
    buffers and plain attributes are `state`, e.g. `weight`, `variance_epsilon`). params: the
    callee's positional parameter names in order (an autograd Function's `forward` without its
    `ctx`), so a position and a name can be told apart (`argument`).
    """

    target: str
    kind: str
    site: str
    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...] = ()
    state: tuple[tuple[str, Arg], ...] = ()
    params: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind, "site": self.site,
                "args": [a.to_dict() for a in self.args],
                "kwargs": {k: a.to_dict() for k, a in self.kwargs},
                "state": {k: a.to_dict() for k, a in self.state}, "params": list(self.params)}

    @classmethod
    def from_dict(cls, data: dict) -> CallRecord:
        return cls(target=data["target"], kind=data["kind"], site=data.get("site", ""),
                   args=tuple(Arg.from_dict(a) for a in data.get("args") or ()),
                   kwargs=tuple((k, Arg.from_dict(a)) for k, a in (data.get("kwargs") or {}).items()),
                   state=tuple((k, Arg.from_dict(a)) for k, a in (data.get("state") or {}).items()),
                   params=tuple(data.get("params") or ()))

    def argument(self, where: int | str) -> Arg | None:
        """The argument the call passed at position `where` (an int) or under the name `where`
        (a keyword, or the callee's parameter of that name passed by position); `self.NAME` is
        a module's own parameter, buffer or attribute. None where the call did not pass it
        (the callee's default applied)."""
        kwargs, state = dict(self.kwargs), dict(self.state)
        if isinstance(where, int):
            if 0 <= where < len(self.args):
                return self.args[where]
            name = self.params[where] if 0 <= where < len(self.params) else None
            return kwargs.get(name) if name is not None else None
        if where.startswith("self."):
            return state.get(where.removeprefix("self."))
        if where in kwargs:
            return kwargs[where]
        if where in self.params:
            index = self.params.index(where)
            return self.args[index] if index < len(self.args) else None
        return None

    def text(self) -> str:
        """One line for a log: `pkg.mod:Fn(Tensor[8, 64] float32, 0.5) at bench.py:12`."""
        parts = [a.text() for a in self.args] + [f"{k}={a.text()}" for k, a in self.kwargs]
        return f"{self.target}({', '.join(parts)})" + (f" at {self.site}" if self.site else "")


# --- in the child: live objects → records -------------------------------------------------------


def summarize(value, depth: int = 0) -> Arg:
    """The `Arg` of a live argument (tensors by shape, dtype, device, requires_grad; numbers,
    bools, strings, None by value; short tuples and lists item by item; anything else by its
    type's name). Never raises on an odd object: a failing look is kept as `other`."""
    try:
        return _summary(value, depth)
    except Exception:  # noqa: BLE001 - a tensor subclass or proxy that fails to describe itself
        return Arg("other", type(value).__name__)


def _summary(value, depth: int) -> Arg:
    torch = sys.modules.get("torch")
    type_name = type(value).__name__
    if torch is not None and isinstance(value, torch.Tensor):
        return Arg("tensor", type_name, shape=tuple(int(d) for d in value.shape),
                   dtype=str(value.dtype).removeprefix("torch."), device=str(value.device),
                   requires_grad=bool(value.requires_grad))
    if value is None or isinstance(value, (bool, str)):
        return Arg("value", type_name, value=value[:MAX_TEXT] if isinstance(value, str) else value)
    if isinstance(value, numbers.Integral):
        return Arg("value", type_name, value=int(value))
    if isinstance(value, numbers.Real):
        return Arg("value", type_name, value=float(value))
    if torch is not None and isinstance(value, (torch.dtype, torch.device)):
        return Arg("value", type_name, value=str(value))
    if isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS and depth < MAX_DEPTH:
        return Arg("sequence", "tuple" if isinstance(value, tuple) else "list",
                   items=tuple(summarize(v, depth + 1) for v in value))
    return Arg("other", type_name)


def module_state(module) -> tuple[tuple[str, Arg], ...]:
    """An nn.Module's parameters (its submodules' too), its own buffers and its plain attributes
    (numbers, bools, strings, None; not `training`), bounded by `MAX_STATE`."""
    out: list[tuple[str, Arg]] = []
    try:
        tensors = [*module.named_parameters(), *module.named_buffers(recurse=False)]
    except Exception:  # noqa: BLE001 - a module half-built by its own __init__
        tensors = []
    for name, tensor in tensors:
        out.append((name, summarize(tensor)))
    for name, value in sorted(getattr(module, "__dict__", {}).items()):
        if name.startswith("_") or name == "training":
            continue
        if value is None or isinstance(value, (bool, str, numbers.Real)):
            out.append((name, summarize(value)))
    return tuple(out[:MAX_STATE])


def signature(target: str, args: tuple[Arg, ...], kwargs: tuple[tuple[str, Arg], ...],
              state: tuple[tuple[str, Arg], ...] = ()) -> str:
    """The key two calls share when they are the same size: the target, every tensor's shape,
    dtype and device, every other argument's value or type; not requires_grad (a script's
    forward, backward and no-grad modes pass the same tensors) nor the call site (pure)."""

    def key(a: Arg):
        if a.kind == "tensor":
            return ["t", list(a.shape or ()), a.dtype, a.device]
        if a.kind == "value":
            return ["v", a.type, a.value]
        if a.kind == "sequence":
            return ["s", a.type, [key(i) for i in a.items]]
        return ["o", a.type]

    return json.dumps([target, [key(a) for a in args], [[k, key(a)] for k, a in sorted(kwargs)],
                       [[k, key(a)] for k, a in state]], default=str)


def call_site(frames: list[tuple[str, int]], script: str, root: str, own_file: str) -> str:
    """`path:line` (relative to `root`) of the call a recorded call came from, given the stack
    as (resolved file, line) pairs from the innermost out: the innermost frame in `script`,
    else the innermost inside `root` that is not `own_file` (the target's module), else ""
    (pure)."""
    prefix = root.rstrip("/") + "/"
    for path, line in frames:
        if path == script:
            return f"{path.removeprefix(prefix)}:{line}"
    for path, line in frames:
        if path.startswith(prefix) and path != own_file:
            return f"{path.removeprefix(prefix)}:{line}"
    return ""


def quick_key(target: str, args: tuple, kwargs: dict, owner) -> tuple | None:
    """A hashable stand-in for `signature` made without building records, so that a timing
    loop's repeated call costs microseconds: tensors by (shape, dtype, device), plain values by
    (type, value), short sequences item by item, anything else by its type; a module by its
    identity and its own parameters' shapes (the caller holds the module while the key stands,
    so the identity is not reused; its other state is taken as unchanged between its calls).
    Equal quick keys mean equal signatures; None where an argument cannot be hashed."""
    try:
        parts = [target, tuple(_quick(v, 0) for v in args), tuple((k, _quick(v, 0)) for k, v in kwargs.items())]
        if owner is not None:
            params = getattr(owner, "_parameters", {})
            parts.append((id(owner), tuple((k, _quick(p, 0)) for k, p in params.items())))
        key = tuple(parts)
        hash(key)
        return key
    except Exception:  # noqa: BLE001 - an argument that cannot be looked at quickly: the full path
        return None


def _quick(value, depth: int):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return (value.shape, value.dtype, value.device)
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value), value)
    if isinstance(value, (tuple, list)) and len(value) <= MAX_ITEMS and depth < MAX_DEPTH:
        return (type(value), tuple(_quick(v, depth + 1) for v in value))
    return (type(value),)
