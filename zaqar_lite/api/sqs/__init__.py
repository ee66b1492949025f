"""The SQS-compatible face: SQS's two wire protocols over the messaging service (docs/api.rst,
"SQS-compatible endpoint").

``wire`` reads a call and writes its answer in either protocol; ``credentials``
says who a call acts for; ``queues``, ``messages`` and ``redrive`` are the
actions, thin over the services the composition root built; ``resource``
serves ``POST /`` (and ``GET /`` with ``Action``) and the queue URLs
``/{account}/{queue}``. The pure rules are in ``rules/sqs/``.
"""
