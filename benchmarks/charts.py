"""PNG charts (matplotlib, Agg backend): throughput with min-max bars, fraction of the limit, liveness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from benchmarks.throughput import CEILING, is_reference

LITE_COLOR = "#1f77b4"
# By label prefix, most specific first: a new client gets its family's colour (or grey) without an entry.
COLORS = {"aiokafka-lite (pure Python)": "#9ecae1", "aiokafka-lite (native, uvloop)": "#6baed6",
          "aiokafka-lite": LITE_COLOR, "confluent-kafka AIO": "#fdae6b", "confluent-kafka": "#ff7f0e",
          "aiokafka": "#2ca02c", "kafka-python": "#9467bd", "limit": "#7f7f7f", "bare Fetch": "#bdbdbd",
          "ceiling": "#d9d9d9"}
ABOVE_LIMIT_COLOR = "#d62728"  # a client's bar beyond 100 % of the limit: the limit is wrong


def _color(label: str) -> str:
    return next((color for prefix, color in COLORS.items() if label.startswith(prefix)), "#999999")


def _bars(ax: Any, labels: list[str], entries: list[dict[str, Any]], scale: float, fmt: str,
          colors: list[str] | None = None) -> None:
    medians = [e["median"] * scale for e in entries]
    low = [(e["median"] - e["min"]) * scale for e in entries]
    high = [(e["max"] - e["median"]) * scale for e in entries]
    ax.barh(labels, medians, xerr=[low, high], capsize=3, color=colors or [_color(lb) for lb in labels])
    ax.invert_yaxis()
    for y, (value, above) in enumerate(zip(medians, high, strict=True)):
        ax.text(value + above, y, " " + fmt.format(value), va="center", fontsize=8)  # right of the error bar
    ax.set_xlim(0, max(medians + [m + h for m, h in zip(medians, high, strict=True)]) * 1.3)
    ax.grid(axis="x", alpha=0.3)


def throughput_chart(results: dict[str, Any], path: Path, figure: str = "records_per_s",
                     part: str = "throughput") -> None:
    sets = results[part]
    rows = max(len(data["clients"]) for data in sets.values())
    fig, axes = plt.subplots(len(sets), 1, figsize=(8, (0.8 + 0.25 * rows) * len(sets)), squeeze=False)
    for ax, (name, data) in zip(axes[:, 0], sets.items(), strict=True):
        # The reference rows are left out (they read no record, and 5-40x the clients' rate would
        # squash every bar); the fraction chart draws the limit as a line at 100 %.
        items = [(lb, e[figure]) for lb, e in data["clients"].items() if figure in e and not is_reference(lb)]
        if not items:
            continue
        if figure == "records_per_s":
            _bars(ax, [lb for lb, _ in items], [e for _, e in items], 1e-3, "{:,.0f}k")
            ax.set_xlabel("thousand records/s (median, min-max)")
        else:
            _fraction_bars(ax, items, data)
        notes = ["limit: compressed bytes"] if data["compression"] != "none" and figure == "fraction_of_limit" else []
        if skipped := [lb for lb, e in data["clients"].items() if "skipped" in e and "records_per_s" not in e]:
            notes.append(f"skipped: {', '.join(skipped)}")  # cannot decode this codec here (the table says why)
        title = f"{name}: {data['records']:,} records, {data.get('partitions', 6):,} partitions"
        if notes:  # on a line of their own: on the first one they ran past the chart's width
            title += "\n" + "; ".join(notes)
        ax.set_title(title, fontsize=10)
    title = "Consumer throughput" if figure == "records_per_s" else "Fraction of the limit (fastest bare Fetch loop)"
    fig.suptitle(f"{title} - {results['broker']}", fontsize=11)
    # About 0.25 inch kept for the suptitle: tight_layout alone lays the first title over it.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / fig.get_figheight()))
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _fraction_bars(ax: Any, items: list[tuple[str, dict[str, Any]]], data: dict[str, Any]) -> None:
    """Each client's % of the limit, red past 100 % (the limit line); the ceiling's % in the legend."""
    colors = [ABOVE_LIMIT_COLOR if e["max"] > 1.0 else _color(lb) for lb, e in items]
    _bars(ax, [lb for lb, _ in items], [e for _, e in items], 100, "{:.0f} %", colors)
    ax.axvline(100, color="black", linestyle="--", linewidth=1, label="limit = 100 %")
    ceiling = data["clients"].get(CEILING, {}).get("fraction_of_limit")
    if ceiling is not None:
        ax.plot([], [], " ", label=f"ceiling (loopback) = {ceiling['median'] * 100:,.0f} %")
    ax.set_xlim(0, max(ax.get_xlim()[1], 110))
    ax.legend(fontsize=7, loc="lower right")
    ax.set_xlabel("records/s as % of the limit (same run)")


def liveness_chart(results: dict[str, Any], path: Path) -> None:
    live = results.get("liveness", {})
    rows: list[tuple[str, float]] = []
    names = {"after_close": "after close()", "after_lapse": "after poll deadline", "after_sigkill": "after SIGKILL"}
    for scenario, label in names.items():
        for client, fig in live.get(scenario, {}).items():
            if fig.get("handover_seconds") is not None:
                rows.append((f"{_name(client)}: {label}", fig["handover_seconds"]))
    jitter = [(client, fig) for client, fig in live.get("heartbeat_jitter", {}).items() if "gap_p50_ms" in fig]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
    if rows:
        colors = [LITE_COLOR if r[0].startswith("aiokafka-lite") else _color("aiokafka") for r in rows]
        ax1.barh([r[0] for r in rows], [r[1] for r in rows], color=colors)
        ax1.invert_yaxis()
        for y, (_, value) in enumerate(rows):
            ax1.text(value, y, f" {value:.2f} s", va="center", fontsize=8)
        ax1.set_xlim(0, max(r[1] for r in rows) * 1.25)
        ax1.set_xlabel("seconds until the peer owns every partition")
        ax1.set_title("Partition hand-over (session 6 s, heartbeat 1 s)", fontsize=10)
        ax1.grid(axis="x", alpha=0.3)
    if jitter:
        labels = [_name(c) for c, _ in jitter]
        x = range(len(labels))
        bars = ((-0.25, "gap_p50_ms", "p50"), (0.0, "gap_p99_ms", "p99"), (0.25, "gap_max_ms", "max"))
        for offset, key, name in bars:
            ax2.bar([i + offset for i in x], [f[key] for _, f in jitter], width=0.25, label=name)
        ax2.axhline(jitter[0][1]["interval_ms"], color="black", linestyle="--", linewidth=1, label="configured")
        ax2.set_xticks(list(x), labels)
        ax2.set_ylabel("ms between heartbeats")
        ax2.set_title("Heartbeat spacing, loop busy with other tasks", fontsize=10)
        ax2.legend(fontsize=8)
        ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _name(client: str) -> str:
    return {"lite": "aiokafka-lite", "lite-thread": "aiokafka-lite\n(thread mode)"}.get(client, client)


def write_all(results: dict[str, Any], directory: Path) -> list[Path]:
    paths: list[Path] = []
    if "throughput" in results:
        for figure, name in (("records_per_s", "throughput.png"), ("fraction_of_limit", "fraction_of_limit.png")):
            throughput_chart(results, directory / name, figure)
            paths.append(directory / name)
    if "scale" in results:
        throughput_chart(results, directory / "scale.png", part="scale")
        paths.append(directory / "scale.png")
    if "liveness" in results:
        liveness_chart(results, directory / "liveness.png")
        paths.append(directory / "liveness.png")
    return paths
