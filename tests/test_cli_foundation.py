"""The ``layoutsat`` command line: help, validate and its exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli import cli
from tests.conftest import BAD_FILES, BENCHMARKS

runner = CliRunner()


def test_help_lists_the_subcommands():
    r = runner.invoke(cli, ["--help"])
    assert r.exit_code == 0
    assert "serve" in r.output and "validate" in r.output


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_validate_accepts_every_public_benchmark(path):
    r = runner.invoke(cli, ["validate", str(path)])
    assert r.exit_code == 0, r.output
    assert "valid fusion problem" in r.output


def test_validate_rejects_bad_file_17_naming_both_faults():
    path = next(p for p in BAD_FILES if "17" in p.name)
    r = runner.invoke(cli, ["validate", str(path)])
    assert r.exit_code == 1
    assert "inputs has 99 entries but op_types has 103" in r.stderr
    assert "tensor index 155 of op 95 is out of range" in r.stderr


def test_validate_rejects_bad_file_13_naming_the_shape_mismatch():
    path = next(p for p in BAD_FILES if "13" in p.name)
    r = runner.invoke(cli, ["validate", str(path)])
    assert r.exit_code == 1
    assert "all tensors of a Pointwise op must have the same shape" in r.stderr


def test_validate_json_output(tmp_path):
    r = runner.invoke(cli, ["validate", "--json", str(BENCHMARKS[0])])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["valid"] is True
    path = next(p for p in BAD_FILES if "17" in p.name)
    r = runner.invoke(cli, ["validate", "--json", str(path)])
    assert r.exit_code == 1
    body = json.loads(r.stdout)
    assert body["valid"] is False and body["errors"][0]["rule"] == "length.ops"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [("{oops", "is not valid JSON"), ('{"ops": []}', "cannot tell the problem family"),
     ("[]", "cannot tell the problem family")],
)
def test_validate_unreadable_documents_exit_1_with_a_reason(tmp_path, content, fragment):
    path = tmp_path / "in.json"
    path.write_text(content)
    r = runner.invoke(cli, ["validate", str(path)])
    assert r.exit_code == 1
    assert fragment in r.stderr


def test_validate_missing_file_exits_1(tmp_path):
    r = runner.invoke(cli, ["validate", str(tmp_path / "nope.json")])
    assert r.exit_code == 1
    assert "cannot read" in r.stderr
