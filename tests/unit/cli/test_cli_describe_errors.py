"""`groups describe` ends every failure as one line on stderr with exit code 1, whatever raised it
(docs/cli.md: one line, no traceback); no broker: the describe step is replaced."""

from __future__ import annotations

import pytest

from aiokafka_lite.cli import groups as cli_groups
from aiokafka_lite.errors import BrokerError


@pytest.mark.parametrize(("raised", "line"), [
    pytest.param(TimeoutError(), "aiokafka-lite: KafkaTimeoutError: describing group 'g' did not complete in time",
                 id="bare-TimeoutError"),
    pytest.param(OSError(99, "Cannot assign requested address"),
                 "aiokafka-lite: KafkaError: describing group 'g' failed: OSError: "
                 "[Errno 99] Cannot assign requested address", id="OSError"),
    pytest.param(RuntimeError("unexpected"), "aiokafka-lite: KafkaError: describing group 'g' failed: "
                 "RuntimeError: unexpected", id="any-other-exception"),
    pytest.param(BrokerError(30, "DescribeGroups 'g'"), "aiokafka-lite: BrokerError: GROUP_AUTHORIZATION_FAILED (30)",
                 id="a-Kafka-error"),
])
def test_any_failure_is_one_line_and_exit_1(monkeypatch, capsys, raised, line):
    async def failing(bootstrap: str, group_id: str) -> cli_groups.GroupView:
        raise raised

    monkeypatch.setattr(cli_groups, "describe_group", failing)
    assert cli_groups.run_describe("g", "127.0.0.1:1", output_format="text") == 1
    captured = capsys.readouterr()
    [only] = captured.err.splitlines()
    assert only.startswith(line)
    assert captured.out == ""
