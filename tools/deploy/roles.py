# What a role installs: the modules its entry point imports, their data files, the firmware's modules.
import ast
import json
import os

from deploy.base import DATA_SKIP, FlashError, LIB, PACKAGE_ROOTS, ROOT
from deploy.boards import board_dir


def _resolve(name):
    """Source file for a dotted module name in the device tree, or None (firmware module)."""
    parts = name.split(".")
    if parts[0] == "organbus":
        core = dict((dest, src) for src, dest in core_files())
        for dest in ("/".join(parts) + "/__init__.py", "/".join(parts) + ".py"):
            if dest in core:
                return core[dest], dest
        return None
    if parts[0] in PACKAGE_ROOTS:
        base = os.path.join(ROOT, *parts)
        if os.path.isfile(os.path.join(base, "__init__.py")):
            return os.path.join(base, "__init__.py"), "/".join(parts) + "/__init__.py"
        if os.path.isfile(base + ".py"):
            return base + ".py", "/".join(parts) + ".py"
    return None


def _imports(path, modname):
    """(module name, conditional) for every import in a file, relative ones resolved; an import
    inside a try or if block is conditional (a fallback, or host-only)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    pkg = modname if path.endswith("__init__.py") else modname.rpartition(".")[0]
    found = []

    def visit(node, in_try):
        for child in ast.iter_child_nodes(node):
            t = in_try or isinstance(child, (ast.Try, ast.If))  # conditional imports
            if isinstance(child, ast.Import):
                for a in child.names:
                    parts = a.name.split(".")
                    for i in range(1, len(parts) + 1):
                        found.append((".".join(parts[:i]), in_try))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = pkg.split(".")
                    up = up[: len(up) - (child.level - 1)] if child.level > 1 else up
                    base = ".".join([x for x in up + ([base] if base else []) if x])
                parts = base.split(".") if base else []
                for i in range(1, len(parts) + 1):
                    found.append((".".join(parts[:i]), in_try))
                for a in child.names:
                    found.append((base + "." + a.name if base else a.name, None))  # maybe a module
            visit(child, t)

    visit(tree, False)
    return found


PACKAGE_VERSION = "0.1.0"  # the mip package of the core (package.json)


def core_files():
    """The protocol core as it installs: every module of lib/organbus/ (its manifest.py aside),
    [(src, dest under /lib)]. The one list: the board manifests freeze this folder (through
    lib/organbus/manifest.py), package.json is made from it, and a role's import scan takes its
    organbus modules from it (those the role imports)."""
    core = os.path.join(LIB, "organbus")
    names = sorted(n for n in os.listdir(core) if n.endswith(".py") and n != "manifest.py")
    return [(os.path.join(core, n), "organbus/" + n) for n in names]


def package_json():
    """package.json (the core's mip package, relative urls) as core_files() says."""
    urls = [[dest, os.path.relpath(src, ROOT).replace(os.sep, "/")] for src, dest in core_files()]
    return {"urls": urls, "deps": [], "version": PACKAGE_VERSION}


def write_package_json(path=None):
    path = path or os.path.join(ROOT, "package.json")
    with open(path, "w") as f:
        json.dump(package_json(), f, indent=2)
        f.write("\n")
    return path


class _Options:
    # manifestfile's IncludeOptions: options.NAME is the include()'s keyword, else its default
    def __init__(self, kwargs):
        self._kwargs = kwargs
        self._defaults = {}

    def defaults(self, **kwargs):
        self._defaults = kwargs

    def __getattr__(self, name):
        return self._kwargs.get(name, self._defaults.get(name))


def manifest_files(path, **options):
    """[(src, dest)] that a manifest of this tree freezes (MicroPython's manifestfile: its
    package(), module() and include() with options, as the master's manifests use them), so
    that a USB install and a frozen build take their files from the same source."""
    out = []
    seen = set()

    def run(mpath, opts):
        mpath = os.path.abspath(mpath)
        if os.path.isdir(mpath):
            mpath = os.path.join(mpath, "manifest.py")
        if mpath in seen:
            return
        seen.add(mpath)
        here = os.path.dirname(mpath)

        def package(package_path, files=None, base_path=".", opt=None):
            top = os.path.normpath(os.path.join(here, base_path))
            if files is None:
                files = []
                for d, _, names in os.walk(os.path.join(top, package_path)):
                    rel = os.path.relpath(d, os.path.join(top, package_path))
                    files += [
                        os.path.normpath(os.path.join(rel, n)) for n in names if n.endswith(".py")
                    ]
            for f in files:
                dest = (package_path + "/" + f).replace(os.sep, "/")
                out.append((os.path.join(top, package_path, f), dest))

        def module(module_path, base_path=".", opt=None):
            top = os.path.normpath(os.path.join(here, base_path))
            out.append((os.path.join(top, module_path), module_path))

        def include(p, **kw):
            run(os.path.join(here, p), kw)

        with open(mpath, encoding="utf-8") as f:
            code = compile(f.read(), mpath, "exec")
        g = {"package": package, "module": module, "include": include, "options": _Options(opts)}
        exec(code, g)

    run(path, options)
    return sorted(set(out), key=lambda m: m[1])


MASTER_MANIFEST = os.path.join(ROOT, "master", "manifest.py")


def master_links(config):
    """The optional links (master/manifest.py's options) a master with this /config.json runs."""
    config = config or {}
    return {
        "console": config.get("console") == "link",
        "nudge": bool(config.get("nudge_url")),
        "xiaozhi": bool(config.get("xiaozhi")),
        "mqtt": bool(config.get("mqtt")),
        "ota": bool(
            (config.get("ota") or {}).get("key") or (config.get("http") or {}).get("token")
        ),
    }


def role_files(role, board=None, links=None):
    """What a role needs on the board: {"modules": [(src, dest)], "data": [(src, dest)],
    "externals": {name: required}} where dest is relative to /lib and externals are modules the
    firmware must provide (required unless every import of it is conditional). `links`: the
    master's optional links (master_links) when only those are to be installed; None: all."""
    bdir = board_dir(role)
    entry = os.path.join(bdir, "main.py")
    if not os.path.isfile(entry):
        raise FlashError("%s has no main.py (the role's entry point)" % os.path.relpath(bdir, ROOT))
    modules = {}
    externals = {}
    todo = [(entry, "__main__")]

    for extra in (board or {}).get("extra_modules", ()):
        r = _resolve(extra)
        if not r:
            raise FlashError("extra module %r of %s is not in lib/ or a package" % (extra, role))
        todo.append((r[0], extra))
        modules[extra] = r
    if role == "master":  # its links load by name (master/app.py): the manifests name them
        for src, dest in manifest_files(MASTER_MANIFEST, **(links or {})):
            name = dest[:-3].replace("/", ".").replace(".__init__", "")
            todo.append((src, name))
            modules[name] = (src, dest)
    seen = set()
    while todo:
        path, modname = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name, in_try in _imports(path, modname):
            r = _resolve(name)
            if r:
                if name not in modules:
                    modules[name] = r
                    todo.append((r[0], name))
            elif in_try is not None:
                top = name.split(".")[0]
                if _resolve(top) is None:
                    externals[top] = externals.get(top, False) or not in_try
    if role == "master" and links is not None:  # only the links the config names
        keep = set(dest for _, dest in manifest_files(MASTER_MANIFEST, **links))
        modules = dict(
            (k, v) for k, v in modules.items() if not v[1].startswith("master/") or v[1] in keep
        )
    # Data files (e.g. the voice's lexicon) sit beside the package modules that open them.
    data = []
    pkg_dirs = sorted({os.path.dirname(src) for src, dest in modules.values() if "/" in dest})
    for d in pkg_dirs:
        for fn in sorted(os.listdir(d)):
            full = os.path.join(d, fn)
            if os.path.isfile(full) and not fn.startswith(".") and not fn.endswith(DATA_SKIP):
                data.append((full, os.path.relpath(full, ROOT).replace(os.sep, "/")))
    mods = sorted(set(modules.values()), key=lambda m: m[1])
    return {"modules": mods, "data": data, "externals": externals}


if __name__ == "__main__":  # (cd tools && python -m deploy.roles): package.json from core_files()
    print(write_package_json())
