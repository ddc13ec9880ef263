"""KIP-932 share groups (ShareGroupHeartbeat): the member as data (state.py), its error verdicts
(errors.py) and its asyncio shell with the heartbeat task and the poll-deadline watchdog (member.py);
and the group's start offsets and lag as its coordinator reports them (offsets.py)."""
