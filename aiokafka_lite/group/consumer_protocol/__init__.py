"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat): the member as data (state.py),
reconciliation, commits and offsets as a member, error verdicts, the poll-lapse watchdog, thread mode."""
