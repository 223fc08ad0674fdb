#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The public names abidiff calls harmless (tests/unit/abi_check.sh): a
struct field renamed keeps the binary layout, but a program that names it no
longer compiles. Every kvf_ struct field (name, offset) and every kvf_ enum
constant (name, value) of the recorded ABI must be in the built one; an
enum's _NUM count may only grow (a constant appended before it).

    abi_fields.py RECORDED.abi CURRENT.abi
"""
import sys
import xml.etree.ElementTree as ET


def public_names(path):
    """{(kind, type, name): where or value} of the kvf_ structs and enums."""
    names = {}
    for c in ET.parse(path).iter("class-decl"):
        t = c.get("name", "")
        if not t.startswith("kvf_") or c.get("is-declaration-only") == "yes":
            continue
        for m in c.iter("data-member"):
            v = m.find("var-decl")
            names[("field", t, v.get("name"))] = m.get("layout-offset-in-bits")
    for e in ET.parse(path).iter("enum-decl"):
        t = e.get("name", "")
        if t.startswith("kvf_"):
            for k in e.iter("enumerator"):
                names[("constant", t, k.get("name"))] = k.get("value")
    return names


def main():
    old, new = public_names(sys.argv[1]), public_names(sys.argv[2])
    if not old:
        print(f"FAIL: no kvf_ struct or enum in {sys.argv[1]}")
        return 1
    bad = []
    for (kind, t, name), where in sorted(old.items()):
        now = new.get((kind, t, name))
        if now is None:
            bad.append(f"{kind} {t}.{name} is gone (removed or renamed)")
        elif kind == "constant" and name.endswith("_NUM") and int(now) > int(where):
            # An enum's count grows with a constant appended before it: the
            # enums are made to grow (include/kvferry/stats.h keeps room for
            # them in kvf_stats' arrays, checked at build time in src/engine/names.c).
            print(f"grown: {t}.{name} {where} -> {now}")
        elif now != where:
            what = "offset (bits)" if kind == "field" else "value"
            bad.append(f"{kind} {t}.{name}: {what} {where} -> {now}")
    for b in bad:
        print(f"FAIL: {b}")
    print(f"public names: {len(old)} recorded, {len(new)} now, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
