"""One module per client. Each runs as its own process: ``python -m benchmarks.clients.<name> '<spec json>'``
consumes ``spec["records"]`` records of ``spec["topic"]`` from the beginning and prints one JSON line
with its figures (see ``_harness``), so CPU time and peak RSS belong to that client alone.
"""
