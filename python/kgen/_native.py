"""ctypes bindings of the native library (python/native.c): the generator
(gen/kgen.h) and libkrt (runtime/krt.h). Nothing here knows PyTorch."""

import ctypes
import os
import struct
import threading

_KIND = {"tmap": 0, "ptr": 1, "u32": 2, "s32": 3, "u64": 4, "f32": 5}
MAX_RANK = 5
ARG_BYTES = 104  # sizeof(KrtArg): int kind, pad, then a 96-byte union
ERR_MSG = 8192


def _find_library():
    path = os.environ.get("KGEN_NATIVE")
    if path:
        return path
    from . import _knative  # the extension module is the library itself

    return _knative.__file__


class KrtError(RuntimeError):
    """A libkrt or generator failure that is not the caller's input."""


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char * ERR_MSG)]


_lib = ctypes.CDLL(_find_library())
_P = ctypes.c_void_p
_sz = ctypes.c_size_t
for _name, _res, _args in [
    ("kgp_generate", ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                    ctypes.POINTER(_P), ctypes.POINTER(_sz), ctypes.c_char_p, _sz]),
    ("kgp_free", None, [_P]),
    ("kgp_sizeof_arg", _sz, []),
    ("kgp_sizeof_err", _sz, []),
    ("krt_gpu_present", ctypes.c_int, []),
    ("krt_device_open", ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_int, _P]),
    ("krt_device_cc", ctypes.c_int, [_P]),
    ("krt_device_name", ctypes.c_char_p, [_P]),
    ("krt_alloc", ctypes.c_int, [_P, _sz, ctypes.POINTER(ctypes.c_uint64), _P]),
    ("krt_free", ctypes.c_int, [_P, ctypes.c_uint64, _P]),
    ("krt_upload", ctypes.c_int, [_P, ctypes.c_uint64, _P, _sz, _P]),
    ("krt_download", ctypes.c_int, [_P, _P, ctypes.c_uint64, _sz, _P]),
    ("krt_module_load", ctypes.c_int, [_P, ctypes.c_char_p, _sz, ctypes.POINTER(_P), _P]),
    ("krt_module_unload", None, [_P]),
    ("krt_module_ctas_per_sm", ctypes.c_int, [_P]),
    ("krt_launch", ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_int, _P, _P]),
]:
    _f = getattr(_lib, _name)
    _f.restype = _res
    _f.argtypes = _args

if _lib.kgp_sizeof_arg() != ARG_BYTES or _lib.kgp_sizeof_err() != ctypes.sizeof(_Err):
    raise ImportError("kgen: the native library's KrtArg/KrtErr layout is not the one "
                      "kgen/_native.py packs (rebuild the package)")

_local = threading.local()


def _err():
    e = getattr(_local, "err", None)
    if e is None:
        e = _local.err = _Err()
    return e


def _raise(what, e):
    raise KrtError("%s: %s" % (what, e.msg.decode("utf-8", "replace")))


def generate(family, args):
    """PTX text of family with CLI-style arguments; ValueError with the
    generator's one-line message when it refuses the configuration."""
    argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
    ptx, n = _P(), _sz()
    msg = ctypes.create_string_buffer(1024)
    if _lib.kgp_generate(family.encode(), len(args), argv, ctypes.byref(ptx), ctypes.byref(n),
                         msg, len(msg)):
        raise ValueError("kgen %s: %s" % (family, msg.value.decode("utf-8", "replace")))
    try:
        return ctypes.string_at(ptx, n.value).decode()
    finally:
        _lib.kgp_free(ptx)


def gpu_present():
    return bool(_lib.krt_gpu_present())


class Device:
    """A libkrt device: "cuda" (ordinal: the CUDA device, its primary
    context, which is the one PyTorch uses) or "emu"."""

    def __init__(self, kind, ordinal=0):
        h, e = _P(), _err()
        if _lib.krt_device_open(ctypes.byref(h), kind.encode(), ordinal, ctypes.byref(e)):
            _raise("kgen: opening device %s:%d" % (kind, ordinal), e)
        self.h, self.kind, self.ordinal = h, kind, ordinal
        self.cc = _lib.krt_device_cc(h)

    def alloc(self, nbytes):
        p, e = ctypes.c_uint64(), _err()
        if _lib.krt_alloc(self.h, max(nbytes, 16), ctypes.byref(p), ctypes.byref(e)):
            _raise("kgen: krt_alloc(%d)" % nbytes, e)
        return p.value

    def free(self, p):
        _lib.krt_free(self.h, p, ctypes.byref(_err()))

    def upload(self, dst, src_ptr, nbytes):
        e = _err()
        if nbytes and _lib.krt_upload(self.h, dst, src_ptr, nbytes, ctypes.byref(e)):
            _raise("kgen: krt_upload", e)

    def download(self, dst_ptr, src, nbytes):
        e = _err()
        if nbytes and _lib.krt_download(self.h, dst_ptr, src, nbytes, ctypes.byref(e)):
            _raise("kgen: krt_download", e)


_devices = {}
_dev_lock = threading.Lock()


def device(kind, ordinal=0):
    key = (kind, ordinal)
    d = _devices.get(key)
    if d is None:
        with _dev_lock:
            d = _devices.get(key)
            if d is None:
                d = _devices[key] = Device(kind, ordinal)
    return d


def _abi_params(ptx):
    """[(kind, name)] of the //@param lines (docs/ABI.md), in order."""
    out = []
    for line in ptx.splitlines():
        if line.startswith("//@param "):
            w = line.split()
            out.append((w[1], w[2]))
        elif line.startswith("//@end"):
            break
    return out


_FMT = {
    "tmap": "i4xQi4x5Q5Q",
    "ptr": "i4xQ88x",
    "u32": "i4xI92x",
    "s32": "i4xi92x",
    "u64": "i4xQ88x",
    "f32": "i4xf92x",
}


class Module:
    """A loaded kernel: its parameters by name and one struct that packs a
    whole KrtArg array in a single call."""

    def __init__(self, dev, ptx):
        h, e = _P(), _err()
        b = ptx.encode()
        if _lib.krt_module_load(dev.h, b, len(b), ctypes.byref(h), ctypes.byref(e)):
            _raise("kgen: loading the kernel", e)
        self.h, self.dev = h, dev
        # CTAs of this kernel one SM holds at once (the driver's occupancy
        # calculator; -1 on the emulator): grids sized to whole waves
        self.ctas_per_sm = _lib.krt_module_ctas_per_sm(h)
        self.params = _abi_params(ptx)
        self.names = [n for _, n in self.params]
        self.struct = struct.Struct("<" + "".join(_FMT[k] for k, _ in self.params))
        assert self.struct.size == ARG_BYTES * len(self.params)
        self._kinds = [_KIND[k] for k, _ in self.params]
        self._tmap = [k == "tmap" for k, _ in self.params]

    def pack(self, values):
        """values: one per parameter in ABI order: a tensor map as
        (ptr, dims, strides) (innermost first, strides in bytes), else a
        number."""
        flat = []
        for kind, is_tmap, v in zip(self._kinds, self._tmap, values):
            flat.append(kind)
            if is_tmap:
                ptr, dims, strides = v
                r = len(dims)
                flat.append(ptr)
                flat.append(r)
                flat.extend(dims)
                flat.extend((0,) * (MAX_RANK - r))
                flat.extend(strides)
                flat.extend((0,) * (MAX_RANK - r))
            else:
                flat.append(v)
        return self.struct.pack(*flat)

    def launch(self, packed, stream=0):
        e = _err()
        if _lib.krt_launch(self.h, packed, len(self.params), stream or None, ctypes.byref(e)):
            _raise("kgen: launching", e)
