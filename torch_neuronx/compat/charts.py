"""Charts in the Markdown reports: Mermaid blocks, which GitHub and most Markdown viewers draw.

A pie of outcomes reads at a glance where a table of 189 rows does not; a bar
per family shows where the failures cluster. Both are plain text in the report,
so it stays a diff-able file.
"""

from __future__ import annotations


def _label(text: str) -> str:
    return text.replace('"', "'")


def pie(title: str, slices: dict[str, int]) -> list[str]:
    """A pie chart of counts (empty slices left out); the labels carry the counts too."""
    lines = ["```mermaid", f"pie showData title {_label(title)}"]
    lines += [f'    "{_label(label)}" : {count}' for label, count in slices.items() if count > 0]
    return lines + ["```"]


def bars(title: str, values: dict[str, float], y_label: str, y_max: float = 100.0) -> list[str]:
    """A bar chart, one bar per label (e.g. the pass rate of each family, in percent)."""
    labels = ", ".join(f'"{_label(k)}"' for k in values)
    numbers = ", ".join(f"{v:.1f}" for v in values.values())
    return ["```mermaid", "xychart-beta", f'    title "{_label(title)}"', f"    x-axis [{labels}]",
            f'    y-axis "{_label(y_label)}" 0 --> {y_max:g}', f"    bar [{numbers}]", "```"]
