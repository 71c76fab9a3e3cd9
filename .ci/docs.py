#!/usr/bin/env python3
"""The documentation's links, checked offline (run by .ci/run after `mdbook build docs`; Python 3
standard library only).

    python3 .ci/docs.py

Checks, in README.md and every page of the book (docs/**/*.md):
  - every relative link names a file or folder that exists, and every `#anchor` (in the same page
    or in another Markdown file) names a heading of that page (its GitHub and mdBook id: lower
    case, punctuation dropped, spaces to `-`, a repeated heading gets `-1`, `-2`) or an explicit
    `<a id="…">`;
  - every page under docs/ is in docs/SUMMARY.md, and everything SUMMARY.md names exists;
  - the README stays a newcomer's page: under 300 lines.
Links to other sites are not fetched. Exit 1 naming every problem.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs'
README_MAX_LINES = 300

LINK = re.compile(r'(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
IMAGE = re.compile(r'!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)')
REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)', re.M)
HEADING = re.compile(r'^(#{1,6})\s+(.*?)\s*#*\s*$')
EXPLICIT = re.compile(r'<a\s+(?:name|id)="([^"]+)"')


def prose(text):
    """The text with fenced code blocks and inline code spans blanked (lines kept)."""
    out, fence = [], None
    for line in text.split('\n'):
        m = re.match(r'^\s{0,3}(`{3,}|~{3,})', line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append('')
            continue
        if m:
            fence = m.group(1)
            out.append('')
            continue
        out.append(re.sub(r'(`+)(.+?)\1', lambda c: ' ' * len(c.group(0)), line))
    return '\n'.join(out)


def slug(heading):
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link's text
    text = re.sub(r'<[^>]+>', '', text)  # inline HTML
    out = []
    for ch in text:
        if ch.isalnum() or ch in '_-':
            out.append(ch.lower())
        elif ch.isspace():
            out.append('-')
    return ''.join(out)


ANCHORS = {}


def anchors(path):
    if path not in ANCHORS:
        seen, ids = {}, set()
        text = path.read_text(encoding='utf-8')
        code = prose(text).split('\n')
        raw = text.split('\n')
        for i, line in enumerate(code):
            m = HEADING.match(line)
            if m:
                # the heading as written (code spans included), from the raw line
                s = slug(HEADING.match(raw[i]).group(2).replace('`', ''))
                n = seen.get(s, 0)
                ids.add(s if n == 0 else f'{s}-{n}')
                seen[s] = n + 1
        ids.update(EXPLICIT.findall(text))
        ANCHORS[path] = ids
    return ANCHORS[path]


def check_file(path, problems):
    text = prose(path.read_text(encoding='utf-8'))
    targets = []
    for n, line in enumerate(text.split('\n'), 1):
        for m in LINK.finditer(line):
            targets.append((n, m.group(2)))
        for m in IMAGE.finditer(line):
            targets.append((n, m.group(1)))
    for m in REFDEF.finditer(text):
        targets.append((text.count('\n', 0, m.start()) + 1, m.group(1)))
    where = path.relative_to(ROOT)
    for n, target in targets:
        if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target):
            continue  # another site, or mailto:
        file, _, anchor = target.partition('#')
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            problems.append(f'{where}:{n}: {target}: no such file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}')
            continue
        if anchor:
            if dest.is_dir() or dest.suffix != '.md':
                problems.append(f'{where}:{n}: {target}: an anchor into something that is not a Markdown page')
            elif anchor not in anchors(dest):
                problems.append(f'{where}:{n}: {target}: {dest.relative_to(ROOT)} has no heading with id "{anchor}"')
    return len(targets)


def main():
    problems = []
    pages = sorted(DOCS.rglob('*.md'))
    count = sum(check_file(p, problems) for p in [ROOT / 'README.md'] + pages)

    summary = DOCS / 'SUMMARY.md'
    named = set()
    if not summary.is_file():
        problems.append('docs/SUMMARY.md is missing')
    else:
        for m in LINK.finditer(prose(summary.read_text(encoding='utf-8'))):
            if m.group(2):
                named.add((DOCS / m.group(2).partition('#')[0]).resolve())
        for p in pages:
            if p != summary and p.resolve() not in named:
                problems.append(f'{p.relative_to(ROOT)} is in no chapter of docs/SUMMARY.md')

    lines = (ROOT / 'README.md').read_text(encoding='utf-8').count('\n')
    if lines >= README_MAX_LINES:
        problems.append(f'README.md has {lines} lines: a newcomer\'s page stays under {README_MAX_LINES}; '
                        'move the rest into a page of the book (docs/)')

    for p in problems:
        print('FAIL ' + p)
    print(f'{"ok" if not problems else "FAIL"}: {count} links in README.md and {len(pages)} pages '
          f'of docs/; README.md {lines} lines; {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
