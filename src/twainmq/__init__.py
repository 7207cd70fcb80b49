"""twainmq: an embedded, broker-free, durable, partitioned message log.

A directory is the whole system: topics, partitions, keyed messages, producers,
consumers and consumer groups coordinated through files.
"""

__version__ = "0.1.0"
