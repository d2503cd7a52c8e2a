"""Redaction of what a support bundle carries: credentials out, evidence kept (DESIGN §8).

What is replaced by ``***REDACTED***``:

- container ``env`` values whose *names* look like credentials (token, password, secret,
  key, credential, auth, …) and any ``value`` set beside a ``secretKeyRef``;
- substrings of log lines, event messages, annotations, env values and container
  ``command``/``args`` that look like secrets: bearer tokens, JWTs, PEM private-key
  blocks, ``user:pass@`` URLs, cloud and SaaS access keys, and ``password=...``-style
  assignments.

The vendor key formats (AWS, Azure, GitHub, GitLab, Slack, Stripe, …) and the keyword
assignments come from Yelp's ``detect-secrets``, a maintained, widely used secret
scanner: its plugins' compiled patterns are applied here, so new formats arrive with the
library. Its entropy and public-IP plugins are left out on purpose: GPU UUIDs, pod UIDs
and node addresses are the evidence a diagnosis needs, not secrets. Its generic plugins
stop at the marker (``BEGIN RSA PRIVATE KEY``) or need a scanner context, so five
generic shapes are dradiag's own: a whole PEM block, ``Bearer <token>``,
``token=<value>``, JWTs and ``scheme://user:pass@``.

``detect-secrets``' own line scanner runs its ~25 plugins at about 2 ms a line (490
lines/s measured here, entropy plugins included): a 5,000-line plugin log would take ten
seconds. So its regex plugins' compiled patterns are used directly, behind one RE2
prefilter over the whole text (every pattern joined, look-arounds dropped: a superset),
which finds the few candidate lines in linear time (50,000 clean lines: about 15 ms);
only those lines get the exact patterns and the keyword plugin.

Counts of what was removed, per place and per pattern, go to ``redactions.json``; the
values never leave this module.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from dradiag.errors import UsageError

REDACTED = "***REDACTED***"

CREDENTIAL_NAME = re.compile(
    r"(?i)(token|passw(or)?d|passwd|pwd|secret|(^|_|-)key($|_|-)|apikey|api_key|access_?key|"
    r"private|credential|(^|_|-)auth|cookie|session|signature|cert(ificate)?_?key)"
)
"""Env variable names whose values are taken for credentials, whatever the value looks like."""

_PEM_BLOCK = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY[A-Z ]*)-----.*?(-----END \1-----|\Z)", re.DOTALL
)
_GENERIC: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("BearerToken", re.compile(r"(?i)\bbearer\s+([A-Za-z0-9\-._~+/]{8,}=*)")),
    (
        "TokenAssignment",
        re.compile(r"(?i)\btoken[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9\-._~+/]{8,}=*)"),
    ),
    ("JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_\-+/=]*")),
    ("URLCredentials", re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]+:([^\s@/'\"]+)@")),
)
"""dradiag's own generic shapes; group 1, when there is one, is the part replaced."""

_KEEP_CONTEXT = frozenset(p for _, p in _GENERIC if p.groups)

_EXCLUDED_PLUGINS = frozenset(
    {"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector", "KeywordDetector"}
)
_KEYWORD_HINT = re.compile(
    r"(pass|pwd|secret|token|key|auth|credential|private)[^\s:=]*[\"']?\s*[:=]", re.IGNORECASE
)
"""Lines that may hold a keyword assignment: only those go through detect-secrets' keyword plugin."""


@dataclass(frozen=True, slots=True)
class _Library:
    name: str
    patterns: tuple[tuple[str, re.Pattern[str]], ...]
    keyword: Any
    """detect-secrets' KeywordDetector instance (for ``password = "..."`` forms)."""
    prefilter: Any
    """One RE2 pattern matching wherever any pattern may: where it finds nothing, the
    exact patterns need not run. ``finditer`` over a whole log is linear time."""


@lru_cache(maxsize=1)
def _library() -> _Library:
    """detect-secrets' regex plugins, compiled once; UsageError when it is not installed."""
    try:
        import detect_secrets
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector
        from detect_secrets.plugins.keyword import KeywordDetector
    except ImportError:
        raise UsageError(
            "redaction needs the detect-secrets package (pip install detect-secrets); "
            "without it, pass --no-redact to collect an unredacted bundle"
        ) from None
    patterns: list[tuple[str, re.Pattern[str]]] = []
    cls: Any
    for cls in sorted(get_mapping_from_secret_type_to_class().values(), key=lambda c: c.__name__):
        if cls.__name__ in _EXCLUDED_PLUGINS or not issubclass(cls, RegexBasedDetector):
            continue
        if cls.__name__ == "PrivateKeyDetector":
            continue  # markers only; the whole PEM block is replaced by _PEM_BLOCK
        for pattern in cls().denylist:
            patterns.append((cls.__name__.removesuffix("Detector"), pattern))
    every = [p for _, p in patterns] + [p for _, p in _GENERIC] + [_KEYWORD_HINT]
    version = getattr(detect_secrets, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("detect-secrets")
    return _Library(
        name=f"detect-secrets {version}",
        patterns=tuple(_GENERIC) + tuple(patterns),
        keyword=KeywordDetector(),
        prefilter=_prefilter(every),
    )


_GLOBAL_FLAGS = re.compile(r"^\(\?[aiLmsux]+\)")


def _scoped(pattern: re.Pattern[str]) -> str:
    """``pattern`` as a group with its own flags, so patterns can be joined into one."""
    flags = "".join(
        letter
        for letter, flag in (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL))
        if pattern.flags & flag
    )
    source = _GLOBAL_FLAGS.sub("", pattern.pattern)
    return f"(?{flags}:{source})" if flags else f"(?:{source})"


_LOOKAROUND = re.compile(r"\(\?<?[=!](?:[^()\\]|\\.)*\)")
_LONG_REPEAT = re.compile(r"\{(\d+),(\d{4,})\}")


def _prefilter(patterns: Iterable[re.Pattern[str]]) -> Any:
    """The patterns joined into one RE2 pattern that matches a superset of their matches.

    RE2 has no look-arounds and caps repetition at 1,000; dropping a look-around or an
    upper bound only widens a pattern, which a prefilter may do. Line anchors hold per
    line (multi-line mode), as the exact patterns apply them to one line at a time.
    """
    import re2

    parts = [_LONG_REPEAT.sub(r"{\1,}", _LOOKAROUND.sub("", _scoped(p))) for p in patterns]
    return re2.compile("(?m)" + "|".join(parts))


def library_name() -> str:
    """``detect-secrets 1.5.0``: recorded in the manifest."""
    return _library().name


def _replace_match(match: re.Match[str]) -> str:
    """The whole match redacted, or only its group 1 for dradiag's own patterns that
    keep their context (``Bearer ***REDACTED***``, ``https://user:***REDACTED***@``)."""
    if match.re in _KEEP_CONTEXT and match.group(1):
        start, end = match.span(1)
        offset = match.start()
        text = match.group(0)
        return text[: start - offset] + REDACTED + text[end - offset :]
    return REDACTED


@dataclass(slots=True)
class Redactor:
    """Redacts text and objects, counting what it removed per place and per pattern."""

    enabled: bool = True
    counts: MutableMapping[str, MutableMapping[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int))
    )

    def __post_init__(self) -> None:
        if self.enabled:
            _library()  # fail early, before any read, when the library is missing

    def _count(self, where: str, rule: str, n: int = 1) -> None:
        if n:
            self.counts[where][rule] += n

    # -- text -------------------------------------------------------------------------

    def text(self, value: str, where: str) -> str:
        """``value`` with every secret-looking substring replaced."""
        if not self.enabled or not value:
            return value
        lib = _library()
        if "PRIVATE KEY" in value:
            value, n = _PEM_BLOCK.subn(REDACTED, value)
            self._count(where, "PrivateKey", n)
        candidates: list[tuple[int, int]] = []
        for match in lib.prefilter.finditer(value):
            start = value.rfind("\n", 0, match.start()) + 1
            end = value.find("\n", max(match.end() - 1, match.start()))
            end = len(value) if end < 0 else end
            if candidates and start <= candidates[-1][1]:
                candidates[-1] = (candidates[-1][0], max(end, candidates[-1][1]))
            else:
                candidates.append((start, end))
        if not candidates:
            return value
        out: list[str] = []
        done = 0
        for start, end in candidates:
            out.append(value[done:start])
            out.append(
                "\n".join(self._line(line, where, lib) for line in value[start:end].split("\n"))
            )
            done = end
        out.append(value[done:])
        return "".join(out)

    def _line(self, line: str, where: str, lib: _Library) -> str:
        for rule, pattern in lib.patterns:
            line, n = pattern.subn(_replace_match, line)
            self._count(where, rule, n)
        if _KEYWORD_HINT.search(line):
            found = lib.keyword.analyze_line(filename="bundle.yaml", line=line, line_number=0)
            for secret in sorted(found, key=lambda s: -len(s.secret_value or "")):
                value = secret.secret_value
                if value and value != REDACTED and REDACTED not in value and value in line:
                    self._count(where, "Keyword", line.count(value))
                    line = line.replace(value, REDACTED)
        return line

    # -- objects ----------------------------------------------------------------------

    def pod(self, pod: MutableMapping[str, Any], where: str) -> None:
        """Redact a pod in place: env values, command lines and annotations."""
        if not self.enabled:
            return
        self.annotations(pod, where)
        spec = pod.get("spec")
        if not isinstance(spec, Mapping):
            return
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for container in spec.get(group) or []:
                if isinstance(container, MutableMapping):
                    self._container(container, f"{where} container {container.get('name')}")
        self._status_messages(pod.get("status"), f"{where} status")

    def _status_messages(self, status: Any, where: str) -> None:
        """Messages of the pod, its conditions and container states (an image pull error
        may quote a registry URL with its credentials)."""
        if not isinstance(status, MutableMapping):
            return
        holders: list[Any] = [status, *(status.get("conditions") or [])]
        for group in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
            for st in status.get(group) or []:
                if not isinstance(st, Mapping):
                    continue
                for state_key in ("state", "lastState"):
                    state = st.get(state_key)
                    if isinstance(state, Mapping):
                        holders += [v for v in state.values() if isinstance(v, MutableMapping)]
        for holder in holders:
            if isinstance(holder, MutableMapping) and isinstance(holder.get("message"), str):
                holder["message"] = self.text(holder["message"], where)

    def _container(self, container: MutableMapping[str, Any], where: str) -> None:
        for entry in container.get("env") or []:
            if not isinstance(entry, MutableMapping) or "value" not in entry:
                continue
            value = entry.get("value")
            if not isinstance(value, str) or value == REDACTED:
                continue
            from_secret = isinstance(entry.get("valueFrom"), Mapping) and (
                "secretKeyRef" in entry["valueFrom"]
            )
            if from_secret or CREDENTIAL_NAME.search(str(entry.get("name") or "")):
                entry["value"] = REDACTED
                self._count(where, "SecretRefValue" if from_secret else "CredentialEnvName")
            else:
                entry["value"] = self.text(value, where)
        for key in ("command", "args"):
            words = container.get(key)
            if isinstance(words, list):
                container[key] = [self.text(w, where) if isinstance(w, str) else w for w in words]

    def annotations(self, obj: MutableMapping[str, Any], where: str) -> None:
        """Redact annotation values; the last-applied configuration is dropped whole.

        ``kubectl.kubernetes.io/last-applied-configuration`` repeats the object as
        applied, env values included, as one JSON string: no pattern can tell its
        credentials, and no diagnosis reads it.
        """
        if not self.enabled:
            return
        meta = obj.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
        if not isinstance(annotations, MutableMapping):
            return
        for key in sorted(annotations):
            value = annotations[key]
            if not isinstance(value, str):
                continue
            if key == "kubectl.kubernetes.io/last-applied-configuration":
                annotations[key] = REDACTED
                self._count(f"{where} annotations", "LastAppliedConfiguration")
            else:
                annotations[key] = self.text(value, f"{where} annotations")

    def report(self, *, extra: Iterable[tuple[str, str, int]] = ()) -> dict[str, Any]:
        """The ``redactions.json`` document: counts only, never a value."""
        for where, rule, n in extra:
            self._count(where, rule, n)
        by_place = {
            where: dict(sorted(rules.items()))
            for where, rules in sorted(self.counts.items())
            if any(rules.values())
        }
        by_rule: dict[str, int] = defaultdict(int)
        for rules in by_place.values():
            for rule, n in rules.items():
                by_rule[rule] += n
        return {
            "schemaVersion": "dradiag.redactions/v1",
            "enabled": self.enabled,
            "library": library_name() if self.enabled else None,
            "replacement": REDACTED,
            "total": sum(by_rule.values()),
            "byRule": dict(sorted(by_rule.items())),
            "byPlace": by_place,
        }
