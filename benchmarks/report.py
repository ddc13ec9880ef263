"""The terminal table (and the text the README can quote) from a results dict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.throughput import CEILING, is_reference


def _fmt(entry: dict[str, Any], figure: str, scale: float = 1.0, digits: int = 0) -> str:
    return median_and_spread(entry, figure, scale, digits) or "-"


def median_and_spread(entry: dict[str, Any], figure: str, scale: float = 1.0, digits: int = 0,
                      count: str = "ok_runs") -> str:
    """"median (min-max)" of one figure, the median alone after a single run, "" when it is missing."""
    s = entry.get(figure)
    if s is None:
        return ""
    if entry.get(count, 1) <= 1:
        return f"{s['median'] * scale:,.{digits}f}"
    return f"{s['median'] * scale:,.{digits}f} ({s['min'] * scale:,.{digits}f}-{s['max'] * scale:,.{digits}f})"


def _ran(label: str, entry: dict[str, Any]) -> str:
    """The row's label, flagged when the record decoder that ran is not the one the label names."""
    expected = "python" if "pure Python" in label else "native"
    decoder = entry.get("decoder")
    if decoder is not None and decoder != expected:
        return f"{label} [ran: {decoder}]"
    return f"{label} [native from another checkout]" if entry.get("native_from_other_checkout") else label


ABOVE = " !! ABOVE"  # marks an "of limit" cell of a client that read more than the limit


def above_limit(label: str, entry: dict[str, Any]) -> bool:
    """Whether a client row read more than the limit in any run (a reference row never is)."""
    fraction = entry.get("fraction_of_limit")
    return not is_reference(label) and fraction is not None and fraction["max"] > 1.0


def _row(label: str, entry: dict[str, Any], scale: bool) -> tuple[str, ...]:
    if "records_per_s" not in entry:
        status = "skipped (below)" if "skipped" in entry and "errors" not in entry else "failed (below)"
        return (label, status, *[""] * (10 if scale else 8))
    of_limit = _fmt(entry, "fraction_of_limit", 100) + " %" + (ABOVE if above_limit(label, entry) else "")
    row = (_ran(label, entry), _fmt(entry, "records_per_s"), _fmt(entry, "mb_per_s", digits=1),
           _fmt(entry, "cpu_seconds", digits=2), _fmt(entry, "cpu_seconds_per_m_records", digits=2),
           _fmt(entry, "peak_rss_mb"), _fmt(entry, "vs_lite", digits=2), of_limit,
           _fmt(entry, "vs_confluent_tuned", digits=2), _fmt(entry, "whole_read_vs_confluent_tuned", digits=2))
    if not scale:
        return row
    return (*row, _fmt(entry, "vs_6_partitions", digits=2), _fmt(entry, "cpu_vs_6_partitions", digits=2))


def limit_warnings(data: dict[str, Any]) -> list[str]:
    """Loud lines for a data set whose limit is no limit: a client above it in some run, or the
    ceiling (loopback copy rate) below it."""
    lines = [f"  !! LIMIT EXCEEDED: {label} read {entry['fraction_of_limit']['max']:.2f}x the limit "
             f"(median {entry['fraction_of_limit']['median']:.2f}x): the limit is no limit; "
             "see benchmarks/README.md, 'The limit'"
             for label, entry in data["clients"].items() if above_limit(label, entry)]
    ceiling = data["clients"].get(CEILING, {}).get("fraction_of_limit")
    # Not for a compressed topic: the limit reads its few compressed responses in a blink, from the
    # kernel's socket buffers, which no steady copy rate bounds.
    if ceiling is not None and data["compression"] == "none" and ceiling["min"] < 1.0:
        lines.append(f"  !! CEILING BELOW THE LIMIT: the loopback copy rate was {ceiling['min']:.2f}x the limit")
    return lines


def throughput_table(sets: dict[str, Any], scale: bool = False) -> str:
    header: tuple[str, ...] = ("client", "records/s (min-max)", "MB/s", "CPU s", "CPU s/M rec", "peak RSS MB",
                               "x lite", "of limit", "x confluent tuned", "whole read x conf. tuned")
    if scale:
        header += ("x 6 partitions", "CPU/rec x 6 p")
    lines: list[str] = []
    for name, data in sets.items():
        rows = [header] + [_row(label, entry, scale) for label, entry in data["clients"].items()]
        where = f"{data.get('partitions', 6):,} partitions in {data.get('topics', 1)} topic(s)"
        calls = f"up to {data.get('batch', 10_000):,} records a call"  # not saved before the 10 KB set
        lines.append(f"\n{name}: {data['records']:,} records, {where}, {data['compression']} compression, {calls}; "
                     "x lite = records/s / aiokafka-lite (native)'s, of limit = records/s / the fastest bare "
                     "Fetch loop's (the limit rows), x confluent tuned = records/s / confluent-kafka (tuned)'s; "
                     "whole read = the same ratio for records / seconds from the consumer's creation to the last "
                     "record "
                     "(start-up included: a client that prefetches before its first record gets no head start)"
                     + ("; x 6 partitions = records/s / the same client's on 6 partitions (target >= 0.80), "
                        "CPU/rec x 6 p = CPU s per record / the same client's on 6 partitions" if scale else ""))
        lines.extend(grid(rows))
        lines.extend(f"  {label} failed: " + "; ".join(e.split(" | ")[-1].strip() for e in entry["errors"])[:200]
                     for label, entry in data["clients"].items() if "records_per_s" not in entry and "errors" in entry)
        lines.extend(f"  {label} skipped: {entry['skipped']}" for label, entry in data["clients"].items()
                     if "records_per_s" not in entry and "skipped" in entry)
        lines.extend(limit_warnings(data))
    return "\n".join(lines)


def grid(rows: Sequence[tuple[str, ...]], left: int = 1) -> list[str]:
    """Aligned columns: the first ``left`` columns flush left (text), the rest flush right (numbers)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        pairs = enumerate(zip(row, widths, strict=True))
        cells = (cell.ljust(w) if i < left else cell.rjust(w) for i, (cell, w) in pairs)
        out.append("  ".join(cells).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return out


def _secs(value: Any) -> str:
    return "-" if value is None else f"{value:.3f} s"


def liveness_table(live: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = [("figure", "client", "value")]
    for scenario, by_client in live.items():
        for client, fig in by_client.items():
            if "error" in fig:
                rows.append((scenario, client, "failed: " + str(fig["error"])[:70]))
            elif scenario == "heartbeat_jitter":
                gaps = f"p50 {fig['gap_p50_ms']:.0f} / p99 {fig['gap_p99_ms']:.0f} / max {fig['gap_max_ms']:.0f} ms"
                rows.append((scenario, client, f"interval {fig['interval_ms']:.0f} ms: gap {gaps} "
                                               f"(stdev {fig['jitter_stdev_ms']:.1f} ms)"))
            else:
                text = f"peer owns all partitions {_secs(fig.get('handover_seconds'))}"
                text += {"after_close": " after close() was called",
                         "after_lapse": " after the poll deadline",
                         "after_sigkill": " after SIGKILL"}[scenario]
                if fig.get("leave_delay_seconds") is not None:
                    text += f"; LeaveGroup {fig['leave_delay_seconds'] * 1000:.1f} ms after the deadline"
                rows.append((scenario, client, text))
    return "\n".join(grid(rows, left=3))


def blocked_table(blocked: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = [("member blocked 20 s (session 6 s)", "rebalance?", "peer took over after")]
    for label, fig in blocked.items():
        if "error" in fig:
            rows.append((label, "failed", str(fig["error"])[:60]))
            continue
        rows.append((label, "yes" if fig["rebalanced"] else "no", _secs(fig.get("peer_took_partitions_after_seconds"))))
    return "\n".join(grid(rows))


def idle_table(idle: dict[str, Any]) -> str:
    rows: list[tuple[str, ...]] = [("idle consumer", "CPU %", "RSS MB", "window")]
    for label, fig in idle.items():
        if "error" in fig:
            rows.append((label, "failed", str(fig["error"])[:60], ""))
            continue
        rows.append((label, f"{fig['cpu_percent']:.2f}", f"{fig['rss_mb']:.1f}", f"{fig['seconds']:.0f} s"))
    return "\n".join(grid(rows))


def render(results: dict[str, Any]) -> str:
    parts = [f"broker: {results['broker']}   runs: {results['runs']}   machine: {results['machine']}"]
    if "throughput" in results:
        parts.append(throughput_table(results["throughput"]))
    if "scale" in results:
        parts.append("\nScale: the 100 B records over 200 topics x 6 partitions, against 6 partitions in the same run")
        parts.append(throughput_table(results["scale"], scale=True))
    for key, title, fn in (("liveness", "Liveness", liveness_table), ("blocked_loop", "Blocked loop", blocked_table),
                           ("idle", "Idle cost", idle_table)):
        if key in results:
            parts.append(f"\n{title}\n" + fn(results[key]))
    return "\n".join(parts)
