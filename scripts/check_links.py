#!/usr/bin/env python3
"""Checks the relative links of README.md and docs/*.md.

  scripts/check_links.py [REPO_ROOT]

Every link or image whose target is not a URL must name a file or folder
that exists (relative to the page it is on), and a `#anchor` must match a
heading of the page it points to, as GitHub derives anchors from headings:
lowercase, punctuation removed, each space a hyphen, and `-1`, `-2`, ...
added to repeats. Links inside code (fenced blocks, `spans`) are not links.

README.md's repository paths must exist too: a `code span` that is a path
(a '/' in it, or a file name with an extension of FILE_EXTENSIONS) names a
file or folder relative to the repository root, and a bare file name must
be the name of some file in it. `build/...` (what a build makes) and
absolute paths (the machine's, not the repository's) are not checked.

  scripts/check_links.py --self-test

checks the checker on a small repository of its own: a clean one passes,
and a missing path, a missing bare file name, a broken anchor and a broken
anchor of a link whose text spans two lines each fail.

Prints one line per broken link or path and exits 1 if there is any; exits
0 and says how many links and paths it checked otherwise. Standard library only, so that
ctest can run it with /usr/bin/python3 before anything is built (label
`unit`, tests/unit/CMakeLists.txt).
"""

import os
import re
import sys
import tempfile

# [text](target) and ![alt](target); the target ends at whitespace or ')'
# (an optional "title" may follow).
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# The end of a link whose text began on the line before: "](target)" with no
# '[' before it on its line.
CONTINUED_LINK = re.compile(r"^[^\[\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...
# A code span that may be a repository path: path characters only.
PATH_SPAN = re.compile(r"[\w.\-/]+")
FILE_EXTENSIONS = (".h", ".cc", ".py", ".sh", ".proto", ".md", ".textproto", ".yml", ".yaml",
                   ".txt", ".json", ".cmake", ".service")
# Pages whose code spans name repository paths that must exist.
PATH_PAGES = ["README.md"]


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
        prose = strip_code_spans(line)
        match = CONTINUED_LINK.match(prose)
        if match:
            yield number, match.group(1)
        for match in INLINE_LINK.finditer(prose):
            yield number, match.group(1)


def named_paths(text):
    """Yields (line number, path) for each code span of a page that names a
    repository path."""
    for number, line in prose_lines(text):
        for match in CODE_SPAN.finditer(line):
            span = match.group(2).strip()
            if not PATH_SPAN.fullmatch(span) or span.startswith(("/", "build/")):
                continue
            if "/" in span or span.endswith(FILE_EXTENSIONS):
                yield number, span


def file_names(root):
    """The names of the repository's files, build directories and .git left out."""
    names = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" and
                   not os.path.exists(os.path.join(folder, d, "CMakeCache.txt"))]
        names.update(files)
    return names


def check_paths(root):
    checked = 0
    problems = []
    names = None
    for page in PATH_PAGES:
        path = os.path.join(root, page)
        if not os.path.exists(path):
            continue  # check() reports it
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, named in named_paths(text):
            checked += 1
            if "/" in named:
                if not os.path.exists(os.path.join(root, named)):
                    problems.append(f"{page}:{number}: `{named}`: no such path in the repository")
                continue
            if names is None:
                names = file_names(root)
            if named not in names:
                problems.append(f"{page}:{number}: `{named}`: no file of that name in the repository")
    return checked, problems


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


def check_all(root):
    checked, problems = check(root)
    paths, path_problems = check_paths(root)
    return checked, paths, problems + path_problems


def self_test():
    """A clean small repository passes; each of three breakages fails, and
    is reported by the line it is on."""
    readme = ("# R\n\n* [`src/a.h`](src/a.h) and `src/b.cc`, `b.cc` and `src/`\n"
              "* [the page](docs/x.md#a-heading); `build/retryd` and `/etc/r.textproto`\n"
              "* [a link across\n  two lines](#r) and [another](#r)\n")
    breakages = {
        "a missing path": ("`src/b.cc`", "`src/gone.cc`", "README.md:3: `src/gone.cc`"),
        "a missing bare file name": ("`b.cc`", "`c.cc`", "README.md:3: `c.cc`"),
        "a broken anchor": ("#a-heading", "#no-heading", "README.md:4: docs/x.md#no-heading"),
        "a broken anchor of a link across two lines": ("two lines](#r)", "two lines](#q)",
                                                       "README.md:6: #q"),
    }
    failures = []
    for name, breakage in [("clean", None)] + list(breakages.items()):
        with tempfile.TemporaryDirectory() as root:
            for folder in ("src", "docs"):
                os.mkdir(os.path.join(root, folder))
            files = {"src/a.h": "", "src/b.cc": "", "docs/x.md": "# A heading\n",
                     "README.md": readme if not breakage else readme.replace(*breakage[:2])}
            for path, text in files.items():
                with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                    f.write(text)
            links, paths, problems = check_all(root)
            if breakage is None:
                ok = not problems and links == 4 and paths == 4
            else:
                ok = len(problems) == 1 and problems[0].startswith(breakage[2])
            if not ok:
                failures.append(f"{name}: {links} links, {paths} paths, problems {problems}")
    for failure in failures:
        print(f"check_links self-test: {failure}")
    if failures:
        return 1
    print(f"check_links self-test: a clean page passes; {', '.join(breakages)} each fail")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = os.path.abspath(argv[1] if len(argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    checked, paths, problems = check_all(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_links: {len(problems)} broken of {checked} relative links and "
              f"{paths} repository paths")
        return 1
    print(f"check_links: {checked} relative links and {paths} repository paths, all good")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
