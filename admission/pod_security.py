"""The Pod Security Standards as the API server's PodSecurity admission applies them, over plain pod dicts.

A namespace labelled `pod-security.kubernetes.io/enforce: <level>` refuses every
pod that fails a check of that level; a Job's or JobSet's pod template is only
warned about, so a pod refused here is refused when the Job controller creates
it, after `pulumi up` has succeeded. The checks are those of
k8s.io/pod-security-admission v0.35.4 (policy/check_*.go, the "latest"
version of each), the admission plugin of the Kubernetes 1.35 API server:
https://kubernetes.io/docs/concepts/security/pod-security-standards/

- baseline: no host namespaces, no privileged container, capabilities only
  from the runtime's default set, no hostPath volume, no hostPort, no
  Unconfined seccomp or AppArmor profile, SELinux types from the allowed few
  and no user or role, the Default procMount, safe sysctls only, no probe or
  lifecycle hook naming a host;
- restricted: baseline, and every container drops ALL capabilities (adding
  NET_BIND_SERVICE only), sets allowPrivilegeEscalation=false and runs as
  non-root (runAsNonRoot=true, no runAsUser=0, the pod's or its own), the
  seccomp profile RuntimeDefault or Localhost, volumes of the allowed kinds;
  a pod in a user namespace (`hostUsers: false`) may run as uid 0.

A host-network pod's ports are host ports: the API server defaults each
`hostPort` to its `containerPort` (pkg/apis/core/v1/defaults.go `SetDefaults_Pod`),
so the baseline hostPort check sees them. `evaluate` says what fails at a
level, `least_level` the strictest level a pod passes; e2e/tests/test_namespace_policy.py
holds both to what the real API server admits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

RESTRICTED, BASELINE, PRIVILEGED = "restricted", "baseline", "privileged"
LEVELS = (RESTRICTED, BASELINE, PRIVILEGED)  # strictest first
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
SOURCE = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"

# check_capabilities_baseline.go `capabilities_allowed_1_0`: the container runtimes' default set.
DEFAULT_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                  "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# check_restrictedVolumes.go: the volume kinds restricted allows.
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                                "persistentVolumeClaim", "projected", "secret"})
# check_seLinuxOptions.go `selinuxAllowedTypes1_31`.
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# check_sysctls.go, the 1.32 set.
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"})


@dataclass(frozen=True)
class Violation:
    """A failed check, worded as the admission plugin words it: its reason and detail."""

    level: str  # the level whose check failed
    reason: str  # e.g. "runAsNonRoot != true", "host namespaces"
    detail: str

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})"


def _containers(spec: Mapping) -> Iterator[Mapping]:
    """Every container the checks visit: init containers, containers, ephemeral containers (visitor.go)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or ()


def _security(container: Mapping) -> Mapping:
    return container.get("securityContext") or {}


def _names(containers: list[str]) -> str:
    return ("container " if len(containers) == 1 else "containers ") + ", ".join(f'"{c}"' for c in containers)


def _host_namespaces(spec: Mapping) -> str | None:
    found = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key)]
    return ", ".join(found) or None


def _privileged(spec: Mapping) -> str | None:
    bad = [c["name"] for c in _containers(spec) if _security(c).get("privileged")]
    return f"{_names(bad)} must not set securityContext.privileged=true" if bad else None


def _capabilities_baseline(spec: Mapping) -> str | None:
    bad = [c["name"] for c in _containers(spec)
           if set((_security(c).get("capabilities") or {}).get("add") or ()) - DEFAULT_CAPABILITIES]
    return f"{_names(bad)} must not add non-default capabilities" if bad else None


def _host_path(spec: Mapping) -> str | None:
    bad = [v["name"] for v in spec.get("volumes") or () if "hostPath" in v]
    return f"hostPath volumes {bad}" if bad else None


def _host_ports(spec: Mapping) -> str | None:
    def host_port(port: Mapping) -> int:
        return port.get("hostPort") or (port.get("containerPort", 0) if spec.get("hostNetwork") else 0)
    bad = [c["name"] for c in _containers(spec) if any(host_port(p) for p in c.get("ports") or ())]
    ports = sorted({host_port(p) for c in _containers(spec) for p in c.get("ports") or () if host_port(p)})
    return f"{_names(bad)} {'uses' if len(bad) == 1 else 'use'} hostPorts {ports}" if bad else None


def _profile_types(spec: Mapping, field: str) -> Iterator[tuple[str, str]]:
    """(setter, profile type) of the pod's and each container's `field` (seccompProfile, appArmorProfile)."""
    pod = (spec.get("securityContext") or {}).get(field)
    if pod:
        yield "pod", pod.get("type", "")
    for c in _containers(spec):
        if _security(c).get(field):
            yield f'container "{c["name"]}"', _security(c)[field].get("type", "")


def _unconfined(field: str) -> Callable[[Mapping], str | None]:
    def check(spec: Mapping) -> str | None:
        bad = [who for who, kind in _profile_types(spec, field) if kind == "Unconfined"]
        return f"{' and '.join(bad)} must not set securityContext.{field}.type to \"Unconfined\"" if bad else None
    return check


def _selinux(spec: Mapping) -> str | None:
    def bad(options: Mapping | None) -> bool:
        return bool(options) and (options.get("type", "") not in SELINUX_TYPES or options.get("user")
                                  or options.get("role"))
    setters = (["pod"] if bad((spec.get("securityContext") or {}).get("seLinuxOptions")) else []) + [
        c["name"] for c in _containers(spec) if bad(_security(c).get("seLinuxOptions"))]
    return f"{setters} set forbidden securityContext.seLinuxOptions" if setters else None


def _proc_mount(spec: Mapping) -> str | None:
    bad = [c["name"] for c in _containers(spec) if _security(c).get("procMount", "Default") != "Default"]
    return f"{_names(bad)} must not set securityContext.procMount" if bad else None


def _sysctls(spec: Mapping) -> str | None:
    bad = [s["name"] for s in (spec.get("securityContext") or {}).get("sysctls") or () if s["name"] not in SAFE_SYSCTLS]
    return f"forbidden sysctls {bad}" if bad else None


def _probe_hosts(spec: Mapping) -> str | None:
    def hosts(c: Mapping) -> list[str]:
        handlers = [c.get(p) or {} for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [h or {} for h in (c.get("lifecycle") or {}).values()]
        return [h[k]["host"] for h in handlers for k in ("httpGet", "tcpSocket") if (h.get(k) or {}).get("host")]
    bad = [c["name"] for c in _containers(spec) if hosts(c)]
    return f"{_names(bad)} use probe or lifecycle hosts" if bad else None


def _user_namespace(spec: Mapping) -> bool:
    """check helpers.go `relaxPolicyForUserNamespacePod`: root in a user namespace is no root on the node."""
    return spec.get("hostUsers") is False


def _drop_all(spec: Mapping) -> str | None:
    missing, adding = [], []
    for c in _containers(spec):
        capabilities = _security(c).get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or ()):
            missing.append(c["name"])
        if set(capabilities.get("add") or ()) - {"NET_BIND_SERVICE"}:
            adding.append(c["name"])
    details = ([f'{_names(missing)} must set securityContext.capabilities.drop=["ALL"]'] if missing else []) + (
        [f"{_names(adding)} must not add capabilities other than NET_BIND_SERVICE"] if adding else [])
    return "; ".join(details) or None


def _no_escalation(spec: Mapping) -> str | None:
    bad = [c["name"] for c in _containers(spec) if _security(c).get("allowPrivilegeEscalation") is not False]
    return f"{_names(bad)} must set securityContext.allowPrivilegeEscalation=false" if bad else None


def _pod_or_container(spec: Mapping, field: str, good: Callable[[object], bool]) -> tuple[list[str], list[str]]:
    """(setters with a bad value, containers that set nothing while the pod sets no good value)."""
    pod = (spec.get("securityContext") or {}).get(field)
    bad = ["pod"] if pod is not None and not good(pod) else []
    implicit = []
    for c in _containers(spec):
        mine = _security(c).get(field)
        if mine is not None and not good(mine):
            bad.append(f'container "{c["name"]}"')
        elif mine is None and not (pod is not None and good(pod)):
            implicit.append(c["name"])
    return bad, implicit


def _run_as_non_root(spec: Mapping) -> str | None:
    if _user_namespace(spec):
        return None
    bad, implicit = _pod_or_container(spec, "runAsNonRoot", lambda v: v is True)
    if bad:
        return f"{' and '.join(bad)} must not set securityContext.runAsNonRoot=false"
    return f"pod or {_names(implicit)} must set securityContext.runAsNonRoot=true" if implicit else None


def _run_as_user(spec: Mapping) -> str | None:
    if _user_namespace(spec):
        return None
    bad = (["pod"] if (spec.get("securityContext") or {}).get("runAsUser") == 0 else []) + [
        f'container "{c["name"]}"' for c in _containers(spec) if _security(c).get("runAsUser") == 0]
    return f"{' and '.join(bad)} must not set runAsUser=0" if bad else None


def _seccomp_restricted(spec: Mapping) -> str | None:
    def good(profile: object) -> bool:
        return isinstance(profile, Mapping) and profile.get("type") in ("RuntimeDefault", "Localhost")
    bad, implicit = _pod_or_container(spec, "seccompProfile", good)
    if bad:
        return f"{' and '.join(bad)} must not set securityContext.seccompProfile.type to other than RuntimeDefault"
    return (f'pod or {_names(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or '
            '"Localhost"') if implicit else None


def _volumes(spec: Mapping) -> str | None:
    bad = [v["name"] for v in spec.get("volumes") or () if not RESTRICTED_VOLUMES & set(v)]
    return f"volumes {bad} use restricted volume types" if bad else None


Check = Callable[[Mapping], "str | None"]
# (level, reason as the plugin words it, check). Restricted's capability, volume and seccomp checks replace
# baseline's of the same concern (OverrideCheckIDs), which they imply.
CHECKS: tuple[tuple[str, str, Check], ...] = (
    (BASELINE, "host namespaces", _host_namespaces),
    (BASELINE, "privileged", _privileged),
    (BASELINE, "non-default capabilities", _capabilities_baseline),
    (BASELINE, "hostPath volumes", _host_path),
    (BASELINE, "hostPort", _host_ports),
    (BASELINE, "seccompProfile", _unconfined("seccompProfile")),
    (BASELINE, "forbidden AppArmor profile", _unconfined("appArmorProfile")),
    (BASELINE, "seLinuxOptions", _selinux),
    (BASELINE, "procMount", _proc_mount),
    (BASELINE, "forbidden sysctls", _sysctls),
    (BASELINE, "probe or lifecycle host", _probe_hosts),
    (RESTRICTED, "unrestricted capabilities", _drop_all),
    (RESTRICTED, "allowPrivilegeEscalation != false", _no_escalation),
    (RESTRICTED, "runAsNonRoot != true", _run_as_non_root),
    (RESTRICTED, "runAsUser=0", _run_as_user),
    (RESTRICTED, "seccompProfile", _seccomp_restricted),
    (RESTRICTED, "restricted volume types", _volumes),
)


# The baseline checks a restricted check of the same concern replaces at the restricted level.
OVERRIDDEN_BY_RESTRICTED = frozenset({_capabilities_baseline, _host_path})


def evaluate(pod: Mapping, level: str) -> list[Violation]:
    """What in `pod` (a Pod or pod template: metadata and spec) the `level` refuses; [] when it admits it."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}; allowed: {', '.join(LEVELS)}")
    if level == PRIVILEGED:
        return []
    spec, found = pod.get("spec") or {}, []
    for at, reason, check in CHECKS:
        if at == RESTRICTED and level == BASELINE:
            continue
        if level == RESTRICTED and (check in OVERRIDDEN_BY_RESTRICTED or (at, reason) == (BASELINE, "seccompProfile")):
            continue
        detail = check(spec)
        if detail:
            found.append(Violation(at, reason, detail))
    return found


def least_level(pod: Mapping) -> tuple[str, list[Violation]]:
    """The strictest level that admits `pod`, and what the stricter levels refuse in it."""
    refused: list[Violation] = []
    for level in LEVELS:
        found = evaluate(pod, level)
        if not found:
            return level, refused
        refused = found
    raise AssertionError("the privileged level admits every pod")


def strictness(level: str) -> int:
    """0 for restricted (strictest) to 2 for privileged: a namespace at level L admits what needs L or less."""
    return LEVELS.index(level)
