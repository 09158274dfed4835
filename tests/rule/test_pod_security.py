"""The Pod Security Standards as Caldera checks a tenant's pod template: every control of the
baseline profile refuses what it forbids and lets through what it allows, and the
restricted profile adds its own; each refusal names its path and its control."""

from __future__ import annotations

import pytest

from kube.pod_security import RESTRICTED, violations

AT = ("spec", "template")
POD = "spec.template.spec"
C = f"{POD}.containers[0]"
ARMOR = "container.apparmor.security.beta.kubernetes.io/main"


def template(*, pod: dict | None = None, container: dict | None = None, metadata=None) -> dict:
    return {
        "metadata": metadata or {},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", **(container or {})}],
            **(pod or {}),
        },
    }


# control: (the template that breaks it, the path named, one that it allows)
BASELINE = {
    "HostProcess": (
        template(container={"securityContext": {"windowsOptions": {"hostProcess": True}}}),
        f"{C}.securityContext.windowsOptions.hostProcess",
        template(container={"securityContext": {"windowsOptions": {"hostProcess": False}}}),
    ),
    "Host Namespaces": (
        template(pod={"hostNetwork": True}),
        f"{POD}.hostNetwork",
        template(pod={"hostNetwork": False, "hostPID": False, "hostIPC": False}),
    ),
    "Host Namespaces (PID)": (template(pod={"hostPID": True}), f"{POD}.hostPID", template()),
    "Host Namespaces (IPC)": (template(pod={"hostIPC": True}), f"{POD}.hostIPC", template()),
    "Privileged Containers": (
        template(container={"securityContext": {"privileged": True}}),
        f"{C}.securityContext.privileged",
        template(container={"securityContext": {"privileged": False}}),
    ),
    "Capabilities": (
        template(container={"securityContext": {"capabilities": {"add": ["CHOWN", "SYS_ADMIN"]}}}),
        f"{C}.securityContext.capabilities.add[1]",
        template(container={"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}),
    ),
    "HostPath Volumes": (
        template(pod={"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
        f"{POD}.volumes[0].hostPath",
        template(pod={"volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]}),
    ),
    "Host Ports": (
        template(container={"ports": [{"containerPort": 80, "hostPort": 80}]}),
        f"{C}.ports[0].hostPort",
        template(container={"ports": [{"containerPort": 80, "hostPort": 0}]}),
    ),
    "AppArmor": (
        template(pod={"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
        f"{POD}.securityContext.appArmorProfile.type",
        template(pod={"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}}),
    ),
    "AppArmor (annotation)": (
        template(metadata={"annotations": {ARMOR: "unconfined"}}),
        f"spec.template.metadata.annotations['{ARMOR}']",
        template(metadata={"annotations": {ARMOR: "runtime/default"}}),
    ),
    "SELinux": (
        template(container={"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
        f"{C}.securityContext.seLinuxOptions.type",
        template(
            container={
                "securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1"}}
            }
        ),
    ),
    "SELinux (user)": (
        template(pod={"securityContext": {"seLinuxOptions": {"user": "system_u"}}}),
        f"{POD}.securityContext.seLinuxOptions.user",
        template(),
    ),
    "/proc Mount Type": (
        template(container={"securityContext": {"procMount": "Unmasked"}}),
        f"{C}.securityContext.procMount",
        template(container={"securityContext": {"procMount": "Default"}}),
    ),
    "Seccomp": (
        template(container={"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        f"{C}.securityContext.seccompProfile.type",
        template(container={"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
    ),
    "Sysctls": (
        template(pod={"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
        f"{POD}.securityContext.sysctls[0].name",
        template(
            pod={
                "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}
            }
        ),
    ),
}


@pytest.mark.parametrize("control", sorted(BASELINE))
def test_every_baseline_control_refuses_what_it_forbids_by_path(control):
    broken, where, allowed = BASELINE[control]

    found = violations(broken, AT)

    name = control.split(" (")[0]
    assert list(found) == [where]
    (reason,) = found[where]
    assert reason.startswith(
        f"not allowed by the Pod Security Standards' baseline profile ({name}):"
    )
    assert violations(allowed, AT) == {}


def test_init_and_ephemeral_containers_are_held_to_it_too():
    pod = template()
    pod["spec"]["initContainers"] = [{"name": "i", "securityContext": {"privileged": True}}]
    pod["spec"]["ephemeralContainers"] = [
        {"name": "e", "securityContext": {"procMount": "Unmasked"}}
    ]

    assert set(violations(pod, AT)) == {
        f"{POD}.initContainers[0].securityContext.privileged",
        f"{POD}.ephemeralContainers[0].securityContext.procMount",
    }


HARDENED = template(
    pod={"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}},
    container={
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        }
    },
)


def test_the_restricted_profile_adds_its_hardening():
    assert violations(template(), AT) == {}
    found = violations(
        template(pod={"volumes": [{"name": "n", "nfs": {"server": "x", "path": "/"}}]}),
        AT,
        RESTRICTED,
    )

    assert set(found) == {
        f"{POD}.volumes[0]",
        f"{C}.securityContext.allowPrivilegeEscalation",
        f"{C}.securityContext.runAsNonRoot",
        f"{C}.securityContext.seccompProfile",
        f"{C}.securityContext.capabilities.drop",
    }
    assert all("restricted profile" in reason for reasons in found.values() for reason in reasons)
    assert violations(HARDENED, AT, RESTRICTED) == {}
    root = template(container={**HARDENED["spec"]["containers"][0], "securityContext": {
        **HARDENED["spec"]["containers"][0]["securityContext"], "runAsUser": 0}})  # fmt: skip
    root["spec"]["securityContext"] = HARDENED["spec"]["securityContext"]
    assert list(violations(root, AT, RESTRICTED)) == [f"{C}.securityContext.runAsUser"]
    assert violations(HARDENED, AT, RESTRICTED, beyond="baseline") == {}
    beyond = violations(template(pod={"hostNetwork": True}), AT, RESTRICTED, beyond="baseline")
    assert f"{POD}.hostNetwork" not in beyond  # baseline's, checked already
