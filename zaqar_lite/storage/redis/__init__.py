"""The Redis driver.

``driver`` holds the :class:`~zaqar_lite.storage.base.Storage`; ``layout`` says how
the data lies in the store, for the driver and for the Spark reader alike.
"""
