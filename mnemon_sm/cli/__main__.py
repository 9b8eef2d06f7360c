"""``python -m mnemon_sm.cli``: the command line without the console script."""

from mnemon_sm.cli.main import main

main()
