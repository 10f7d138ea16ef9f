"""``python -m pylog`` runs the command line."""

from pylog.cli import main

raise SystemExit(main())
