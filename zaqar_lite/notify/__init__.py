"""Subscriptions and their guaranteed, ordered, at-least-once delivery by webhook or mail.

docs/api.rst, "Subscriptions and webhook delivery".

``worker`` is the notifier that delivers; ``state`` describes the records it
and the subscription service (:mod:`zaqar_lite.service.subscriptions`, which
the API calls) keep in the store, and ``records`` lists and removes them.
"""
