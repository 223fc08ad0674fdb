#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""docs/wire.md's machine-read tables as a C header (wire_doc.h).

    wire_doc_h.py docs/wire.md OUT.h

Four kinds of table are read; every other table is prose and skipped. A table
is known by its header row:

  | constant | value | ...            KVF_WIRE_<NAME> <value>; with a `text`
                                       column also KVF_WIRE_<PREFIX>_LIST(X),
                                       X(NAME, value, "text") per row, where
                                       PREFIX is the name up to its first '_'
  | field | offset | size | encoding | KVF_WIRE_<S>_<F>_OFF and _SIZE for
                                       `s.f`; an array (size "24 x n") gets
                                       _OFF and _ELEM; KVF_WIRE_<S>_END is the
                                       end of the fixed fields
  | field | bit | bits |               KVF_WIRE_<S>_<F>_SHIFT and _BITS
  | token | role | decode_qpn | ...   KVF_WIRE_AUTH_VECTORS(X), X("token", role,
                                       decode_qpn, prefill_qpn, "decode_nonce",
                                       "prefill_nonce", "decode_gid",
                                       "prefill_gid", "mac"): the proofs' test
                                       vectors, values in hex

It is strict: a row it cannot read, a layout with a gap or an overlap, an
integer encoding whose size is wrong, a name given twice, each stops the build
with the file, the line and what is wrong. Only the standard library.
"""
import re
import sys

SRC = "docs/wire.md"


class DocError(Exception):
    pass


def cells(line):
    """The trimmed cells of a '| a | b |' row."""
    body = line.strip()
    if not (body.startswith("|") and body.endswith("|")):
        return None
    return [c.strip() for c in body[1:-1].split("|")]


def tables(lines):
    """(line number of the header, header cells, [(line number, cells)])."""
    i = 0
    while i < len(lines):
        head = cells(lines[i])
        if head is None or i + 1 >= len(lines) or not re.match(r"^\|[-|: ]+\|$", lines[i + 1].strip()):
            i += 1
            continue
        rows, j = [], i + 2
        while j < len(lines) and cells(lines[j]) is not None:
            rows.append((j + 1, cells(lines[j])))
            j += 1
        yield i + 1, [h.lower() for h in head], rows
        i = j


def ident(cell, where, dotted):
    m = re.fullmatch(r"`([A-Za-z][A-Za-z0-9_]*(\.[a-z][a-z0-9_]*)?)`", cell)
    if not m or bool(m.group(2)) != dotted:
        want = "`struct.field`" if dotted else "`NAME`"
        raise DocError(f"{where}: first cell {cell!r} is not a {want} in backticks")
    return m.group(1)


def integer(cell, where):
    m = re.fullmatch(r"`?(0x[0-9a-fA-F]+|[0-9]+)`?", cell)
    if not m:
        raise DocError(f"{where}: {cell!r} is not a decimal or 0x integer")
    return int(m.group(1), 0)


class Out:
    def __init__(self):
        self.defs = {}   # name -> value text, in order
        self.lists = {}  # prefix -> [(name, value, text)]
        self.vectors = []

    def define(self, name, value, where):
        if name in self.defs:
            raise DocError(f"{where}: {name} is defined twice")
        self.defs[name] = value


def read_constants(out, head, rows, path):
    has_text = "text" in head
    for ln, c in rows:
        where = f"{path}:{ln}"
        if len(c) != len(head):
            raise DocError(f"{where}: {len(c)} cells, the header has {len(head)}")
        name = ident(c[0], where, False)
        value = integer(c[1], where)
        out.define("KVF_WIRE_" + name, f"{value:#x}ull" if value > 0xffffffff else
                   (f"{value:#x}u" if c[1].strip("`").startswith("0x") else f"{value}u"), where)
        if has_text:
            text = c[head.index("text")]
            if not text or '"' in text or "\\" in text:
                raise DocError(f"{where}: text {text!r} is empty or has a quote or backslash")
            out.lists.setdefault(name.split("_")[0], []).append((name, value, text))


INT_SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8}


def read_layout(out, rows, path):
    struct, end = None, 0
    for ln, c in rows:
        where = f"{path}:{ln}"
        if len(c) < 4:
            raise DocError(f"{where}: a layout row needs field, offset, size, encoding")
        s, f = ident(c[0], where, True).split(".")
        if struct not in (None, s):
            raise DocError(f"{where}: field of {s} in the table of {struct}")
        struct = s
        off = integer(c[1], where)
        if off != end:
            raise DocError(f"{where}: {s}.{f} at offset {off}, the fields before end at {end}"
                           " (a gap or an overlap)")
        enc = c[3]
        if enc not in ("bytes", "zero", *INT_SIZES):
            raise DocError(f"{where}: encoding {enc!r} is not u8, u16, u32, u64, bytes or zero")
        base = f"KVF_WIRE_{s.upper()}_{f.upper()}"
        arr = re.fullmatch(r"([0-9]+) *[x×] *([a-z_]+)", c[2])
        out.define(base + "_OFF", f"{off}u", where)
        if arr:
            if enc != "bytes":
                raise DocError(f"{where}: an array's encoding is 'bytes'")
            out.define(base + "_ELEM", f"{arr.group(1)}u", where)
            end = None  # nothing may follow an array
            continue
        if end is None:
            raise DocError(f"{where}: a field after an array")
        size = integer(c[2], where)
        if enc in INT_SIZES and INT_SIZES[enc] != size:
            raise DocError(f"{where}: {enc} is {INT_SIZES[enc]} bytes, the size says {size}")
        out.define(base + "_SIZE", f"{size}u", where)
        end = off + size
    if struct:
        fixed = max(int(v.rstrip("u")) + int(out.defs.get(k[:-4] + "_SIZE", "0u").rstrip("u"))
                    for k, v in out.defs.items()
                    if k.startswith(f"KVF_WIRE_{struct.upper()}_") and k.endswith("_OFF"))
        out.define(f"KVF_WIRE_{struct.upper()}_END", f"{fixed}u", f"{path}:{rows[0][0]}")


def read_bits(out, rows, path):
    used = {}
    for ln, c in rows:
        where = f"{path}:{ln}"
        s, f = ident(c[0], where, True).split(".")
        shift, bits = integer(c[1], where), integer(c[2], where)
        if not 0 < bits <= 64 or shift + bits > 64:
            raise DocError(f"{where}: bits {shift}..{shift + bits - 1} do not fit 64")
        mask = ((1 << bits) - 1) << shift
        if used.get(s, 0) & mask:
            raise DocError(f"{where}: {s}.{f} overlaps another field of {s}")
        used[s] = used.get(s, 0) | mask
        base = f"KVF_WIRE_{s.upper()}_{f.upper()}"
        out.define(base + "_SHIFT", f"{shift}u", where)
        out.define(base + "_BITS", f"{bits}u", where)


VECTOR_HEAD = ["token", "role", "decode_qpn", "prefill_qpn", "decode_nonce", "prefill_nonce",
               "decode_gid", "prefill_gid", "mac"]
VECTOR_BYTES = {"decode_nonce": 16, "prefill_nonce": 16, "decode_gid": 16, "prefill_gid": 16,
                "mac": 32}


def hex_cell(cell, n, what, where):
    h = cell.strip("`")
    if not re.fullmatch(f"[0-9a-f]{{{2 * n}}}", h):
        raise DocError(f"{where}: {what} is not {n} bytes as {2 * n} lowercase hex digits")
    return h


def read_vectors(out, rows, path):
    for ln, c in rows:
        where = f"{path}:{ln}"
        if len(c) != len(VECTOR_HEAD):
            raise DocError(f"{where}: {len(c)} cells, a vector has {len(VECTOR_HEAD)}")
        tok = "" if c[0] == "(empty)" else c[0].strip("`")
        if '"' in tok or "\\" in tok:
            raise DocError(f"{where}: token with a quote or backslash")
        role = integer(c[1], where)
        if role > 1:
            raise DocError(f"{where}: role {role} is neither 0 nor 1")
        qpns = [integer(c[i], where) for i in (2, 3)]
        if any(q >= 1 << 24 for q in qpns):
            raise DocError(f"{where}: a QP number is 24 bits")
        hexes = [hex_cell(c[i], VECTOR_BYTES[VECTOR_HEAD[i]], VECTOR_HEAD[i], where)
                 for i in range(4, 9)]
        out.vectors.append((tok, role, *qpns, *hexes))


def parse(path):
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out = Out()
    for ln, head, rows in tables(lines):
        if head[:2] == ["constant", "value"]:
            read_constants(out, head, rows, path)
        elif head[:4] == ["field", "offset", "size", "encoding"]:
            read_layout(out, rows, path)
        elif head[:3] == ["field", "bit", "bits"]:
            read_bits(out, rows, path)
        elif head == VECTOR_HEAD:
            read_vectors(out, rows, path)
    for need in ("KVF_WIRE_MAGIC", "KVF_WIRE_VERSION", "KVF_WIRE_HDR_END"):
        if need not in out.defs:
            raise DocError(f"{path}: no {need} (a table missing or renamed?)")
    return out


def render(out):
    lines = [
        "/* Generated from " + SRC + " by tools/wire_doc_h.py: do not edit. */",
        "#ifndef KVF_WIRE_DOC_H",
        "#define KVF_WIRE_DOC_H",
        "",
    ]
    lines += [f"#define {k} {v}" for k, v in out.defs.items()]
    for prefix, items in out.lists.items():
        lines += ["", f"#define KVF_WIRE_{prefix}_COUNT {len(items)}u",
                  f"#define KVF_WIRE_{prefix}_LIST(X) \\"]
        lines += [f"\tX({n}, {v}u, \"{t}\") \\" for n, v, t in items]
        lines.append("\t/* end */")
    lines += ["", f"#define KVF_WIRE_AUTH_VECTOR_COUNT {len(out.vectors)}u",
              "#define KVF_WIRE_AUTH_VECTORS(X) \\"]
    lines += [f"\tX(\"{v[0]}\", {v[1]}u, {v[2]:#x}u, {v[3]:#x}u, " +
              ", ".join(f'"{h}"' for h in v[4:]) + ") \\" for v in out.vectors]
    lines += ["\t/* end */", "", "#endif", ""]
    return "\n".join(lines)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: wire_doc_h.py docs/wire.md OUT.h\n")
        return 2
    try:
        text = render(parse(argv[1]))
    except DocError as e:
        sys.stderr.write(f"wire_doc_h.py: {e}\n")
        return 1
    with open(argv[2], "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
