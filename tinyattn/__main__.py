"""``python -m tinyattn``: the ``tinyattn`` command (see :mod:`tinyattn.cli`)."""

from .cli import main

raise SystemExit(main())
