"""The classic group protocol: coordinator requests, offset commits and fetches, the membership
state table, eager and cooperative rebalances, the heartbeat task and thread, and the client-side assignors."""
