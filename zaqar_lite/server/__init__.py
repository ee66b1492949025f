"""The process machinery: gunicorn and its gevent worker, the accept balance, the sweeper, the redrive runner.

Kept empty: the gunicorn master imports the worker class by its dotted path,
and nothing here may import the application before the worker forks.
"""
