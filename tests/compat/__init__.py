"""Differential conformance: the seed's public API, observed in ours and in mq-bridge-py 0.3.2."""
