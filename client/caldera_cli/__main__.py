"""``python -m caldera_cli``: the same as the ``caldera`` command."""

from caldera_cli.main import main

raise SystemExit(main())
