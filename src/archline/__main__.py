"""``python -m archline``: the same as the ``archline`` command."""

from archline.cli.app import main

main()
