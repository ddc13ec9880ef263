"""Group membership: the interface the poll path talks to (member.py), whatever the protocol.
classic/ is JoinGroup/SyncGroup/Heartbeat (eager and cooperative); consumer_protocol/ is KIP-848."""
