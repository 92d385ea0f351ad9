#!/usr/bin/env python3
"""Generates the benchmark's sample project: a small but real-sized Python code base.

    make_sample.py DEST        create DEST (must not exist) and print a one-line summary

The output is byte-for-byte deterministic (fixed seed, no timestamps), so the subagent run and the
--no-subagents baseline read exactly the same file contents. The project is runnable: its unittest
suite passes with `python3 -m unittest discover -s tests -t .`. It has tens of files, a few large
ones (a generated SKU table, a vendored module, a changelog, JSON fixtures) and TODO comments
spread through the code, which the benchmark scenarios in tests/bench/scenarios/ rely on by path.
Stdlib only.
"""

import json
import os
import random
import sys

SEED = 20240607
OWNERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
TODO_TOPICS = [
    "handle negative quantities",
    "cache the warehouse lookup",
    "validate currency codes against ISO 4217",
    "stream large exports instead of building a list",
    "make the CSV dialect configurable",
    "log rejected rows with their line numbers",
    "support partial refunds",
    "replace the linear search with a bisect",
    "drop the legacy v1 field names after the migration",
    "add a retry with backoff around the storage flush",
    "timezone-aware timestamps",
    "split this module, it does too much",
    "round half to even for invoices",
    "return a typed error instead of None",
    "deduplicate SKUs case-insensitively",
]
MODULES = [
    "models", "storage", "pricing", "reports", "validators", "importers", "exporters", "search",
    "warehouse", "orders",
]


def todo(rng, indent=""):
    return f"{indent}# TODO({rng.choice(OWNERS)}): {rng.choice(TODO_TOPICS)}\n"


def module_source(rng, name, n_funcs):
    """A module of small pure functions: rule_<name>_<k>(x) == x * a + b, plus a class."""
    out = [f'"""inventory.{name}: generated business rules for the {name} area."""\n\n']
    out.append("from inventory.utils import clamp, normalise_sku\n\n\n")
    coeffs = []
    for k in range(n_funcs):
        a, b = rng.randint(2, 97), rng.randint(0, 500)
        coeffs.append((k, a, b))
        if rng.random() < 0.12:
            out.append(todo(rng))
        out.append(f"def rule_{name}_{k:03d}(x):\n")
        out.append(f'    """Applies the {name} rule {k}: scales by {a} and offsets by {b}."""\n')
        out.append(f"    return clamp(x * {a} + {b}, 0, 10**12)\n\n\n")
    cls = "".join(p.capitalize() for p in name.split("_"))
    out.append(f"class {cls}Registry:\n")
    out.append(f'    """Keeps {name} records keyed by normalised SKU."""\n\n')
    out.append("    def __init__(self):\n        self._items = {}\n\n")
    out.append("    def add(self, sku, value):\n")
    if rng.random() < 0.5:
        out.append(todo(rng, "        "))
    out.append("        self._items[normalise_sku(sku)] = value\n\n")
    out.append("    def get(self, sku, default=None):\n")
    out.append("        return self._items.get(normalise_sku(sku), default)\n\n")
    out.append("    def __len__(self):\n        return len(self._items)\n")
    return "".join(out), coeffs, cls


def test_source(rng, name, coeffs, cls):
    out = [f'"""Tests for inventory.{name}."""\n\n', "import unittest\n\n"]
    out.append(f"from inventory import {name}\n\n\n")
    out.append(f"class {cls}RulesTest(unittest.TestCase):\n")
    for k, a, b in coeffs:
        x = rng.randint(0, 1000)
        out.append(f"    def test_rule_{k:03d}(self):\n")
        out.append(f"        self.assertEqual({name}.rule_{name}_{k:03d}({x}), {x * a + b})\n\n")
    out.append(f"\nclass {cls}RegistryTest(unittest.TestCase):\n")
    out.append("    def test_add_and_get_normalise_the_sku(self):\n")
    out.append(f"        reg = {name}.{cls}Registry()\n")
    out.append('        reg.add(" ab-12 ", 7)\n')
    out.append('        self.assertEqual(reg.get("AB-12"), 7)\n')
    out.append("        self.assertEqual(len(reg), 1)\n\n\n")
    out.append('if __name__ == "__main__":\n    unittest.main()\n')
    return "".join(out)


def words(rng, n):
    vocab = ("inventory warehouse order invoice sku pallet carrier refund export import report "
             "ledger shipment customer supplier quantity price currency batch audit stock reorder "
             "threshold forecast label barcode location aisle bin picker route manifest").split()
    return " ".join(rng.choice(vocab) for _ in range(n))


def generate(dest):
    rng = random.Random(SEED)
    files = {}

    files["README.md"] = "".join(
        ["# inventory\n\nA small warehouse inventory service.\n\n## Running the tests\n\n",
         "```\npython3 -m unittest discover -s tests -t .\n```\n\n## Design notes\n\n"] +
        [f"### Note {i}\n\n{words(rng, 120)}.\n\n" for i in range(45)])
    files["pyproject.toml"] = (
        '[project]\nname = "inventory"\nversion = "2.7.1"\nrequires-python = ">=3.9"\n'
        'dependencies = []\n\n[tool.inventory]\n# The suite is plain stdlib unittest; no pytest.\n'
        'test-command = "python3 -m unittest discover -s tests -t ."\n')
    files["setup.cfg"] = ("[metadata]\nname = inventory\n\n[options]\npackage_dir =\n    = src\n"
                          "packages = find:\n\n[options.packages.find]\nwhere = src\n")
    files["Makefile"] = (".PHONY: test lint\n\ntest:\n\tpython3 -m unittest discover -s tests -t .\n"
                         "\nlint:\n\tpython3 -m pyflakes src tests\n")
    files[".github/workflows/ci.yml"] = (
        "name: ci\non: [push, pull_request]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v4\n      - uses: actions/setup-python@v5\n"
        "        with:\n          python-version: '3.11'\n      - run: make test\n")
    files["CHANGELOG.md"] = "# Changelog\n\n" + "".join(
        f"## 2.{i // 10}.{i % 10}\n\n" + "".join(f"- {words(rng, 18)}\n" for _ in range(8)) + "\n"
        for i in range(72, 0, -1))
    for i, topic in enumerate(["architecture", "storage-format", "pricing-rules", "operations"]):
        body = "".join(f"{words(rng, 60)}.\n\n" for _ in range(12))
        if i % 2 == 0:
            body += f"TODO({OWNERS[i]}): {TODO_TOPICS[i]}\n"
        files[f"docs/{topic}.md"] = f"# {topic}\n\n{body}"

    files["src/inventory/utils.py"] = (
        '"""inventory.utils: small helpers shared by every module."""\n\n\n'
        "def clamp(value, low, high):\n"
        '    """Limits value to [low, high]."""\n'
        "    return max(low, min(high, value))\n\n\n"
        "def normalise_sku(sku):\n"
        '    """Upper-cases and strips a SKU so lookups are stable."""\n'
        + todo(rng, "    ") +
        "    return sku.strip().upper()\n\n\n"
        "def chunked(items, size):\n"
        '    """Yields lists of at most size items."""\n'
        "    batch = []\n    for item in items:\n        batch.append(item)\n"
        "        if len(batch) == size:\n            yield batch\n            batch = []\n"
        "    if batch:\n        yield batch\n")
    names = list(MODULES)
    files["src/inventory/__init__.py"] = (
        '"""inventory: a small warehouse inventory service."""\n\n__all__ = [\n' +
        "".join(f'    "{n}",\n' for n in names + ["utils"]) + "]\n")
    files["tests/__init__.py"] = (
        '"""Makes src/ importable for `python3 -m unittest discover -s tests -t .`."""\n\n'
        "import os\nimport sys\n\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), \"src\"))\n")
    files["tests/test_utils.py"] = (
        '"""Tests for inventory.utils."""\n\nimport unittest\n\n'
        "from inventory.utils import chunked, clamp, normalise_sku\n\n\n"
        "class UtilsTest(unittest.TestCase):\n"
        "    def test_clamp(self):\n        self.assertEqual(clamp(5, 0, 3), 3)\n"
        "        self.assertEqual(clamp(-1, 0, 3), 0)\n\n"
        "    def test_normalise_sku(self):\n"
        '        self.assertEqual(normalise_sku("  ab-1 "), "AB-1")\n\n'
        "    def test_chunked(self):\n"
        "        self.assertEqual(list(chunked(range(5), 2)), [[0, 1], [2, 3], [4]])\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n')
    for name in names:
        n_funcs = rng.randint(25, 60)
        src, coeffs, cls = module_source(rng, name, n_funcs)
        files[f"src/inventory/{name}.py"] = src
        files[f"tests/test_{name}.py"] = test_source(rng, name, coeffs, cls)

    # The large files.
    rows = []
    for i in range(2600):
        rows.append(f'    ("SKU-{i:05d}", "{words(rng, 3)}", {rng.randint(1, 99999) / 100:.2f}, '
                    f"{rng.randint(0, 5000)}),\n")
    files["src/inventory/data/sku_table.py"] = (
        '"""Generated: the SKU master table (sku, description, unit price, stock)."""\n\n'
        "SKUS = [\n" + "".join(rows) + "]\n")
    files["src/inventory/data/__init__.py"] = ""
    vendor = ['"""tabulate_lite: a vendored, trimmed table formatter (MIT)."""\n\n']
    for i in range(340):
        vendor.append(f"def _fmt_{i:03d}(cell, width):\n"
                      f'    """Formats a cell in style {i}: {words(rng, 8)}."""\n'
                      f"    return str(cell).rjust(width + {i % 7})\n\n\n")
    files["src/inventory/vendor/tabulate_lite.py"] = "".join(vendor)
    files["src/inventory/vendor/__init__.py"] = ""
    orders = [{"id": i, "sku": f"SKU-{rng.randint(0, 2599):05d}", "qty": rng.randint(1, 40),
               "customer": f"C{rng.randint(1, 900):04d}", "note": words(rng, 6)}
              for i in range(1400)]
    files["tests/fixtures/orders.json"] = json.dumps(orders, indent=2) + "\n"
    files["scripts/release.sh"] = ("#!/bin/sh\nset -eu\n# TODO(frank): sign the release tarball\n"
                                   "make test\npython3 -m build\n")
    files["scripts/seed_db.py"] = ('"""Seeds a local database from the SKU table."""\n\n'
                                   + todo(rng) + "from inventory.data.sku_table import SKUS\n\n"
                                   "print(len(SKUS))\n")

    os.makedirs(dest)
    total = 0
    for path in sorted(files):
        full = os.path.join(dest, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8", newline="\n") as f:
            f.write(files[path])
        total += len(files[path].encode())
    return len(files), total


def main():
    if len(sys.argv) != 2:
        print("usage: make_sample.py DEST", file=sys.stderr)
        return 2
    dest = sys.argv[1]
    if os.path.exists(dest):
        print(f"make_sample: {dest} already exists", file=sys.stderr)
        return 1
    n, total = generate(dest)
    print(f"make_sample: {n} files, {total} bytes in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
