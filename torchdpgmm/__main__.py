"""``python -m torchdpgmm``: the ``torchdpgmm`` command (:func:`torchdpgmm.cli.main`), for an environment whose
scripts folder is not on ``PATH``."""
import sys

from torchdpgmm.cli import main

sys.exit(main())
