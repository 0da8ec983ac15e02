#!/usr/bin/env python3
"""Check privdiff's architecture rules.   usage: check_layout.py SOURCE_ROOT [--max-lines N]

The dependencies run one way: plugins -> sdk <- core. core/ and plugins/ build on the
SDK; the SDK and the plugins never see core; and sdk's components/ is the SDK's ground
floor, which every plugin includes, so it must stay small. The rules:

1. Function length. No function body in core/ or sdk/ (*.cpp, *.hpp) is longer than
   --max-lines (120) lines. A body's length counts every physical line from the line
   holding its opening `{` to the line holding its matching `}`, both included (blank and
   comment lines too; the signature above the `{` is not counted; a one-line body is 1).
   Lambdas and local classes inside a function count toward that function. Namespace,
   extern "C", class/struct/union and enum bodies and brace initialisers (`= {`, `x{}`,
   braces inside parentheses, at namespace or class scope) are not functions, so a
   member function is measured on its own. Comments, string, char and raw-string
   literals and preprocessor lines are blanked first, so braces in them do not count.
   A macro opening a body (`TEST(a, b) {`) counts as a function named after the macro.
2. Include direction in core/. An include of "folder/file.hpp" is an edge between core
   folders. LAYERS below lists them top (cli) to bottom; an include may go only to the
   same or a lower layer. The folder graph must have no cycle (each cycle is reported
   once, at an include that closes it). A folder not in LAYERS is a warning. Nothing
   under sdk/ or plugins/ may include a core header.
3. SDK ground floor. sdk/include/privdiff/components/ and sdk/src/components/ include,
   of the other privdiff/ headers, only those in LEAF_HEADERS. Cycles between SDK areas
   (the first folder under sdk/include/privdiff/ and sdk/src/) are warnings for now.
4. Plugins. Nothing under plugins/ includes core headers, toml++, CLI11 or boost/dll:
   a plugin sees the SDK only (the loader owns parsing, the CLI and loading).
5. One release gate. Only core/release/ writes a published privacy statement: a line of
   core/ outside it that names "privacy.json" beside a write, or sets an export's
   privdiff.epsilon / privdiff.delta / privdiff.privacy metadata key, is a violation
   (GATE_EXCEPTIONS would list files allowed to; there are none: an export's statement
   is set by core/release/run_export.cpp).

Prints each violation as `path:line: message` and a summary; exits 1 on any violation.
"""
import argparse
import re
import sys
from pathlib import Path

# Core folders from the top layer (index 0) down; includes may not go up.
LAYERS = [["cli"], ["sweep", "run"], ["release", "compare", "evaluate", "sample", "parallel", "weights", "selection"],
          ["recipe", "data"], ["loader"], ["util"]]
# Rule 5: what writes a published privacy statement, and the files besides core/release/ allowed to.
GATE_WRITE = re.compile(r'(write\w*\(.*"privacy\.json"|"privacy\.json".*write\w*\(|'
                        r'\[export_keys::(epsilon|delta|privacy)\]\s*=[^=]|\{export_keys::(epsilon|delta|privacy),)')
GATE_EXCEPTIONS = set()
# The only privdiff/ headers outside privdiff/components/ that the components may include.
LEAF_HEADERS = ["privdiff/sdk_api.hpp"]
# What plugins may not include (besides core headers): include-path prefixes.
PLUGIN_FORBIDDEN = {"toml++/": "toml++", "CLI/": "CLI11", "CLI11": "CLI11", "boost/dll": "boost/dll"}
EXTENSIONS = (".cpp", ".hpp", ".h", ".cc")
INCLUDE = re.compile(r'#\s*include\s*[<"]([^>"]+)[>"]')
ACCESS = re.compile(r"\b(?:public|protected|private)\s*:(?!:)")
NOT_A_NAME = {"noexcept", "throw", "decltype", "requires", "alignas", "sizeof", "__attribute__", "catch"}
NAME = re.compile(r"((?:[\w~]+\s*::\s*)*(?:operator\s*(?:\(\)|[^\s(]+)|~?\w+))\s*\(\)")


def blank(text):
    return re.sub(r"[^\n]", " ", text)


def clean(text):
    """Return (code, includes): comments, literal contents and preprocessor lines blanked
    (line breaks kept, so line numbers stay), and the [(line, target)] of each #include."""
    out, includes, i, n = [], [], 0, len(text)
    while i < n:
        c, nxt = text[i], text[i + 1:i + 2]
        k = i
        while k > 0 and (text[k - 1].isalnum() or text[k - 1] == "_"):
            k -= 1
        token = text[k:i]  # the identifier or number just before c
        if c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == "":
            j = i
            while (j := text.find("\n", j)) != -1 and text[j - 1] == "\\":
                j += 1
            j = n if j == -1 else j
            if m := INCLUDE.match(text, i, j):
                includes.append((text.count("\n", 0, i) + 1, m.group(1)))
            out.append(blank(text[i:j]))
        elif c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j == -1 else j
            out.append(blank(text[i:j]))
        elif c == "/" and nxt == "*":
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append(blank(text[i:j]))
        elif c == '"' and token in ("R", "u8R", "uR", "UR", "LR"):
            delim = text[i + 1:text.find("(", i)]
            j = text.find(")" + delim + '"', i)
            j = n if j == -1 else j + len(delim) + 2
            out.append('"' + blank(text[i + 1:j - 1]) + '"')
        elif c == '"' or (c == "'" and not token[:1].isdigit()):  # not a digit separator
            j = i + 1
            while j < n and text[j] not in (c, "\n"):
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + blank(text[i + 1:j - 1]) + c)
        else:
            out.append(c)
            j = i + 1
        i = j
    return "".join(out), includes


def flatten(head):
    """The top level of head: each (...) group collapsed to `()`; None while one is open."""
    out, depth = [], 0
    for ch in head:
        if ch == "(":
            out.append("(" if depth == 0 else "")
            depth += 1
        elif ch == ")":
            depth -= 1
            out.append(")" if depth == 0 else "")
        elif depth == 0:
            out.append(ch)
    return None if depth > 0 else "".join(out)


def classify(head):
    """What the `{` after head (the code since the last `;`, `{` or `}`) opens."""
    h = re.sub(r"\[\[.*?\]\]", " ", ACCESS.sub(" ", head), flags=re.S).strip()
    while m := re.match(r"template\s*<", h):  # drop template <...> prefixes
        depth, j = 1, m.end()
        while j < len(h) and depth:
            depth += {"<": 1, ">": -1}.get(h[j], 0)
            j += 1
        h = h[j:].strip()
    flat = flatten(h)
    if flat is None:
        return "init", None  # a brace inside parentheses: f({1, 2}), [](){...} as argument
    if re.search(r"\bnamespace\b", flat) or re.fullmatch(r'extern\s*"\s*"', flat):
        return "scope", None
    tail = flat[flat.rfind("()") + 1:]  # where `class X` would stand after a macro call
    if re.search(r"\b(class|struct|union)\b", tail) and "=" not in tail:
        return "scope", None
    if "()" not in flat or re.search(r"\benum\b", tail):
        return "init", None
    colon = re.search(r"\(\)[^:]*?(?<!:):(?!:)", flat)  # constructor initialiser list
    if colon and not re.search(r"[)}]\s*$|\.\.\.\s*$", flat):
        return "init", None  # the braces of a member initialiser, x_{...}
    signature = flat[:colon.start() + 2] if colon else flat
    before = re.sub(r"operator\s*\S+", " ", signature[:signature.find("()")])
    if re.search(r"(?<![=!<>])=(?!=)", before):
        return "init", None  # `x = f() {`... is an initialiser (a lambda at namespace scope)
    names = [m.group(1) for m in NAME.finditer(signature) if m.group(1).split("::")[-1].strip() not in NOT_A_NAME]
    return "function", re.sub(r"\s+", "", names[-1]) if names else "?"


def functions(code):
    """Yield (name, first line, last line) of each function body in cleaned code."""
    stack, head, line = [], [], 1  # stack: (kind, line, name, head to resume)
    for ch in code:
        if ch == "\n":
            line += 1
        top = stack[-1][0] if stack else "scope"
        if ch == "{":
            kind, name = classify("".join(head)) if top == "scope" else ("inner", None)
            stack.append((kind, line, name, head))
            head = []
        elif ch == "}" and stack:
            kind, first, name, saved = stack.pop()
            if kind == "function":
                yield name, first, line
            head = saved + ["{}"] if kind == "init" else [] if kind in ("scope", "function") else head
        elif ch == ";" and top == "scope":
            head = []
        elif top == "scope":
            head.append(ch)


def cycles(graph):
    """Each simple cycle of graph {node: {node: where}} once, as a list of nodes."""
    found = []

    def walk(start, path):
        for nxt in sorted(graph.get(path[-1], {})):
            if nxt == start:
                found.append(list(path))
            elif nxt > start and nxt not in path:
                walk(start, path + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--max-lines", type=int, default=120)
    args = parser.parse_args()
    root = args.root.resolve()
    errors, warnings = [], []
    files = sorted(p for d in ("core", "sdk", "plugins") for p in (root / d).rglob("*") if p.suffix in EXTENSIONS)
    core_dirs = {p.name for p in (root / "core").iterdir() if p.is_dir()}
    layer = {folder: index for index, folders in enumerate(LAYERS) for folder in folders}
    core_graph, sdk_graph = {}, {}

    def is_core_header(path, target):
        return (not (path.parent / target).is_file() and
                ((root / "core" / target).is_file() or target.startswith("core/")))

    for path in files:
        rel = path.relative_to(root).as_posix()
        code, includes = clean(path.read_text(encoding="utf-8", errors="replace"))
        if rel.startswith(("core/", "sdk/")) and path.suffix in (".cpp", ".hpp"):
            for name, first, last in functions(code):
                if last - first + 1 > args.max_lines:
                    errors.append(f"{rel}:{first}: function '{name}' is {last - first + 1} lines "
                                  f"(lines {first}-{last}; max {args.max_lines})")
        parts = rel.split("/")
        if rel.startswith("core/") and not rel.startswith("core/release/") and rel not in GATE_EXCEPTIONS:
            for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if GATE_WRITE.search(text) and not text.lstrip().startswith("//"):
                    errors.append(f"{rel}:{number}: writes a published privacy statement outside core/release/ "
                                  f"(the release gate): {text.strip()[:100]}")
        for line, target in includes:
            where = f"{rel}:{line}"
            if parts[0] == "core" and len(parts) > 2 and target.split("/")[0] in core_dirs and "/" in target:
                src, dst = parts[1], target.split("/")[0]
                if src != dst:
                    core_graph.setdefault(src, {}).setdefault(dst, where)
                    if src in layer and dst in layer and layer[dst] < layer[src]:
                        errors.append(f"{where}: core/{src} (layer {layer[src]}) includes \"{target}\" from "
                                      f"the higher core/{dst} (layer {layer[dst]})")
            if parts[0] in ("sdk", "plugins") and is_core_header(path, target):
                errors.append(f"{where}: {parts[0]}/ includes the core header \"{target}\"")
            if parts[0] == "plugins":
                for prefix, library in PLUGIN_FORBIDDEN.items():
                    if target.startswith(prefix):
                        errors.append(f"{where}: plugins include {library} (\"{target}\"); only the SDK is theirs")
            if parts[0] == "sdk" and target.startswith("privdiff/"):
                if rel.startswith(("sdk/include/privdiff/components/", "sdk/src/components/")):
                    if not target.startswith("privdiff/components/") and target not in LEAF_HEADERS:
                        errors.append(f"{where}: components/ includes \"{target}\", not in LEAF_HEADERS "
                                      f"(the SDK's ground floor includes only leaf headers)")
                offset = 3 if parts[1] == "include" else 2  # sdk/include/privdiff/AREA, sdk/src/AREA
                src = parts[offset] if len(parts) > offset + 1 else "(top)"
                pieces = target.split("/")
                dst = pieces[1] if len(pieces) > 2 else "(top)"
                if src != dst:
                    sdk_graph.setdefault(src, {}).setdefault(dst, where)

    for folder in sorted(core_dirs - set(layer)):
        warnings.append(f"core/{folder}/: warning: folder '{folder}' is not in LAYERS (add it to check_layout.py)")
    for cycle in cycles(core_graph):
        edges = list(zip(cycle, cycle[1:] + cycle[:1]))
        up = [e for e in edges if e[0] in layer and e[1] in layer and layer[e[1]] < layer[e[0]]]
        src, dst = (up or edges[-1:])[0]
        errors.append(f"{core_graph[src][dst]}: include cycle between core folders "
                      f"{' -> '.join(cycle + cycle[:1])} (this include closes it)")
    for cycle in cycles(sdk_graph):
        src, dst = cycle[-1], cycle[0]
        warnings.append(f"{sdk_graph[src][dst]}: warning: include cycle between SDK areas "
                        f"{' -> '.join(cycle + cycle[:1])} (this include closes it)")

    for message in errors + warnings:
        print(message)
    print(f"check_layout: {len(errors)} violation(s), {len(warnings)} warning(s) in {len(files)} files")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
