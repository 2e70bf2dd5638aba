#!/usr/bin/env python3
"""Writes a gzip-compressed man page from a program's --help text.

usage: man_from_help.py OUT.gz SECTION VERSION -- COMMAND... --help
       man_from_help.py --gzip IN OUT.gz      (reproducible gzip -9n of any file)

meshagent's and meshctl's --help texts are already laid out like man pages:
section headings in capitals at column 0 (NAME, SYNOPSIS, DESCRIPTION, ...),
text indented by 4, a term at 4 with its description at 8. This turns that
layout into roff (.TH/.SH/.PP/.TP, preformatted blocks for SYNOPSIS, EXAMPLES
and anything indented deeper), so the man page can never drift from --help.
The output is reproducible: gzip with no name and mtime 0.
"""
import gzip
import re
import subprocess
import sys

PREFORMATTED_SECTIONS = {"SYNOPSIS", "EXAMPLES", "EXAMPLE"}


def esc(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def blocks(lines):
    block = []
    for line in lines:
        if line.strip():
            block.append(line.rstrip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def preformatted(lines, base):
    out = [".PP", ".nf", ".RS 4" if base else ".RS 0"]
    out += [esc(line[min(base, indent_of(line)):]) for line in lines]
    out += [".RE", ".fi"]
    return out


def is_term(line):
    """A term line: short, not a sentence running into an example."""
    text = line.strip()
    return len(text) <= 48 and not text.endswith((":", "."))


def render_block(block, section):
    ind = [indent_of(line) for line in block]
    if section in PREFORMATTED_SECTIONS:
        return preformatted(block, 4)
    if all(i == 4 for i in ind):
        return [".PP"] + [esc(line.strip()) for line in block]
    out = []
    # Terms at 4 with bodies at 8 (several terms may share one block).
    i = 0
    while i < len(block):
        if ind[i] == 4 and i + 1 < len(block) and ind[i + 1] == 4:
            # Running text at 4; its last line may be the next term.
            j = i
            while j + 1 < len(block) and ind[j + 1] == 4:
                j += 1
            last_is_term = j + 1 < len(block) and is_term(block[j])
            end = j if last_is_term else j + 1
            out += [".PP"] + [esc(line.strip()) for line in block[i:end]]
            i = end
            continue
        if ind[i] == 4 and not is_term(block[i]) and i > 0:
            out += [".PP", esc(block[i].strip())]
            i += 1
            continue
        if ind[i] == 4:
            j = i + 1
            while j < len(block) and ind[j] > 4:
                j += 1
            body = block[i + 1:j]
            if not body:
                out += [".PP", esc(block[i].strip())]
            else:
                out += [".TP", "\\fB" + esc(block[i].strip()) + "\\fR"]
                body_ind = [indent_of(line) for line in body]
                if all(b == 8 for b in body_ind):
                    out += [esc(line.strip()) for line in body]
                else:
                    # A description with deeper, laid-out lines (examples).
                    text = []
                    for line, b in zip(body, body_ind):
                        if b == 8 and not text:
                            out.append(esc(line.strip()))
                        else:
                            text.append(line)
                    if text:
                        out += [".nf"] + [esc(line[8:]) for line in text] + [".fi"]
            i = j
        else:
            j = i + 1
            while j < len(block) and ind[j] != 4:
                j += 1
            out += [".RS 4", ".nf"] + [esc(line[8:] if indent_of(line) >= 8 else line.strip()) for line in block[i:j]]
            out += [".fi", ".RE"]
            i = j
    return out


def to_roff(text, name, section, version):
    lines = text.splitlines()
    out = [f'.TH {name.upper()} {section} "" "{name} {version}" "meshagent"']
    current = None
    body = []

    def flush():
        if current is None:
            return
        out.append(f".SH {current}")
        if current == "NAME":
            words = " ".join(line.strip() for line in body if line.strip())
            prog, _, summary = words.partition(" - ")
            out.append(f"{esc(prog)} \\- {esc(summary)}")
            return
        for block in blocks(body):
            out.extend(render_block(block, current))

    for line in lines:
        if line and not line.startswith(" ") and re.fullmatch(r"[A-Z][A-Z ]*", line.strip()):
            flush()
            current = line.strip()
            body = []
        else:
            body.append(line)
    flush()
    return "\n".join(out) + "\n"


def write_gzip(out, data):
    with open(out, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as z:
            z.write(data)


def main(argv):
    if len(argv) == 4 and argv[1] == "--gzip":
        with open(argv[2], "rb") as f:
            write_gzip(argv[3], f.read())
        return
    if len(argv) < 6 or "--" not in argv:
        sys.exit(__doc__)
    out, section, version = argv[1:4]
    command = argv[argv.index("--") + 1:]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    name = re.search(r"([a-z0-9_-]+)\.[0-9]\.gz$", out).group(1)
    roff = to_roff(text, name, section, version)
    write_gzip(out, roff.encode())


if __name__ == "__main__":
    main(sys.argv)
