#!/usr/bin/env python3
"""The rules of the house, checked from the code (run by .ci/run; Python 3 standard library only).

    python3 .ci/house.py            check every rule; exit 1 naming each one broken
    python3 .ci/house.py --write    regenerate the maps in docs/architecture.md, then check
    python3 .ci/house.py --graph    print the dependencies the code has today, module by module

The rules:
  1. layering: a top-level module of src/ reaches (by a `crate::` path, or `robots_proxy::` from
     the binary) exactly the modules MODULES below allows it: a new dependency is refused until
     the table says so, and a dependency the code no longer has must leave the table, so the
     table is the map of today's code;
  2. crates: a workspace crate depends (in its Cargo.toml) on exactly the crates its entry in
     CRATES names, all listed below it, and every crate of the workspace is listed;
  3. no circle between the top-level modules of src/ (nor between crates);
  4. no source file over 800 lines in src/ or crates/;
  5. one integration-test binary (tests/main.rs) in the whole workspace;
  6. the maps in docs/architecture.md (between the `<!-- house:… -->` markers) are the ones this
     file generates from MODULES and CRATES (`--write` makes them), so they name exactly the
     modules and crates that exist.

Test code (a `#[cfg(test)]` item, or a file that is one) may reach anywhere and is not read.
"""
import os
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / 'docs' / 'architecture.md'
MAX_LINES = 800

# The crates of the workspace, top to bottom: (package name, folder, its one job, the crates of
# the workspace it depends on). A crate may depend only on crates listed below it, and depends on
# exactly those its entry names (as for MODULES, a dependency added or dropped changes the table).
CRATES = [
    ('robots-proxy', '.', 'the proxy, its listeners and stores, and the `robots-proxy` binary '
     '(`src/`); re-exports the crates below under their module names',
     'robots-proxy-pace robots-proxy-archive robots-proxy-engine robots-proxy-authority '
     'robots-proxy-clock robots-proxy-framing robots-proxy-output robots-proxy-units robots-proxy-sync robots-proxy-owner-only '
     'robots-proxy-access robots-proxy-net robots-proxy-identity robots-proxy-audit '
     'robots-proxy-sitefiles robots-proxy-decide robots-proxy-fleet robots-proxy-disclosure '
     'robots-proxy-metrics robots-proxy-config robots-proxy-proxy robots-proxy-admin'),
    ('robots-proxy-admin', 'crates/admin', 'the admin listener (module `admin`): metrics, health, '
     'the live decision for a URL, purges, the archive\'s versions, reload and its preview, the '
     'status page; answers a reload through `config::report::Reloads`, which the root\'s '
     'reloader implements, so it reaches nothing a reload applies',
     'robots-proxy-access robots-proxy-archive robots-proxy-audit robots-proxy-authority '
     'robots-proxy-config robots-proxy-decide robots-proxy-fleet robots-proxy-metrics '
     'robots-proxy-net robots-proxy-proxy'),
    ('robots-proxy-proxy', 'crates/proxy', 'the proxy (module `proxy`): the listeners, one '
     'exchange per request through named phases (its log phase writes the one record), CONNECT '
     '(tunnel and interception), forwarding, the origin pool; reaches robots.txt only through '
     'the decision crate, and reads its `Live` state from `config` once per exchange',
     'robots-proxy-access robots-proxy-audit robots-proxy-authority robots-proxy-clock '
     'robots-proxy-config robots-proxy-decide robots-proxy-fleet robots-proxy-framing '
     'robots-proxy-identity robots-proxy-metrics robots-proxy-net robots-proxy-output '
     'robots-proxy-pace robots-proxy-sync'),
    ('robots-proxy-config', 'crates/config', 'layered configuration (module `config`): the figment '
     'merge, problems with suggestions and origins, the raw configuration converted section by '
     'section (each section\'s `TryFrom` lives in the crate that owns it), the rules between '
     'sections, the typed lists of what is reloadable and what needs a restart',
     'robots-proxy-access robots-proxy-archive robots-proxy-audit robots-proxy-authority '
     'robots-proxy-decide robots-proxy-disclosure robots-proxy-engine robots-proxy-fleet '
     'robots-proxy-identity robots-proxy-net robots-proxy-pace robots-proxy-sitefiles '
     'robots-proxy-units'),
    ('robots-proxy-metrics', 'crates/metrics', 'Prometheus metrics (module `metrics`): the '
     'counters and gauges, both exposition formats, the status page\'s series and the recent '
     'blocks; reads the stores\' and the fleet\'s statistics, never the proxy or `config`',
     'robots-proxy-archive robots-proxy-audit robots-proxy-authority robots-proxy-fleet '
     'robots-proxy-pace robots-proxy-sitefiles robots-proxy-sync'),
    ('robots-proxy-disclosure', 'crates/disclosure', 'the public disclosure of the crawlers '
     '(module `disclosure`): `/crawlers`, `.json`, `.atom`, the Signature Agent Cards and the '
     'feed, generated from the configuration in force; never `config` (the root hands it its '
     'inputs)', 'robots-proxy-archive robots-proxy-decide robots-proxy-engine '
     'robots-proxy-identity robots-proxy-net robots-proxy-output robots-proxy-pace '
     'robots-proxy-sitefiles robots-proxy-sync robots-proxy-units'),
    ('robots-proxy-fleet', 'crates/fleet', 'the fleet on Redis (module `fleet`): `[fleet]`, the '
     'link, robots.txt records shared and sealed (through the site-file store\'s `Shared` seam), '
     'the shared pace (behind `PaceStore`), the fleet view; never `config` or the proxy',
     'robots-proxy-authority robots-proxy-clock robots-proxy-output robots-proxy-owner-only '
     'robots-proxy-pace robots-proxy-sitefiles robots-proxy-sync robots-proxy-units'),
    ('robots-proxy-decide', 'crates/decide', 'the one decision (module `policy`): the product '
     'token and its provenance, the readings of a path, every rule source (robots.txt through '
     'the site-file store, `[[exceptions]]`, AI usage preferences as module `usage`, TDMRep), '
     'report-only, `Decision::explain` and the audit record; the conformance kit; never `config` '
     'or the proxy', 'robots-proxy-archive robots-proxy-audit robots-proxy-authority '
     'robots-proxy-engine robots-proxy-sitefiles robots-proxy-sync robots-proxy-units'),
    ('robots-proxy-sitefiles', 'crates/sitefiles', 'the site-file store (module `cache`): '
     'robots.txt and tdmrep.json, one sans-IO core (one fetch per authority, owned by the store) '
     'with a thin driver, RFC 9309\'s status and lifetime rules, the fleet lease loop through the '
     '`Shared` seam, persistence; fetches through the guard, hands every result to the archive; '
     'never `config`', 'robots-proxy-archive robots-proxy-authority robots-proxy-clock '
     'robots-proxy-engine robots-proxy-net robots-proxy-units'),
    ('robots-proxy-audit', 'crates/audit', 'the audit log (module `audit`): record schema, writer, '
     'hash chain, signed checkpoints, witnesses, `audit verify`; never `config`',
     'robots-proxy-archive robots-proxy-clock robots-proxy-identity robots-proxy-output '
     'robots-proxy-units'),
    ('robots-proxy-identity', 'crates/identity', 'the crawlers\' identity, Web Bot Auth (module '
     '`signing`): keys, the signer, cosigning, the key directory, `robots-proxy keys`; never '
     '`config`', 'robots-proxy-authority robots-proxy-clock robots-proxy-engine robots-proxy-net '
     'robots-proxy-owner-only robots-proxy-sync robots-proxy-units'),
    ('robots-proxy-net', 'crates/net', 'connections, both ways: the one `serve_connection` and its '
     '`ConnectionTimeouts` (module `server`), errors described for people (module `error`), the connection gate and limits (module `limits`), '
     'the destination guard and its connector (module `guard`), TLS (module `tls`); never `config`',
     'robots-proxy-access robots-proxy-framing robots-proxy-owner-only robots-proxy-sync '
     'robots-proxy-units'),
    ('robots-proxy-access', 'crates/access', 'who may use the proxy (module `access`): the client '
     'access list, proxy authentication and the users file',
     'robots-proxy-engine robots-proxy-output robots-proxy-units'),
    ('robots-proxy-pace', 'crates/pace', 'politeness per site (module `pacing`): Crawl-delay, '
     'rates, concurrency; a pure schedule, the `PaceStore` seam and the in-process store',
     'robots-proxy-engine robots-proxy-authority robots-proxy-sync robots-proxy-units'),
    ('robots-proxy-archive', 'crates/archive', 'robots.txt versions (module `robots_version`) and '
     'the archive of every version decided with and when it was in force (module `archive`)',
     'robots-proxy-units'),
    ('robots-proxy-engine', 'crates/engine', 'the robots.txt engine (module `robots`): parse once, '
     'decide many times; usage and opt-out parsers; pure, no I/O', ''),
    ('robots-proxy-authority', 'crates/authority', 'the authority a robots.txt belongs to (module '
     '`authority`): scheme, host, port', ''),
    ('robots-proxy-clock', 'crates/clock', 'time behind a seam (module `clock`)',
     'robots-proxy-sync'),
    ('robots-proxy-framing', 'crates/framing', 'the framing watch: request smuggling checks on '
     'every HTTP/1 request head (module `framing`)', 'robots-proxy-sync'),
    ('robots-proxy-sync', 'crates/sync', 'the one way a lock is taken when a panicking thread may '
     'have poisoned it (module `sync`)', ''),
    ('robots-proxy-units', 'crates/units', 'the units the configuration is written in (module '
     '`units`): sizes, the bounds of durations, sizes and counts, and `Problems`, the error of '
     'every section\'s `TryFrom<Raw…>`', ''),
    ('robots-proxy-owner-only', 'crates/owner_only', 'the mode check of private keys and of the '
     'directories that hold them, and their whole-or-nothing writes (module `owner_only`)', ''),
    ('robots-proxy-output', 'crates/output', 'one output encoding per kind of sink, for text '
     'outsiders wrote (module `output`)', ''),
]

# The top-level modules of src/ (src/X.rs or src/X/, or a crate re-exported as X in lib.rs), each
# with its one job and the modules it may reach. `main` is the binary (src/main.rs, src/main/),
# which reaches the library through `robots_proxy::`.
MODULES = {}


def module(name, job, reaches):
    MODULES[name] = (job, sorted(reaches.split()))


module('access', 'who may use the proxy: the client access list, proxy authentication and '
       'the users file: the crate `crates/access`', '')
module('admin', 'the admin listener: metrics, health, live decisions, purges, reload, the status '
       'page; reaches robots.txt only through `policy`: the crate `crates/admin`', '')
module('archive', 'the archive of every robots.txt version decided with and the windows it was in force: the crate `crates/archive`', '')
module('audit', 'the audit log: record schema, writer, hash chain, signed checkpoints, `audit '
       'verify`; never `config` (`main` hands it its section): the crate `crates/audit`', '')
module('authority', 'the key robots.txt is cached under (scheme, host, port): the crate '
       '`crates/authority`', '')
module('cache', 'the site-file store (robots.txt, tdmrep.json): a sans-IO core (one fetch per '
       'authority, owned by the store) with a thin driver, RFC 9309 status and lifetime rules, '
       'one fleet lease loop, persistence: the crate `crates/sitefiles`', '')
module('check', '`robots-proxy check`: a robots.txt against URLs, offline', 'output policy robots')
module('clock', 'wall-clock time behind a seam, for tests: the crate `crates/clock`', '')
module('config', 'layered configuration: the figment merge, problems with suggestions and '
       'origins, the raw configuration converted section by section (each section\'s `TryFrom` '
       'lives with its owner, and no owner reaches back into `config`), the rules between '
       'sections: the crate `crates/config`', '')
module('disclosure', 'the public disclosure of the crawlers (`/crawlers`, `.json`, `.atom`, the '
       'Signature Agent Cards) and its feed; never `config`: the crate `crates/disclosure`', '')
module('error', 'an error and its causes on one line, for people: in the crate `crates/net`', '')
module('evidence', '`robots-proxy evidence`: past decisions replayed offline from the archive and '
       'the audit log; nothing reaches it but `main`', 'archive audit authority check config '
       'output policy robots robots_version usage')
module('fleet', 'the fleet on Redis: `[fleet]`, the link, shared robots.txt records (implements '
       '`cache::Shared`), the shared pace (implements `pacing::PaceStore`), the fleet view; '
       'never `proxy` or `config`: the crate `crates/fleet`', '')
module('framing', 'request smuggling checks on the bytes a client sends: the crate `crates/framing`', '')
module('guard', 'the destination guard: where the proxy may connect (SSRF), and its connector: '
       'in the crate `crates/net`', '')
module('limits', 'connection and request limits: the connection gate, head sizes, write '
       'timeouts: in the crate `crates/net`', '')
module('logging', 'operational logs (tracing), apart from the audit log', 'audit config output')
module('metrics', 'Prometheus metrics, the status page\'s series and the recent blocks: the '
       'crate `crates/metrics`', '')
module('notify', 'readiness and status for systemd (`sd_notify`)', '')
module('on_disk', 'the files a configuration names and what they hold, so a reload compares '
       'contents', 'config preflight tls')
module('output', 'one output encoding per kind of sink, for text outsiders wrote: the crate '
       '`crates/output`', '')
module('owner_only', 'the mode check of private keys and of the directories that hold them: the '
       'crate `crates/owner_only`', '')
module('pacing', 'politeness: Crawl-delay and a pace per site across every crawler; `PaceStore` and `LocalPace`: the crate `crates/pace`', '')
module('policy', 'the one door to the rules: product token, readings, decision, exceptions, '
       'report-only, the audit record; re-exports what others need of `cache` and `archive`: '
       'the crate `crates/decide`', '')
module('preflight', 'what a configuration needs from the machine (files that must parse, '
       'directories that must be creatable), creating nothing', 'access audit config fleet '
       'signing tls')
module('proxy', 'the listeners, a request\'s exchange through named phases (`exchange.rs`, '
       '`pipeline.rs`; the log phase writes its record), CONNECT, interception, '
       'forwarding, the origin pool; reaches robots.txt rules and the store only through '
       '`policy`: the crate `crates/proxy`', '')
module('reload', 'the one `Reloader` (SIGHUP and `POST /api/reload`): applies a configuration to '
       'the running collaborators, one `Reload` part each', 'audit cache config disclosure '
       'logging on_disk preflight proxy signing tls')
module('robots', 'the robots.txt engine: parse once, decide many times; pure, no I/O: the '
       'crate `crates/engine`', '')
module('robots_version', 'a robots.txt version (the body as parsed, its SHA-256, when and from where it was fetched): in the crate `crates/archive`', '')
module('server', 'the one way a connection is served (`serve_connection`): HTTP/1.1 or HTTP/2 '
       'with the configured limits, for every listener: in the crate `crates/net`', '')
module('signing', 'Web Bot Auth: keys, the signer, cosigning, the key directory, `robots-proxy '
       'keys`; never `config`: the crate `crates/identity`', '')
module('tls', 'the one crypto provider, the proxy\'s CA, the verified client for origins, the '
       'TLS listener: in the crate `crates/net`', '')
module('sync', 'the one way a lock is taken when a panicking thread may have poisoned it: the '
       'crate `crates/sync`', '')
module('units', 'units the configuration is written in (sizes), the bounds and `Problems` of '
       'every section\'s `TryFrom`', '')
module('usage', 'AI usage preferences for each crawler\'s purpose: in the crate `crates/decide`', '')
module('main', 'the binary: the command line (`src/main.rs`) and `src/main/serve.rs`, the one '
       'composition root of `serve`, which builds every collaborator once and passes them in',
       'access admin archive audit cache check clock config disclosure evidence fleet guard '
       'logging notify output pacing policy preflight proxy reload robots signing tls')


# ---------------------------------------------------------------------------------------------
# Reading Rust source: comments, strings and test code out, then the paths it names.

def strip(text):
    """The source with comments, string and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith('/*', i):
                    depth, i = depth + 1, i + 2
                elif text.startswith('*/', i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == '\n':
                        out.append('\n')
                    i += 1
        elif c == 'r' and re.match(r'r#*"', text[i:i + 70]) and not (i and (text[i - 1].isalnum() or text[i - 1] == '_')):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + len(hashes) + 2)
            end = n if end < 0 else end + 1 + len(hashes)
            out.append('""' + '\n' * text.count('\n', i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            out.append('""' + '\n' * text.count('\n', i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:i + 14])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


CFG_TEST = re.compile(r'#\[cfg\(test\)\]')


def without_tests(code):
    """`code` (stripped) without the items under `#[cfg(test)]`; and the names of the test
    modules it declares in files of their own (`#[cfg(test)] mod tests;`)."""
    kept, files, i = [], [], 0
    for m in CFG_TEST.finditer(code):
        if m.start() < i:
            continue
        kept.append(code[i:m.start()])
        j = m.end()
        # further attributes on the same item
        while True:
            a = re.match(r'\s*#\[[^\]]*\]', code[j:])
            if not a:
                break
            j += a.end()
        decl = re.match(r'\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', code[j:])
        if decl:
            files.append(decl.group(1))
            i = j + decl.end()
            continue
        k = j
        while k < len(code) and code[k] not in ';{':
            k += 1
        if k < len(code) and code[k] == '{':
            depth = 0
            while k < len(code):
                depth += {'{': 1, '}': -1}.get(code[k], 0)
                k += 1
                if depth == 0:
                    break
        i = k + 1
    kept.append(code[i:])
    return ''.join(kept), files


def paths_in(code, prefix):
    """The first segment of every `prefix::` path in code, groups (`prefix::{a, b::c}`) included."""
    found = set()
    for m in re.finditer(r'(?<![\w$])\$?' + prefix + r'::', code):
        rest = code[m.end():]
        if rest.startswith('{'):
            depth, k = 0, 0
            for k, ch in enumerate(rest):
                depth += {'{': 1, '}': -1}.get(ch, 0)
                if depth == 0:
                    break
            inner = rest[1:k]
            # top-level items of the group only
            depth, item = 0, ''
            for ch in inner + ',':
                if ch == ',' and depth == 0:
                    name = re.match(r'\s*(\w+)', item)
                    if name:
                        found.add(name.group(1))
                    item = ''
                    continue
                depth += {'{': 1, '}': -1}.get(ch, 0)
                item += ch
        else:
            name = re.match(r'(\w+)', rest)
            if name:
                found.add(name.group(1))
    return found


def rust_files(top):
    for d, dirs, fs in os.walk(top):
        dirs[:] = sorted(x for x in dirs if x != 'target')
        for f in sorted(fs):
            if f.endswith('.rs'):
                yield Path(d) / f


def test_files(src):
    """The files of src/ that are test modules (declared `#[cfg(test)] mod x;`), and the code of
    every other file without its test items."""
    code, skip = {}, set()
    for p in rust_files(src):
        text, decls = without_tests(strip(p.read_text(encoding='utf-8', errors='replace')))
        code[p] = text
        here = p.parent if p.name in ('mod.rs', 'lib.rs', 'main.rs') else p.parent / p.stem
        for name in decls:
            skip.add(here / f'{name}.rs')
            skip.add(here / name / 'mod.rs')
            skip.update(rust_files(here / name) if (here / name).is_dir() else ())
    return {p: c for p, c in code.items() if p not in skip}


# ---------------------------------------------------------------------------------------------
# The workspace.

def load_toml(path):
    with open(path, 'rb') as f:
        return tomllib.load(f)


def workspace():
    """[(package name, folder, manifest)] for the root package and every member."""
    root = load_toml(ROOT / 'Cargo.toml')
    crates = [(root['package']['name'], ROOT, root)] if 'package' in root else []
    for pattern in root.get('workspace', {}).get('members', []):
        folders = sorted(ROOT.glob(pattern)) if any(c in pattern for c in '*?[') else [ROOT / pattern]
        for folder in folders:
            if (folder / 'Cargo.toml').is_file() and folder.resolve() != ROOT:
                m = load_toml(folder / 'Cargo.toml')
                crates.append((m['package']['name'], folder, m))
    return crates, root


def lib_name(name, manifest):
    return manifest.get('lib', {}).get('name', name.replace('-', '_'))


def workspace_deps(manifest, names, root):
    """The workspace crates a manifest depends on ([dependencies], [build-dependencies], and
    their target-specific forms)."""
    tables = [manifest.get('dependencies', {}), manifest.get('build-dependencies', {})]
    for t in manifest.get('target', {}).values():
        tables += [t.get('dependencies', {}), t.get('build-dependencies', {})]
    shared = root.get('workspace', {}).get('dependencies', {})
    deps = set()
    for table in tables:
        for key, spec in table.items():
            if isinstance(spec, dict) and spec.get('workspace'):
                spec = shared.get(key, spec)
            package = spec.get('package', key) if isinstance(spec, dict) else key
            if package in names:
                deps.add(package)
    return deps


# ---------------------------------------------------------------------------------------------
# The module graph of the root package.

def modules_of_src():
    """The top-level modules of src/: {name: source folder or file, or the crate it re-exports}."""
    src = ROOT / 'src'
    found = {}
    for p in sorted(src.iterdir()):
        name = p.stem if p.suffix == '.rs' else p.name if p.is_dir() else None
        if name and name != 'lib':
            found[name] = str(p.relative_to(ROOT))
    return found


def reexports(lib_rs, crate_libs):
    """The modules lib.rs makes out of workspace crates: `pub use crate_lib as x;`,
    `pub use crate_lib::x;`, `pub use crate_lib::y as x;` -> {x: 'crate_lib::y'}."""
    out = {}
    code = strip(lib_rs.read_text(encoding='utf-8')) if lib_rs.is_file() else ''
    for m in re.finditer(r'pub\s+use\s+(\w+)((?:::\w+)*)(?:\s+as\s+(\w+))?\s*;', code):
        crate, path, alias = m.group(1), m.group(2), m.group(3)
        if crate in crate_libs:
            name = alias or (path.rsplit('::', 1)[-1] if path else crate)
            out[name] = crate + path
    return out


def edges_of_src(names, exported):
    """{module: {reached module: [files]}} from the code of src/."""
    edges = {}
    by_crate = {}
    for name, target in exported.items():
        by_crate.setdefault(target.split('::')[0], {})[target] = name
    for p, code in test_files(ROOT / 'src').items():
        rel = p.relative_to(ROOT / 'src')
        first = rel.parts[0]
        mod = first[:-3] if first.endswith('.rs') else first
        if mod == 'lib':
            continue
        prefix = 'robots_proxy' if mod == 'main' else 'crate'
        reached = paths_in(code, prefix)
        # a workspace crate named directly: the module that re-exports it (or its item)
        for crate, targets in by_crate.items():
            for seg in paths_in(code, crate):
                reached.add(targets.get(f'{crate}::{seg}', targets.get(crate, seg)))
        for t in reached:
            if t in names and t != mod:
                edges.setdefault(mod, {}).setdefault(t, []).append(str(p.relative_to(ROOT)))
    return edges


def circles(edges):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return comps


# ---------------------------------------------------------------------------------------------
# The maps in docs/architecture.md.

def module_map():
    rows = ['| module | its one job | may reach (checked) |', '|---|---|---|']
    for name in sorted(MODULES, key=lambda n: (n == 'main', n)):
        job, reaches = MODULES[name]
        rows.append(f'| `{name}` | {job} | '
                    + (', '.join(f'`{r}`' for r in reaches) if reaches else 'nothing else of the crate')
                    + ' |')
    return '\n'.join(rows)


def crate_map():
    rows = ['| crate | its one job | depends on (checked) |', '|---|---|---|']
    for name, folder, job, deps in CRATES:
        deps = deps.split()
        rows.append(f'| `{name}` (`{folder}`) | {job} | '
                    + (', '.join(f'`{d}`' for d in deps) if deps else 'no crate of the workspace')
                    + ' |')
    return '\n'.join(rows)


MAPS = {'modules': module_map, 'crates': crate_map}


def section(text, key):
    return re.search(rf'<!-- house:{key} -->\n(.*?)<!-- /house:{key} -->', text, re.S)


def write_maps():
    text = ARCHITECTURE.read_text(encoding='utf-8')
    for key, make in MAPS.items():
        m = section(text, key)
        if not m:
            sys.exit(f'{ARCHITECTURE.relative_to(ROOT)}: no <!-- house:{key} --> … '
                     f'<!-- /house:{key} --> markers to write the map between')
        text = text[:m.start(1)] + make() + '\n' + text[m.end(1):]
    ARCHITECTURE.write_text(text, encoding='utf-8')


# ---------------------------------------------------------------------------------------------

results = []


def rule(name, problems):
    results.append(not problems)
    print(('ok   ' if not problems else 'FAIL ') + name)
    for p in problems:
        print('       ' + p)


def line_count(p):
    with open(p, 'rb') as f:
        return sum(1 for _ in f)


def main(argv):
    if '--write' in argv:
        write_maps()
    crates, root = workspace()
    names = {c[0] for c in crates}
    crate_libs = {lib_name(n, m): n for n, _, m in crates}
    found = modules_of_src()
    exported = reexports(ROOT / 'src' / 'lib.rs', crate_libs)
    for name, target in exported.items():
        found.setdefault(name, target)
    edges = edges_of_src(set(found), exported)
    reach = {m: set(ts) for m, ts in edges.items()}

    if '--graph' in argv:
        for m in sorted(found):
            print(f'{m:18} -> {" ".join(sorted(reach.get(m, ())))}')
        return 0

    # 1. layering
    problems = []
    for m in sorted(set(found) - set(MODULES)):
        problems.append(f'module `{m}` ({found[m]}) is not in MODULES (.ci/house.py): add it, '
                        f'with its job and what it reaches: {" ".join(sorted(reach.get(m, ()))) or "nothing"}')
    for m in sorted(set(MODULES) - set(found)):
        problems.append(f'MODULES names `{m}`, which is no module of src/ (nor re-exported by lib.rs): remove it')
    for m in sorted(set(MODULES) & set(found)):
        allowed = set(MODULES[m][1])
        for t in sorted(reach.get(m, set()) - allowed):
            files = sorted(set(edges[m][t]))
            problems.append(f'`{m}` reaches `{t}`, which MODULES does not allow ({", ".join(files[:3])}'
                            f'{" …" if len(files) > 3 else ""})')
        if m in exported:
            # a crate re-exported as a module: its Cargo.toml and CRATES hold its layering
            if allowed:
                problems.append(f'`{m}` is the crate `{exported[m]}`: its dependencies are '
                                f'in CRATES, not MODULES')
            continue
        for t in sorted(allowed - reach.get(m, set())):
            problems.append(f'MODULES lets `{m}` reach `{t}`, which its code no longer does: remove it '
                            f'(then --write the map)')
    rule('layering: each module reaches exactly what MODULES allows', problems)

    # 2. crates
    problems = []
    listed = [c[0] for c in CRATES]
    for n in sorted(names - set(listed)):
        problems.append(f'crate `{n}` is not in CRATES (.ci/house.py): add it where it belongs')
    for n in sorted(set(listed) - names):
        problems.append(f'CRATES names `{n}`, which is no crate of the workspace: remove it')
    crate_edges = {}
    for n, folder, manifest in crates:
        deps = workspace_deps(manifest, names, root) - {n}
        crate_edges[n] = deps
        if n in listed:
            i = listed.index(n)
            below, named = set(listed[i + 1:]), set(CRATES[i][3].split())
            manifest_path = (folder / 'Cargo.toml').relative_to(ROOT)
            for d in sorted(named - below):
                problems.append(f'CRATES lets `{n}` depend on `{d}`, which is not below it: reorder')
            for d in sorted(deps - named):
                problems.append(f'crate `{n}` depends on `{d}` ({manifest_path}), which CRATES does not allow')
            for d in sorted(named - deps):
                problems.append(f'CRATES lets `{n}` depend on `{d}`, which its {manifest_path} no '
                                f'longer does: remove it (then --write the map)')
    rule('crates: each depends on exactly what CRATES allows, all below it', problems)

    # 3. circles
    comps = circles(reach) + circles(crate_edges)
    rule('no circle between modules or crates', [' <-> '.join(c) for c in comps])

    # 4. sizes
    sources = [p for top in ('src', 'crates') for p in rust_files(ROOT / top)]
    sizes = sorted(((line_count(p), p) for p in sources), reverse=True)
    rule(f'no source file in src/ or crates/ over {MAX_LINES} lines',
         [f'{p.relative_to(ROOT)}: {k} lines' for k, p in sizes if k > MAX_LINES])

    # 5. one integration-test binary
    binaries = []
    for n, folder, manifest in crates:
        tests = folder / 'tests'
        if manifest.get('package', {}).get('autotests', True) and tests.is_dir():
            binaries += [str(p.relative_to(ROOT)) for p in sorted(tests.glob('*.rs'))]
            binaries += [str(p.relative_to(ROOT)) for p in sorted(tests.glob('*/main.rs'))]
        binaries += [f'[[test]] {t.get("name")} in {(folder / "Cargo.toml").relative_to(ROOT)}'
                     for t in manifest.get('test', [])]
    binaries = sorted(set(binaries))
    rule('one integration-test binary (tests/main.rs)',
         [] if binaries == ['tests/main.rs'] else [f'{len(binaries)}: {", ".join(binaries)}'])

    # 6. the maps
    problems = []
    text = ARCHITECTURE.read_text(encoding='utf-8')
    for key, make in MAPS.items():
        m = section(text, key)
        if not m:
            problems.append(f'docs/architecture.md has no <!-- house:{key} --> map')
        elif m.group(1) != make() + '\n':
            problems.append(f'docs/architecture.md: the {key} map is not the one MODULES/CRATES make: '
                            f'python3 .ci/house.py --write')
    rule('the maps in docs/architecture.md are generated from the tables', problems)

    largest = sizes[0]
    print(f'{sum(results)}/{len(results)} house rules hold; {len(found)} modules, {len(crates)} crates, '
          f'{sum(len(v) for v in reach.values())} module dependencies; largest file '
          f'{largest[1].relative_to(ROOT)} ({largest[0]} lines)')
    return 0 if all(results) else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
