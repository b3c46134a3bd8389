"""bisect's and heapq's functions, bound once as `Final` names for the compiled modules.

Compiled by mypyc, a `Final` module-level name is a C static, and a module that imports
it reads the defining module's static directly, whereas `bisect.insort(...)` by module
attribute, or a plain global alias, is a dictionary lookup at every call. The engine's
queue, cluster indexes and agenda and the compiled policies all import them from here.
"""

from __future__ import annotations

import bisect
import heapq
from typing import Final

bisect_left: Final = bisect.bisect_left
bisect_right: Final = bisect.bisect_right
insort: Final = bisect.insort
heappush: Final = heapq.heappush
heappop: Final = heapq.heappop
heapify: Final = heapq.heapify
