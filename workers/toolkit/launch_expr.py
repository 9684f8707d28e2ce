"""Launch geometry of raw kernels, written in variant.toml as expressions of the problem size:
``grid = ["ceil(N/16)", "ceil(M/16)"]``, ``block = [16, 16]``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from workers.core.formula import ExpressionError, evaluate

FUNCTIONS = {"ceil": math.ceil, "floor": math.floor, "min": min, "max": max}


def dimension(item: str | int, sizes: Mapping[str, int]) -> int:
    """One grid or block dimension: an int as is, or an expression over ``sizes`` (M, N, K, n...)
    using ceil/floor/min/max. The result must be a positive whole number."""
    if isinstance(item, bool):
        raise ExpressionError(f"not a dimension: {item!r}")
    raw = item if isinstance(item, int) else evaluate(str(item), sizes, FUNCTIONS)
    if raw != int(raw) or int(raw) < 1:
        raise ExpressionError(f"dimension {item!r} is {raw} for {dict(sizes)}; expected a whole number >= 1")
    return int(raw)


def dims3(items: Sequence[str | int], sizes: Mapping[str, int]) -> tuple[int, int, int]:
    """(x, y, z) from one to three dimensions; missing ones are 1."""
    if not 1 <= len(items) <= 3:
        raise ExpressionError(f"expected 1 to 3 dimensions, got {list(items)!r}")
    values = [dimension(item, sizes) for item in items]
    return tuple(values + [1] * (3 - len(values)))  # type: ignore[return-value]
