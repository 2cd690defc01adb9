"""``python -m livecells``: the command line (see :mod:`livecells.cli`)."""

from livecells.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
