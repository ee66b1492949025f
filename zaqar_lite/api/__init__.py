"""The HTTP API (falcon WSGI)."""

#: the WSGI environ key where the API leaves a request's project, for the access log line
#: (gunicorn's ``%({zaqar_lite.project}e)s``); kept here so the server needs no more of the API
PROJECT_ENVIRON = "zaqar_lite.project"
