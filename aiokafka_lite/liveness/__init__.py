"""Liveness that does not depend on the group protocol: the KIP-62 timers, event-loop stall
detection and the health verdict."""
