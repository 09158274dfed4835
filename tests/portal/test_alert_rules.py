"""The shipped alert rules (deploy/monitoring/rules.yaml) pass ``promtool check rules`` and
their unit tests, ``promtool test rules`` (tests/support/monitoring/rules_test.yml),
against the series of two web replicas and two workers. promtool is Debian's prometheus
package (.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess

import yaml

from ..support.paths import REPO

MONITORING = REPO / "deploy" / "monitoring"
CASES = REPO / "tests" / "support" / "monitoring" / "rules_test.yml"


def promtool(*args: str, cwd) -> subprocess.CompletedProcess:
    binary = shutil.which("promtool")
    assert binary, "promtool is not installed (Debian's package prometheus: .ci/run)"
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_alert_rules_pass_promtool_with_two_replicas_series(tmp_path):
    rule = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    shutil.copy(CASES, tmp_path / "rules_test.yml")

    checked = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "rules_test.yml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test():
    rule = yaml.safe_load((MONITORING / "rules.yaml").read_text())
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    cases = yaml.safe_load(CASES.read_text())["tests"]
    tested = {t["alertname"] for case in cases for t in case.get("alert_rule_test", [])}
    assert alerts - tested == set()
