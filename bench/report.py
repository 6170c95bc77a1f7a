"""The figures and the table they are printed in."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One measured ratio and its target.

    ``baseline`` and ``measured`` are in ``unit`` (seconds or bytes);
    ``ratio`` is measured / baseline, except for speed, where it is
    baseline / measured (how fast the pipeline runs next to the bare loop).
    """
    name: str
    baseline_label: str
    baseline: float
    measured_label: str
    measured: float
    unit: str                 # "s" or "B"
    ratio: float
    target: float
    at_least: bool = False    # True: the ratio must reach the target; False: stay within it

    @property
    def passed(self) -> bool:
        return self.ratio >= self.target if self.at_least else self.ratio <= self.target

    @property
    def target_text(self) -> str:
        return f"≥ {self.target:g}" if self.at_least else f"≤ {self.target:g}×"

    @property
    def ratio_text(self) -> str:
        return f"{self.ratio:.3f}" if self.at_least else f"{self.ratio:.2f}×"


def size_ratio(name: str, baseline_label: str, baseline: float, measured_label: str, measured: float,
               target: float, unit: str = "s") -> Figure:
    return Figure(name, baseline_label, baseline, measured_label, measured, unit,
                  measured / baseline if baseline else float("inf"), target)


def amount(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value / 1e6:.2f} MB"
    if value < 1:
        return f"{value * 1000:.2f} ms"
    return f"{value:.2f} s"


COLUMNS = ("figure", "baseline", "measured", "ratio", "target", "")


def table(figures: list[Figure]) -> str:
    rows = [COLUMNS] + [(f.name, f"{f.baseline_label}: {amount(f.baseline, f.unit)}",
                         f"{f.measured_label}: {amount(f.measured, f.unit)}", f.ratio_text, f.target_text,
                         "PASS" if f.passed else "FAIL") for f in figures]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths).rstrip())
    return "\n".join(lines)


def markdown(figures: list[Figure]) -> str:
    lines = ["| figure | baseline | measured | ratio | target | |", "|---|---|---|---|---|---|"]
    lines += [f"| {f.name} | {f.baseline_label}: {amount(f.baseline, f.unit)} | "
              f"{f.measured_label}: {amount(f.measured, f.unit)} | {f.ratio_text} | {f.target_text} | "
              f"{'PASS' if f.passed else 'FAIL'} |" for f in figures]
    return "\n".join(lines)
