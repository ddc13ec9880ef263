"""aiokafka_lite.testing.schema_registry without starting anything: the port read from Apicurio's
log, Java versions, where Java 21+ is looked for, and a download that cannot happen failing (not
skipping) with one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiokafka_lite.testing import schema_registry
from aiokafka_lite.testing._process import BrokerStartError, BrokerUnavailable

# Apicurio 3.3.3's start line, as logged here (the management port comes second).
STARTED = ("2026-11+00-29 19:22:46 INFO [io.quarkus.bootstrap.runner.Timing] (main) apicurio-registry-app 3.3.3 "
           "on JVM (powered by Quarkus 3.33.3.1) started in 9.110s. Listening on: http://127.0.0.1:37215. "
           "Management interface listening on http://127.0.0.1:38549.")


def test_the_http_port_is_read_and_not_the_management_one() -> None:
    assert schema_registry.http_port_of("earlier lines\n" + STARTED + "\n") == 37215
    assert schema_registry.http_port_of("Management interface listening on http://127.0.0.1:38549.") is None
    assert schema_registry.http_port_of("starting...") is None


def fake_java_home(root: Path, version: str) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")
    (root / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return root


@pytest.mark.parametrize(("version", "major"), [("25.0.1", 25), ("21", 21), ("17.0.15", 17), ("1.8.0_292", 8),
                                                ("22-ea", 22)])
def test_java_major_reads_the_release_file(tmp_path: Path, version: str, major: int) -> None:
    assert schema_registry.java_major(fake_java_home(tmp_path, version)) == major


def test_the_configured_java21_home_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = fake_java_home(tmp_path / "jdk21", "21.0.2")
    monkeypatch.setenv(schema_registry.JAVA21_HOME_ENV, str(home))
    assert schema_registry.find_java21() == str(home / "bin" / "java")


def test_a_java_home_older_than_21_is_passed_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(schema_registry.JAVA21_HOME_ENV, str(fake_java_home(tmp_path / "jdk17", "17.0.15")))
    monkeypatch.setenv("JAVA_HOME", str(fake_java_home(tmp_path / "jdk22", "22.0.1")))
    assert schema_registry.find_java21() == str(tmp_path / "jdk22" / "bin" / "java")


def test_a_download_without_maven_fails_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOKAFKA_LITE_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BrokerStartError, match=r"`mvn` is not on PATH; it is needed to download Apicurio") as caught:
        schema_registry.apicurio_home("3.3.3")
    assert "\n" not in str(caught.value)


def test_without_java21_the_registry_is_unavailable_in_one_line(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(schema_registry.JAVA21_HOME_ENV, str(fake_java_home(tmp_path / "jdk17", "17.0.15")))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(schema_registry, "JVM_DIRECTORIES", [tmp_path / "no-jvm-here"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BrokerUnavailable, match=r"needs Java 21\+, none found .* tried: .*jdk17 \(17\)") as caught:
        schema_registry.ApicurioRegistry().start()
    assert "\n" not in str(caught.value)
