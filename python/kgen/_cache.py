"""Kernels by configuration: an in-memory cache of loaded modules, then an
on-disk cache of PTX ($KGEN_CACHE_DIR, default ~/.cache/kgen; one file per
kernel, keyed by a hash of the kgen version, family, target and arguments,
written atomically), then the generator in-process."""

import hashlib
import os
import tempfile
import threading

from . import _native

VERSION = "0.1.0"  # meson.build's project version; part of every cache key

_modules = {}
_ptx = {}
_lock = threading.Lock()
stats = {"memory": 0, "disk": 0, "generated": 0}


def cache_dir():
    d = os.environ.get("KGEN_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kgen")


def _key(family, args):
    h = hashlib.sha256(("kgen %s\n%s\n%s" % (VERSION, family, "\n".join(args))).encode())
    return "%s-%s" % (family, h.hexdigest()[:40])


def _write_atomic(path, text):
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def ptx(family, args):
    """The PTX of family with args (a tuple whose first pair is --target)."""
    text = _ptx.get((family, args))
    if text is not None:
        return text
    path = os.path.join(cache_dir(), _key(family, args) + ".ptx")
    try:
        with open(path) as f:
            text = f.read()
        if not text.endswith("\n") or "//@end" not in text:
            text = None  # a torn or foreign file: regenerate it
        else:
            stats["disk"] += 1
    except OSError:
        text = None
    if text is None:
        text = _native.generate(family, list(args))
        stats["generated"] += 1
        try:
            _write_atomic(path, text)
        except OSError:
            pass  # a read-only cache only costs the next process a generation
    _ptx[(family, args)] = text
    return text


def module(dev, family, args):
    """The loaded module of (family, args) on libkrt device dev."""
    key = (dev.kind, dev.ordinal, family, args)
    m = _modules.get(key)
    if m is not None:
        stats["memory"] += 1
        return m
    with _lock:
        m = _modules.get(key)
        if m is None:
            m = _modules[key] = _native.Module(dev, ptx(family, args))
    return m
