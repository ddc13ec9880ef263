"""Benchmarks: aiokafka-lite side by side with confluent-kafka, aiokafka and kafka-python.

Run ``python -m benchmarks.run --help``; see benchmarks/README.md.
"""
