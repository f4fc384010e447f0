"""Small statistics helpers for the benchmark table (no numpy needed)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by linear interpolation between order statistics.
    Raises ``ValueError`` on an empty sequence."""
    if not values:
        raise ValueError("quantile of an empty sequence")
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """Median of ``values`` (``ValueError`` when empty)."""
    return quantile(values, 0.5)


@dataclass(frozen=True)
class Summary:
    """Distribution of one measurement within a run: ``median``, ``p90``, ``max`` and ``n`` (count)."""

    median: float
    p90: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "Summary":
        """Summary of ``values`` (times in whatever unit the caller measured). Raises ``ValueError`` on an
        empty sequence.
        """
        return cls(median(values), quantile(values, 0.9), max(values), len(values))


@dataclass(frozen=True)
class Spread:
    """One figure over repeated runs: ``value`` (median of the runs), ``lo``/``hi`` (min/max of the runs)."""

    value: float
    lo: float
    hi: float
    runs: int

    @classmethod
    def of(cls, values: Iterable[float]) -> "Spread":
        """Spread of ``values`` (one per run): median, min, max, count. Raises ``ValueError`` on an empty
        iterable.
        """
        v = list(values)
        return cls(median(v), min(v), max(v), len(v))

    def fmt(self, digits: int = 2, unit: str = "") -> str:
        """``"3.10 ms [2.95–3.40]"`` (the bracket only when there were several runs)."""
        s = f"{self.value:.{digits}f}{unit}"
        if self.runs > 1:
            s += f" [{self.lo:.{digits}f}–{self.hi:.{digits}f}]"
        return s
