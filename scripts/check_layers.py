#!/usr/bin/python3
"""Checks that every target includes only the headers of what it links.

  scripts/check_layers.py BUILD_DIR [--cmake CMAKE]    # check a configured build
  scripts/check_layers.py --self-test [--cmake CMAKE] [--generator G]  # check the checker

Reads the targets of a build from CMake's File API (the codemodel that
tests/unit/CMakeLists.txt requests at configure time): each target's
sources, the folder whose CMakeLists.txt declares it, and the targets it
depends on. Then, for every `#include "server/..."` or `#include
"client/..."` line of a target's sources and of its headers, it finds the
target that owns the included header and fails unless that is the includer
itself or a library in the includer's link closure. Each violation is
printed as

  FILE:LINE: includes HEADER owned by OWNER, not linked by TARGET

A header belongs to:
  1. the target that lists it among its sources (header-only libraries such
     as retryd_model list their headers);
  2. else the target that compiles the .cc of the same name beside it
     (server/kafka/producer.h: retryd_kafka);
  3. else, of the targets declared in the nearest CMakeLists.txt at or above
     its folder, the one that compiles a .cc in its folder, or in the nearest
     folder above it that has one (server/engine/stats/latest_measurement.h and
     server/engine/api/engine.h: retryd_engine); or the only one declared
     there.
A header that belongs to no target is an error too. The headers of a
header-only (INTERFACE) library are judged in every target that links it,
where they are compiled: the codemodel does not list an interface library's
own links.

The closure follows the `dependencies` of the codemodel through libraries
only: an executable one target waits for (add_dependencies) is not linked.

So that an empty or unreadable codemodel cannot pass, the check fails when
it finds fewer than --min-targets targets or no include line to judge.
--self-test configures small projects of its own with CMake and fails
unless a missing link (in a library's file, and in a header-only library's
header), a header of no target and an empty codemodel are each reported as
they should be, and the same tree with the link added passes.

CMake reads File API queries before it configures, so the configure step
that first writes the query (a fresh build directory) cannot answer it;
when the reply is missing, this script runs the configure step once more
(`cmake BUILD_DIR`). Standard library only, for /usr/bin/python3 (ctest:
`build_layers` and `build_layers_self_test`, label `unit`).
"""

import argparse
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"((?:server|client)/[^"]+)"')
COMPILED = (".cc", ".cpp", ".cxx", ".c")
HEADERS = (".h", ".hh", ".hpp")
LINKABLE = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY",
            "INTERFACE_LIBRARY"}
# The folders whose headers other targets include by their path from the root.
HEADER_ROOTS = ("server", "client")


class Unreadable(Exception):
    """The build has no codemodel this script can read."""


def reply_dir(build):
    return os.path.join(build, ".cmake", "api", "v1", "reply")


def latest_index(build):
    indexes = sorted(glob.glob(os.path.join(reply_dir(build), "index-*.json")))
    return indexes[-1] if indexes else None


def load_codemodel(build, cmake):
    """Returns (source root, {target id: target object})."""
    index_path = latest_index(build)
    if index_path is None and cmake:
        print(f"check_layers: no codemodel in {build} yet (the configure step that "
              "writes the query cannot answer it): running the configure step again")
        subprocess.run([cmake, build], check=True, stdout=subprocess.DEVNULL)
        index_path = latest_index(build)
    if index_path is None:
        raise Unreadable(f"no File API reply in {reply_dir(build)}: configure the build "
                         "(twice, if the directory is new)")
    with open(index_path) as f:
        index = json.load(f)
    entry = index.get("reply", {}).get("codemodel-v2")
    if not entry or "jsonFile" not in entry:
        raise Unreadable(f"{index_path} has no codemodel-v2 reply")
    with open(os.path.join(reply_dir(build), entry["jsonFile"])) as f:
        codemodel = json.load(f)
    configuration = codemodel["configurations"][0]
    targets = {}
    for ref in configuration["targets"]:
        with open(os.path.join(reply_dir(build), ref["jsonFile"])) as f:
            target = json.load(f)
        targets[target["id"]] = target
    return codemodel["paths"]["source"], targets


def folder_of(path):
    """A repo-relative folder as os.path.dirname spells it: "" for the root."""
    path = os.path.normpath(path)
    return "" if path == "." else path


class Layers:
    """Who owns which header, and who links whom."""

    def __init__(self, targets):
        self.targets = targets  # id -> target object
        self.by_name = {t["name"]: t for t in targets.values()}
        self.sources = {}  # name -> [repo-relative paths of its own sources]
        self.listed = {}  # repo-relative path -> {names listing it}
        for target in targets.values():
            paths = []
            for source in target.get("sources", []):
                path = source["path"]
                if source.get("isGenerated") or os.path.isabs(path) or path.startswith(".."):
                    continue
                paths.append(path)
                self.listed.setdefault(path, set()).add(target["name"])
            self.sources[target["name"]] = paths
        # Folder of a CMakeLists.txt ("" for the root) -> names of the targets it
        # declares.
        self.declared = {}
        for target in targets.values():
            if target["type"] != "UTILITY":
                folder = folder_of(target["paths"]["source"])
                self.declared.setdefault(folder, set()).add(target["name"])
        self._closure = {}

    def closure(self, name):
        """The libraries NAME links, directly or through another library."""
        if name not in self._closure:
            seen = set()
            stack = [name]
            while stack:
                for dependency in self.by_name[stack.pop()].get("dependencies", []):
                    other = self.targets.get(dependency["id"])
                    if other and other["type"] in LINKABLE and other["name"] not in seen:
                        seen.add(other["name"])
                        stack.append(other["name"])
            self._closure[name] = seen
        return self._closure[name]

    def owners(self, header):
        """The targets a repo-relative header belongs to (see the docstring)."""
        if header in self.listed:
            return self.listed[header]
        stem, _ = os.path.splitext(header)
        for extension in COMPILED:
            if stem + extension in self.listed:
                return self.listed[stem + extension]
        folder = os.path.dirname(header)
        cmake_folder = folder
        while not self.declared.get(cmake_folder):
            if cmake_folder == "":
                return set()
            cmake_folder = os.path.dirname(cmake_folder)
        candidates = self.declared[cmake_folder]
        place = folder
        while True:
            compiling = {name for name in candidates
                         if any(os.path.dirname(path) == place and path.endswith(COMPILED)
                                for path in self.sources[name])}
            if compiling:
                return compiling
            if place == cmake_folder:
                break
            place = os.path.dirname(place)
        return set(candidates) if len(candidates) == 1 else set()


def includes(root, path):
    """Yields (line number, included path) of PATH's repo-root includes."""
    try:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, start=1):
                match = INCLUDE.match(line)
                if match:
                    yield number, match.group(1)
    except FileNotFoundError:
        return


def all_headers(root):
    for top in HEADER_ROOTS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(HEADERS):
                    yield os.path.relpath(os.path.join(folder, name), root)


def check(root, targets, min_targets, out=sys.stdout):
    """Prints each violation; returns the number of problems found."""
    layers = Layers(targets)
    problems = 0
    real = [t for t in targets.values() if t["type"] != "UTILITY"]
    if len(real) < min_targets:
        print(f"check_layers: the codemodel has {len(real)} targets, fewer than "
              f"{min_targets}: not the build it should be", file=out)
        return 1
    # What each target answers for: its sources, and the headers it owns.
    compiling = [t["name"] for t in real if t["type"] != "INTERFACE_LIBRARY"]
    files = {name: [p for p in layers.sources[name] if p.endswith(COMPILED + HEADERS)]
             for name in compiling}
    for header in sorted(all_headers(root)):
        owners = layers.owners(header)
        if not owners:
            print(f"{header}:1: belongs to no target (no library lists it, compiles "
                  "its .cc, or is declared beside it)", file=out)
            problems += 1
        for owner in owners:
            if layers.by_name[owner]["type"] == "INTERFACE_LIBRARY":
                judges = [name for name in compiling if owner in layers.closure(name)]
            else:
                judges = [owner]
            for judge in judges:
                if header not in files.setdefault(judge, []):
                    files[judge].append(header)
    edges = 0
    reported = set()
    for name in sorted(files):
        linked = layers.closure(name)
        for path in sorted(files[name]):
            for number, included in includes(root, path):
                if not os.path.isfile(os.path.join(root, included)):
                    continue  # the compiler says so
                edges += 1
                owners = layers.owners(included)
                if not owners:
                    continue  # reported above, as a header of no target
                if name in owners or owners & linked:
                    continue
                line = (f"{path}:{number}: includes {included} owned by "
                        f"{' or '.join(sorted(owners))}, not linked by {name}")
                if line not in reported:
                    reported.add(line)
                    print(line, file=out)
                    problems += 1
    if edges == 0:
        print("check_layers: no include line to judge: not the build it should be", file=out)
        return problems + 1
    if problems == 0:
        print(f"check_layers: {len(real)} targets, {edges} include lines of server/ and "
              "client/ headers, each owned by its includer or a library it links", file=out)
    return problems


# ---- self-test ----------------------------------------------------------------

FIXTURE = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.25)
project(layers_fixture CXX)
add_subdirectory(server)
""",
    "server/CMakeLists.txt": """add_subdirectory(model)
add_subdirectory(low)
add_subdirectory(other)
add_subdirectory(high)
add_executable(app main.cc)
target_include_directories(app PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(app PRIVATE high other)
""",
    "server/main.cc": '#include "server/high/high.h"\n#include "server/other/other.h"\n'
                      "int main() { return High() + Other(); }\n",
    "server/model/CMakeLists.txt": "add_library(model INTERFACE record.h)\n",
    "server/model/record.h": "struct Record {};\n",
    "server/low/CMakeLists.txt": """add_library(low STATIC low.cc)
target_include_directories(low PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(low PUBLIC model)
""",
    "server/low/low.h": '#include "server/model/record.h"\nint Low();\n',
    "server/low/low.cc": '#include "server/low/low.h"\nint Low() { return 1; }\n',
    "server/low/api/port.h": "struct Port {};\n",
    "server/other/CMakeLists.txt": """add_library(other STATIC other.cc)
target_include_directories(other PRIVATE ${PROJECT_SOURCE_DIR})
""",
    "server/other/other.h": "int Other();\n",
    "server/other/other.cc": '#include "server/other/other.h"\nint Other() { return 2; }\n',
    "server/high/CMakeLists.txt": """add_library(high STATIC high.cc)
target_include_directories(high PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(high PUBLIC low)
# waiting for an executable is no link
add_dependencies(high app_helper)
add_executable(app_helper helper.cc)
target_include_directories(app_helper PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(app_helper PRIVATE other)
""",
    "server/high/helper.cc": '#include "server/other/other.h"\nint main() { return Other(); }\n',
    "server/high/high.h": '#include "server/low/api/port.h"\nint High();\n',
    # Line 3 is the one violation: high links low, not other.
    "server/high/high.cc": '#include "server/high/high.h"\n#include "server/low/low.h"\n'
                           '#include "server/other/other.h"\n'
                           "int High() { return Low() + Other(); }\n",
}
EXPECTED = ["server/high/high.cc:3: includes server/other/other.h owned by other, "
            "not linked by high"]


def configure_fixture(cmake, generator, files):
    work = tempfile.mkdtemp(prefix="check_layers.")
    source, build = os.path.join(work, "src"), os.path.join(work, "build")
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(source, path)), exist_ok=True)
        with open(os.path.join(source, path), "w") as f:
            f.write(text)
    query = os.path.join(build, ".cmake", "api", "v1", "query", "codemodel-v2")
    os.makedirs(os.path.dirname(query))
    open(query, "w").close()
    generator_args = ["-G", generator] if generator else []
    subprocess.run([cmake, "-S", source, "-B", build] + generator_args, check=True,
                   stdout=subprocess.DEVNULL)
    return work, build


def run_fixture(cmake, generator, files):
    """Returns (problems, printed lines) of the check of a project of FILES."""
    work, build = configure_fixture(cmake, generator, files)
    try:
        root, targets = load_codemodel(build, None)
        out = io.StringIO()
        problems = check(root, targets, min_targets=5, out=out)
        return problems, out.getvalue().splitlines()
    finally:
        shutil.rmtree(work)


def self_test(cmake, generator):
    failures = []
    problems, lines = run_fixture(cmake, generator, FIXTURE)
    if lines != EXPECTED or problems != 1:
        failures.append("the fixture with one missing link: expected exactly\n  "
                        + "\n  ".join(EXPECTED) + "\ngot\n  " + "\n  ".join(lines))
    fixed = dict(FIXTURE)
    fixed["server/high/CMakeLists.txt"] = fixed["server/high/CMakeLists.txt"].replace(
        "PUBLIC low)", "PUBLIC low other)")
    problems, lines = run_fixture(cmake, generator, fixed)
    if problems != 0:
        failures.append("the fixture with the link added: expected no violation, got\n  "
                        + "\n  ".join(lines))
    upward = dict(fixed)
    upward["server/model/record.h"] = '#include "server/other/other.h"\nstruct Record {};\n'
    problems, lines = run_fixture(cmake, generator, upward)
    expected = ["server/model/record.h:1: includes server/other/other.h owned by other, "
                "not linked by low"]
    if lines != expected:
        failures.append("a header-only library's header: expected it judged where it is "
                        "compiled\n  " + "\n  ".join(expected) + "\ngot\n  " + "\n  ".join(lines))
    orphan = dict(fixed)
    orphan["client/lost.h"] = "int Lost();\n"
    problems, lines = run_fixture(cmake, generator, orphan)
    if problems != 1 or not lines or not lines[0].startswith("client/lost.h:1: belongs to no"):
        failures.append("a header of no target: expected it reported, got\n  " + "\n  ".join(lines))
    empty = {"CMakeLists.txt": FIXTURE["CMakeLists.txt"].replace("add_subdirectory(server)\n", ""),
             "server/x.h": "\n"}
    problems, lines = run_fixture(cmake, generator, empty)
    if problems == 0:
        failures.append("an empty codemodel passed: " + "\n  ".join(lines))
    for failure in failures:
        print(f"check_layers --self-test: FAILED: {failure}")
    if not failures:
        print("check_layers --self-test: a missing link (in a library's own file and in a "
              "header-only library's), a header of no target and an empty codemodel are "
              "reported; a clean tree passes")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", nargs="?", help="a configured build directory")
    parser.add_argument("--cmake", default=shutil.which("cmake"),
                        help="the cmake to configure with (default: cmake on PATH)")
    parser.add_argument("--min-targets", type=int, default=20,
                        help="fewer targets than this means the codemodel is not the build's")
    parser.add_argument("--generator", help="the CMake generator of the self-test's project")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on a small project of its own")
    args = parser.parse_args()
    if args.self_test:
        if not args.cmake:
            parser.error("--self-test needs cmake (--cmake)")
        return self_test(args.cmake, args.generator)
    if not args.build:
        parser.error("BUILD_DIR is required (or --self-test)")
    try:
        root, targets = load_codemodel(args.build, args.cmake)
    except (Unreadable, OSError, ValueError, KeyError) as error:
        print(f"check_layers: {error}")
        return 1
    return 1 if check(root, targets, args.min_targets) else 0


if __name__ == "__main__":
    sys.exit(main())
