"""The message lifecycle's pure rules: claims, dead letters, delays, expiry, and what a queue's metadata sets.

Visibility and the claim policy (``policy``), reserved queue metadata
(``metadata``), queue names (``names``), redrive (``redrive``), ordered groups
(``groups``), deduplication (``dedup``), failure signatures (``signatures``)
and the consumer's retry backoff (``retry_backoff``); values in, values out.
The rules of the features around the queue are in :mod:`zaqar_lite.rules`.
"""
