"""deploy/prometheus/: the rule files pass ``promtool check rules``, their unit tests pass
``promtool test rules``, every rule is tested firing and not firing (a recording rule: its
value), and every alert has its runbook in docs/operations.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.prometheus import DEPLOY, ROOT, run_promtool

RULE_FILES = sorted((DEPLOY / "rules").glob("*.yml"))
TEST_FILES = sorted((DEPLOY / "tests").glob("*_test.yml"))


def _rules() -> list[dict[str, Any]]:
    return [
        rule
        for path in RULE_FILES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


def _tests() -> list[dict[str, Any]]:
    return [test for path in TEST_FILES for test in yaml.safe_load(path.read_text())["tests"]]


def test_there_are_rules_and_tests() -> None:
    assert [p.name for p in RULE_FILES] == ["alerts.yml", "slos.yml"]
    assert [p.name for p in TEST_FILES] == ["alerts_test.yml", "slos_test.yml"]


def test_the_rule_files_pass_promtool_check_rules() -> None:
    result = run_promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    found = sum(int(n) for n in re.findall(r"SUCCESS: (\d+) rules found", result.stdout))
    assert found == len(_rules())


def test_the_rules_pass_their_unit_tests() -> None:
    result = run_promtool("test", "rules", *map(str, TEST_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(TEST_FILES)


def test_a_rule_that_changed_fails_its_unit_tests(tmp_path: Path) -> None:
    # The tests can fail: the e-stop alert at 100 ms instead of 50, the fast burn at 30x.
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    alerts = (DEPLOY / "rules" / "alerts.yml").read_text()
    slos = (DEPLOY / "rules" / "slos.yml").read_text()
    assert ") > 0.05\n" in alerts and "(14.4 * " in slos
    (tmp_path / "rules" / "alerts.yml").write_text(alerts.replace(") > 0.05\n", ") > 0.1\n"))
    (tmp_path / "rules" / "slos.yml").write_text(slos.replace("(14.4 * ", "(30 * "))
    (tmp_path / "tests" / "alerts_test.yml").write_text(
        (DEPLOY / "tests" / "alerts_test.yml").read_text()
    )
    # Of the SLO tests, the emergency stop's (the others take time and test other rules).
    slo_tests = yaml.safe_load((DEPLOY / "tests" / "slos_test.yml").read_text())
    slo_tests["tests"] = [
        test
        for test in slo_tests["tests"]
        if any(c["alertname"].startswith("EmergencyStop") for c in test["alert_rule_test"])
    ]
    (tmp_path / "tests" / "slos_test.yml").write_text(yaml.safe_dump(slo_tests))
    for name, failing in (
        ("alerts_test.yml", "alertname: EmergencyStopLatencyHigh"),
        ("slos_test.yml", "alertname: EmergencyStopBudgetBurnFast"),
    ):
        result = run_promtool("test", "rules", str(tmp_path / "tests" / name))
        assert result.returncode != 0
        assert failing in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_not_firing() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in _tests():
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    alerts = {r["alert"] for r in _rules() if "alert" in r}
    assert sorted(alerts - firing) == []
    assert sorted(alerts - quiet) == []


def test_every_recording_rule_s_value_is_tested() -> None:
    tested = " ".join(
        case["expr"] for test in _tests() for case in test.get("promql_expr_test", [])
    )
    records = {r["record"] for r in _rules() if "record" in r}
    assert sorted(r for r in records if not re.search(rf"\b{re.escape(r)}\b", tested)) == []


def test_every_alert_says_how_bad_and_has_a_runbook_in_operations() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    # GitHub's anchors of the runbook's headings: "#### GatewayShardDown" -> gatewaysharddown
    anchors = {h.strip().lower() for h in re.findall(r"^#{2,4} (\w+)$", operations, re.M)}
    problems = []
    for rule in _rules():
        if "alert" not in rule:
            continue
        name, annotations = rule["alert"], rule.get("annotations", {})
        if rule.get("labels", {}).get("severity") not in ("page", "ticket"):
            problems.append(f"{name}: severity")
        if not annotations.get("summary") or not annotations.get("description"):
            problems.append(f"{name}: summary and description")
        if annotations.get("runbook_url") != f"docs/operations.md#{name.lower()}":
            problems.append(f"{name}: runbook_url")
        if name.lower() not in anchors:
            problems.append(f"{name}: no runbook section in docs/operations.md")
    assert problems == []


def test_no_rule_keeps_a_label_that_grows() -> None:
    # Mowers, commands, users and accounts are never labels the rules group by or make.
    growing = re.compile(r"\b(mower_id|command_id|user_id|account_id|account)\b")
    assert [r.get("alert") or r.get("record") for r in _rules() if growing.search(r["expr"])] == []
    assert not [r for r in _rules() if growing.search(" ".join(r.get("labels", {})))]
