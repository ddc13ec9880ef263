"""The client defects the conformance scenarios found, as strict xfail marks (README.md has the
details). A scenario carries the mark of the defect that fails it; whoever fixes the defect removes
the mark, and a fixed-but-still-marked scenario fails the run (strict)."""

from __future__ import annotations

import pytest

DEFECT_2 = pytest.mark.xfail(strict=True, reason="defect 2: a rebalance listener callback is cancelled "
                             "when poll(timeout) lapses while it runs")
DEFECT_3_4 = pytest.mark.xfail(strict=True, reason="defects 3 and 4: commit() returns before earlier "
                               "commit_async() calls complete; assign() with a group_id cannot commit")
DEFECT_5 = pytest.mark.xfail(strict=True, reason="defect 5: partitions added to a subscribed topic never "
                             "trigger a rebalance")
DEFECT_4 = pytest.mark.xfail(strict=True, reason="defect 4: a consumer with group_id using assign() cannot "
                             "commit (CommitFailedError, nothing sent)")
ASSIGN_IGNORES_COMMITTED = pytest.mark.xfail(strict=True, reason="defect 4, and an assign()ed consumer with a "
                                             "group_id starts at auto_offset_reset, not at the committed offset")
CLOSE_DROPS_COMMITS = pytest.mark.xfail(strict=True, reason="close() fails commit_async() calls still pending "
                                        "with ConsumerClosedError instead of completing them (and defect 4)")
REVOKE_ON_CLOSE = pytest.mark.xfail(strict=True, reason="inside on_partitions_revoked run by close(), every "
                                    "consumer method raises ConsumerClosedError (close() marks it closed first)")
EAGER_ONLY = pytest.mark.xfail(strict=True, reason="cooperative-sticky still rebalances eagerly: "
                               "on_partitions_assigned gets the whole assignment, not only the added partitions")
PREFIX_MATCH = pytest.mark.xfail(strict=True, reason="subscribe(pattern=) matches the start of a topic name "
                                 "(re.match), not the whole name as Java's Pattern.matcher().matches()")
INVALID_TOPIC_SILENT = pytest.mark.xfail(strict=True, reason="an invalid topic name is never reported: Metadata's "
                                         "INVALID_TOPIC_EXCEPTION is ignored (poll() and partitions_for() go quiet)")
NO_AUTO_CREATE = pytest.mark.xfail(strict=True, reason="allow_auto_create_topics=True is not honoured: every "
                                   "Metadata request says allow_auto_topic_creation=False (_net/cluster.py)")
INTERNAL_TOPICS_HIDDEN = pytest.mark.xfail(strict=True, reason="list_topics() leaves out __consumer_offsets: "
                                           "exclude_internal_topics, meant for pattern subscriptions, filters it")
POLL_ZERO = pytest.mark.xfail(strict=True, reason="poll(timeout=0) never returns records: the zero deadline "
                              "cancels every poll at its first await, so no work completes")
ASSIGNED_CALLBACK_FAILURE_FETCHES = pytest.mark.xfail(strict=True, reason="records are fetched from partitions "
                                                      "whose on_partitions_assigned raised (Java: not fetchable)")
ASSIGN_NO_AUTO_COMMIT = pytest.mark.xfail(strict=True, reason="defect 4, and assign() does not auto-commit the "
                                          "consumed offsets of the partitions it replaces")
NOT_STICKY = pytest.mark.xfail(strict=True, reason="cooperative-sticky moves more partitions than needed: "
                               "JoinGroup never reports owned partitions (consumer/group.py _join_body)")
