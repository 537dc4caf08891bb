"""The argument rules the newer calls share (topk, merge_attn_states,
indexer, fp8_gemm, moe_gemm): each violation raises TypeError/ValueError
as "<call>: <argument>=<value>: <rule>", before anything is generated or
launched."""

from ._attention import TARGETS, device_and_target
from ._tensors import View

INT32_MAX = (1 << 31) - 1
GRID_YZ = 65535


class Rules:
    def __init__(self, who):
        self.who = who

    def fail(self, exc, arg, value, rule):
        raise exc("%s: %s=%s: %s" % (self.who, arg, value, rule))

    def view(self, name, x, dtypes, ndim, layout, like=None):
        """x's View after its dtype (one of dtypes, a dict name -> words
        for the message), rank, device (like's) and density rules."""
        v = View(name, x)
        if v.dtype not in dtypes:
            self.fail(TypeError, name + ".dtype", v.dtype, "must be " + " or ".join(
                dtypes.values()))
        if len(v.shape) != ndim:
            self.fail(ValueError, name + ".shape", list(v.shape), "want " + layout)
        if like is not None and (v.device != like.device or v.index != like.index):
            self.fail(ValueError, name + ".device", v.where(), "must be %s's device, %s"
                      % (like.name, like.where()))
        return v

    def dense(self, v, align=16):
        if not dense(v):
            self.fail(ValueError, v.name + ".stride()", list(v.strides), "must be contiguous "
                      "(pass .contiguous())")
        if v.ptr % align:
            self.fail(ValueError, v.name + ".data_ptr()", hex(v.ptr), "must be %d-byte aligned"
                      % align)

    def shape(self, v, want, what):
        if tuple(v.shape) != tuple(want):
            self.fail(ValueError, v.name + ".shape", list(v.shape), "want %s = %s"
                      % (what, list(want)))

    def int_arg(self, name, x, lo, hi, rule):
        if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
            self.fail(ValueError if isinstance(x, int) else TypeError, name, repr(x), rule)
        return x

    def target(self, v, target, have=tuple(TARGETS.values())):
        """(libkrt device, target); have: the targets the family exists for."""
        if v.device == "cpu" and target is None:
            target = have[0]
        if target is not None and target not in have:
            self.fail(ValueError, "target", repr(target), "%s kernels are generated for %s"
                      % (self.who, " and ".join(have)))
        dev, t = device_and_target(v, target, self.who)
        if t not in have:
            self.fail(ValueError, v.name + ".device", "%s (%s)" % (v.where(), t),
                      "%s kernels are generated for %s; CPU tensors run them on the emulator"
                      % (self.who, " and ".join(have)))
        return dev, t


def dense(v):
    """Whether v's strides are row-major dense (size-1 dims ignored; an
    empty array is)."""
    if 0 in v.shape:
        return True
    acc = 1
    for n, s in zip(reversed(v.shape), reversed(v.strides)):
        if n > 1 and s != acc:
            return False
        acc *= n
    return True


def sms(dev):
    """The SM count of a CUDA libkrt device (cached)."""
    n = _sms.get(dev.ordinal)
    if n is None:
        from ._tensors import torch_module

        n = _sms[dev.ordinal] = \
            torch_module().cuda.get_device_properties(dev.ordinal).multi_processor_count
    return n


_sms = {}
