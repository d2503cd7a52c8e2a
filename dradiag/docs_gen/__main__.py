"""``python -m dradiag.docs_gen``."""

from dradiag.docs_gen import main

raise SystemExit(main())
