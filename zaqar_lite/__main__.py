"""``python -m zaqar_lite`` is the ``zaqar-lite`` command."""

from zaqar_lite.cli import main

main()
