"""The ``parts`` fixture: a ShareConsumer built on fake.py's scripted parts."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite.share import consumer as share_module

from .fake import FakeCluster, FakeFetcher, FakeMember, Parts


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> Parts:
    made = Parts()

    def cluster(config: Any) -> FakeCluster:
        made.cluster = FakeCluster()
        return made.cluster

    def member(config: Any, cluster: Any, on_change: Any) -> FakeMember:
        made.member = FakeMember(on_change)
        return made.member

    def fetcher(config: Any, cluster: Any, member_id: str) -> FakeFetcher:
        made.fetcher = FakeFetcher()
        return made.fetcher

    monkeypatch.setattr(share_module, "make_cluster", cluster)
    monkeypatch.setattr(share_module, "make_member", member)
    monkeypatch.setattr(share_module, "make_fetcher", fetcher)
    return made
