"""The Pod Security Standards model (admission/pod_security.py): each check fires on its bad case, and only there.

The e2e (e2e/tests/test_namespace_policy.py) holds the model to the real API server's PodSecurity
admission on every shipped stack's pods; these cases cover each check alone.
"""

from __future__ import annotations

import copy

import pytest

from admission import pod_security
from admission.pod_security import BASELINE, PRIVILEGED, RESTRICTED, evaluate, least_level

GOOD = {
    "metadata": {"name": "p"},
    "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "init", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
        "containers": [{"name": "main", "ports": [{"containerPort": 8471}], "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
        "volumes": [{"name": "data", "csi": {"driver": "gcsfuse.csi.storage.gke.io"}},
                    {"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "token", "secret": {}}],
    },
}


def changed(change) -> dict:
    pod = copy.deepcopy(GOOD)
    change(pod["spec"])
    return pod


def main(spec: dict) -> dict:
    return spec["containers"][0]


# (case, change, the least level that admits it, the reason the stricter level gives)
CASES = [
    ("host network", lambda s: (s.update(hostNetwork=True), main(s).pop("ports")), PRIVILEGED, "host namespaces"),
    ("host PID", lambda s: s.update(hostPID=True), PRIVILEGED, "host namespaces"),
    ("privileged", lambda s: main(s)["securityContext"].update(privileged=True), PRIVILEGED, "privileged"),
    ("SYS_ADMIN", lambda s: main(s)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]), PRIVILEGED,
     "non-default capabilities"),
    ("hostPath", lambda s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}), PRIVILEGED,
     "hostPath volumes"),
    ("hostPort", lambda s: main(s)["ports"][0].update(hostPort=8471), PRIVILEGED, "hostPort"),
    ("seccomp Unconfined", lambda s: s["securityContext"].update(seccompProfile={"type": "Unconfined"}), PRIVILEGED,
     "seccompProfile"),
    ("SELinux user", lambda s: s["securityContext"].update(seLinuxOptions={"user": "root"}), PRIVILEGED,
     "seLinuxOptions"),
    ("procMount", lambda s: main(s)["securityContext"].update(procMount="Unmasked"), PRIVILEGED, "procMount"),
    ("unsafe sysctl", lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
     PRIVILEGED, "forbidden sysctls"),
    ("probe host", lambda s: main(s).update(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
     PRIVILEGED, "probe or lifecycle host"),
    ("capabilities kept", lambda s: main(s)["securityContext"]["capabilities"].update(drop=["NET_RAW"]), BASELINE,
     "unrestricted capabilities"),
    ("CHOWN added", lambda s: main(s)["securityContext"]["capabilities"].update(add=["CHOWN"]), BASELINE,
     "unrestricted capabilities"),
    ("escalation", lambda s: s["initContainers"][0]["securityContext"].pop("allowPrivilegeEscalation"), BASELINE,
     "allowPrivilegeEscalation != false"),
    ("root image", lambda s: s["securityContext"].pop("runAsNonRoot"), BASELINE, "runAsNonRoot != true"),
    ("runAsUser 0", lambda s: main(s)["securityContext"].update(runAsUser=0), BASELINE, "runAsUser=0"),
    ("no seccomp", lambda s: s["securityContext"].pop("seccompProfile"), BASELINE, "seccompProfile"),
    ("nfs volume", lambda s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}), BASELINE,
     "restricted volume types"),
]


def test_the_good_pod_is_restricted():
    assert least_level(GOOD) == (RESTRICTED, [])


@pytest.mark.parametrize(("case", "change", "level", "reason"), CASES, ids=[c[0] for c in CASES])
def test_each_check_fires_on_its_bad_case(case, change, level, reason):
    found, refused = least_level(changed(change))
    assert found == level, (case, refused)
    assert [v.reason for v in refused] == [reason], refused


def test_a_host_network_pod_s_ports_are_host_ports_as_the_api_server_defaults_them():
    pod = changed(lambda s: s.update(hostNetwork=True))
    assert {v.reason for v in evaluate(pod, BASELINE)} == {"host namespaces", "hostPort"}
    main(pod["spec"]).pop("ports")
    assert {v.reason for v in evaluate(pod, BASELINE)} == {"host namespaces"}


def test_root_in_a_user_namespace_is_restricted_as_of_1_35():
    pod = changed(lambda s: s["securityContext"].update(runAsNonRoot=False, runAsUser=0))
    assert least_level(pod)[0] == BASELINE
    pod["spec"]["hostUsers"] = False
    assert least_level(pod) == (RESTRICTED, [])


def test_a_container_setting_runasnonroot_itself_needs_nothing_from_the_pod():
    pod = changed(lambda s: s["securityContext"].pop("runAsNonRoot"))
    for container in (*pod["spec"]["initContainers"], *pod["spec"]["containers"]):
        container["securityContext"]["runAsNonRoot"] = True
    assert least_level(pod) == (RESTRICTED, [])


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="allowed: restricted, baseline, privileged"):
        evaluate(GOOD, "strict")
    assert pod_security.strictness(RESTRICTED) < pod_security.strictness(BASELINE) < pod_security.strictness(PRIVILEGED)
