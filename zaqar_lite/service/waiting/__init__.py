"""Long polling: claims that wait for messages, and the wake-ups that end their wait.

:mod:`~zaqar_lite.service.waiting.room` keeps a worker process's waiting claims, one
line per queue; :mod:`~zaqar_lite.service.waiting.channels` carries wake-ups between
the processes serving one store (unix datagram sockets on one machine, or a
Redis pub/sub channel per queue); :mod:`~zaqar_lite.service.waiting.long_poll` is the
loop around the service's claim.
"""
