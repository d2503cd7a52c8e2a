"""``dradiag rbac [-n NS ...]``: the read-only ClusterRole dradiag needs, ready for ``kubectl apply``.

The answer is ``docs/rbac.yaml`` as shipped in the package (a ClusterRole with get/list
only, a ServiceAccount and a ClusterRoleBinding), so what users apply is the file the
test suite's API server enforces. With ``-n`` it is the namespace-limited form the file
describes: the same ClusterRole and ServiceAccount, bound by one RoleBinding per
namespace instead of the ClusterRoleBinding.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

RBAC_FILE = "rbac.yaml"

Namespaces = Annotated[
    list[str] | None,
    typer.Option(
        "-n",
        "--namespace",
        metavar="NS",
        help="Bind the role in this namespace only, with a RoleBinding (repeatable).",
    ),
]


def rbac_text() -> str:
    """``docs/rbac.yaml`` as shipped, verbatim (comments included)."""
    from dradiag.packaged import docs_file

    return docs_file(RBAC_FILE).read_text("utf-8")


def namespaced(documents: list[dict[str, Any]], namespaces: list[str]) -> list[dict[str, Any]]:
    """The file's objects with its ClusterRoleBinding replaced by a RoleBinding per namespace.

    The RoleBinding keeps the ClusterRoleBinding's name, labels, roleRef and subjects: a
    RoleBinding may reference a ClusterRole, and then grants it within its namespace only.
    """
    out: list[dict[str, Any]] = []
    for doc in documents:
        if doc.get("kind") != "ClusterRoleBinding":
            out.append(doc)
            continue
        for ns in namespaces:
            binding = dict(doc, kind="RoleBinding")
            binding["metadata"] = dict(doc.get("metadata") or {}, namespace=ns)
            out.append(binding)
    return out


def rbac(namespace: Namespaces = None) -> int:
    """Print the read-only RBAC dradiag needs (get/list only; no Secrets, no exec).

    \b
    Examples:
      dradiag rbac | kubectl apply -f -
      dradiag rbac -n ml -n research | kubectl apply -f -

    Prints docs/rbac.yaml: a ClusterRole that can get and list what dradiag reads, a
    ServiceAccount `dradiag` in namespace `dradiag`, and a ClusterRoleBinding. With -n,
    the role is bound by a RoleBinding in each namespace given instead; cluster-scoped
    kinds (ResourceSlices, DeviceClasses, Nodes) then read as unknown.
    """
    import sys

    import yaml

    text = rbac_text()
    if not namespace:
        sys.stdout.write(text)
        return 0
    documents = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    header = (
        "# dradiag's read-only ClusterRole, bound in namespace(s) "
        + ", ".join(namespace)
        + " only (from `dradiag rbac -n`).\n"
    )
    sys.stdout.write(header + yaml.safe_dump_all(namespaced(documents, namespace), sort_keys=False))
    return 0


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("rbac")(rbac)
