#!/usr/bin/env python3
"""Checks the user documentation against the repository.

  check_docs.py REPO_ROOT

1. Links: every relative link and image in the Markdown files (README.md, CHANGELOG.md, docs/,
   bench/, tests/gpu/, tests/fuzz/, examples/) names a file or directory of the repository, and a
   "#anchor" names a heading of its target.
2. Figures: every measured figure in README.md and docs/PERFORMANCE.md (a number with a unit: ms,
   us, s, images/s, samples/s, steps/s, GiB, MiB, TFLOP/s, %, or a ratio such as 0.47x) has a
   matching value in the result files its section cites (bench/results/*.json or *.csv, named in
   the section's text; the nearest heading above starts a section). A value matches when it
   rounds to the printed digits (bytes convert to GiB and MiB; fractions to %; milliseconds to
   seconds). A ratio matches a value of those files, or two figures of its own paragraph or table
   row. A section with figures must cite a result file; code spans and code blocks are not text.
3. Words: README.md and docs/ speak of the product, so they name no development session or issue
   number and cite no file outside the repository (DESIGN.md).

Exit status 0 when everything holds, 1 with one line per problem otherwise.
"""

import csv
import io
import json
import os
import re
import sys

DOC_GLOBS = ["README.md", "CHANGELOG.md", "docs", "bench", "tests/gpu", "tests/fuzz", "examples"]
FIGURE_DOCS = ["README.md", "docs/PERFORMANCE.md"]
PRODUCT_DOCS_DIRS = ["docs"]

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`]*`")
RESULT_FILE = re.compile(r"((?:bench/results/)?[\w.-]+\.(?:json|csv))")
# A number and its unit. "224x224" and "2x2" are sizes, not ratios: a ratio's x is not followed by
# a letter or digit.
FIGURE = re.compile(
    r"(?<![\w.^/-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?"
    r"(images/s|samples/s|steps/s|TFLOP/s|GiB|MiB|ms|us|s|%|x)(?![\w/])")


def markdown_files(root):
    for entry in DOC_GLOBS:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            yield entry
        elif os.path.isdir(path):
            for base, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.endswith(".md"):
                        yield os.path.relpath(os.path.join(base, n), root)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    text = CODE_SPAN.sub(lambda m: m.group(0)[1:-1], heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def prose_lines(text):
    """(line number, line) outside code blocks, with code spans blanked."""
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def headings(text):
    return {slug(line.lstrip("#")) for _, line in prose_lines(text) if line.startswith("#")}


def check_links(root, problems):
    for rel in markdown_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        for number, line in prose_lines(text):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                resolved = os.path.join(root, rel) if not path else \
                    os.path.normpath(os.path.join(root, os.path.dirname(rel), path))
                if not os.path.exists(resolved):
                    problems.append("%s:%d: broken link %s" % (rel, number, target))
                    continue
                if anchor and resolved.endswith(".md"):
                    with open(resolved, encoding="utf-8") as f:
                        if anchor not in headings(f.read()):
                            problems.append("%s:%d: no heading for #%s in %s"
                                            % (rel, number, anchor, path or rel))


def numbers_of(value, out):
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        out.append(float(value))
    elif isinstance(value, dict):
        for v in value.values():
            numbers_of(v, out)
    elif isinstance(value, list):
        for v in value:
            numbers_of(v, out)


def result_values(root, name, cache):
    if name in cache:
        return cache[name]
    path = os.path.join(root, name if name.startswith("bench/") else "bench/results/" + name)
    values = []
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if path.endswith(".json"):
            numbers_of(json.loads(text), values)
        else:
            for row in csv.reader(io.StringIO(text)):
                for cell in row:
                    try:
                        values.append(float(cell.replace(",", "")))
                    except ValueError:
                        pass
    else:
        values = None
    cache[name] = values
    return values


def close(printed, decimals, candidate):
    return abs(candidate - printed) <= 0.5 * 10 ** -decimals * (1 + 1e-9) + 1e-12


def converted(unit, value):
    """What a raw value of a result file may be in the printed unit."""
    yield value
    if unit == "GiB":
        yield value / 2 ** 30
    elif unit == "MiB":
        yield value / 2 ** 20
    elif unit == "%":
        yield value * 100
    elif unit == "s":
        yield value / 1000
    elif unit == "ms":
        yield value * 1000
    elif unit == "us":
        yield value / 1000  # nanoseconds (Nsight Compute)
        yield value * 1000


def blocks(text):
    """Sections (heading, [paragraphs]); a paragraph is [(line number, prose line)], a table row
    being a paragraph of its own."""
    sections = [("(top)", [])]
    paragraph = []
    for number, line in prose_lines(text):
        if line.startswith("#"):
            if paragraph:
                sections[-1][1].append(paragraph)
            paragraph = []
            sections.append((line.strip("# "), []))
        elif not line.strip() or line.lstrip().startswith("|"):
            if paragraph:
                sections[-1][1].append(paragraph)
            paragraph = [(number, line)] if line.strip() else []
            if line.strip():
                sections[-1][1].append(paragraph)
                paragraph = []
        else:
            paragraph.append((number, line))
    if paragraph:
        sections[-1][1].append(paragraph)
    return sections


def check_figures(root, rel, problems):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        text = f.read()
    cache = {}
    for heading, paragraphs in blocks(text):
        cited = set()
        for paragraph in paragraphs:
            for _, line in paragraph:
                # bench/results/NAME, or a bare NAME of a file there (config.json is not one).
                cited.update(m for m in RESULT_FILE.findall(line) if m.startswith(
                    "bench/results/") or ("/" not in m and os.path.isfile(
                        os.path.join(root, "bench/results", m))))
        pool = []
        for name in sorted(cited):
            values = result_values(root, name, cache)
            if values is None:
                problems.append("%s: section '%s' cites %s, which is not in bench/results/"
                                % (rel, heading, name))
            else:
                pool.extend(values)
        for paragraph in paragraphs:
            figures = []
            for number, line in paragraph:
                prose = CODE_SPAN.sub(" ", line)
                prose = RESULT_FILE.sub(" ", prose)
                for m in FIGURE.finditer(prose):
                    digits = m.group(1).replace(",", "") + (m.group(2) or "")
                    figures.append((number, float(digits), len(m.group(2) or "") - (1 if m.group(2) else 0),
                                    m.group(3), m.group(0)))
            values = [v for _, v, _, unit, _ in figures if unit != "x"]
            for number, printed, decimals, unit, shown in figures:
                if not cited:
                    problems.append("%s:%d: figure '%s' in section '%s', which cites no result "
                                    "file" % (rel, number, shown.strip(), heading))
                    continue
                ok = any(close(printed, decimals, c) for v in pool for c in converted(unit, v))
                if not ok and unit in ("x", "%"):
                    scale = 100 if unit == "%" else 1
                    ok = any(b and close(printed, decimals, scale * a / b)
                             for a in values for b in values)
                if not ok:
                    problems.append("%s:%d: figure '%s' (section '%s') matches no value of %s"
                                    % (rel, number, shown.strip(), heading, ", ".join(sorted(cited))))


def check_words(root, problems):
    files = ["README.md"]
    for d in PRODUCT_DOCS_DIRS:
        for base, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.relpath(os.path.join(base, n), root) for n in sorted(names)
                      if n.endswith(".md")]
    files += ["bench/README.md", "tests/gpu/TOLERANCES.md"]
    banned = [(re.compile(r"\b[Ss]ession[ -]?\d+"), "a development session"),
              (re.compile(r"\b[Ii]ssue[ -]?#?\d+"), "an issue number"),
              (re.compile(r"DESIGN(\.md| §)"), "DESIGN, a file outside the repository"),
              (re.compile(r"device tool|run\(carry"), "the development tooling")]
    for rel in files:
        path = os.path.join(root, rel)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                text = RESULT_FILE.sub(" ", line)  # result files keep their historical names
                for pattern, what in banned:
                    if pattern.search(text):
                        problems.append("%s:%d: names %s: %s" % (rel, number, what, line.strip()))


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[0]
    problems = []
    check_links(root, problems)
    for rel in FIGURE_DOCS:
        if os.path.isfile(os.path.join(root, rel)):
            check_figures(root, rel, problems)
        else:
            problems.append("%s is missing" % rel)
    check_words(root, problems)
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print("check_docs: links, figures and wording hold")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
