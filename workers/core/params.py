"""Parameter points: one value per axis of a variant's `[params]`, and the names they travel by.

A swept variant (`[params] BLOCK_M = [64, 128]`, `STAGES = [2, 3]`) is expanded into one
variant record per point, named `gemm_tiled[BLOCK_M=128,STAGES=3]` (axes in the manifest's
order). The name is the point's identity everywhere a variant name is: build cache,
measurement identity, the store's series, compare, detect and bisect. This module is the one
place that writes and reads those names, and turns a point into what a compiler or a Python
entry takes (`-DBLOCK_M=128`, `BLOCK_M=128`).
"""

from __future__ import annotations

import re

Value = int | float | bool | str

# The pass a point measures (`modes` in a manifest): an axis of its own, named last in a point's
# name (`liger_rms_norm[mode=backward]`, `gemm_tiled[BK=32,mode=full]`). `forward` is left out of
# the name, so a variant's forward series keeps the name it had before it declared modes.
MODE_AXIS = "mode"
FORWARD, BACKWARD, FULL = "forward", "backward", "full"
MODES = (FORWARD, BACKWARD, FULL)

# A point selector on the command line: `NAME[BLOCK_M=128]` (some axes) or `NAME[BLOCK_M=128,STAGES=3]`.
_POINT = re.compile(r"^(?P<family>[^\[\]]+)\[(?P<axes>[^\[\]]*)\]$")


def format_value(value: Value) -> str:
    """A value as it appears in a point name and a `-D` define: `128`, `0.5`, `true`, `float`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_value(text: str) -> Value:
    """The inverse of `format_value` for what a user types in a selector (`128` → 128)."""
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def point_name(family: str, params: dict[str, Value]) -> str:
    """`family[A=1,B=2]`: the name of one point (the family itself when there are no axes)."""
    if not params:
        return family
    return f"{family}[{','.join(f'{k}={format_value(v)}' for k, v in params.items())}]"


def split_point(name: str) -> tuple[str, dict[str, Value]]:
    """(`family`, {axis: value}) of a point's name; a plain variant's name is its own family,
    and so is a name that only looks like a point (a folder called `x[y]`)."""
    m = _POINT.match(name)
    if not m:
        return name, {}
    axes: dict[str, Value] = {}
    for part in filter(None, (p.strip() for p in m["axes"].split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            return name, {}
        axes[key.strip()] = parse_value(value.strip())
    return m["family"], axes


def family_of(name: str) -> str:
    return split_point(name)[0]


def mode_name(name: str, mode: str) -> str:
    """The name of a variant or point measured in `mode`: the mode axis added last, except for
    `forward` (`liger_rms_norm` + backward → `liger_rms_norm[mode=backward]`)."""
    if mode == FORWARD:
        return name
    family, axes = split_point(name)
    return point_name(family, {**axes, MODE_AXIS: mode})


def mode_of(name: str) -> str:
    """The pass a variant or point name measures (`forward` when the name has no mode axis)."""
    return str(split_point(name)[1].get(MODE_AXIS, FORWARD))


def sweep_family(name: str) -> tuple[str, dict[str, Value]]:
    """(`family` with its mode, {axis: value} without it): how the reports group a sweep's
    points. Passes are not points to pick a best from (a backward pass is not a faster forward),
    so `tri[BK=32,mode=full]` belongs to family `tri[mode=full]` with axes {BK: 32}, and a point
    with only a mode is a plain variant of its own."""
    family, axes = split_point(name)
    mode = axes.pop(MODE_AXIS, None)
    return (point_name(family, {MODE_AXIS: mode}) if mode is not None else family), axes


def selects(selector: str, name: str) -> bool:
    """Whether a `--variant` selector picks the variant or point `name`: the family name picks
    every point, `family[A=1]` the points with A=1, a full point name that point."""
    if selector == name:
        return True
    family, params = split_point(name)
    want_family, want = split_point(selector)
    if want_family != family:
        return False
    params.setdefault(MODE_AXIS, FORWARD)  # `NAME[mode=forward]` picks the points named without a mode
    return all(k in params and format_value(params[k]) == format_value(v) for k, v in want.items())


def exactly(name: str) -> str:
    """A selector that picks `name` and none of its other passes: a forward point's name with
    `mode=forward` added (its plain name selects every pass), any other name as it is."""
    family, axes = split_point(name)
    return name if MODE_AXIS in axes else point_name(family, {**axes, MODE_AXIS: FORWARD})


def define_flags(params: dict[str, Value]) -> list[str]:
    """Compiler defines of a point: `-DBLOCK_M=128`; a boolean is 1 or 0 (`#if USE_TMA` reads it)."""
    out = []
    for key, value in params.items():
        text = ("1" if value else "0") if isinstance(value, bool) else format_value(value)
        out.append(f"-D{key}={text}")
    return out


def template_entry(entry: str, params: dict[str, Value]) -> str:
    """A raw entry naming template arguments by axis (`gemm_tiled<BM, BK>`) with the point's
    values put in (`gemm_tiled<64, 8>`); an entry without `<` is returned as it is."""
    if "<" not in entry or not params:
        return entry

    def put(m: re.Match) -> str:
        word = m.group(0)
        if word not in params:
            return word
        value = params[word]
        return ("true" if value else "false") if isinstance(value, bool) else format_value(value)

    head, _, rest = entry.partition("<")
    # Written as a demangler writes template arguments (`k<64, 8>`), so the name resolves
    # against the compiled kernels' demangled names.
    return head + "<" + re.sub(r"\s*,\s*", ", ", re.sub(r"[A-Za-z_][A-Za-z0-9_]*", put, rest))
