"""twainmq: an embedded, broker-free, durable, partitioned message log.

A directory is the whole system: topics, partitions, keyed messages, producers,
consumers and consumer groups coordinated through files. Start with ``Twain(root)``.
"""

from .config import TopicConfig
from .consumer import Consumer
from .describe import PartitionInfo, SegmentInfo, TopicDescription
from .errors import (
    ClosedError,
    InvalidKeyError,
    InvalidKeyTypeError,
    InvalidMessageError,
    InvalidOptionError,
    InvalidPartitionError,
    InvalidTopicNameError,
    MessageTooLargeError,
    MessageTypeConflictError,
    MessageTypeError,
    OffsetOutOfRangeError,
    PartitionLockedError,
    StorageError,
    StorageFullError,
    StorageIOError,
    TopicConfigError,
    TopicCorruptError,
    TopicExistsError,
    TwainMQError,
    UnknownTopicError,
    UnregisteredMessageTypeError,
)
from .keys import default_partitioner, splitmix64
from .message import Message, RecordMetadata
from .producer import Producer
from .twain import Twain, multi_poll

__version__ = "0.1.0"

__all__ = [
    "ClosedError",
    "Consumer",
    "InvalidKeyError",
    "InvalidKeyTypeError",
    "InvalidMessageError",
    "InvalidOptionError",
    "InvalidPartitionError",
    "InvalidTopicNameError",
    "Message",
    "MessageTooLargeError",
    "MessageTypeConflictError",
    "MessageTypeError",
    "OffsetOutOfRangeError",
    "PartitionInfo",
    "PartitionLockedError",
    "Producer",
    "RecordMetadata",
    "SegmentInfo",
    "StorageError",
    "StorageFullError",
    "StorageIOError",
    "TopicConfig",
    "TopicConfigError",
    "TopicCorruptError",
    "TopicDescription",
    "TopicExistsError",
    "Twain",
    "TwainMQError",
    "UnknownTopicError",
    "UnregisteredMessageTypeError",
    "__version__",
    "default_partitioner",
    "multi_poll",
    "splitmix64",
]
