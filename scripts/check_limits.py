#!/usr/bin/python3
"""Checks the size limits and the include graph of server/ and client/, and
the size of the docs' pages.

  scripts/check_limits.py [ROOT] [--baseline FILE]        # check the tree
  scripts/check_limits.py [ROOT] --update [--accept-new]  # rewrite the baseline
  scripts/check_limits.py --self-test                     # check the checker

The limits (see docs/architecture.md, "Size limits and include cycles"):

  file      a file under server/ longer than 800 lines;
  function  a function body in server/ or client/ longer than 60 lines,
            counted from the line of the function's name to the line of its
            closing brace;
  cycle     an include cycle among the project's own files: units A and B
            such that A includes B and B, directly or through others,
            includes A. A unit is a header and the source of the same name
            beside it (server/engine/worker/worker.h and worker.cc), or a file that
            has no such partner; an edge is an `#include "server/..."` or
            `#include "client/..."` line of any file of the unit naming a file
            of another unit. So a.h -> b.h -> a.h is a cycle, and so is a.cc
            including b.h while b.cc includes a.h. Each strongly connected
            component of more than one unit is one offender; its size is its
            number of units.
  doc       a page docs/*.md larger than 30,000 bytes (30 KB); its size is
            its number of bytes.

The baseline (scripts/limits_baseline.txt) lists the offenders the tree had
when the limits came, one a line: `SIZE KIND PATH [NAME]`, or for a cycle
`SIZE cycle UNIT UNIT ...`. An offender in the baseline may stay while it
does not grow (a cycle: while its units are a subset of a baselined cycle's);
a new offender, or one that grew, fails. A baseline entry that no longer
offends (fixed, shrunk under the limit, renamed or gone) is reported, not
failed; `--update` then rewrites the baseline from the tree, lowering sizes
and dropping entries, but never adds one unless given `--accept-new`.

Functions are found by a scanner, not a compiler: comments, string and
character literals (raw strings too) and preprocessor lines are blanked;
then a `{` at namespace or class level is a function body when the text
before it (back to the last `;`, `{` or `}` at that level) reads as a
declarator: a name, a parameter list, then only qualifiers (const, noexcept,
override, final, &, &&, an ABSL_... annotation), a `-> return type`, or a
constructor's initializer list. Namespace, class, struct, union and enum
bodies, and initializers (anything after an `=`, so a lambda in an
expression), are not functions. Everything inside a function (lambdas,
local classes) counts toward that function. TEST(Suite, Name) and its kin
are functions named after their arguments.

Standard library only, for /usr/bin/python3 (ctest: `limits` and
`limits_self_test`, label `unit`).
"""

import argparse
import bisect
import os
import re
import sys
import tempfile

FILE_LIMIT = 800
FUNCTION_LIMIT = 60
DOC_LIMIT = 30000
DOC_ROOT = "docs"
FILE_ROOTS = ("server",)
FUNCTION_ROOTS = ("server", "client")
CPP = (".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp")
SOURCES = (".cc", ".cpp", ".cxx")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"((?:server|client)/[^"]+)"', re.M)
DEFAULT_BASELINE = os.path.join("scripts", "limits_baseline.txt")

# ---------------------------------------------------------------- C++ scanning


def blank(chars, start, end):
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "


def literal_end(text, start):
    """The offset just past the quoted literal opening at start."""
    e = start + 1
    while e < len(text) and text[e] != text[start] and text[e] != "\n":
        e += 2 if text[e] == "\\" else 1
    return min(len(text), e + 1)


def clean(text):
    """The text with comments, literals and preprocessor lines blanked.

    Same length and same newlines as the input, so offsets keep their lines.
    """
    chars = list(text)
    n = len(text)
    i = 0
    line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "#" and line_start:
            j = i
            while j < n:
                e = text.find("\n", j)
                if e < 0:
                    e = n
                if e > 0 and text[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            blank(chars, i, e)
            i = e
            continue
        line_start = False
        if text.startswith("//", i):
            e = text.find("\n", i)
            e = n if e < 0 else e
            blank(chars, i, e)
            i = e
        elif text.startswith("/*", i):
            e = text.find("*/", i + 2)
            e = n if e < 0 else e + 2
            blank(chars, i, e)
            i = e
        elif c == '"':
            j = i
            while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
                j -= 1
            if text[j:i] in ("R", "u8R", "uR", "UR", "LR"):
                paren = text.find("(", i + 1)
                delim = text[i + 1:paren] if paren >= 0 else ""
                e = text.find(")" + delim + '"', paren + 1) if paren >= 0 else -1
                e = n if e < 0 else e + len(delim) + 2
            else:
                e = literal_end(text, i)
            blank(chars, i, e)
            i = e
        elif c == "'":
            # A digit separator (1'000) sits inside a number; a character
            # literal (u8'a', L'a') does not.
            j = i
            while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_.'"):
                j -= 1
            if j < i and text[j].isdigit():
                i += 1
                continue
            e = literal_end(text, i)
            blank(chars, i, e)
            i = e
        else:
            i += 1
    return "".join(chars)


NOT_NAMES = {"decltype", "alignas", "__attribute__", "__declspec", "sizeof", "alignof",
             "_Pragma", "static_assert", "requires"}
CONTROL = {"if", "for", "while", "switch", "catch", "return", "do", "else", "try"}
NAME = re.compile(r"((?:[\w~]+\s*::\s*)*operator\b[^()]*?|[\w~][\w:~]*)\s*$")
QUALIFIER = re.compile(r"\s*(&&|&|(?:const|volatile|noexcept|override|final|mutable|try|throw"
                       r"|[A-Z][A-Z0-9_]*)\b)")


def matching(text, open_at):
    """The offset of the bracket closing the one at open_at, or -1."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    for k in range(open_at, len(text)):
        c = text[k]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")}]":
            if not stack or stack.pop() != c:
                return -1
            if not stack:
                return k
    return -1


def strip_template(text):
    """text without a leading `template <...>` (angle brackets matched)."""
    m = re.match(r"\s*template\s*<", text)
    while m:
        depth = 1
        k = m.end()
        while k < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[k], 0)
            k += 1
        text = text[k:]
        m = re.match(r"\s*template\s*<", text)
    return text


def only_qualifiers(post):
    """What follows the qualifiers after a parameter list."""
    while True:
        m = QUALIFIER.match(post)
        if not m or not m.group(1):
            return post.strip()
        post = post[m.end():]
        if post.lstrip().startswith("(") and m.group(1) not in ("const", "volatile", "override",
                                                                "final", "mutable", "&", "&&"):
            start = post.index("(")
            close = matching(post, start)
            if close < 0:
                return post.strip()
            post = post[close + 1:]


def classify(head):
    """('function', name, name_offset) or (kind,) for the `{` ending head."""
    work = re.sub(r"\[\[.*?\]\]", lambda m: " " * len(m.group(0)), head, flags=re.S)
    depth = 0
    k = 0
    candidate = None
    while k < len(work):
        c = work[k]
        if c == "(" and depth == 0:
            m = NAME.search(work, 0, k)
            word = m.group(1).split("::")[-1].strip() if m else ""
            if m and word not in NOT_NAMES:
                candidate = (k, m)
                break
            close = matching(work, k)
            if close < 0:
                break
            k = close + 1
            continue
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        k += 1
    plain = strip_template(work)
    if candidate:
        p, m = candidate
        name = re.sub(r"\s+", "", m.group(1)) if "operator" not in m.group(1) else \
            re.sub(r"\s+", " ", m.group(1)).strip()
        pre = strip_template(work[:m.start(1)])
        q = matching(work, p)
        if q >= 0 and name.endswith("operator") and not work[p + 1:q].strip():
            nxt = work.find("(", q + 1)
            if nxt >= 0 and not work[q + 1:nxt].strip():
                name += "()"
                p, q = nxt, matching(work, nxt)
        if (q >= 0 and name not in CONTROL and "=" not in pre
                and not re.search(r"\b(class|struct|union|enum|namespace)\b", pre)):
            rest = only_qualifiers(work[q + 1:])
            is_function = (not rest or rest.startswith("->")
                           or (rest.startswith(":") and not rest.startswith("::")
                               and rest.rstrip()[-1] in ")}"))
            if is_function:
                if re.fullmatch(r"[A-Z0-9_]*TEST[A-Z0-9_]*", name):
                    name = "%s(%s)" % (name, re.sub(r"\s+", " ", work[p + 1:q]).strip())
                return ("function", name, m.start(1))
            if rest.startswith(":") and not rest.startswith("::"):
                return ("init",)
    if re.search(r"\b(namespace|extern)\b", plain) and "=" not in plain:
        return ("namespace",)
    if re.search(r"\benum\b", plain):
        return ("other",)
    if re.search(r"\b(class|struct|union)\b", plain) and "=" not in plain:
        return ("class",)
    return ("other",)


def functions(text):
    """[(line, name, lines)] of the function definitions in C++ text."""
    code = clean(text)
    starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n"]

    def line_of(offset):
        return bisect.bisect_right(starts, offset)

    found = []
    # Each entry: [kind, data]. At namespace or class level `head` is where
    # the text before the next `{` begins and `paren` the parentheses open.
    stack = [["namespace", None]]
    head, paren = 0, 0
    for i, c in enumerate(code):
        kind = stack[-1][0]
        if kind in ("namespace", "class"):
            if c == "(":
                paren += 1
            elif c == ")":
                paren = max(0, paren - 1)
            elif c == ";" and paren == 0:
                head = i + 1
            elif c == "{":
                if paren:
                    stack.append(["skip", (head, paren)])
                    continue
                what = classify(code[head:i])
                if what[0] == "function":
                    stack.append(["function", (line_of(head + what[2]), what[1])])
                elif what[0] == "init":
                    stack.append(["skip", (head, paren)])
                elif what[0] in ("namespace", "class"):
                    stack.append([what[0], None])
                    head, paren = i + 1, 0
                else:
                    stack.append(["other", None])
            elif c == "}":
                if len(stack) > 1:
                    stack.pop()
                head, paren = i + 1, 0
        elif c == "{":
            stack.append(["block", None])
        elif c == "}":
            entry = stack.pop()
            if entry[0] == "function":
                line, name = entry[1]
                found.append((line, name, line_of(i) - line + 1))
                head, paren = i + 1, 0
            elif entry[0] == "skip":
                head, paren = entry[1]
            elif entry[0] == "other":
                head, paren = i + 1, 0
            if not stack:
                stack.append(["namespace", None])
    return found


# ----------------------------------------------------------------- the tree


def walk(root, tops, exts=None):
    """Relative paths of the files under root/top for each top, sorted."""
    out = []
    for top in tops:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in files:
                if exts is None or f.endswith(exts):
                    out.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return sorted(out)


def read(root, rel):
    with open(os.path.join(root, rel), "rb") as f:
        data = f.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def line_count(text):
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def unit_of(rel):
    return os.path.splitext(rel)[0]


def cycles(root, files):
    """[(units, example)] for each include cycle among the files' units."""
    present = set(files)
    edges = {}  # unit -> {unit: (file, line, included)}
    for rel in files:
        text = read(root, rel) or ""
        u = unit_of(rel)
        edges.setdefault(u, {})
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target in present and unit_of(target) != u:
                line = text.count("\n", 0, m.start()) + 1
                edges[u].setdefault(unit_of(target), (rel, line, target))
                edges.setdefault(unit_of(target), {})
    # Tarjan's strongly connected components, iteratively.
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    out = []
    for comp in sorted(comps):
        members = set(comp)
        # The shortest way from the first unit back to itself, as an example.
        first = comp[0]
        prev = {first: None}
        queue = [first]
        back = None
        while queue and back is None:
            nxt = []
            for v in queue:
                for w in sorted(edges[v]):
                    if w not in members:
                        continue
                    if w == first:
                        back = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if back is not None:
                    break
            queue = nxt
        path = [back]
        while prev[path[-1]] is not None:
            path.append(prev[path[-1]])
        path.reverse()
        path.append(first)
        steps = ["%s:%d includes %s" % edges[a][b] for a, b in zip(path, path[1:])]
        out.append((comp, "; ".join(steps)))
    return out


class Offender:
    def __init__(self, kind, path, name, size, limit, where):
        self.kind, self.path, self.name, self.size = kind, path, name, size
        self.limit, self.where = limit, where

    def key(self):
        return (self.kind, self.path, self.name)

    def line(self):
        return " ".join(x for x in (str(self.size), self.kind, self.path, self.name) if x)

    def describe(self):
        if self.kind == "file":
            return "%s: file has %d lines, limit %d" % (self.where, self.size, self.limit)
        if self.kind == "doc":
            return "%s: page has %d bytes, limit %d" % (self.where, self.size, self.limit)
        if self.kind == "function":
            return "%s: function %s has %d lines, limit %d" % (self.where, self.name, self.size,
                                                               self.limit)
        return "include cycle among %d units (%s): %s" % (
            self.size, " ".join([self.path] + ([self.name] if self.name else [])), self.where)


def offenders(root):
    """(offenders, C++ files scanned)."""
    found = []
    for rel in walk(root, FILE_ROOTS):
        text = read(root, rel)
        if text is not None and line_count(text) > FILE_LIMIT:
            found.append(Offender("file", rel, "", line_count(text), FILE_LIMIT, rel))
    cpp = walk(root, FUNCTION_ROOTS, CPP)
    for rel in cpp:
        for line, name, size in functions(read(root, rel) or ""):
            if size > FUNCTION_LIMIT:
                found.append(Offender("function", rel, name, size, FUNCTION_LIMIT,
                                      "%s:%d" % (rel, line)))
    for comp, example in cycles(root, cpp):
        found.append(Offender("cycle", comp[0], " ".join(comp[1:]), len(comp), 1, example))
    for rel in doc_pages(root):
        size = os.path.getsize(os.path.join(root, rel))
        if size > DOC_LIMIT:
            found.append(Offender("doc", rel, "", size, DOC_LIMIT, rel))
    return found, cpp


def doc_pages(root):
    """Relative paths of the pages docs/*.md, sorted."""
    top = os.path.join(root, DOC_ROOT)
    if not os.path.isdir(top):
        return []
    return sorted("%s/%s" % (DOC_ROOT, f) for f in os.listdir(top)
                  if f.endswith(".md") and os.path.isfile(os.path.join(top, f)))


# ----------------------------------------------------------------- baseline


def parse_baseline(path):
    entries = []
    if not os.path.exists(path):
        return entries
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            parts = text.split(None, 3)
            if len(parts) < 3 or not parts[0].isdigit() or parts[1] not in (
                    "file", "function", "cycle", "doc"):
                raise ValueError("%s:%d: not `SIZE KIND PATH [NAME]`: %s" % (path, number, text))
            entries.append(Offender(parts[1], parts[2], parts[3] if len(parts) > 3 else "",
                                    int(parts[0]), 0, "%s:%d" % (path, number)))
    return entries


def compare(current, baseline):
    """(kept, grown, new, gone): pairs (current, baseline entry) or entries.

    Files and functions pair by kind, path and name (equal names, such as
    overloads, pair largest with largest); a cycle is kept while its units
    are all in one baselined cycle.
    """
    kept, grown, new, gone = [], [], [], []
    by_key, base_by_key = {}, {}
    for o in current:
        if o.kind != "cycle":
            by_key.setdefault(o.key(), []).append(o)
    for b in baseline:
        if b.kind != "cycle":
            base_by_key.setdefault(b.key(), []).append(b)
    for key in sorted(set(by_key) | set(base_by_key)):
        cur = sorted(by_key.get(key, []), key=lambda o: -o.size)
        base = sorted(base_by_key.get(key, []), key=lambda o: -o.size)
        for o, b in zip(cur, base):
            (kept if o.size <= b.size else grown).append((o, b))
        new.extend(cur[len(base):])
        gone.extend(base[len(cur):])
    base_cycles = [(b, set(b.line().split()[2:])) for b in baseline if b.kind == "cycle"]
    used = set()
    for o in current:
        if o.kind != "cycle":
            continue
        units = set([o.path] + o.name.split())
        home = next((b for b, members in base_cycles if units <= members), None)
        if home is None:
            new.append(o)
        else:
            kept.append((o, home))
            used.add(id(home))
    gone.extend(b for b, _ in base_cycles if id(b) not in used)
    return kept, grown, new, gone


def write_baseline(path, entries):
    order = {"file": 0, "function": 1, "cycle": 2, "doc": 3}
    lines = sorted((e.line() for e in entries),
                   key=lambda s: (order[s.split()[1]], s.split(None, 2)[2]))
    with open(path, "w", encoding="utf-8") as f:
        f.write("# The offenders of scripts/check_limits.py the tree may keep while they do\n"
                "# not grow: SIZE KIND PATH [NAME]. Shrink it with\n"
                "# `scripts/check_limits.py --update`; see docs/architecture.md.\n")
        for line in lines:
            f.write(line + "\n")


def check(root, baseline_path, update=False, accept_new=False, out=sys.stdout):
    """0 when the tree keeps the limits its baseline allows, else 1."""
    current, cpp = offenders(root)
    if not cpp:
        print("no C++ files under %s: nothing was checked" % " ".join(
            os.path.join(root, t) for t in FUNCTION_ROOTS), file=out)
        return 1
    try:
        baseline = parse_baseline(baseline_path)
    except ValueError as e:
        print(e, file=out)
        return 1
    kept, grown, new, gone = compare(current, baseline)
    for b in gone:
        print("no longer offends (remove it with --update): %s: %s" % (b.where, b.line()),
              file=out)
    for o, b in grown:
        print("GREW: %s (baseline %d, %s)" % (o.describe(), b.size, b.where), file=out)
    for o in new:
        print("NEW: %s" % o.describe(), file=out)
    counts = {k: sum(1 for o in current if o.kind == k)
              for k in ("file", "function", "cycle", "doc")}
    print("%d C++ files; files over %d lines: %d; functions over %d lines: %d; include "
          "cycles: %d; docs pages over %d bytes: %d; baselined %d, grew %d, new %d, no longer "
          "offending %d" % (
              len(cpp), FILE_LIMIT, counts["file"], FUNCTION_LIMIT, counts["function"],
              counts["cycle"], DOC_LIMIT, counts["doc"], len(kept), len(grown), len(new),
              len(gone)), file=out)
    if update:
        # Kept entries take their current (smaller or equal) size; grown ones
        # keep the baseline's; new ones come in only when accepted.
        entries = [o for o, _ in kept]
        entries += [o for o, _ in grown] + new if accept_new else [b for _, b in grown]
        write_baseline(baseline_path, entries)
        print("wrote %s (%d entries)" % (baseline_path, len(entries)), file=out)
        return 0 if accept_new or not (grown or new) else 1
    if grown or new:
        print("limits: a file over %d lines, a function over %d lines, an include cycle or a "
              "docs page over %d bytes that the baseline %s does not allow; shorten it, or see "
              "docs/architecture.md" % (FILE_LIMIT, FUNCTION_LIMIT, DOC_LIMIT, baseline_path),
              file=out)
        return 1
    return 0


# ----------------------------------------------------------------- self-test


def lines_of(n, prefix="  x += 1;"):
    return "".join(prefix + "\n" for _ in range(n))


def function_source(name, length):
    """A function of `length` lines, from its name's line to its closing brace."""
    return "int %s(int x) {\n%s  return x;\n}\n" % (name, lines_of(length - 3))


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def self_test():
    failures = []

    def expect(cond, what):
        print(("ok:   " if cond else "FAIL: ") + what)
        if not cond:
            failures.append(what)

    def run(root, **kw):
        import io
        out = io.StringIO()
        rc = check(root, os.path.join(root, "baseline.txt"), out=out, **kw)
        return rc, out.getvalue()

    # The scanner on its own: what is a function and how long it is.
    tricky = r'''
namespace a {
namespace {
constexpr int kBig = 1'000'000;
const char* kRaw = R"x(int f() { { { )x";
const char kBrace = '{';
auto kLambda = [](int y) {
  return y;
};
struct S {
  S(int v) : v_{v}, w_(v) {
    v_ += 1;
  }
  int Get() const ABSL_LOCKS_EXCLUDED(mu_) { return v_; }
  bool operator==(const S& o) const { return v_ == o.v_; }
  int operator()(int k) const { return k; }
  auto Tail() -> int { return 1; }
  enum class E { kA, kB };
  int v_, w_;
};
}  // namespace
// void NotAFunction() {
/* int AlsoNot() { */
TEST_F(Suite, Name) {
  const char* s = "}";
  if (s) {
  }
}
template <typename T = decltype(1)>
T Twice(T t) {
  return t + t;
}
}  // namespace a
'''
    got = [(name, size) for _, name, size in functions(tricky)]
    want = [("S", 3), ("Get", 1), ("operator==", 1), ("operator()", 1), ("Tail", 1),
            ("TEST_F(Suite, Name)", 5), ("Twice", 3)]
    expect(got == want, "the scanner finds %s (found %s)" % (want, got))
    long_one = "namespace n {\nclass C {\n public:\n" + function_source("C::Long", 70) + "};\n}\n"
    got = functions(long_one)
    expect(got == [(4, "C::Long", 70)], "a 70-line member is 70 lines at line 4 (%s)" % got)

    with tempfile.TemporaryDirectory() as root:
        write(root, "server/ok.cc", function_source("Short", 10))
        write(root, "client/ok.cc", function_source("Short", 60))
        rc, out = run(root)
        expect(rc == 0, "a tree within the limits passes:\n" + out)

        write(root, "server/long_file.cc", "// a long file\n" + lines_of(801, "int x;"))
        rc, out = run(root)
        expect(rc == 1 and "NEW: server/long_file.cc: file has 802 lines, limit 800" in out,
               "a file over 800 lines fails:\n" + out)
        rc, out = run(root, update=True)
        expect(rc == 1 and "long_file" not in open(os.path.join(root, "baseline.txt")).read(),
               "--update does not take in a new offender:\n" + out)
        rc, out = run(root, update=True, accept_new=True)
        rc2, out2 = run(root)
        expect(rc == 0 and rc2 == 0, "--accept-new takes it in, and then it passes:\n" + out2)

        write(root, "client/long_function.cc", "\n\n" + function_source("Long", 61))
        rc, out = run(root)
        expect(rc == 1 and "NEW: client/long_function.cc:3: function Long has 61 lines, "
               "limit 60" in out, "a function over 60 lines fails:\n" + out)
        run(root, update=True, accept_new=True)

        write(root, "server/a.h", '#include "server/b.h"\n')
        write(root, "server/b.h", '#include "server/c.h"\n')
        write(root, "server/c.h", '#include "server/a.h"\n')
        rc, out = run(root)
        expect(rc == 1 and "NEW: include cycle among 3 units (server/a server/b server/c): "
               "server/a.h:1 includes server/b.h; server/b.h:1 includes server/c.h; "
               "server/c.h:1 includes server/a.h" in out, "a header cycle fails:\n" + out)
        run(root, update=True, accept_new=True)
        write(root, "server/d.h", "")
        write(root, "server/d.cc", '#include "server/d.h"\n#include "server/e.h"\n')
        write(root, "server/e.h", "")
        write(root, "server/e.cc", '#include "server/e.h"\n#include "server/d.h"\n')
        rc, out = run(root)
        expect(rc == 1 and "NEW: include cycle among 2 units (server/d server/e): "
               "server/d.cc:2 includes server/e.h; server/e.cc:2 includes server/d.h" in out,
               "two sources including each other's headers fail:\n" + out)
        run(root, update=True, accept_new=True)
        write(root, "docs/short.md", "# Short\n" + "x" * 29990 + "\n")
        write(root, "docs/notes.txt", "x" * 40000)
        write(root, "docs/long.md", "# Long\n" + "x" * 30000 + "\n")
        rc, out = run(root)
        expect(rc == 1 and "NEW: docs/long.md: page has 30008 bytes, limit 30000" in out
               and "short.md" not in out and "notes.txt" not in out,
               "a docs page over 30,000 bytes fails, one under and a non-page do not:\n" + out)
        run(root, update=True, accept_new=True)
        rc, out = run(root)
        expect(rc == 0, "the baselined tree passes:\n" + out)

        write(root, "server/long_file.cc", "// a long file\n" + lines_of(802, "int x;"))
        rc, out = run(root)
        expect(rc == 1 and "GREW: server/long_file.cc: file has 803 lines, limit 800 "
               "(baseline 802" in out, "a baselined file that grows fails:\n" + out)
        write(root, "client/long_function.cc", "\n\n" + function_source("Long", 62))
        write(root, "server/long_file.cc", "// a long file\n" + lines_of(801, "int x;"))
        rc, out = run(root)
        expect(rc == 1 and "GREW: client/long_function.cc:3: function Long has 62 lines, "
               "limit 60 (baseline 61" in out, "a baselined function that grows fails:\n" + out)
        write(root, "client/long_function.cc", "\n\n" + function_source("Long", 61))
        write(root, "docs/long.md", "# Long\n" + "x" * 30001 + "\n")
        rc, out = run(root)
        expect(rc == 1 and "GREW: docs/long.md: page has 30009 bytes, limit 30000 "
               "(baseline 30008" in out, "a baselined docs page that grows fails:\n" + out)
        write(root, "docs/long.md", "# Long\n" + "x" * 30000 + "\n")
        write(root, "server/d.cc", '#include "server/d.h"\n#include "server/a.h"\n'
              '#include "server/e.h"\n')
        write(root, "server/c.h", '#include "server/a.h"\n#include "server/d.h"\n')
        rc, out = run(root)
        expect(rc == 1 and "NEW: include cycle among 5 units" in out,
               "a baselined cycle that takes in more units fails:\n" + out)
        write(root, "server/d.cc", '#include "server/d.h"\n#include "server/e.h"\n')
        write(root, "server/c.h", '#include "server/a.h"\n')

        write(root, "server/long_file.cc", "// now short\n")
        write(root, "client/long_function.cc", function_source("Long", 58))
        write(root, "server/c.h", "")
        write(root, "docs/long.md", "# Now short\n")
        before = open(os.path.join(root, "baseline.txt")).read()
        rc, out = run(root)
        expect(rc == 0 and out.count("no longer offends") == 4
               and "30008 doc docs/long.md" in out
               and "802 file server/long_file.cc" in out
               and "61 function client/long_function.cc Long" in out
               and "3 cycle server/a server/b server/c" in out,
               "fixed entries are reported and do not fail:\n" + out)
        expect(open(os.path.join(root, "baseline.txt")).read() == before,
               "a check leaves the baseline as it was")
        rc, out = run(root, update=True)
        after = open(os.path.join(root, "baseline.txt")).read()
        expect(rc == 0 and "long_file" not in after and "Long" not in after
               and "long.md" not in after
               and "server/a" not in after and "2 cycle server/d server/e" in after,
               "--update drops them:\n" + after)

    with tempfile.TemporaryDirectory() as root:
        rc, out = run(root)
        expect(rc == 1 and "nothing was checked" in out, "an empty tree fails:\n" + out)

    print("%d check(s) failed" % len(failures) if failures else "self-test passed")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?",
                        default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--baseline", help="default: ROOT/" + DEFAULT_BASELINE)
    parser.add_argument("--update", action="store_true",
                        help="rewrite the baseline from the tree, shrinking only")
    parser.add_argument("--accept-new", action="store_true",
                        help="with --update: take in new and grown offenders too")
    parser.add_argument("--list", action="store_true", help="print every offender")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if args.list:
        for o in sorted(offenders(args.root)[0], key=lambda o: (o.kind, -o.size)):
            print(o.describe())
    baseline = args.baseline or os.path.join(args.root, DEFAULT_BASELINE)
    return check(args.root, baseline, update=args.update, accept_new=args.accept_new)


if __name__ == "__main__":
    sys.exit(main())
