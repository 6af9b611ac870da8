#!/usr/bin/python3
"""Checks the layer rules of server/layers.txt against the sources and the build.

  scripts/layer_rules.py BUILD_DIR [--rules F] [--docs F] [--cmake CMAKE]
  scripts/layer_rules.py --write-docs docs/architecture.md [--rules F]
  scripts/layer_rules.py --self-test [--cmake CMAKE] [--generator G]

server/layers.txt names each component of server/ and client/ (its folders
and files, its CMake targets), the components it may include and the
families of includes (librdkafka, grpc, protobuf) it must never include; its
header says the format. The check fails on, each printed as one line:

  FILE:LINE: COMPONENT includes HEADER of OTHER, which it may not use
  FILE:LINE: COMPONENT includes INCLUDE (FAMILY), which it must never include
  FILE:1: belongs to no component of RULES
  TARGET (COMPONENT) links TARGET2 (OTHER), outside what COMPONENT may use
  TARGET: declared in FOLDER but owned by no component of RULES
  RULES: exception FILE: INCLUDE no longer happens: remove it

An include of a family a component must never include passes only when the
rules list it as an exception. The link rule reads CMake's File API
codemodel (as check_layers.py does): the targets a target links, directly
or not, must belong to components it may use, or to components those may
use, and so on; a target of no component (generated protos, tests/ and
third-party targets) is not judged there. With --docs it also fails when
the generated table between the markers of that file differs from what the
rules make; --write-docs rewrites it.

--self-test configures a small project of its own and breaks a copy of it
or of its rules once per rule (an include against the direction, a family
included where it must never be, a folder of no component, a target of no
component, a link outside the rules, a stale exception, an out-of-date docs
table); it fails unless each is reported and the unbroken copy passes.
Standard library only, for /usr/bin/python3 (ctest: `layer_rules` and
`layer_rules_self_test`, label `unit`).
"""

import argparse
import fnmatch
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402 (the codemodel reader and the fixture project)

INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')
OWN = ("server/", "client/")
SOURCES = (".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".c")
BEGIN = "<!-- layers: begin (scripts/layer_rules.py --write-docs, from server/layers.txt) -->"
END = "<!-- layers: end -->"


class BadRules(Exception):
    """The rules file does not parse or names what is not there."""


class Component:
    def __init__(self, name):
        self.name = name
        self.paths, self.targets, self.may, self.never = [], [], [], []
        self.note = ""


class Rules:
    def __init__(self, text, name="server/layers.txt"):
        self.name = name
        self.families = {}  # name -> [glob patterns]
        self.components = {}  # name -> Component, in the file's order
        self.exceptions = []  # (file, include, line number)
        current = None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
            if not line.strip():
                continue
            where = f"{name}:{number}"
            word, _, rest = line.strip().partition(" ")
            if not raw[0].isspace():
                current = None
                if word == "family":
                    family, _, patterns = rest.partition(":")
                    self.families[family.strip()] = patterns.split()
                elif word == "component":
                    if rest.strip() in self.components:
                        raise BadRules(f"{where}: component {rest.strip()} named twice")
                    current = self.components[rest.strip()] = Component(rest.strip())
                elif word == "exception":
                    path, _, included = rest.partition(":")
                    self.exceptions.append((path.strip(), included.strip(), number))
                else:
                    raise BadRules(f"{where}: expected family, component or exception")
                continue
            key, colon, value = line.strip().partition(":")
            if current is None or not colon:
                raise BadRules(f"{where}: a `key: value` line outside a component")
            if key == "note":
                current.note = value.strip()
            elif key in ("paths", "targets", "may", "never"):
                getattr(current, key).extend(value.split())
            else:
                raise BadRules(f"{where}: unknown key {key}")
        for component in self.components.values():
            for other in component.may:
                if other not in self.components or other == component.name:
                    raise BadRules(f"{name}: {component.name} may use {other}, "
                                   "which is no other component")
            for family in component.never:
                if family not in self.families:
                    raise BadRules(f"{name}: {component.name} never includes {family}, "
                                   "which is no family")
        # A path (a file, or a folder's own files) -> its component.
        self.by_path = {}
        for component in self.components.values():
            for path in component.paths:
                if path in self.by_path:
                    raise BadRules(f"{name}: {path} is in {self.by_path[path]} and "
                                   f"{component.name}")
                self.by_path[path] = component.name
        self.by_target = {t: c.name for c in self.components.values() for t in c.targets}

    def component_of(self, path):
        """The component of a repo-relative file, or None."""
        return self.by_path.get(path) or self.by_path.get(os.path.dirname(path))

    def usable(self, name):
        """The components NAME may use, directly or through those."""
        seen, stack = set(), [name]
        while stack:
            for other in self.components[stack.pop()].may:
                if other not in seen:
                    seen.add(other)
                    stack.append(other)
        return seen

    def families_of(self, included):
        return [family for family, patterns in self.families.items()
                if any(fnmatch.fnmatchcase(included, p) for p in patterns)]


def sources(root):
    """Repo-relative paths of every source file under server/ and client/."""
    for top in OWN:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(folder, name), root)


def check_sources(root, rules, out):
    """Returns (problems, include lines judged)."""
    problems = judged = 0
    used_exceptions = set()
    allowed = {(path, included) for path, included, _ in rules.exceptions}
    for path in sources(root):
        name = rules.component_of(path)
        if name is None:
            print(f"{path}:1: belongs to no component of {rules.name} (add one for its "
                  "folder)", file=out)
            problems += 1
            continue
        component = rules.components[name]
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                included = match.group(1)
                judged += 1
                if included.startswith(OWN) and os.path.isfile(os.path.join(root, included)):
                    other = rules.component_of(included)
                    if other and other != name and other not in component.may:
                        print(f"{path}:{number}: {name} includes {included} of {other}, "
                              "which it may not use", file=out)
                        problems += 1
                for family in rules.families_of(included):
                    if family not in component.never:
                        continue
                    if (path, included) in allowed:
                        used_exceptions.add((path, included))
                        continue
                    print(f"{path}:{number}: {name} includes {included} ({family}), which "
                          "it must never include", file=out)
                    problems += 1
    for path, included, number in rules.exceptions:
        if (path, included) not in used_exceptions:
            print(f"{rules.name}:{number}: exception {path}: {included} no longer happens "
                  "(or breaks no rule): remove it", file=out)
            problems += 1
    return problems, judged


def check_links(rules, targets, out):
    """Returns (problems, link edges judged)."""
    problems = judged = 0
    by_id = targets
    for target in sorted(targets.values(), key=lambda t: t["name"]):
        if target["type"] == "UTILITY":
            continue
        folder = check_layers.folder_of(target["paths"]["source"])
        name = rules.by_target.get(target["name"])
        if name is None:
            if folder.split(os.sep)[0] in ("server", "client"):
                print(f"{target['name']}: declared in {folder}/ but owned by no component "
                      f"of {rules.name}", file=out)
                problems += 1
            continue
        usable = rules.usable(name) | {name}
        for dependency in target.get("dependencies", []):
            other_target = by_id.get(dependency["id"])
            if not other_target or other_target["type"] == "UTILITY":
                continue
            other = rules.by_target.get(other_target["name"])
            if other is None:
                continue
            judged += 1
            if other not in usable:
                print(f"{target['name']} ({name}) links {other_target['name']} ({other}), "
                      f"outside what {name} may use", file=out)
                problems += 1
    for target_name in sorted(rules.by_target):
        if not any(t["name"] == target_name for t in targets.values()):
            print(f"{rules.name}: {rules.by_target[target_name]} owns target {target_name}, "
                  "which the build does not declare", file=out)
            problems += 1
    return problems, judged


def check_paths(root, rules, out):
    problems = 0
    for path, name in rules.by_path.items():
        if not os.path.exists(os.path.join(root, path)):
            print(f"{rules.name}: {name} names {path}, which does not exist", file=out)
            problems += 1
    return problems


def table(rules):
    """The markdown table of the rules, with its markers."""
    def code(items, suffix=""):
        return ", ".join(f"`{i}{suffix}`" for i in items)

    lines = [BEGIN, "", "| component | files | targets | may include | never | notes |",
             "| --- | --- | --- | --- | --- | --- |"]
    for c in rules.components.values():
        paths = ", ".join(f"`{p}/`" if not os.path.splitext(p)[1] else f"`{p}`"
                          for p in c.paths)
        lines.append(f"| {c.name} | {paths} | {code(c.targets) or '—'} | "
                     f"{code(c.may) or '—'} | {', '.join(c.never) or '—'} | {c.note} |")
    lines.append("")
    families = "; ".join(f"{f}: {code(p)}" for f, p in rules.families.items())
    lines.append(f"The families: {families}.")
    if rules.exceptions:
        known = "; ".join(f"`{p}` includes `{i}`" for p, i, _ in rules.exceptions)
        lines += ["", f"Known exceptions, to remove: {known}."]
    lines += ["", END]
    return "\n".join(lines)


def with_table(doc_text, rules):
    """DOC_TEXT with the table between its markers replaced, or None without markers."""
    start, end = doc_text.find(BEGIN), doc_text.find(END)
    if start < 0 or end < start:
        return None
    return doc_text[:start] + table(rules) + doc_text[end + len(END):]


def check_docs(doc_path, rules, out, shown=None):
    shown = shown or doc_path
    with open(doc_path) as f:
        text = f.read()
    wanted = with_table(text, rules)
    if wanted is None:
        print(f"{shown}: no layers table markers ({BEGIN} ... {END})", file=out)
        return 1
    if wanted != text:
        print(f"{shown}: the layers table is out of date with {rules.name}: run "
              f"/usr/bin/python3 scripts/layer_rules.py --write-docs {shown}", file=out)
        return 1
    return 0


def check(root, rules, targets, doc_path=None, out=sys.stdout):
    """Prints each violation; returns the number of problems."""
    problems, includes = check_sources(root, rules, out)
    link_problems, links = check_links(rules, targets, out)
    problems += link_problems + check_paths(root, rules, out)
    if doc_path:
        problems += check_docs(doc_path, rules, out, os.path.relpath(doc_path, root))
    if includes == 0 or links == 0:
        print(f"layer_rules: {includes} include lines and {links} links judged: not the "
              "tree it should be", file=out)
        problems += 1
    if problems == 0:
        print(f"layer_rules: {len(rules.components)} components, {includes} include lines "
              f"and {links} links within the rules", file=out)
    return problems


# ---- self-test ----------------------------------------------------------------

FIXTURE_RULES = """family grpc: grpcpp/*
family protobuf: *.pb.h

component model
  paths: server/model
  targets: model
  may:
  never: grpc protobuf
component low
  paths: server/low server/low/api
  targets: low
  may: model
  never: grpc
component other
  paths: server/other
  targets: other
  may:
  never: grpc protobuf
component high
  paths: server/high
  targets: high app_helper
  may: low other
  never: grpc
  note: the top
component main
  paths: server/main.cc
  targets: app
  may: high other
  never:
# other.h returns a generated message for now
exception server/other/other.h: other.pb.h
"""


def fixture_files():
    files = dict(check_layers.FIXTURE)
    files["server/high/CMakeLists.txt"] = files["server/high/CMakeLists.txt"].replace(
        "PUBLIC low)", "PUBLIC low other)")
    files["server/other/other.h"] = '#include "other.pb.h"\n' + files["server/other/other.h"]
    files["server/layers.txt"] = FIXTURE_RULES
    files["docs/architecture.md"] = "# Fixture\n\n" + BEGIN + "\n" + END + "\n\nAfter.\n"
    return files


def run_case(cmake, generator, files):
    """Returns (problems, printed lines) of the check of a project of FILES."""
    work, build = check_layers.configure_fixture(cmake, generator, files)
    try:
        root, targets = check_layers.load_codemodel(build, None)
        rules = Rules(files["server/layers.txt"])
        doc = os.path.join(root, "docs", "architecture.md")
        out = io.StringIO()
        problems = check(root, rules, targets, doc, out)
        return problems, out.getvalue().splitlines()
    finally:
        shutil.rmtree(work)


def self_test(cmake, generator):
    clean = fixture_files()
    clean["docs/architecture.md"] = with_table(clean["docs/architecture.md"],
                                               Rules(FIXTURE_RULES))
    cases = []  # (what, files, expected line)

    def broken(what, expected, **changes):
        files = dict(clean)
        for path, text in changes.items():
            files[path.replace("__", "/").replace("_DOT_", ".")] = text
        cases.append((what, files, expected))

    low_cc = clean["server/low/low.cc"]
    exception_line = FIXTURE_RULES.splitlines().index(
        "exception server/other/other.h: other.pb.h") + 1
    broken("an include against the direction (low includes high)",
           "server/low/low.cc:2: low includes server/high/high.h of high, which it may not use",
           server__low__low_DOT_cc=low_cc.replace(
               '#include "server/low/low.h"\n',
               '#include "server/low/low.h"\n#include "server/high/high.h"\n'))
    broken("a family a component must never include",
           "server/low/low.cc:2: low includes grpcpp/grpcpp.h (grpc), which it must never "
           "include",
           server__low__low_DOT_cc=low_cc.replace(
               '#include "server/low/low.h"\n',
               '#include "server/low/low.h"\n#include <grpcpp/grpcpp.h>\n'))
    broken("a folder of no component (a new wing)",
           "server/wing/wing.h:1: belongs to no component of server/layers.txt (add one for "
           "its folder)",
           server__wing__wing_DOT_h="int Wing();\n")
    broken("a component dropped from the rules",
           "server/other/other.cc:1: belongs to no component of server/layers.txt (add one "
           "for its folder)",
           server__layers_DOT_txt=FIXTURE_RULES.replace("  paths: server/other\n", "  paths:\n"))
    broken("a target of no component",
           "extra: declared in server/other/ but owned by no component of server/layers.txt",
           server__other__CMakeLists_DOT_txt=clean["server/other/CMakeLists.txt"]
           + "add_library(extra STATIC other.cc)\n")
    broken("a link outside the rules (low links other, includes nothing of it)",
           "low (low) links other (other), outside what low may use",
           server__low__CMakeLists_DOT_txt=clean["server/low/CMakeLists.txt"].replace(
               "PUBLIC model)", "PUBLIC model other)"))
    broken("an exception that no longer happens",
           f"server/layers.txt:{exception_line}: exception server/other/other.h: other.pb.h "
           "no longer happens (or breaks no rule): remove it",
           server__other__other_DOT_h=check_layers.FIXTURE["server/other/other.h"])
    broken("an exception missing from the rules",
           "server/other/other.h:1: other includes other.pb.h (protobuf), which it must never "
           "include",
           server__layers_DOT_txt=FIXTURE_RULES.replace(
               "exception server/other/other.h: other.pb.h\n", ""))
    broken("a docs table out of date",
           "docs/architecture.md: the layers table is out of date with server/layers.txt: run "
           "/usr/bin/python3 scripts/layer_rules.py --write-docs docs/architecture.md",
           docs__architecture_DOT_md=clean["docs/architecture.md"].replace("the top", "a top"))

    failures = []
    problems, lines = run_case(cmake, generator, clean)
    if problems != 0:
        failures.append("the unbroken fixture: expected no violation, got\n  "
                        + "\n  ".join(lines))
    for what, files, expected in cases:
        problems, lines = run_case(cmake, generator, files)
        if problems == 0 or expected not in lines:
            failures.append(f"{what}: expected\n  {expected}\ngot\n  " + "\n  ".join(lines))
        else:
            print(f"layer_rules --self-test: {what}: {expected}")
    for failure in failures:
        print(f"layer_rules --self-test: FAILED: {failure}")
    if not failures:
        print(f"layer_rules --self-test: each of the {len(cases)} broken copies is reported; "
              "the unbroken one passes")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", help="a configured build directory")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--rules", default=os.path.join(root, "server", "layers.txt"))
    parser.add_argument("--docs", help="the doc whose layers table must be up to date")
    parser.add_argument("--write-docs", metavar="DOC", help="rewrite DOC's layers table")
    parser.add_argument("--cmake", default=shutil.which("cmake"))
    parser.add_argument("--generator", help="the CMake generator of the self-test's project")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        if not args.cmake:
            parser.error("--self-test needs cmake (--cmake)")
        return self_test(args.cmake, args.generator)
    try:
        with open(args.rules) as f:
            rules = Rules(f.read(), os.path.relpath(args.rules, root))
    except (BadRules, OSError) as error:
        print(f"layer_rules: {error}")
        return 1
    if args.write_docs:
        with open(args.write_docs) as f:
            text = with_table(f.read(), rules)
        if text is None:
            print(f"layer_rules: {args.write_docs} has no markers {BEGIN} ... {END}")
            return 1
        with open(args.write_docs, "w") as f:
            f.write(text)
        return 0
    if not args.build:
        parser.error("BUILD_DIR is required (or --write-docs, --self-test)")
    try:
        source_root, targets = check_layers.load_codemodel(args.build, args.cmake)
    except (check_layers.Unreadable, OSError, ValueError, KeyError) as error:
        print(f"layer_rules: {error}")
        return 1
    return 1 if check(source_root, rules, targets, args.docs) else 0


if __name__ == "__main__":
    sys.exit(main())
