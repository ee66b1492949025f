"""Fault checking in the style of Jepsen: a workload records a history under faults, a checker reads it.

``history.py`` holds the records, ``checker.py`` the rules every history must keep,
``workload.py`` the clients, ``nemesis.py`` the faults and their seeded schedules,
``run.py`` one run (and the long run's command line). docs/faults.rst says what the
runs measured.
"""
