"""One generated section of a Markdown file (bench/README.md): the one place that knows the markers.

A section named NAME is the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, each marker
on its own line. The generators (make_table.py, synth_vs_real.py, policy_evidence.sh,
gpu/step_time_readme.py) render a section's body and call replace_section(); nothing else in the
file changes.

    python3 bench/readme_section.py README.md NAME BODY_FILE   # the body from a file
"""
import os
import sys


def markers(name):
    """The begin and end markers of section `name`."""
    return "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name


def replace_section(path, name, body, append_heading=None):
    """Puts `body` between the markers of section `name` in the file at `path` (the markers stay).

    When the file has neither marker: with append_heading None that is an error naming the file
    and the markers; otherwise append_heading (may be "") and the section are appended at the end,
    after one blank line. One marker without the other is an error, and the file is left as it was.
    Written whole to a temporary file that then replaces it, so a reader never sees half a file."""
    begin, end = markers(name)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    block = begin + "\n" + body + ("" if body.endswith("\n") else "\n") + end
    b, e = text.find(begin), text.find(end)
    if b >= 0 and e > b:
        text = text[:b] + block + text[e + len(end):]
    elif b >= 0 or e >= 0:
        raise SystemExit("%s has only one of %s and %s" % (path, begin, end))
    elif append_heading is None:
        raise SystemExit("%s: markers %s / %s not found" % (path, begin, end))
    else:
        text = text.rstrip("\n") + "\n\n" + append_heading + block + "\n"
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        raise SystemExit("usage: readme_section.py README.md NAME BODY_FILE")
    with open(argv[2], encoding="utf-8") as f:
        replace_section(argv[0], argv[1], f.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
