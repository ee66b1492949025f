"""zaqar-lite: a Zaqar v2 compatible message queue with dead-letter queues and delays."""

__version__ = "0.1.0"
