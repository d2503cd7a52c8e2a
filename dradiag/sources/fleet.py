"""Fast loading of one large JSON device source (a fleet's ``kubectl get resourceslices -o json``).

Decoding 160k devices as one document costs about twelve times the file size in memory
(a dict per value). Here the top-level ``items`` array is decoded in slices of about
64 KiB with orjson and each slice's repeated values are shared as it arrives, so the
file costs its own size (as text, while decoding) plus one copy of what is distinct.

Finding where a slice of the array may end needs no JSON scanner. The items of a list
usually begin alike (``{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
...``): a ``},`` followed by the first item's opening is a candidate. Otherwise (or when
that candidate fails) a candidate is a ``}`` followed by ``,`` and ``{`` where the braces
counted from the slice's start balance (a cheap count that ignores strings). orjson then
decides: ``[`` + slice + ``]`` parses only when the slice ends between two items of the
array (a cut inside a string, an object or a nested array leaves something unclosed), so
a parsed slice holds exactly the items the one-by-one decoder would have produced. Where
no candidate works, the standard library decodes the items there one at a time, as
before; malformed input is therefore reported with the same message, line and column
either way.

While a slice's devices are still in the cache, the loader also notes what
``analyses.selection.build_inventory`` reads of them and keeps every distinct value it
shared (:class:`FleetIndex`, found again with :func:`fleet_index`): the inventory then
needs no pass of its own over 160k devices, and whether every value converts for CEL is
asked only of the distinct values that are not plain strings.

Sharing is by JSON text: whole ``attributes`` maps first (while they are found; a fleet
of per-device uuids has none to find), then the values of the maps not seen before, a
map at a time where a slice's maps have the same names. The values of a name found new
on nearly every device (:data:`NAME_PROBE_VALUES`) are left unshared: sharing them
would save nothing. A text kept as a key is an exact-size copy (:func:`_compact`):
orjson's own would pin a KiB of the C heap each.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from dradiag.errors import InputError
from dradiag.snapshot.model import Kind, Snapshot, SourceInfo, paused_gc
from dradiag.snapshot.normalize import kind_of, normalize
from dradiag.sources.manifests import decode_text

__all__ = [
    "STREAM_THRESHOLD_BYTES",
    "FleetIndex",
    "SliceDevices",
    "fleet_index",
    "iter_json_items",
    "stream_slice_snapshot",
]

STREAM_THRESHOLD_BYTES = 16 * 1024 * 1024
"""JSON files at least this large are streamed (see the module docstring)."""

CHUNK_CHARS = 64 * 1024
"""Aim for array slices of this many characters (measured: 64-128 KiB decode fastest)."""

MAX_PROBE_CHARS = 16 * CHUNK_CHARS

"""How far past the aim a slice's end is looked for before decoding one item at a time."""

MAP_PROBE_AFTER = 4096
MAP_PROBE_EVERY = 64
"""Once :data:`MAP_PROBE_AFTER` attribute maps were looked up and under one in eight
was found shared, whole maps are looked up in one slice of :data:`MAP_PROBE_EVERY`
only (the others share their values one by one, as fresh maps do)."""

ROWS_MAX = 1 << 16
"""Rows (:meth:`_Interner._share_rows`) kept at most: past that, rows not seen are still
shared value by value, only not remembered whole."""

NAME_PROBE_VALUES = 1024
"""Values of one attribute name shared before the loader judges whether that name's
values repeat: a name whose values were at least seven in eight new (a per-device
``uuid``, ``serial``, ``pciBusID``) is left unshared from then on (each such value is
kept once either way; a name misjudged so costs memory, never a different value).
Names not judged within the first :data:`NAME_PROBE_SLICES` slices stay shared."""
NAME_PROBE_SLICES = 4096


_MISSING = object()
_SCALARS_MAX = 1 << 16

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SPLIT = re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*\{")


def _orjson_loads() -> Callable[[str], Any] | None:
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a declared dependency
        return None
    loads: Callable[[str], Any] = orjson.loads
    return loads


def _item_start(text: str, start: int) -> re.Pattern[str] | None:
    """A pattern for the boundary before an item that begins like the one at ``start``.

    Items of a list usually begin alike, up to their first nested value (``{"apiVersion":
    "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": ``); a ``},`` followed
    by that text is almost always the end of an item, found without counting braces
    (orjson still decides). None when the first item's opening is too short to tell.
    """
    head = text[start : start + 256]
    nested = min((i for i in (head.find("{", 1), head.find("[", 1)) if i > 0), default=-1)
    if nested < 24:
        return None
    return re.compile(r"\}[ \t\n\r]*,[ \t\n\r]*" + re.escape(head[:nested]))


def _slice_end(
    text: str, start: int, item_start: re.Pattern[str] | None = None
) -> tuple[int, int] | None:
    """(end, next): ``text[start:end]`` may be whole items, the next item starts at ``next``.

    ``start`` is where an item begins. With ``item_start``, the end is the first
    boundary it finds past the aim. Otherwise it is just after a ``}`` that is followed by
    ``,`` and ``{`` and where the braces counted from ``start`` balance. None when there
    is none within reach (the array ends first, or strings hold unbalanced braces).
    """
    target = start + CHUNK_CHARS
    limit = target + MAX_PROBE_CHARS
    if item_start is not None:
        found = item_start.search(text, target, limit)
        if found is None:
            return None
        return found.start() + 1, text.find("{", found.start() + 1)
    search = _SPLIT.search
    count = text.count
    found = search(text, target)
    if found is None:
        return None
    pos = found.start() + 1
    depth = count("{", start, pos) - count("}", start, pos)
    while depth:
        found = search(text, pos)
        if found is None or found.start() > limit:
            return None
        nxt = found.start() + 1
        depth += count("{", pos, nxt) - count("}", pos, nxt)
        pos = nxt
    return pos, found.end() - 1


_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def iter_json_items(
    text: str, path: str, *, on_constant: Callable[[], None] | None = None
) -> Iterator[Any]:
    """The objects of a top-level List (or array), decoded a slice of the array at a time.

    Items of a ``<Kind>List`` that carry no ``kind`` get the list's (from the keys read
    before ``items``), as ``sources.manifests`` does. Raises InputError (with line and
    column) for malformed JSON. ``on_constant`` is called when the standard library's
    decoder meets ``NaN`` or an infinity (which it accepts, as this loader always has),
    before the item holding it is yielded.
    """

    def constant(name: str) -> float:
        if on_constant is not None:
            on_constant()
        return _CONSTANTS[name]

    scan = json.JSONDecoder(parse_constant=constant).scan_once  # type: ignore[attr-defined]
    loads = _orjson_loads()

    def skip(index: int) -> int:
        return _WHITESPACE.match(text, index).end()  # type: ignore[union-attr]

    def fail(index: int, reason: str) -> InputError:
        line = text.count("\n", 0, index) + 1
        column = index - text.rfind("\n", 0, index)
        return InputError(f"malformed JSON: {reason}", path=path, line=line, column=column)

    def decode(index: int) -> tuple[Any, int]:
        try:
            value, end = scan(text, index)
        except StopIteration:
            raise fail(index, "expecting a value") from None
        except json.JSONDecodeError as exc:
            raise fail(exc.pos, exc.msg) from None
        return value, end

    end = [0]

    def items(index: int) -> Iterator[Any]:
        """The array's values; ``end[0]`` is the index after its ``]`` once exhausted."""
        index = skip(index + 1)
        fast_from = index if loads is not None else len(text)
        item_start = _item_start(text, index) if loads is not None else None
        while not text.startswith("]", index):
            if index >= fast_from and loads is not None:
                values = None
                for pattern in (item_start, None) if item_start is not None else (None,):
                    cut = _slice_end(text, index, pattern)
                    if cut is None:
                        continue
                    stop, resume = cut
                    try:
                        values = loads("[" + text[index:stop] + "]")
                    except ValueError:  # orjson.JSONDecodeError: counting, or the stdlib
                        continue
                    break
                if values is not None:
                    yield from values
                    index = resume
                    continue
                fast_from = index + CHUNK_CHARS + MAX_PROBE_CHARS
            value, index = decode(index)
            yield value
            index = skip(index)
            if text.startswith(",", index):
                index = skip(index + 1)
            elif not text.startswith("]", index):
                raise fail(index, "expecting ',' or ']'")
        end[0] = index + 1

    index = skip(0)
    if text.startswith("[", index):
        yield from items(index)
        return
    if not text.startswith("{", index):
        raise fail(index, "expecting '{' or '['")
    index = skip(index + 1)
    header: dict[str, Any] = {}
    while not text.startswith("}", index):
        key, index = decode(index)
        index = skip(index)
        if not text.startswith(":", index):
            raise fail(index, "expecting ':'")
        index = skip(index + 1)
        if key == "items" and text.startswith("[", index):
            item_kind = str(header.get("kind") or "")[: -len("List")] or None
            for item in items(index):
                if isinstance(item, dict) and item_kind and "kind" not in item:
                    item = {"apiVersion": header.get("apiVersion"), "kind": item_kind, **item}
                yield item
            index = end[0]
        else:
            header[key], index = decode(index)
        index = skip(index)
        if text.startswith(",", index):
            index = skip(index + 1)
    if "items" not in header and header.get("kind") and not str(header["kind"]).endswith("List"):
        yield header


@dataclass(slots=True)
class SliceDevices:
    """What the inventory reads of one slice's devices, noted while they were decoded."""

    devices: list[Any]
    """The slice's ``spec.devices`` list itself (the record is valid for it only)."""
    names: list[str]
    """``str(name or "")`` of each device."""
    node_names: list[str | None] | None
    """Each device's own ``nodeName`` (``str``, or None when unset); None when no device
    has one."""
    types: list[str]
    """``str(scalar or "")`` of each device's ``type`` attribute (the bare name, else the
    driver-qualified one), as ``selection.build_inventory`` labels devices."""
    profiles: list[str | None]
    """Likewise of ``profile``, None when absent."""
    attributes: list[dict[str, Any]]
    """Each device's ``attributes`` map ({} when it has none)."""
    capacities: list[dict[str, Any]]
    """Each device's ``capacity`` map ({} when it has none)."""


@dataclass(slots=True)
class FleetIndex:
    """Facts about a streamed snapshot's devices, gathered while decoding (hot in cache).

    ``attribute_values`` and ``capacity_maps`` hold every attribute value object and
    every ``capacity`` map of every device of the snapshot (all shared but the few
    ``loose`` ones that could not be), so a question about all values, such as "does each
    convert for CEL", is asked of a few thousand objects instead of 160k devices.
    """

    slices: dict[int, SliceDevices] = field(default_factory=dict)
    """By ``id`` of the ``spec.devices`` list."""
    attribute_values: list[Any] = field(default_factory=list)
    checked_values: list[Any] | None = None
    """The ``attribute_values`` that need a look to know whether they convert: all but
    the plain ``{"string": ...}`` ones (None: not known, look at all)."""
    capacity_maps: list[Any] = field(default_factory=list)
    attribute_names: set[str] = field(default_factory=set)
    capacity_names: set[str] = field(default_factory=set)
    complete: bool = True
    """False when some device's ``attributes``/``capacity`` was not a map: then the
    value lists above do not hold everything."""


# The index of the snapshot streamed last (one: a CLI run reads one device source).
_LAST_INDEX: list[tuple[Snapshot, FleetIndex]] = []


def fleet_index(snapshot: Snapshot) -> FleetIndex | None:
    """The index :func:`stream_slice_snapshot` gathered for ``snapshot``, if it made it."""
    for known, index in _LAST_INDEX:
        if known is snapshot:
            return index
    return None


def _compact(
    table: dict[bytes, Any],
    texts: list[bytes],
    values: list[Any],
    shared: list[Any],
    unplain: list[Any] | None = None,
) -> None:
    """Re-key ``table`` by exact-size copies of the texts that just became its keys.

    ``shared`` is ``map(table.setdefault, texts, values)``: where it is the value itself,
    the text was new. orjson writes into a 1 KiB buffer and shrinks it in place: a text
    kept as a key (every distinct attribute value's) then pins most of that KiB of the C
    heap, which glibc cannot return or reuse. At 300k distinct values (a fleet of
    per-device uuids) that was 1.2 GB of RSS for a 73 MB file, and the page faults cost
    a second. A copy of a short text comes from Python's small-object allocator instead;
    the texts that were not kept are freed with the caller's list.

    With ``unplain``, each new value that is not a plain ``{"string": "..."}`` (which
    always converts for CEL) is appended to it: told from its text, whose only quotes
    are then the four of ``{"string":"…"}``.
    """
    pop = table.pop
    fresh = itertools.compress(zip(texts, values, strict=True), map(operator.is_, shared, values))
    if unplain is None:
        for text, _ in fresh:
            table[bytes(memoryview(text))] = pop(text)
        return
    for text, value in fresh:
        table[bytes(memoryview(text))] = pop(text)
        if not (text.startswith(b'{"string":"') and text.endswith(b'"}') and text.count(b'"') == 4):
            unplain.append(value)


def _unplain(leaves: list[Any]) -> list[Any]:
    """The values of ``leaves`` that are not a plain ``{"string": <str>}`` (in C when
    every one is a one-member map, as a fleet's per-device values are)."""
    if set(map(type, leaves)) <= {dict} and set(map(len, leaves)) <= {1}:
        strings = map(dict.get, leaves, repeat("string"))
        odd = map(operator.is_not, map(type, strings), repeat(str))
        return list(itertools.compress(leaves, odd))
    return [
        leaf
        for leaf in leaves
        if not (leaf.__class__ is dict and len(leaf) == 1 and leaf.get("string").__class__ is str)
    ]


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]] | None:
    """``map[name] for name in names`` as a tuple, in C; None for no names."""
    if not names:
        return None
    if len(names) == 1:
        one = operator.itemgetter(names[0])
        return lambda entries: (one(entries),)
    return operator.itemgetter(*names)


def _scalar(value: Any) -> Any:
    # selection.devices._attribute's member order.
    if isinstance(value, Mapping):
        for member in ("string", "int", "bool", "version"):
            if member in value:
                return value[member]
    return None


class _Interner:
    """Shares equal values across devices: a fleet repeats the same few thousand.

    Whole ``attributes`` and ``capacity`` maps and ``consumesCounters`` lists, and the
    attribute values (``{"string": "mig"}``) of maps not seen before, are replaced by one
    shared object per distinct JSON text: key order (which CEL and the allocator see) is
    kept, and 1, 1.0 and true stay apart as they do in CEL. A device then costs its name
    and little else. Where JSON text cannot tell values apart (NaN, which only the
    standard library's decoder reads, is written as null) values are shared one at a
    time by (member, scalar, its type).
    """

    __slots__ = (
        "values",
        "shared",
        "dumps",
        "loose_values",
        "unplain",
        "loose_maps",
        "names",
        "capacity_names",
        "complete",
        "scalars",
        "capacity_maps",
        "exact",
        "maps",
        "map_tries",
        "map_hits",
        "map_slices",
        "unshared",
        "unshared_names",
        "name_tries",
        "name_news",
        "judged",
        "layouts",
        "rows",
        "row_tries",
        "row_hits",
    )

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}
        self.shared: dict[bytes, Any] = {}
        self.loose_values: list[Any] = []
        self.unplain: list[Any] = []
        """The shared values (of ``values``) that are not plain strings (see _compact)."""
        self.loose_maps: list[Any] = []
        self.names: set[str] = set()
        self.capacity_names: set[str] = set()
        self.complete = True
        self.scalars: dict[int, Any] = {id(None): None}
        self.capacity_maps: list[Any] = []
        self.maps: dict[int, dict[str, Any]] = {}
        """Shared ``attributes`` maps by the hash of their JSON text (the text itself
        would cost as much memory as the maps; a hit is checked against it)."""
        self.map_tries = 0
        self.map_hits = 0
        self.map_slices = 0
        """Whole ``attributes`` maps looked up, found shared, and slices seen: when maps
        are seldom shared (every device its own uuid), looking costs a text per map for
        nothing, so it is only tried on one slice in :data:`MAP_PROBE_EVERY`."""
        self.unshared: list[Any] = []
        """Values of :attr:`unshared_names` left as decoded (each is kept once anyway)."""
        self.unshared_names: frozenset[str] = frozenset()
        self.name_tries: dict[str, int] = {}
        self.name_news: dict[str, int] = {}
        """Per attribute name: values shared while judging it, and how many were new."""
        self.judged: set[str] = set()
        self.layouts: dict[
            tuple[str, ...],
            tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]] | None, Any],
        ] = {}
        """Per attribute-name layout: the names shared, and getters of their values and
        of the unshared ones' (:meth:`_share_layout`)."""
        self.rows: dict[bytes, tuple[Any, ...]] = {}
        self.row_tries = 0
        self.row_hits = 0
        """Shared rows (a map's kept values, in layout order) by their JSON text, and
        rows looked up and found (:meth:`_share_rows`)."""
        self.exact = False
        """Set once the decoder met NaN or an infinity: attribute values are then shared
        one at a time (their JSON text would not tell NaN from null)."""
        try:
            import orjson

            self.dumps: Callable[[Any], bytes] | None = orjson.dumps
        except ImportError:  # pragma: no cover - orjson is a declared dependency
            self.dumps = None

    def device(self, device: dict[str, Any]) -> None:
        attributes = device.get("attributes")
        if attributes.__class__ is dict:
            keys = list(attributes)  # type: ignore[call-overload]
            self.names.update(keys)
            leaves = list(attributes.values())  # type: ignore[union-attr]
            try:
                if self.dumps is None or self.exact:
                    raise TypeError
                # Shared by JSON text: 1, 1.0 and true differ there, as they do in CEL.
                texts = list(map(self.dumps, leaves))
                shared = list(map(self.values.setdefault, texts, leaves))
                _compact(self.values, texts, leaves, shared, self.unplain)
            except TypeError:  # beyond what orjson writes exactly: one at a time
                shared = [self._shared_value(leaf) for leaf in leaves]
            attributes.update(zip(keys, shared, strict=True))  # type: ignore[union-attr]
        elif attributes is not None:
            self.complete = False
        capacity = device.get("capacity")
        if capacity.__class__ is dict:
            known = len(self.shared)
            shared_map = self._shared_json(capacity)
            if shared_map is None:
                self.loose_maps.append(capacity)
            elif len(self.shared) > known:  # a new one
                self.capacity_names.update(capacity)  # type: ignore[arg-type]
                self.capacity_maps.append(capacity)
            else:
                device["capacity"] = shared_map
        elif capacity is not None:
            self.complete = False
        counters = device.get("consumesCounters")
        if counters.__class__ is list:
            shared_list = self._shared_json(counters)
            if shared_list is not None:
                device["consumesCounters"] = shared_list

    def _shared_value(self, leaf: Any) -> Any:
        """One attribute value shared by (member, scalar, its type), else kept as is."""
        try:
            ((member, inner),) = leaf.items()
            return self.values.setdefault((member, inner, inner.__class__), leaf)
        except (AttributeError, ValueError, TypeError):
            self.loose_values.append(leaf)
            return leaf

    def _shared_json(self, value: Any) -> Any:
        """The shared object with the same JSON text as ``value`` (None: not shareable).

        orjson writes NaN and infinities (which only the standard library's decoder
        accepts) as ``null``: once the decoder has met one, text holding ``null`` is not
        shared. Nor is an empty value.
        """
        if not value or self.dumps is None:
            return None
        try:
            fingerprint = bytes(memoryview(self.dumps(value)))  # may be kept: see _compact
        except TypeError:  # an integer beyond 64 bits, a lone surrogate (stdlib-decoded)
            return None
        if self.exact and b"null" in fingerprint:
            return None
        return self.shared.setdefault(fingerprint, value)

    def index(self) -> FleetIndex:
        return FleetIndex(
            attribute_values=[*self.values.values(), *self.loose_values, *self.unshared],
            # Once NaN was met values are keyed by (member, scalar, type), not by text.
            checked_values=None
            if self.exact
            else [*self.unplain, *_unplain(self.unshared), *self.loose_values],
            capacity_maps=self.capacity_maps + self.loose_maps,
            attribute_names=self.names,
            capacity_names=self.capacity_names,
            complete=self.complete,
        )

    def note_slice(self, devices: list[Any], driver: str) -> SliceDevices | None:
        """Share one slice's values and note what the inventory reads of its devices.

        Column by column (``map`` in C) while the slice is still in the cache; device
        by device (:meth:`device`) where it holds anything unusual. None when the slice
        cannot be noted (the inventory then reads it itself).
        """
        if set(map(type, devices)) != {dict}:
            self.complete = False
            for device in devices:
                if device.__class__ is dict:
                    self.device(device)
            return None
        attributes: list[Any] = list(map(dict.get, devices, repeat("attributes")))
        capacities: list[Any] = list(map(dict.get, devices, repeat("capacity")))
        counters: list[Any] = list(map(dict.get, devices, repeat("consumesCounters")))
        if not (
            self._share_values(devices, attributes)
            and self._share_whole(devices, "capacity", capacities, dict)
            and self._share_whole(devices, "consumesCounters", counters, list)
        ):
            for device in devices:
                self.device(device)
            attributes = list(map(dict.get, devices, repeat("attributes")))
        capacities = list(map(dict.get, devices, repeat("capacity")))
        n = len(devices)
        if attributes.count(None):
            attributes = [a if a is not None else {} for a in attributes]
        if capacities.count(None):
            capacities = [c if c is not None else {} for c in capacities]
        if set(map(type, attributes)) != {dict} or set(map(type, capacities)) != {dict}:
            return None
        names: list[Any] = list(map(dict.get, devices, repeat("name")))
        if set(map(type, names)) != {str}:
            names = [str(name or "") for name in names]
        nodes = list(map(dict.get, devices, repeat("nodeName")))
        node_names: list[str | None] | None = None
        if nodes.count(None) != n:
            node_names = [str(node) if node else None for node in nodes]
        types = self._scalars(attributes, f"{driver}/type", "type")
        if set(map(type, types)) != {str}:  # (the usual case needs no step per device)
            types = [value if value.__class__ is str else str(value or "") for value in types]
        profiles = self._scalars(attributes, f"{driver}/profile", "profile")
        if not set(map(type, profiles)) <= {str, type(None)}:
            profiles = [str(value) if value is not None else None for value in profiles]
        return SliceDevices(
            devices=devices,
            names=names,
            node_names=node_names,
            types=types,
            profiles=profiles,
            attributes=attributes,
            capacities=capacities,
        )

    def _share_values(self, devices: list[Any], attributes: list[Any]) -> bool:
        """:meth:`device`'s attribute sharing for a slice; False: not done (unusual).

        Whole ``attributes`` maps are shared first (by their JSON text: the MIG devices
        of one GPU and profile publish the same map); the values of maps not seen before
        are then shared one by one. ``attributes`` is updated to the shared maps.
        """
        dumps = self.dumps
        if dumps is None or self.exact or set(map(type, attributes)) != {dict}:
            return False
        self.map_slices += 1
        try:
            if not self._look_up_maps():
                return self._share_leaves(attributes)
            texts = list(map(dumps, attributes))
        except TypeError:  # beyond what orjson writes (an item the stdlib decoded)
            return False
        maps = self.maps
        self.map_tries += len(texts)
        fresh = []
        for i, text in enumerate(texts):
            mine = attributes[i]
            found = maps.get(hash(text))
            if found is None:
                fresh.append(mine)
                maps[hash(text)] = mine
            elif found is not mine:
                if dumps(found) != text:  # another map with the same hash: kept apart
                    fresh.append(mine)
                    continue
                attributes[i] = found
                devices[i]["attributes"] = found
        self.map_hits += len(texts) - len(fresh)
        try:
            return self._share_leaves(fresh)
        except TypeError:  # as above; what was shared so far is equal, so it may stay
            return False

    def _look_up_maps(self) -> bool:
        """Whether this slice's whole maps are looked up (see ``map_tries``)."""
        return (
            self.map_tries < MAP_PROBE_AFTER
            or self.map_hits * 8 >= self.map_tries
            or self.map_slices % MAP_PROBE_EVERY == 0
        )

    def _share_leaves(self, fresh: list[dict[str, Any]]) -> bool:
        """Share the values of the maps ``fresh`` one by one (by their JSON text).

        Values of a name judged per-device (:data:`NAME_PROBE_VALUES`) are left as they
        are: sharing a value no other device holds saves nothing, and looking it up cost
        most of the sharing (a text, a table entry and its exact-size copy each).
        """
        if not fresh:
            return True
        layout = fresh[0].keys()
        if len(fresh) == 1 or all(map(operator.eq, map(dict.keys, fresh), repeat(layout))):
            return self._share_layout(fresh, tuple(layout))
        dumps = self.dumps
        assert dumps is not None
        keys = list(itertools.chain.from_iterable(fresh))
        leaves = list(itertools.chain.from_iterable(map(dict.values, fresh)))
        self.names.update(keys)
        owners: Any = itertools.chain.from_iterable(map(repeat, fresh, map(len, fresh)))
        skip = self.unshared_names
        if skip:
            left = list(map(skip.__contains__, keys))
            if True in left:
                self._keep_unshared(list(itertools.compress(leaves, left)))
                kept = list(map(operator.not_, left))
                owners = itertools.compress(owners, kept)
                keys = list(itertools.compress(keys, kept))
                leaves = list(itertools.compress(leaves, kept))
        texts = list(map(dumps, leaves))
        shared = list(map(self.values.setdefault, texts, leaves))
        _compact(self.values, texts, leaves, shared, self.unplain)
        del texts
        deque(map(dict.__setitem__, owners, keys, shared), maxlen=0)
        if len(self.judged) < len(self.names) and self.map_slices <= NAME_PROBE_SLICES:
            self._judge_names(keys, list(map(operator.is_, shared, leaves)))
        return True

    def _share_layout(self, fresh: list[dict[str, Any]], layout: tuple[str, ...]) -> bool:
        """:meth:`_share_leaves` for maps that all have the names ``layout``: the values
        are read and written back a map at a time (``itemgetter``, ``dict.update``), not
        a name at a time, and the unshared names are left out without a pass over all."""
        plan = self.layouts.get(layout)
        if plan is None:
            kept = tuple(name for name in layout if name not in self.unshared_names)
            left = tuple(name for name in layout if name in self.unshared_names)
            plan = self.layouts[layout] = (kept, _getter(kept), _getter(left))
            self.names.update(layout)
        kept, take, take_left = plan
        if take_left is not None:
            self._keep_unshared(list(itertools.chain.from_iterable(map(take_left, fresh))))
        if take is None:
            return True
        judging = len(self.judged) < len(self.names) and self.map_slices <= NAME_PROBE_SLICES
        if not judging and len(kept) > 1 and self._look_up_rows():
            return self._share_rows(fresh, kept, take)
        return self._share_each(fresh, kept, take, judging)

    def _look_up_rows(self) -> bool:
        """Whether this slice's rows are looked up (as :meth:`_look_up_maps` for maps)."""
        return (
            self.row_tries < MAP_PROBE_AFTER
            or self.row_hits * 8 >= self.row_tries
            or self.map_slices % MAP_PROBE_EVERY == 0
        )

    def _share_rows(
        self, fresh: list[dict[str, Any]], kept: tuple[str, ...], take: Callable[[Any], Any]
    ) -> bool:
        """Share the kept values of ``fresh`` a row at a time: one JSON text per map.

        A fleet whose maps differ only in per-device values (left unshared) repeats the
        rest of each map as a whole (the same driver, product and PCI root on every
        node): one text and one look-up per map then share all its other values, where
        a text per value cost most of the loading (a 1 KiB orjson buffer each). A row
        not seen before has its values shared one by one (:meth:`_share_each`) and is
        kept as the tuple of those shared values.
        """
        dumps = self.dumps
        assert dumps is not None
        rows = list(map(take, fresh))
        texts = list(map(dumps, rows))
        table = self.rows
        found: list[Any] = list(map(table.get, texts))
        self.row_tries += len(found)
        misses = [i for i, row in enumerate(found) if row is None] if None in found else []
        self.row_hits += len(found) - len(misses)
        if misses:
            self._share_each([fresh[i] for i in misses], kept, take, False)
            for i in misses:
                found[i] = shared_row = take(fresh[i])
                if len(table) < ROWS_MAX:
                    table.setdefault(bytes(memoryview(texts[i])), shared_row)  # see _compact
        del texts
        deque(map(dict.update, fresh, map(zip, repeat(kept), found)), maxlen=0)
        return True

    def _share_each(
        self,
        fresh: list[dict[str, Any]],
        kept: tuple[str, ...],
        take: Callable[[Any], Any],
        judging: bool,
    ) -> bool:
        """Share the kept values of ``fresh`` one by one (and judge their names)."""
        dumps = self.dumps
        assert dumps is not None
        leaves = list(itertools.chain.from_iterable(map(take, fresh)))
        texts = list(map(dumps, leaves))
        shared = list(map(self.values.setdefault, texts, leaves))
        _compact(self.values, texts, leaves, shared, self.unplain)
        del texts
        rows = zip(*[iter(shared)] * len(kept), strict=True)
        deque(map(dict.update, fresh, map(zip, repeat(kept), rows)), maxlen=0)
        if judging:
            self._judge_names(list(kept) * len(fresh), list(map(operator.is_, shared, leaves)))
        return True

    def _judge_names(self, keys: list[str], new: list[bool]) -> None:
        """Count, per name not judged yet, values shared and new; judge those counted enough."""
        from collections import Counter

        tries, news, judged = self.name_tries, self.name_news, self.judged
        seen = Counter(keys)
        fresh = Counter(itertools.compress(keys, new))
        unshared = []
        for key, count in seen.items():
            if key in judged:
                continue
            tries[key] = tries.get(key, 0) + count
            news[key] = news.get(key, 0) + fresh[key]
            if tries[key] >= NAME_PROBE_VALUES:
                judged.add(key)
                if news[key] * 8 >= tries[key] * 7:
                    unshared.append(key)
        if unshared:
            self.unshared_names = self.unshared_names.union(unshared)
            self.layouts.clear()

    def _keep_unshared(self, leaves: list[Any]) -> None:
        """Note values left unshared: all are values of the index.

        Which of them need a look (not plain strings) is told once, in :meth:`index`:
        a pass over 10⁵ values at once costs a fraction of one per slice.
        """
        self.unshared.extend(leaves)

    def _share_whole(self, devices: list[Any], holder: str, values: list[Any], kind: type) -> bool:
        """:meth:`device`'s sharing of whole maps (lists) for a slice; False: not done."""
        if values.count(None) == len(values):
            return True
        dumps = self.dumps
        if dumps is None or set(map(type, values)) != {kind} or not all(values):
            return False
        try:
            texts = list(map(dumps, values))
        except TypeError:
            return False
        if self.exact and any(map(bytes.__contains__, texts, repeat(b"null"))):
            return False  # (NaN, written as null, exists only once `exact` is set)
        shared = list(map(self.shared.setdefault, texts, values))
        _compact(self.shared, texts, values, shared)
        if kind is dict:
            for new in itertools.compress(values, map(operator.is_, values, shared)):
                self.capacity_names.update(new)
                self.capacity_maps.append(new)
        deque(map(dict.__setitem__, devices, repeat(holder), shared), maxlen=0)
        return True

    def _scalars(self, attributes: list[dict[str, Any]], qualified: str, name: str) -> list[Any]:
        """The scalar of attribute ``name`` (else ``qualified``) of each device."""
        leaves = list(map(dict.get, attributes, repeat(name)))
        if None in leaves:
            leaves = [
                leaf if leaf is not None else entries.get(qualified)
                for leaf, entries in zip(leaves, attributes, strict=True)
            ]
        known = self.scalars
        values = list(map(known.get, map(id, leaves), repeat(_MISSING)))
        if _MISSING in values:
            # Every value object here is kept alive by the interner (shared or loose), so
            # its id names it for as long as this cache lives.
            for i, leaf in enumerate(leaves):
                if values[i] is _MISSING:
                    value = values[i] = _scalar(leaf)
                    if len(known) < _SCALARS_MAX:
                        known[id(leaf)] = value
        return values


def stream_slice_snapshot(path: str) -> Snapshot:
    """A Snapshot of one large JSON file, decoded a slice at a time with shared values.

    Only the kinds dradiag reads are kept. Python's cyclic GC is paused while decoding:
    the decoded objects hold no cycles, and its passes over a heap of millions of small
    dicts cost as much as the decoding itself.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=path) from None
    text = decode_text(data, path)
    del data
    objects: dict[Kind, list[Any]] = {k: [] for k in Kind if k is not Kind.LOG}
    interner = _Interner()
    slices: dict[int, SliceDevices] = {}
    with paused_gc():

        def exact() -> None:
            interner.exact = True

        for item in iter_json_items(text, path, on_constant=exact):
            if not isinstance(item, dict):
                continue
            kind = kind_of(item)
            if kind is None:
                continue
            # A resource.k8s.io/v1 object comes back as it is (no copy of its devices).
            obj = normalize(kind, item)
            if kind is Kind.RESOURCE_SLICE:
                spec = obj.get("spec") or {}
                devices = spec.get("devices")
                if devices.__class__ is list and devices:
                    # Now, while the slice is in the cache: batching slices measured slower.
                    noted = interner.note_slice(devices, str(spec.get("driver") or ""))
                    if noted is not None:
                        slices[id(devices)] = noted
            objects[kind].append(obj)
        # Made while the GC is paused, so frozen with the devices: later collections
        # would otherwise walk these lists of every distinct value again and again.
        index = interner.index()
        index.slices = slices
    del text
    if not any(objects.values()):
        raise InputError("no Kubernetes objects dradiag can read", path=path)
    from dradiag.snapshot.model import Coverage, KindRecord

    coverage = {
        kind: KindRecord(kind=kind, coverage=Coverage.COLLECTED, scope="files")
        for kind, objs in objects.items()
        if objs
    }
    snapshot = Snapshot(
        objects=objects, coverage=coverage, source=SourceInfo(kind="files", location=path)
    )
    _LAST_INDEX[:] = [(snapshot, index)]
    return snapshot
