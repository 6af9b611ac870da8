#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md.

  scripts/check_links.py [REPO_ROOT]

Every link or image whose target is not a URL must name a file or folder
that exists (relative to the page it is on), and a `#anchor` must match a
heading of the page it points to, as GitHub derives anchors from headings:
lowercase, punctuation removed, each space a hyphen, and `-1`, `-2`, ...
added to repeats. Links inside code (fenced blocks, `spans`) are not links.

Prints one line per broken link and exits 1 if there is any; exits 0 and
says how many links it checked otherwise. Standard library only, so that
ctest can run it with /usr/bin/python3 before anything is built (label
`unit`, tests/unit/CMakeLists.txt).
"""

import os
import re
import sys

# [text](target) and ![alt](target); the target ends at whitespace or ')'
# (an optional "title" may follow).
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def strip_code_spans(line):
    return CODE_SPAN.sub("", line)


def prose_lines(text):
    """Yields (line number, line) for the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)[0] * len(match.group(1))
                continue
            yield number, line
        elif match and match.group(1).startswith(fence):
            fence = None


def anchor_of(heading):
    """GitHub's anchor of a heading's text."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters, digits and '_'
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in prose_lines(f.read()):
                match = HEADING.match(line)
                if not match:
                    continue
                base = anchor_of(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def links(text):
    for number, line in prose_lines(text):
        match = REFERENCE_DEF.match(line)
        if match:
            yield number, match.group(1)
            continue
        for match in INLINE_LINK.finditer(strip_code_spans(line)):
            yield number, match.group(1)


def check(root):
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += sorted(
            os.path.join(docs, name) for name in os.listdir(docs) if name.endswith(".md"))
    problems = []
    checked = 0
    for page in pages:
        if not os.path.exists(page):
            problems.append(f"{os.path.relpath(page, root)}: missing")
            continue
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for number, target in links(text):
            if URL.match(target):
                continue
            checked += 1
            where = f"{os.path.relpath(page, root)}:{number}"
            path_part, _, anchor = target.partition("#")
            dest = page if not path_part else os.path.normpath(
                os.path.join(os.path.dirname(page), path_part))
            if not os.path.exists(dest):
                problems.append(f"{where}: {target}: no such file")
                continue
            if not anchor:
                continue
            if not dest.endswith(".md") or os.path.isdir(dest):
                problems.append(f"{where}: {target}: an anchor into a page that is not markdown")
            elif anchor not in anchors(dest):
                problems.append(
                    f"{where}: {target}: no heading with anchor #{anchor} in "
                    f"{os.path.relpath(dest, root)}")
    return checked, problems


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    checked, problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_links: {len(problems)} broken of {checked} relative links")
        return 1
    print(f"check_links: {checked} relative links, all good")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
