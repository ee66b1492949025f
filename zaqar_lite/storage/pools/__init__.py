"""Pools: a deployment of several stores, each queue in one of them (see :mod:`.router`)."""
