"""Every primitive, grouped by family. Importing this package registers them all in
``fusegrad.ir.primitive.PRIMS``; each family's module holds its ops' complete rules."""
from .elementwise import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .layout import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .creation import *  # noqa: F401,F403
from .sorting import *  # noqa: F401,F403
from .complex import *  # noqa: F401,F403
from .fft import *  # noqa: F401,F403
from .ctc import *  # noqa: F401,F403
