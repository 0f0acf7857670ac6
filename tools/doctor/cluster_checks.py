"""The doctor's checks of an existing cluster: what a stack with `existingCluster` needs from it.

- the cluster: its kubeconfig context exists (or, by name and location, GKE
  knows the cluster) and its API server answers (GET /version);
- the namespace exists, or the stack declares it (`createNamespace: true`);
- every right of `make handoff` (tools/plan/rbac.py) is the deployer's: one
  SelfSubjectAccessReview per verb, resource and name, which the API server
  answers for the identity that asks (any signed-in user may ask it);
  https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access
- the controllers: JobSet (and Kueue, where a run goes through it) installed
  by whom the stack's `controllers` expects (admission/shared_cluster.py),
  installed as `controllerReleases` says (the names the handoff grants), and
  their versions, read off their Deployments' images, against the pinned ones;
- the namespace's Pod Security level, ResourceQuotas and LimitRanges admit the
  stack's pods (admission/namespace_needs.py, admission/quota.py).

Every read goes through the answers (tools/doctor/answers.py `kube`), so a
recording replays them; a read the cluster forbids is a `skip` that says so.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from admission.installed_controllers import SUPPORTED
from admission.shared_cluster import (
    ControllerObjects, controller_objects, install_of, installed_controllers, release_of, release_problems,
)
from components.namespace_policy import NamespaceFacts, namespace_problems
from stack.config import StackConfig
from stack.controller_releases import ControllerInstall
from tools.doctor.answers import KUBE_TIMEOUT, Asked
from tools.doctor.checks import MISS, OK, SKIP, WARN, Finding
from tools.plan import rbac

SHOWN_DENIED = 6  # denied rights listed in the detail; the rest counted


def connector(config: StackConfig):
    """What builds the API client of the stack's cluster: its kubeconfig context (name and location: the
    kubeconfig `gcloud container clusters get-credentials` writes, by context name)."""
    from kubernetes import config as k8s_config  # pylint: disable=import-outside-toplevel

    existing = config.existing
    if existing.by_context:
        kubeconfig = str(Path(existing.kubeconfig).expanduser()) if existing.kubeconfig else None
        return lambda: k8s_config.new_client_from_config(config_file=kubeconfig, context=existing.context)
    context = f"gke_{config.project}_{existing.location}_{existing.name}"
    return lambda: k8s_config.new_client_from_config(context=context)


def _ask(answers, config: StackConfig, key: str, ask) -> Asked:
    return answers.kube(key, ask, connector(config))


def cluster(answers, config: StackConfig) -> tuple[Finding, bool]:
    """(the finding, whether the cluster answers)."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    existing = config.existing
    where = (f"context {existing.context}" if existing.by_context
             else f"cluster {existing.name} in {existing.location}")
    got = _ask(answers, config, "version", lambda api: client.VersionApi(api).get_code(_request_timeout=KUBE_TIMEOUT))
    if got.status == 200:
        return Finding("cluster", OK, f"{where}: Kubernetes {got.body.get('gitVersion', '?')}"), True
    fix = ("`gcloud container clusters get-credentials <cluster> --location <location>` writes the context, or set "
           "existingCluster.context to one `kubectl config get-contexts` lists") if existing.by_context else (
        f"`gcloud container clusters get-credentials {existing.name} --location {existing.location}"
        f"{' --dns-endpoint' if existing.dns_endpoint else ''}` (the doctor reads the context it writes)")
    return Finding("cluster", MISS, f"{where} does not answer: {got.error}", fix), False


def namespace(answers, config: StackConfig) -> tuple[Finding, dict | None]:
    """(the finding, the namespace's labels; None: not read or none)."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    ns = config.runs_namespace
    got = _ask(answers, config, f"namespace {ns}",
               lambda api: client.CoreV1Api(api).read_namespace(ns, _request_timeout=KUBE_TIMEOUT))
    if got.status == 200:
        labels = (got.body.get("metadata") or {}).get("labels") or {}
        return Finding("namespace", OK, f"{ns} exists"), labels
    if got.status == 404:
        if config.creates_namespace:
            return Finding("namespace", OK, f"{ns}: `pulumi up` creates it (createNamespace: true)"), None
        return Finding("namespace", MISS, f"{ns} does not exist in the cluster",
                       "the platform team creates it, or set `gke-finetune:createNamespace: true`"), None
    return Finding("namespace", SKIP, f"not checked: {got.error}"), None


def rights(answers, config: StackConfig, found: rbac.Rights) -> Finding:
    """Each right of the handoff, asked of the API server as the deployer."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    denied, asked = [], 0
    for attributes in rbac.access_reviews(found):
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(**attributes)))
        got = _ask(answers, config, f"access {json.dumps(attributes, sort_keys=True)}",
                   lambda api, r=review: client.AuthorizationV1Api(api).create_self_subject_access_review(
                       r, _request_timeout=KUBE_TIMEOUT))
        if got.status not in (200, 201):
            return Finding("Kubernetes rights", SKIP, f"not checked: {got.error}")
        asked += 1
        if not (got.body.get("status") or {}).get("allowed"):
            where = attributes.get("namespace", "the cluster")
            denied.append(f"{attributes['verb']} {attributes['resource']}"
                          + (f" {attributes['name']}" if "name" in attributes else "") + f" in {where}")
    if denied:
        more = f" and {len(denied) - SHOWN_DENIED} more" if len(denied) > SHOWN_DENIED else ""
        return Finding("Kubernetes rights", MISS, f"{len(denied)} of {asked} denied: "
                       f"{'; '.join(denied[:SHOWN_DENIED])}{more}",
                       f"the platform team applies the RBAC of `make handoff STACK={config.stack}` for you")
    extra = f"; not covered: {len(found.not_covered)} Helm release(s), cluster-admin's" if found.not_covered else ""
    return Finding("Kubernetes rights", OK, f"all {asked} that `pulumi up` and `destroy` use{extra}")


def _version(deployments: list[dict], controller: str) -> str | None:
    for deployment in deployments:
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            image = container.get("image", "")
            if controller in image.rsplit("/", 1)[-1] and ":" in image:
                return image.rsplit(":", 1)[1].split("@")[0]
    return None


def controllers(answers, config: StackConfig, needed: tuple[str, ...]) -> list[Finding]:
    """Which controllers the cluster's webhooks show, by whom, at which version (their Deployments' images)."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    def webhooks(api):
        registration = client.AdmissionregistrationV1Api(api)
        return [*registration.list_validating_webhook_configuration(_request_timeout=KUBE_TIMEOUT).items,
                *registration.list_mutating_webhook_configuration(_request_timeout=KUBE_TIMEOUT).items]

    got = _ask(answers, config, "webhook configurations", webhooks)
    if got.status != 200:
        return [Finding("controllers", SKIP, f"not checked: {got.error}")]
    shown, mode, out = installed_controllers(got.body), config.existing.controllers, []
    for controller in needed:
        name = f"controller {controller}"
        if controller not in shown:
            out.append(Finding(name, OK, f"not installed: `pulumi up` installs {controller} {SUPPORTED[controller]}")
                       if mode == "install" else Finding(
                           name, MISS, f"not installed, and existingCluster.controllers is {mode!r}",
                           f"ask the platform team to install {controller} {SUPPORTED[controller]}"))
            continue
        install = install_of(controller, shown[controller])
        found = _with_version(answers, config, name, controller, controller_objects(controller, install))
        if mode == "existing":
            found = _as_said(config, controller, install, found)
        if mode == "install":
            release = release_of(shown[controller])
            by = f"Helm release {release[1]!r} in {release[0]!r}" if release else "no Helm release"
            found = Finding(name, WARN, f"installed already ({by}; {found.detail}): unless this stack installed it, "
                            "`pulumi preview` refuses controllers: install", "existingCluster.controllers: existing")
        out.append(found)
    return out


def _as_said(config: StackConfig, controller: str, install: ControllerInstall, found: Finding) -> Finding:
    """A MISS where the cluster's install names other objects than `controllerReleases` says, whose names the
    handoff grants (admission/shared_cluster.py `release_problems`)."""
    problems = release_problems(controller, config.existing.controller_releases.install(controller), install,
                                config.stack)
    if not problems:
        return found
    [problem] = problems
    return Finding(found.check, MISS, f"{replace(problem, allowed='')}; {found.detail}", problem.allowed)


def _with_version(answers, config: StackConfig, name: str, controller: str, objects: ControllerObjects) -> Finding:
    """The controller's version from its Deployment's image, read by name as `pulumi preview` reads it."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    where = f"{objects.namespace}/{objects.deployment}"
    got = _ask(answers, config, f"deployment {where}", lambda api: client.AppsV1Api(api).read_namespaced_deployment(
        objects.deployment, objects.namespace, _request_timeout=KUBE_TIMEOUT))
    if got.status != 200:
        return Finding(name, OK, f"installed; version not checked (Deployment {where}): {got.error}")
    version = _version([got.body], controller)
    if not re.fullmatch(r"v?\d+\.\d+\.\d+\S*", version or ""):  # a branch's or a mirror's own tag
        return Finding(name, OK, f"installed in {objects.namespace}; its image tag {version!r} names no version")
    if version == SUPPORTED[controller]:
        return Finding(name, OK, f"{version} in {objects.namespace}")
    return Finding(name, WARN, f"{version or 'an unknown version'} in {objects.namespace}; the stacks are tested "
                   f"with {SUPPORTED[controller]}", f"ask the platform team for {controller} {SUPPORTED[controller]}")


def namespace_policy(answers, config: StackConfig, labels: dict | None) -> Finding:
    """The namespace's Pod Security level and quotas against the stack's pods."""
    from kubernetes import client  # pylint: disable=import-outside-toplevel

    if labels is None:
        return Finding("namespace policy", SKIP, "no namespace to read")
    ns, facts = config.runs_namespace, NamespaceFacts(labels=labels)
    for what, key, read in (
            ("ResourceQuotas", "quotas", lambda api: client.CoreV1Api(api).list_namespaced_resource_quota(
                ns, _request_timeout=KUBE_TIMEOUT).items),
            ("LimitRanges", "limit_ranges", lambda api: client.CoreV1Api(api).list_namespaced_limit_range(
                ns, _request_timeout=KUBE_TIMEOUT).items)):
        got = _ask(answers, config, f"{key} {ns}", read)
        if got.status == 200:
            setattr(facts, key, got.body)
        else:
            facts.not_checked.append(f"not checked: the namespace's {what} ({got.error})")
    problems, warnings = namespace_problems(config, facts)
    if problems:
        return Finding("namespace policy", MISS, "; ".join(f"{p.key}: {p.value!r} {p.why}" for p in problems),
                       "; ".join(sorted({p.allowed for p in problems})))
    return Finding("namespace policy", WARN if warnings else OK,
                   "; ".join(warnings) or "its Pod Security level, quotas and limit ranges admit the stack's pods")


def cluster_findings(answers, config: StackConfig, root: Path) -> list[Finding]:
    """Every check of the stack's existing cluster (none for a stack that declares its own)."""
    if config.existing is None:
        return []
    found, answering = cluster(answers, config)
    if not answering:
        return [found]
    from components.preflight import needed_controllers  # pylint: disable=import-outside-toplevel
    from tools.plan.handoff import stack_resources, used_controllers  # pylint: disable=import-outside-toplevel

    ns, labels = namespace(answers, config)
    objects, releases = rbac.declared(stack_resources(config, root))
    granted = rbac.rights(objects, config.runs_namespace, releases, used_controllers(config))
    return [found, ns, rights(answers, config, granted), *controllers(answers, config, needed_controllers(config)),
            namespace_policy(answers, config, labels)]
