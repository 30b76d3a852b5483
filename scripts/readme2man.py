#!/usr/bin/env python3
"""readme2man.py - the man pages colibri(8) and colibri.conf(5), made from
README.md's reference sections at build time, so there is one text and no
second copy to drift (tests/http/test_man.py checks that what the code
reads and accepts is in them).

    scripts/readme2man.py README.md OUTDIR VERSION

writes OUTDIR/colibri.8 and OUTDIR/colibri.conf.5. The Markdown the README
uses is turned into man(7) requests: ## and ### headings, paragraphs,
fenced and indented code, "- " lists, tables (one tagged paragraph a row),
`code`, **bold** and [links](url). Standard library only."""

import re
import sys

PAGES = {
    "colibri.8": {
        "th": ("COLIBRI", "8"),
        "name": "colibri \\- a small, fast HTTP/1.1 server",
        "sections": ["Command line", "Running under systemd"],
        "see_also": "colibri.conf(5), systemd.service(5), systemd.socket(5), logrotate(8)",
    },
    "colibri.conf.5": {
        "th": ("COLIBRI.CONF", "5"),
        "name": "colibri.conf \\- configuration of the colibri HTTP server",
        "sections": ["Configuration", "Logs", "Behind a load balancer", "Reverse proxy", "PHP (FastCGI)"],
        "see_also": "colibri(8)",
    },
}


def sections(text):
    """{title: body} of the README's "## " sections (with their "### ")."""
    out, title, body, fence = {}, None, [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("## "):
            if title:
                out[title] = body
            title, body = line[3:].strip(), []
        elif title:
            body.append(line)
    if title:
        out[title] = body
    return out


def esc(s):
    """Text safe in a man page line: backslashes, and a leading . or '."""
    s = s.replace("\\", "\\e")
    return "\\&" + s if s[:1] in (".", "'") else s


def inline(s):
    out = []
    for part in re.split(r"(`[^`]*`)", s):
        if len(part) >= 2 and part[0] == "`" and part[-1] == "`":
            out.append("\\fB" + part[1:-1].replace("\\", "\\e").replace("-", "\\-") + "\\fR")
            continue
        part = part.replace("\\", "\\e")
        part = re.sub(r"\*\*(.+?)\*\*", r"\\fB\1\\fR", part)
        part = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1 (\2)", part)
        out.append(part)
    line = "".join(out)
    return "\\&" + line if line[:1] in (".", "'") else line


def cells(row):
    return [c.strip() for c in row.strip().strip("|").split("|")]


def convert(lines):
    out = []
    i, n = 0, len(lines)
    para = []

    def flush():
        if para:
            out.append(".PP")
            out.extend(inline(l) for l in para)
            para.clear()

    while i < n:
        line = lines[i]
        if line.startswith("```"):
            flush()
            i += 1
            out += [".PP", ".RS 4", ".nf"]
            while i < n and not lines[i].startswith("```"):
                out.append(esc(lines[i]))
                i += 1
            out += [".fi", ".RE"]
            i += 1
            continue
        if line.startswith("### "):
            flush()
            out.append(".SS " + inline(line[4:].strip()))
            i += 1
            continue
        if line.startswith("    ") and not para and (not out or out[-1] != ".IP \\(bu 2"):
            flush()
            out += [".PP", ".RS 4", ".nf"]
            while i < n and (lines[i].startswith("    ") or
                             (not lines[i].strip() and i + 1 < n and lines[i + 1].startswith("    "))):
                out.append(esc(lines[i][4:]))
                i += 1
            out += [".fi", ".RE"]
            continue
        if line.startswith("|"):
            flush()
            rows = []
            while i < n and lines[i].startswith("|"):
                if not re.fullmatch(r"\|[\s:|-]+\|?", lines[i].strip()):
                    rows.append(cells(lines[i]))
                i += 1
            head, rows = rows[0], rows[1:]
            out.append(".PP")
            out.append(inline(" / ".join(head)) + ":")
            for r in rows:
                out += [".TP", inline(r[0]), inline(" \\(em ".join(r[1:])) if len(r) > 1 else ""]
            continue
        m = re.match(r"^(\s*)(- |\d+\. )(.*)", line)
        if m and not para:
            flush()
            mark = "\\(bu" if m.group(2) == "- " else m.group(2).strip()
            out.append(".IP %s %d" % (mark, 2 if mark == "\\(bu" else 4))
            out.append(inline(m.group(3)))
            i += 1
            while i < n and lines[i].startswith("  ") and lines[i].strip() and \
                    not re.match(r"^\s*(- |\d+\. )", lines[i]):
                out.append(inline(lines[i].strip()))
                i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        para.append(line.strip())
        i += 1
    flush()
    return out


def page(name, spec, secs, version):
    th, num = spec["th"]
    out = [
        '.\\" Generated from README.md by scripts/readme2man.py: edit the README, not this.',
        '.TH %s %s "" "colibri %s" "colibri"' % (th, num, version),
        ".SH NAME",
        spec["name"],
    ]
    for title in spec["sections"]:
        if title not in secs:
            sys.exit("readme2man: README.md has no section '## %s' (for %s)" % (title, name))
        out.append(".SH " + inline(title.upper()))
        out += convert(secs[title])
    out += [".SH SEE ALSO", spec["see_also"], ""]
    # ASCII: every other character as groff's \[uXXXX]
    return re.sub(r"[^\x00-\x7f]", lambda m: "\\[u%04X]" % ord(m.group(0)), "\n".join(out))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: readme2man.py README.md OUTDIR VERSION")
    readme, outdir, version = sys.argv[1:]
    with open(readme, encoding="utf-8") as f:
        secs = sections(f.read())
    for name, spec in PAGES.items():
        text = page(name, spec, secs, version)
        path = "%s/%s" % (outdir, name)
        try:
            with open(path, encoding="utf-8") as f:
                if f.read() == text:
                    continue
        except OSError:
            pass
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
