# SPDX-License-Identifier: Apache-2.0
"""docs/api.md names every function the library exports, once, under a
group, and nothing else; the exports are the header's KVF_API functions and
the version script's (issue 25)."""
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def header_api():
    inc = os.path.join(ROOT, "include", "kvferry")
    text = "".join(read(os.path.join("include", "kvferry", h)) for h in sorted(os.listdir(inc)))
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"KVF_API\b[^;{]*?\b(kvf_[a-z0-9_]+)\s*\(", text))


def map_api():
    return set(re.findall(r"^\s*(kvf_[a-z0-9_]+);", read("src/libkvferry.map"), re.M))


def doc_rows():
    """(group, function) of each table row of docs/api.md."""
    rows, group = [], None
    for line in read("docs/api.md").splitlines():
        if line.startswith("## "):
            group = line[3:]
        m = re.match(r"\| `(kvf_[a-z0-9_]+)` \|", line)
        if m:
            rows.append((group, m.group(1)))
    return rows


def test_header_and_version_script_agree():
    assert header_api() and header_api() == map_api()


def test_every_export_documented_once_under_a_group():
    rows = doc_rows()
    names = [f for _, f in rows]
    assert all(g for g, _ in rows), "a row before the first group"
    dup = {f for f in names if names.count(f) > 1}
    assert not dup, f"listed twice: {sorted(dup)}"
    missing = map_api() - set(names)
    assert not missing, f"exported, not in docs/api.md: {sorted(missing)}"
    extra = set(names) - map_api()
    assert not extra, f"in docs/api.md, not exported: {sorted(extra)}"
