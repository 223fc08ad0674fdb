#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Man pages from the texts that already document each thing, so there is
one source for each:

  man_pages.py conf docs/config.md VERSION OUT        kvferry.conf(5): every key of
      docs/config.md's tables (the ones tests/unit/config/test_config_keys.c checks
      against the code), with its side, phase, default and range
  man_pages.py tool NAME SOURCE VERSION OUT           a tool's page (section 1) from
      the comment that opens its source: the C header comment of
      tools/bench_main.c and tools/gpu_check.c, the docstring of
      tools/kvferry-stat

Run by meson (man/meson.build) at build time; the pages are installed with
the tools (and go into the kvferry-tools Debian package).
"""
import re
import sys

TOOLS = {
    "kvferry-bench": "move KV blocks between two kvferry engines over RDMA and time it",
    "kvferry-stat": "show what a running kvferry engine's rooms are doing",
    "kvferry-gpu-check": "tell which path CUDA memory takes to the NIC, and move a room from it",
}


def esc(text):
    """Plain text as troff: backslashes, and no line may start with . or '."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def inline(md):
    """docs/config.md's inline markdown as troff: `code` and **bold** in bold,
    [text](link) as its text."""
    md = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", md)
    parts = re.split(r"(`[^`]*`|\*\*[^*]+\*\*)", md)
    out = []
    for p in parts:
        if p.startswith("`") and p.endswith("`") and len(p) >= 2:
            out.append("\\fB" + esc(p[1:-1]) + "\\fR")
        elif p.startswith("**") and p.endswith("**"):
            out.append("\\fB" + esc(p[2:-2]) + "\\fR")
        else:
            out.append(esc(p.replace("*", "")))
    return "".join(out)


def header(name, section, version, summary):
    return [f'.TH {name.upper()} {section} "" "kvferry {version}" "kvferry"',
            ".SH NAME", f"{esc(name)} \\- {esc(summary)}"]


def bullets(lines, after):
    """The first "- " list after the line `after` (continuation lines joined)."""
    items, seen = [], False
    for line in lines:
        if not seen:
            seen = line.strip() == after
        elif line.startswith("- "):
            items.append(line[2:].strip())
        elif line.startswith("  ") and items:
            items[-1] += " " + line.strip()
        elif line.strip() and items:
            break
    return items


def conf_page(md_path, version):
    lines = open(md_path, encoding="utf-8").read().splitlines()
    out = header("kvferry.conf", 5, version, "kvferry engine configuration file")
    out += [".SH SYNOPSIS", "/etc/kvferry/kvferry.conf (any path, given to \\fBkvf_engine_open\\fR(), "
            "kvferry\\-bench \\-\\-prefill\\-config and \\-\\-decode\\-config, or kvferry.Engine)",
            ".SH DESCRIPTION",
            "One libconfig file configures one engine; overrides given in code "
            "(\\fBkvf_engine_open_with\\fR()) are applied on top. Each key below is listed "
            "with the \\fIside\\fR that reads it (prefill = the sender, decode = the receiver, "
            "both), the \\fIphase\\fR (room state or stage) whose behaviour it changes, its "
            "default and its range (inclusive). This page is generated from the tables of "
            "docs/config.md."]
    # The rules before the tables: the "- " list after "Rules:".
    rules = bullets(lines, "Rules:")
    if rules:
        out.append(".SS Rules")
        for r in rules:
            out += [".IP \\(bu 2", inline(r)]
    group, prev_group, nkeys = None, None, 0
    for line in lines:
        m = re.match(r"^## (\w+)\s*$", line)
        if m:
            group = m.group(1)
            continue
        # cells split at the pipes that are not escaped (\| is a | in a cell)
        cells = ([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
                 if line.startswith("| `") else None)
        if not cells:
            continue
        if len(cells) != 6:
            sys.exit(f"{md_path}: a key row without the 6 columns: {line}")
        key, side, phase, default, rng, meaning = cells
        if group and not key.startswith(f"`{group}."):
            continue
        g = key.strip("`").split(".")[0]
        if g != prev_group:
            out += [".SH " + esc(g.upper()) + " GROUP"]
        prev_group = g
        out += [".TP", inline(key),
                f"side: {inline(side)}; phase: {inline(phase)}; default: {inline(default)}; "
                f"range: {inline(rng)}.",
                ".br", inline(meaning)]
        nkeys += 1
    cross = bullets(lines, "## Checks across keys")
    if cross:
        out.append(".SH CHECKS ACROSS KEYS")
        for r in cross:
            out += [".IP \\(bu 2", inline(r)]
    if nkeys < 10:
        sys.exit(f"{md_path}: only {nkeys} keys found in its tables")
    out += [".SH FILES", "/usr/share/kvferry/kvferry.conf: an annotated example that sets every "
            "key to its default.",
            ".SH SEE ALSO", "\\fBkvferry\\-bench\\fR(1), \\fBkvferry\\-stat\\fR(1), "
            "docs/config.md (cross\\-key checks, overrides, what does not affect what)"]
    return out


def source_comment(path):
    """The comment that opens a source: a C /* */ block or a Python docstring,
    as its lines (the comment's own leading ' * ' removed)."""
    text = open(path, encoding="utf-8").read()
    m = re.search(r'"""(.*?)"""', text, re.S) if not path.endswith(".c") else None
    if m:
        return m.group(1).strip("\n").splitlines()
    blocks = re.findall(r"/\*(.*?)\*/", text, re.S)
    block = next(b for b in blocks if "SPDX" not in b)
    return [re.sub(r"^ ?\* ?", "", l) for l in block.strip("\n").splitlines()]


def tool_page(name, src, version):
    body = source_comment(src)
    out = header(name, 1, version, TOOLS[name])
    usage = [l.strip() for l in body if re.match(r"\s*(kvferry-\w+|gpu_check) \[", l)]
    if usage:
        out += [".SH SYNOPSIS", ".nf"] + [esc(u.replace("gpu_check", name)) for u in usage] + [".fi"]
    out += [".SH DESCRIPTION",
            "From the tool's source (" + esc(src.split("/")[-1]) + "), as written there:",
            ".PP", ".nf"]
    out += [esc(l) for l in body]
    out += [".fi", ".SH SEE ALSO", "\\fBkvferry.conf\\fR(5)"]
    return out


def main(argv):
    if len(argv) == 5 and argv[1] == "conf":
        page = conf_page(argv[2], argv[3])
        out = argv[4]
    elif len(argv) == 6 and argv[1] == "tool" and argv[2] in TOOLS:
        page = tool_page(argv[2], argv[3], argv[4])
        out = argv[5]
    else:
        sys.exit(__doc__)
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main(sys.argv)
