"""The Kubernetes rights an existing-cluster stack's `pulumi preview`, `up` and `destroy` need: exactly the
verbs the Kubernetes provider uses on exactly the objects the stack declares.

The provider (pulumi-kubernetes v4.25.0 provider/pkg, read 2026-12; the stacks
enable server-side apply, components/kube.py) makes these requests:

- create and update: a server-side apply PATCH (`await.Creation`, `await.Update`:
  `client.Patch(..., types.ApplyPatchType, ...)`), a dry run of it in
  preview; an apply that creates the object is also authorized as `create`
  on that name (k8s.io/apiserver pkg/endpoints/handlers/patch.go,
  `createAuthorizerAttributes`), so `create` is named too, and both can be
  held to the objects' names;
- read, refresh and the diff's live object: GET (`readLiveObject`, `await.Read`);
- delete: DELETE, then it waits for the object to go with an informer (LIST
  and WATCH of the object's kind in its namespace, or cluster-wide for a
  cluster-scoped kind) and a GET (`await.Deletion`, await/condition/deleted.go);
- an awaited Job (dataset staging, await/job.go): informers on its Jobs and
  Pods (LIST, WATCH), the pods listed;
- every create and delete: an informer on the namespace's Events, whose
  messages it shows (await/watchers.go `NewEventAggregator`).

Cluster-scoped objects (the Kueue objects named after the namespace, the
namespace itself where the stack declares it) get `get`, `create`, `patch` and
`delete` on their names only; LIST and WATCH cannot be held to names (the
informers select none) and are granted on their kinds. Namespaced kinds get
their verbs in the stack's namespace. The preview's own reads of the cluster
(components/preflight.py, components/namespace_policy.py) are added: the
stack's namespace, the webhook configurations that show the controllers, the
namespace's ResourceQuotas and LimitRanges; with `controllers: existing`, the installed
controllers' Deployments and Kueue's manager ConfigMap, `get` by name in the
controllers' namespaces (a Role there each: admission/shared_cluster.py
`controller_objects` names them for the install `existingCluster.controllerReleases`
says, stack/controller_releases.py; the preview refuses a cluster whose install
names others, so that what it reads is what is granted here). A
`get` can be held to names; a `list` only where the client selects the name
with a field selector, which the preview's reads need not. A Helm release (`controllers:
install`) installs CRDs, cluster roles and webhooks: no list of rights short
of cluster-admin covers it, so it is named, not granted.
https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from admission.shared_cluster import controller_objects
from stack.controller_releases import ControllerInstall

WRITE = ("get", "create", "patch", "delete")
WATCH = ("list", "watch")
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def plural(kind: str) -> str:
    """A kind's resource name as the API server guesses it and every CRD the stacks use declares it
    (k8s.io/apimachinery pkg/api/meta/restmapper.go UnsafeGuessKindToResource): lowercase, then "es"
    after a final s ("secretproviderclasses"), "ies" for a final y, else "s"."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


@dataclass(frozen=True)
class Declared:
    """A Kubernetes object the stack declares."""

    api_version: str
    kind: str
    name: str
    namespace: str  # "" for a cluster-scoped object
    # A Role's rules: whoever creates a Role must hold what it grants (below, `rights`).
    grants: tuple[Rule, ...] = ()

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def resource(self) -> str:
        return plural(self.kind)


@dataclass(frozen=True)
class Rule:
    """One RBAC rule: verbs on a group's resources, by name where `names` is set."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()
    why: str = ""

    def manifest(self) -> dict:
        rule = {"apiGroups": [self.group], "resources": list(self.resources), "verbs": list(self.verbs)}
        if self.names:
            rule["resourceNames"] = list(self.names)
        return rule


@dataclass(frozen=True)
class Rights:
    namespace: str
    namespaced: tuple[Rule, ...]
    cluster: tuple[Rule, ...]
    not_covered: tuple[str, ...]  # what the stack declares that no rule here covers (Helm releases)
    elsewhere: tuple[tuple[str, Rule], ...] = ()  # (namespace, rule): the installed controllers' reads


def declared(resources: Iterable[Mapping]) -> tuple[list[Declared], list[str]]:
    """The Kubernetes objects among a plan's resources (type, name and inputs), and its Helm releases' names."""
    objects, releases = [], []
    for r in resources:
        if r["type"] == HELM_RELEASE:
            releases.append(r["inputs"].get("name") or r["name"])
        elif r["type"].startswith("kubernetes:") and "apiVersion" in r["inputs"]:
            meta = r["inputs"].get("metadata") or {}
            grants = tuple(Rule(g, tuple(rule["resources"]), tuple(rule["verbs"]), tuple(rule.get("resourceNames", ())))
                           for rule in r["inputs"].get("rules") or [] for g in rule["apiGroups"]) \
                if r["inputs"]["kind"] == "Role" else ()
            objects.append(Declared(r["inputs"]["apiVersion"], r["inputs"]["kind"], meta["name"],
                                    meta.get("namespace", ""), grants))
    return objects, releases


def _by_kind(objects: Iterable[Declared]) -> dict[tuple[str, str], list[str]]:
    kinds: dict[tuple[str, str], list[str]] = {}
    for o in objects:
        kinds.setdefault((o.group, o.resource), []).append(o.name)
    return kinds


def preview_reads(namespace: str) -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """(namespaced, cluster) reads of the preview's own checks of the cluster."""
    namespaced = (Rule("", ("resourcequotas", "limitranges"), WATCH[:1],
                       why="the namespace's quotas (components/namespace_policy.py)"),)
    cluster = (Rule("", ("namespaces",), ("get",), (namespace,), "the stack's namespace: it exists, its labels"),
               Rule("admissionregistration.k8s.io", ("validatingwebhookconfigurations",
                                                     "mutatingwebhookconfigurations"), WATCH[:1],
                    why="which controllers are installed (components/preflight.py)"),
               Rule("kueue.x-k8s.io", ("clusterqueues", "resourceflavors"), WATCH[:1],
                    why="the queues already on the stack's pools: an overcommitted pool (admission/shared_pools.py)"))
    return namespaced, cluster


def controller_reads(controllers: Mapping[str, ControllerInstall]) -> tuple[tuple[str, Rule], ...]:
    """The preview's reads of the installed controllers it uses (`controllers: existing`;
    components/preflight.py `installed_problems`), each installed as given: its Deployment's image, Kueue's
    manager ConfigMap, by name."""
    reads = []
    for controller, install in controllers.items():
        objects = controller_objects(controller, install)
        reads.append((objects.namespace, Rule("apps", ("deployments",), ("get",), (objects.deployment,),
                                              f"{controller}'s version: its Deployment's image")))
        if objects.config_map:
            reads.append((objects.namespace, Rule("", ("configmaps",), ("get",), (objects.config_map,),
                                                  "Kueue's configuration: the namespaces and integrations it manages")))
    return tuple(reads)


def rights(objects: Iterable[Declared], namespace: str, releases: Iterable[str] = (),
           controllers: Mapping[str, ControllerInstall] | None = None) -> Rights:
    """The namespaced and cluster rules the objects need, with the preview's reads (of the installed
    `controllers` too, by how each is installed: those the stack uses and doesn't install)."""
    objects = list(objects)
    namespaced_objects = [o for o in objects if o.namespace]
    if any(o.namespace != namespace for o in namespaced_objects):
        raise ValueError(f"objects outside namespace {namespace!r}: "
                         f"{sorted({o.namespace for o in namespaced_objects} - {namespace})}")
    namespaced = [Rule(group, (resource,), (*WRITE, *WATCH), why=f"the stack's {resource}: {', '.join(sorted(names))}")
                  for (group, resource), names in sorted(_by_kind(namespaced_objects).items())]
    if any(o.kind == "Job" and o.group == "batch" for o in namespaced_objects):
        namespaced.append(Rule("", ("pods",), WATCH, why="the awaited staging Jobs' pods"))
    namespaced.append(Rule("", ("events",), WATCH, why="the provider shows the objects' events"))
    # RBAC's escalation check: a Role (and a RoleBinding to it) is created only by a user who holds every right it
    # grants, short of the `escalate` and `bind` verbs, which would let the user grant itself anything through it.
    # https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping
    namespaced += [dataclasses.replace(rule, why=f"granted by the stack's Role {o.name}: held to create it")
                   for o in namespaced_objects for rule in o.grants]
    cluster = []
    for (group, resource), names in sorted(_by_kind(o for o in objects if not o.namespace).items()):
        cluster.append(Rule(group, (resource,), WRITE, tuple(sorted(names)), f"the stack's {resource}, by name"))
        cluster.append(Rule(group, (resource,), WATCH, why=f"waiting for a deleted {resource[:-1]} to go"))
    reads_namespaced, reads_cluster = preview_reads(namespace)
    not_covered = tuple(f"Helm release {name!r} (controllers: install): CRDs, cluster roles and webhooks, which "
                        "take cluster-admin; the platform team installs the controllers (controllers: existing)"
                        for name in releases)
    return Rights(namespace, (*namespaced, *reads_namespaced), (*cluster, *reads_cluster), not_covered,
                  controller_reads(controllers or {}))


def rbac_documents(found: Rights, role: str, subjects: list[dict]) -> list[dict]:
    """The Role, ClusterRole and their bindings, as `kubectl apply` takes them."""
    label = {"app.kubernetes.io/managed-by": "gke-finetune-handoff"}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}
    docs = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": role, "namespace": found.namespace, "labels": label},
         "rules": [r.manifest() for r in found.namespaced]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": role, "namespace": found.namespace, "labels": label},
         "roleRef": role_ref, "subjects": subjects},
    ]
    # Named after the stack's namespace too, outside it: one per team.
    scoped_role = f"{role}:{found.namespace}"
    by_namespace: dict[str, list[dict]] = {}
    for namespace, rule in found.elsewhere:
        by_namespace.setdefault(namespace, []).append(rule.manifest())
    for namespace, rules in by_namespace.items():
        docs += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": scoped_role, "namespace": namespace, "labels": label}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": scoped_role, "namespace": namespace, "labels": label},
             "roleRef": {**role_ref, "name": scoped_role}, "subjects": subjects},
        ]
    if found.cluster:
        docs += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": scoped_role, "labels": label}, "rules": [r.manifest() for r in found.cluster]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": scoped_role, "labels": label},
             "roleRef": {**role_ref, "kind": "ClusterRole", "name": scoped_role}, "subjects": subjects},
        ]
    return docs


def access_reviews(found: Rights) -> list[dict]:
    """Each (verb, resource, name, namespace) the rules grant, as a SelfSubjectAccessReview's resourceAttributes
    (what `make doctor` asks the cluster)."""
    scoped = [(found.namespace, r) for r in found.namespaced] + [("", r) for r in found.cluster] + list(found.elsewhere)
    reviews = []
    for namespace, rule in scoped:
        for resource, verb, name in ((res, v, n) for res in rule.resources for v in rule.verbs
                                     for n in rule.names or ("",)):
            attributes = {"group": rule.group, "resource": resource, "verb": verb}
            attributes.update({"namespace": namespace} if namespace else {})
            attributes.update({"name": name} if name else {})
            reviews.append(attributes)
    return reviews
