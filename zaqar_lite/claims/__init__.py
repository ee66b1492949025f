"""The pure rules (claims, dead letters, delays, expiry, and every other policy), with no I/O.

The layers above apply them: the service (:mod:`zaqar_lite.service`), the storage loops
(:mod:`zaqar_lite.storage.base`), the API and the notifier; docs/architecture.rst, "Where each
rule lives", says which rule is in which module.
"""
