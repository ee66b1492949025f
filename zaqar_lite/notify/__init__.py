"""Subscriptions and their guaranteed, ordered, at-least-once delivery by webhook or mail.

docs/api.rst, "Subscriptions and webhook delivery".

``subscriptions`` is the service the API calls; ``worker`` is the notifier
that delivers; ``state`` describes the records both keep in the store.
"""
