"""The Pod Security Standards (kubernetes.io/docs/concepts/security/pod-security-standards),
checked on a pod template as Pod Security Admission checks a pod.

Caldera's ServiceAccount creates the tenants' objects, so a pod it creates must not get
more than the profile allows, whatever the namespace enforces. ``baseline`` prevents the
known privilege escalations (the host's namespaces, files and ports, privileged
containers, added capabilities beyond the default set, unconfined seccomp or AppArmor,
SELinux options, unsafe sysctls, an unmasked /proc); ``restricted`` adds the hardening of
the current best practice (only ephemeral and claimed volume types, no privilege
escalation, not running as root, a seccomp profile, every capability dropped but
NET_BIND_SERVICE). Each violation is named by its path and its control.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .said import Said, gettext_noop
from .schema import render

BASELINE, RESTRICTED = "baseline", "restricted"
LEVELS = (BASELINE, RESTRICTED)

Where = tuple[str | int, ...]

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
    }
)  # fmt: skip
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
        "projected", "secret",
    }
)  # fmt: skip
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

# Why each control keeps a tenant's pod from it, said with its name.
_WHY = {
    "HostProcess": gettext_noop("a Windows HostProcess container runs on the node itself"),
    "Host Namespaces": gettext_noop("a pod may not share the node's network, PID or IPC"),
    "Privileged Containers": gettext_noop("a privileged container has the node's devices"),
    "Capabilities": gettext_noop("only the container runtime's default capabilities may be added"),
    "HostPath Volumes": gettext_noop("a pod may not mount the node's files"),
    "Host Ports": gettext_noop("a pod may not take the node's ports"),
    "AppArmor": gettext_noop("AppArmor may not be turned off"),
    "SELinux": gettext_noop("only the container SELinux types may be set, not a user or role"),
    "/proc Mount Type": gettext_noop("the /proc mask may not be lifted"),
    "Seccomp": gettext_noop("seccomp may not be Unconfined"),
    "Sysctls": gettext_noop("only the namespaced safe sysctls may be set"),
    "Volume Types": gettext_noop(
        "only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, "
        "projected and secret volumes"
    ),
    "Privilege Escalation": gettext_noop("allowPrivilegeEscalation must be false"),
    "Running as Non-root": gettext_noop(
        "runAsNonRoot must be true, for the pod or every container"
    ),
    "Running as Non-root user": gettext_noop("runAsUser may not be 0"),
    "Seccomp (restricted)": gettext_noop(
        "a seccomp profile must be set, RuntimeDefault or Localhost, for the pod or every container"
    ),
    "Capabilities (restricted)": gettext_noop(
        "every capability must be dropped (ALL), and only NET_BIND_SERVICE added"
    ),
}


def refusal(control: str, level: str) -> Said:
    """The reason a path breaks ``control`` of ``level``."""
    name = control.removesuffix(" (restricted)")
    return Said(
        gettext_noop(
            "not allowed by the Pod Security Standards' %(level)s profile (%(control)s): %(why)s"
        ),
        level=level,
        control=name,
        why=Said(_WHY[control]),
    )


def violations(
    template: Mapping[str, Any], at: Where, level: str = BASELINE, *, beyond: str = ""
) -> dict[str, list[str]]:
    """Every path of a pod template (``metadata`` and ``spec``) under ``at`` that the
    ``level`` profile forbids, with the reason naming its control; with ``beyond`` (a
    lower level, checked already), only what ``level`` adds to it."""
    found: dict[str, list[str]] = {}
    levels: tuple[str, ...] = (BASELINE,) if level == BASELINE else (BASELINE, RESTRICTED)
    levels = levels[levels.index(beyond) + 1 :] if beyond in levels else levels
    spec = _map(template.get("spec"))
    for rule in levels:
        checks = _baseline if rule == BASELINE else _restricted
        for where, control in checks(template, spec, (*at, "spec")):
            found.setdefault(render(where), []).append(refusal(control, rule))
    return found


Object = Mapping[str, Any]


def _map(value: Any) -> Object:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _containers(spec: Object, at: Where) -> Iterator[tuple[Object, Where]]:
    for part in CONTAINER_LISTS:
        items = spec.get(part)
        for index, container in enumerate(items if isinstance(items, list) else []):
            if isinstance(container, Mapping):
                yield container, (*at, part, index)


def _context(holder: Object) -> Object:
    context = holder.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def _baseline(template: Object, spec: Object, at: Where) -> Iterator[tuple[Where, str]]:
    pod = _context(spec)
    contexts = [(pod, (*at, "securityContext"))] + [
        (_context(c), (*where, "securityContext")) for c, where in _containers(spec, at)
    ]
    for context, where in contexts:
        windows = context.get("windowsOptions")
        if isinstance(windows, Mapping) and windows.get("hostProcess") is True:
            yield (*where, "windowsOptions", "hostProcess"), "HostProcess"
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) is True:
            yield (*at, field), "Host Namespaces"
    for container, where in _containers(spec, at):
        context = _context(container)
        if context.get("privileged") is True:
            yield (*where, "securityContext", "privileged"), "Privileged Containers"
        capabilities = context.get("capabilities")
        added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
        for index, name in enumerate(added if isinstance(added, list) else []):
            if name not in BASELINE_CAPABILITIES:
                yield (*where, "securityContext", "capabilities", "add", index), "Capabilities"
        ports = container.get("ports")
        for index, port in enumerate(ports if isinstance(ports, list) else []):
            if isinstance(port, Mapping) and port.get("hostPort") not in (None, 0):
                yield (*where, "ports", index, "hostPort"), "Host Ports"
        if context.get("procMount") not in (None, "Default"):
            yield (*where, "securityContext", "procMount"), "/proc Mount Type"
    volumes = spec.get("volumes")
    for index, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if isinstance(volume, Mapping) and volume.get("hostPath") is not None:
            yield (*at, "volumes", index, "hostPath"), "HostPath Volumes"
    for context, where in contexts:
        armor = context.get("appArmorProfile")
        if isinstance(armor, Mapping) and armor.get("type") not in (
            None, "RuntimeDefault", "Localhost",
        ):  # fmt: skip
            yield (*where, "appArmorProfile", "type"), "AppArmor"
        selinux = context.get("seLinuxOptions")
        if isinstance(selinux, Mapping):
            if selinux.get("type", "") not in SELINUX_TYPES:
                yield (*where, "seLinuxOptions", "type"), "SELinux"
            for field in ("user", "role"):
                if selinux.get(field):
                    yield (*where, "seLinuxOptions", field), "SELinux"
        seccomp = context.get("seccompProfile")
        if isinstance(seccomp, Mapping) and seccomp.get("type") == "Unconfined":
            yield (*where, "seccompProfile", "type"), "Seccomp"
    annotations = (template.get("metadata") or {}).get("annotations")
    for key, value in annotations.items() if isinstance(annotations, Mapping) else []:
        if str(key).startswith(APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            yield (*at[:-1], "metadata", "annotations", str(key)), "AppArmor"
    sysctls = pod.get("sysctls")
    for index, sysctl in enumerate(sysctls if isinstance(sysctls, list) else []):
        if not isinstance(sysctl, Mapping) or sysctl.get("name") not in SAFE_SYSCTLS:
            yield (*at, "securityContext", "sysctls", index, "name"), "Sysctls"


def _restricted(template: Object, spec: Object, at: Where) -> Iterator[tuple[Where, str]]:
    volumes = spec.get("volumes")
    for index, volume in enumerate(volumes if isinstance(volumes, list) else []):
        if isinstance(volume, Mapping):
            kinds = set(volume) - {"name"}
            if not kinds <= RESTRICTED_VOLUMES and "hostPath" not in kinds:
                yield (*at, "volumes", index), "Volume Types"
    pod = _context(spec)
    containers = list(_containers(spec, at))
    for container, where in containers:
        context = _context(container)
        if (
            where[-2] != "ephemeralContainers"
            and context.get("allowPrivilegeEscalation") is not False
        ):
            yield (*where, "securityContext", "allowPrivilegeEscalation"), "Privilege Escalation"
        if context.get("runAsNonRoot") is not True and pod.get("runAsNonRoot") is not True:
            yield (*where, "securityContext", "runAsNonRoot"), "Running as Non-root"
        if context.get("runAsUser") == 0:
            yield (*where, "securityContext", "runAsUser"), "Running as Non-root user"
        seccomp = context.get("seccompProfile") or pod.get("seccompProfile")
        if not isinstance(seccomp, Mapping) or seccomp.get("type") not in (
            "RuntimeDefault", "Localhost",
        ):  # fmt: skip
            if not (isinstance(seccomp, Mapping) and seccomp.get("type") == "Unconfined"):
                yield (*where, "securityContext", "seccompProfile"), "Seccomp (restricted)"
        capabilities = _map(context.get("capabilities"))
        if where[-2] != "ephemeralContainers" and "ALL" not in _items(capabilities.get("drop")):
            yield (*where, "securityContext", "capabilities", "drop"), "Capabilities (restricted)"
        for index, name in enumerate(_items(capabilities.get("add"))):
            if name != "NET_BIND_SERVICE" and name in BASELINE_CAPABILITIES:
                yield (
                    (*where, "securityContext", "capabilities", "add", index),
                    "Capabilities (restricted)",
                )
    if pod.get("runAsUser") == 0:
        yield (*at, "securityContext", "runAsUser"), "Running as Non-root user"
