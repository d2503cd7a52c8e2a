"""Large JSON ``List`` files kept undecoded; their items are decoded when a look-up needs them.

A ``claim`` or ``pod`` diagnosis reads a handful of the 100,000 claims, 105,000 pods and
200,000 events of a large snapshot. Decoding every item (orjson: 1.7 s for 182 MB),
normalizing and indexing it costs several times the diagnosis. Here msgspec's structural
scan splits the ``items`` array into one undecoded span per item (no Python object per
value: about 0.6 ms per MB) and reads each item's ``apiVersion``/``kind`` only. Each kind's
items become a :class:`DeferredJsonItems`, and the Snapshot decodes an item only when a
look-up may need it (``snapshot.model.DeferredObjects``). Where each item lies is worked
out in the file itself when its items are evenly separated (what every serializer
writes); otherwise the items are copied into one compact buffer.

Which items may need decoding is found in the text: an item whose decoded form holds
the string ``v`` anywhere has ``"v"`` literally in its JSON when ``v`` is plain (ASCII
letters, digits, ``.``, ``-``, ``_``, ``:``: every Kubernetes name, namespace, UID and
node name) and no ``\\u`` escape in the buffer spells one of those characters. Otherwise
the store says it cannot tell, and the Snapshot decodes the whole kind.

Anything that is not a plain ``<Kind>List``/``List`` of objects with string
``apiVersion``/``kind`` (after the list's kind is given to items without one), and any
file msgspec rejects, is left to the normal loader, so its handling and its error
messages (file, line, column) are unchanged.
"""

from __future__ import annotations

import re
import string
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from operator import attrgetter
from typing import Any

from dradiag.errors import InputError
from dradiag.snapshot.model import Kind
from dradiag.snapshot.normalize import kind_of

__all__ = ["DEFER_MIN_BYTES", "DeferredJsonItems", "SplitList", "split_json_list"]

DEFER_MIN_BYTES = 4 * 1024 * 1024
"""JSON files at least this large are split instead of decoded (when the caller defers).
Below it, decoding everything costs less than a few look-ups' scans."""

_PLAIN_CHARS = frozenset(string.ascii_letters + string.digits + "._:-")
_PLAIN = re.compile("[" + re.escape("".join(sorted(_PLAIN_CHARS))) + "]+\\Z")
_SCALAR_SPELLING = re.compile(
    r"(?:-?(?:[0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?|inf)|nan|True|False|None)\Z"
)
"""How ``str()`` spells a JSON number or literal: the Snapshot indexes a non-string name
that way, and the text holds it unquoted (or spelled otherwise: ``1e5``, ``true``)."""
_ASCII_ESCAPE = re.compile(rb"\\u00([2-7][0-9A-Fa-f])")
_FEW = 256
"""Up to this many matches (or an eighth of the kind) are decoded one by one."""


class _Layout:
    """Where each item's text lies in a buffer: ``start(i) = origin + prefix[i] + i * gap``.

    ``prefix[i]`` sums the lengths of the items before ``i``; ``gap`` is what separates
    two items (``,`` in compact JSON, ``,\\n`` and the indentation in kubectl's).
    """

    __slots__ = ("text", "origin", "gap", "prefix", "array", "copied")

    def __init__(
        self,
        text: bytes,
        origin: int,
        gap: int,
        prefix: array[int],
        array_span: tuple[int, int],
        *,
        copied: bool,
    ) -> None:
        self.text = text
        self.origin = origin
        self.gap = gap
        self.prefix = prefix
        self.array = array_span
        """(start, end) of the ``[...]`` holding every item."""
        self.copied = copied
        """True for a buffer built from the items: their places are known, not inferred."""

    def start(self, index: int) -> int:
        return self.origin + self.prefix[index] + index * self.gap


def _prefix_sums(spans: Sequence[Any]) -> array[int]:
    return array("q", accumulate(map(len, spans), initial=0))


def _joined(spans: Sequence[Any]) -> _Layout:
    """The items copied into one compact ``[a,b,...]`` buffer."""
    parts = list(spans)
    last = len(parts) - 1
    parts[0] = b"[" + bytes(parts[0])
    parts[last] = bytes(parts[last]) + b"]"
    text = b",".join(parts)
    return _Layout(text, 1, 1, _prefix_sums(spans), (0, len(text)), copied=True)


def _in_place(text: bytes, spans: Sequence[Any]) -> _Layout | None:
    """The layout of ``spans`` (every item of the file's list) in the file itself, when
    the items are separated alike (any serializer's output); None otherwise.

    Item 0 is where its text first occurs after a ``[``, the gap is measured between
    items 0 and 1, and the last item must then be found exactly where the gap predicts,
    followed by ``]``. :meth:`DeferredJsonItems.candidates` still checks every item it
    maps a match to, and falls back to a copy on any mismatch.
    """
    first = bytes(spans[0])
    origin = text.find(first)
    opening = text.rfind(b"[", 0, origin) if origin > 0 else -1
    if opening < 0 or text[opening + 1 : origin].strip():
        return None
    gap = 1
    if len(spans) > 1:
        end = origin + len(first)
        second = text.find(bytes(spans[1]), end)
        if second < 0 or text[end:second].strip() != b",":
            return None
        gap = second - end
    layout = _Layout(text, origin, gap, _prefix_sums(spans), (opening, opening), copied=False)
    last = len(spans) - 1
    tail = layout.start(last)
    end = tail + len(spans[last])
    closing = text.find(b"]", end)
    if text[tail:end] != bytes(spans[last]) or closing < 0 or text[end:closing].strip():
        return None
    layout.array = (opening, closing + 1)
    return layout


class DeferredJsonItems:
    """The undecoded items of one kind from one JSON list file.

    Each item is a msgspec ``Raw`` span of the file (decoded alone with orjson). Finding
    which items hold a string needs where each lies in one buffer: the file itself
    when the items are all of its list and evenly separated, else a compact copy.
    """

    __slots__ = ("kind", "path", "_spans", "_file", "_layout", "_list", "_inherit", "_escapes")

    def __init__(
        self,
        kind: Kind,
        path: str,
        spans: Sequence[Any],
        list_header: tuple[Any, str | None],
        inherit: bool,
        *,
        file: bytes | None = None,
    ) -> None:
        self.kind = kind
        self.path = path
        self._spans = spans
        self._file = file
        """The file's text, when ``spans`` are every item of its list, in order."""
        self._layout: _Layout | None = None
        self._list = list_header
        """(the list's apiVersion, the kind its items inherit), as the loader applies them."""
        self._inherit = inherit
        """Whether some item carries no ``kind`` of its own."""
        self._escapes: bool | None = None

    def __len__(self) -> int:
        return len(self._spans)

    def _where(self) -> _Layout:
        if self._layout is None:
            found = _in_place(self._file, self._spans) if self._file is not None else None
            self._layout = found or _joined(self._spans)
            self._file = None
        return self._layout

    def candidates(self, value: str, *, within: bool = False) -> list[int] | None:
        if not _PLAIN.match(value) or (_SCALAR_SPELLING.match(value) and not within):
            return None
        if self._inherit and value in ("apiVersion", "kind", *self._list):
            return None  # items given the list's kind hold these without their text showing
        if self._spells_plain_escapes():
            return None
        # A whole string value is quoted in the text; a value named inside a longer
        # string (an event message naming a claim) is found as a bare substring.
        needle = value.encode("ascii") if within else b'"' + value.encode("ascii") + b'"'
        limit = max(_FEW, len(self._spans) // 8)
        found = self._find(needle, limit)
        if found is False:  # an item is not where the file's layout says: use a copy
            self._layout = _joined(self._spans)
            found = self._find(needle, limit)
        return found if isinstance(found, list) else None

    def _find(self, needle: bytes, limit: int) -> list[int] | bool:
        """Indexes of the items whose text holds ``needle``. True past ``limit`` items
        (most of the kind: decoding it all at once costs less); False when an item is
        not where the layout says."""
        layout = self._where()
        spans, text = self._spans, layout.text
        starts = range(len(spans))
        out: list[int] = []
        at = text.find(needle)
        while at != -1:
            index = bisect_right(starts, at, key=layout.start) - 1
            if index < 0:
                return False
            begin = layout.start(index)
            end = begin + len(spans[index])
            if at >= end or (not layout.copied and text[begin:end] != bytes(spans[index])):
                return False
            if len(out) == limit:
                return True
            out.append(index)
            at = text.find(needle, end)
        return out

    def _spells_plain_escapes(self) -> bool:
        """True when some ``\\u00XX`` escape in the text stands for a plain character."""
        if self._escapes is None:
            import re2

            # RE2 looks for the rare backslash with memchr: ~50x faster than `in` here.
            text = self._where().text
            self._escapes = re2.search(_ASCII_ESCAPE.pattern, text) is not None and any(
                chr(int(m[1], 16)) in _PLAIN_CHARS for m in _ASCII_ESCAPE.finditer(text)
            )
        return self._escapes

    def field_values(self, path: Sequence[str]) -> list[Any] | None:
        """The value at ``path`` (object keys) in every item, None where absent, read by
        msgspec without decoding the rest; None when some item holds a non-object on
        the way."""
        import msgspec

        shape: Any = msgspec.defstruct("Leaf", [(path[-1], Any, None)])
        for key in reversed(path[:-1]):
            shape = msgspec.defstruct("Step", [(key, shape | None, None)])
        layout = self._where()
        start, end = layout.array
        try:
            items = msgspec.json.decode(memoryview(layout.text)[start:end], type=list[shape])
        except msgspec.MsgspecError:
            return None
        out = []
        for item in items:
            for key in path:
                if item is None:
                    break
                item = getattr(item, key)
            out.append(item)
        return out

    def decode(self, index: int) -> dict[str, Any]:
        item = self._loads(memoryview(self._spans[index]))
        return self._with_list_kind(item) if self._inherit else item

    def decode_all(self) -> list[dict[str, Any]]:
        layout = self._where()
        start, end = layout.array
        items: list[dict[str, Any]] = self._loads(memoryview(layout.text)[start:end])
        if self._inherit:
            items = [self._with_list_kind(item) for item in items]
        return items

    def _with_list_kind(self, item: dict[str, Any]) -> dict[str, Any]:
        # As sources.manifests does for raw API list responses: items omit kind/apiVersion.
        if "kind" in item:
            return item
        api_version, item_kind = self._list
        return {"apiVersion": api_version, "kind": item_kind, **item}

    def _loads(self, data: Any) -> Any:
        import orjson

        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            # msgspec accepted it; orjson is stricter (integers beyond 64 bits, lone
            # surrogates). Said as the normal loader would have said it, without a line.
            raise InputError(f"malformed JSON: {exc.msg}", path=self.path) from None


class SplitList:
    """What :func:`split_json_list` found: per-kind stores and the kinds passed over."""

    __slots__ = ("stores", "skipped")

    def __init__(self, stores: list[DeferredJsonItems], skipped: dict[str, int]) -> None:
        self.stores = stores
        self.skipped = skipped
        """``apiVersion/kind`` → how many items of a kind dradiag does not read."""


_DECODERS: tuple[Any, Any, Any] | None = None


def _decoders() -> tuple[Any, Any, Any]:
    """(list decoder with raw items, items' apiVersion/kind decoder, UNSET), built once."""
    global _DECODERS
    if _DECODERS is None:
        import msgspec

        # defstruct, not class statements: this module's annotations are strings.
        raw_list = msgspec.defstruct(
            "RawList",
            [
                ("apiVersion", Any, None),
                ("kind", Any, None),
                ("items", list[msgspec.Raw] | None, None),
            ],
        )
        item_head = msgspec.defstruct(
            "ItemHead", [("apiVersion", Any, msgspec.UNSET), ("kind", Any, msgspec.UNSET)]
        )
        heads = list[item_head] | None  # type: ignore[valid-type]
        head_list = msgspec.defstruct("HeadList", [("items", heads, None)])
        _DECODERS = (
            msgspec.json.Decoder(raw_list),
            msgspec.json.Decoder(head_list),
            msgspec.UNSET,
        )
    return _DECODERS


def split_json_list(data: bytes, path: str) -> SplitList | None:
    """Per-kind deferred stores for a JSON ``<Kind>List``/``List`` file.

    None when the file is anything else (a single object, an array, an empty list,
    items that are not objects, nested lists, items without a string apiVersion/kind)
    or not JSON msgspec accepts: the caller then decodes it as before.
    """
    import msgspec

    raw_decoder, head_decoder, unset = _decoders()
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        listed = raw_decoder.decode(data)
        kind = listed.kind
        if not (isinstance(kind, str) and kind.endswith("List")) or not listed.items:
            return None
        heads = head_decoder.decode(data).items
    except msgspec.MsgspecError:
        return None
    spans = listed.items
    if heads is None or len(heads) != len(spans):  # pragma: no cover - same document
        return None
    list_api = listed.apiVersion
    item_kind = kind[: -len("List")] or None
    try:
        api_versions = set(map(attrgetter("apiVersion"), heads))
        kinds = set(map(attrgetter("kind"), heads))
    except TypeError:  # an object or array where a string belongs: the loader reports it
        return None
    inherit = unset in kinds
    if inherit and item_kind is None:
        return None  # a bare List's item without a kind: the loader reports it

    def resolve(api_version: Any, kind_name: Any) -> tuple[str, str] | None:
        if kind_name is unset:
            kind_name = item_kind
            api_version = list_api if api_version is unset else api_version
        if type(kind_name) is not str or type(api_version) is not str:
            return None
        if kind_name.endswith("List"):
            return None
        return api_version, kind_name

    by_kind: dict[Kind, list[Any]] = {}
    skipped: dict[str, int] = {}
    if len(api_versions) == 1 and len(kinds) == 1:
        only = resolve(heads[0].apiVersion, heads[0].kind)
        if only is None:
            return None
        found = kind_of({"apiVersion": only[0], "kind": only[1]})
        if found is None:
            skipped[f"{only[0]}/{only[1]}"] = len(spans)
        else:
            by_kind[found] = spans
    else:
        kind_by_pair: dict[tuple[Any, Any], Kind | None] = {}
        for head, span in zip(heads, spans, strict=True):
            pair = (head.apiVersion, head.kind)
            if pair not in kind_by_pair:
                resolved = resolve(*pair)
                if resolved is None:
                    return None
                kind_by_pair[pair] = kind_of({"apiVersion": resolved[0], "kind": resolved[1]})
            found = kind_by_pair[pair]
            if found is not None:
                by_kind.setdefault(found, []).append(span)
            else:
                api_version, kind_name = resolve(*pair) or ("", "")
                label = f"{api_version}/{kind_name}"
                skipped[label] = skipped.get(label, 0) + 1
    header = (list_api, item_kind)
    whole = data if len(by_kind) == 1 and not skipped else None
    stores = [
        DeferredJsonItems(k, path, members, header, inherit, file=whole)
        for k, members in by_kind.items()
    ]
    return SplitList(stores, skipped)
