"""``python -m zaqar_lite.notify PARENT_PID``: one notifier process of a pool (settings on stdin)."""

from zaqar_lite.notify.process import child_main

child_main()
