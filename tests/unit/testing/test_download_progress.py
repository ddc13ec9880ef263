"""The Kafka jar download tells its progress: what, how much, how long; nothing once cached."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from aiokafka_lite.testing._download_progress import DownloadProgress
from aiokafka_lite.testing._kafka_jars import CACHE_ENV, kafka_jars
from aiokafka_lite.testing._process import BrokerUnavailable

CENTRAL = "https://repo.maven.apache.org/maven2"


def maven_lines(count: int, size: str = "1.5 MB") -> list[str]:
    lines = []
    for i in range(count):
        url = f"{CENTRAL}/org/example/lib{i}/1.0/lib{i}-1.0.jar"
        lines.append(f"[INFO] Downloading from central: {url}\n")
        lines.append(f"[INFO] Downloaded from central: {url} ({size} at 3.2 MB/s)\n")
    return lines


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_output_is_whole_lines_every_few_seconds_and_the_totals() -> None:
    out, clock = io.StringIO(), FakeClock()
    progress = DownloadProgress("Kafka's jars", out, terminal=False, line_every=5.0, clock=clock)
    progress.start("/cache/kafka-9")
    for line in maven_lines(10):
        clock.now += 0.5  # two lines a file, one file a second: a progress line every five
        progress.feed(line)
    progress.feed("[INFO] Copying lib0-1.0.jar to /cache/kafka-9/lib0-1.0.jar\n")
    progress.finish(ok=True)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "downloading Kafka's jars with Maven into /cache/kafka-9 (once; later runs use that cache)"
    assert lines[1:-1] == ["  ... 5 files, 7.5 MB so far (5 s)", "  ... 10 files, 15.0 MB so far (10 s)"]
    assert lines[-1] == "downloaded Kafka's jars: 10 files, 15.0 MB in 10 s"


def test_a_terminal_gets_a_counter_redrawn_in_place_then_cleared() -> None:
    out, clock = io.StringIO(), FakeClock()
    progress = DownloadProgress("Kafka's jars", out, terminal=True, clock=clock)
    progress.start("/cache/kafka-9")
    for line in maven_lines(3, size="512 kB"):
        clock.now += 0.5  # one file a second
        progress.feed(line)
    progress.finish(ok=True)
    text = out.getvalue()
    assert "\r  2 files, 1.0 MB: lib1-1.0.jar" in text
    assert "\r  3 files, 1.5 MB: lib2-1.0.jar" in text
    counter_cleared = "\r" + " " * len("  3 files, 1.5 MB: lib2-1.0.jar") + "\r"
    assert text.endswith(counter_cleared + "downloaded Kafka's jars: 3 files, 1.5 MB in 3 s\n")


def test_a_failed_download_clears_the_counter_and_claims_nothing() -> None:
    out, clock = io.StringIO(), FakeClock()
    progress = DownloadProgress("Kafka's jars", out, terminal=True, clock=clock)
    progress.start("/cache/kafka-9")
    clock.now += 1.0
    progress.feed(maven_lines(1)[1])
    progress.finish(ok=False)
    assert "downloaded" not in out.getvalue()
    assert out.getvalue().endswith("\r")


def _fake_mvn(bin_dir: Path, *, succeed: bool) -> None:
    """Prints what Maven prints in batch mode, then copies the jars (or fails as Maven does)."""
    bin_dir.mkdir()
    downloads = "".join(f'echo "{line.strip()}"\n' for line in maven_lines(4))
    body = ('out=$(printf "%s\\n" "$@" | sed -n "s/^-DoutputDirectory=//p")\n'
            'ver=$(printf "%s\\n" "$@" | sed -n "s/^-Dkafka.version=//p")\n'
            'echo "[INFO] Scanning for projects..."\n' + downloads
            + ('mkdir -p "$out" && for a in kafka_2.13 kafka-server kafka-tools; do '
               'touch "$out/$a-$ver.jar"; done\n' if succeed
               else 'echo "[ERROR] Failed to execute goal: Could not transfer artifact" ; exit 1\n'))
    script = bin_dir / "mvn"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_the_first_download_says_what_and_how_much_and_a_cached_one_says_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_mvn(tmp_path / "bin", succeed=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first, again = io.StringIO(), io.StringIO()
    kafka_jars("9.9.6", progress=first)
    kafka_jars("9.9.6", progress=again)
    lines = first.getvalue().splitlines()
    assert lines[0].startswith(f"downloading Apache Kafka 9.9.6's jars from Maven Central with Maven into "
                               f"{tmp_path / 'cache' / 'kafka-9.9.6'}")
    assert lines[-1].startswith("downloaded Apache Kafka 9.9.6's jars from Maven Central: 4 files, 6.0 MB in ")
    assert again.getvalue() == ""


def test_default_progress_goes_to_stderr_as_pytest_captures_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fake_mvn(tmp_path / "bin", succeed=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    kafka_jars("9.9.5")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "downloaded Apache Kafka 9.9.5's jars" in captured.err
    assert "\r" not in captured.err  # captured output is not a terminal: whole lines only


def test_a_failed_download_reports_mavens_error_without_the_per_file_chatter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_mvn(tmp_path / "bin", succeed=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    out = io.StringIO()
    with pytest.raises(BrokerUnavailable, match="exit 1") as failure:
        kafka_jars("9.9.4", progress=out)
    assert "Could not transfer artifact" in str(failure.value)
    assert "Downloaded from" not in str(failure.value)
    assert "downloaded Apache Kafka" not in out.getvalue()


def test_a_missing_maven_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with pytest.raises(BrokerUnavailable, match=r"`mvn` is not on PATH.*install Apache Maven"):
        kafka_jars("9.9.3", progress=io.StringIO())
