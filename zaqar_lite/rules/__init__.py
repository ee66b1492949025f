"""The pure rules of the features around the queue.

As ``claims/`` holds the message lifecycle's, this package holds the rules of
what surrounds it, as values in and values out (no store, no HTTP, no
service): pre-signed URLs (``signed_urls``), the codec of encryption at rest
(``encryption``), pool placement (``pools``), queue templates (``templates``),
topic names (``topics``), the notifier's target allow-list (``egress``) and
its delivery retry policy (``delivery_retry``).
"""
