"""One memoized evaluator per compiled selector, kept for the run.

The class selectors of a DeviceClass are shared by every request of every claim
checked in one run (``compile_selector`` returns one object per expression), and each
evaluator memoizes on the values its selector reads, so it is made once per compiled
selector, not once per request. Both the inventory
(``DeviceInventory.indices_passing``) and the stages (:mod:`.evaluate`) use it, which
is why it sits apart from either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.cel import CelDevice, CompiledSelector


# One memoized evaluator per compiled selector and run: the class selectors of
# gpu.nvidia.com are shared by every request of every claim checked in one run.
_MEMO: dict[int, tuple[Any, Callable[[Any], bool]]] = {}


def _memoized(compiled: CompiledSelector) -> Callable[[CelDevice], bool]:
    found = _MEMO.get(id(compiled))
    if found is not None and found[0] is compiled:
        return found[1]
    fn = compiled.memoized()
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[id(compiled)] = (compiled, fn)
    return fn
