"""One launch of a kernel whose parameters are plain pointers, tensor maps
and scalars, for the families whose calls check everything first and then
only bind addresses (topk, decode_merge, indexer, the block-scaled gemm
and gemm_moe).

Each parameter of the ABI header (docs/ABI.md) gets one value by name:
    In(x)            an input array, dense (the caller's checks made sure)
    Map(x, dims, st) an input array behind a tensor map: dims innermost
                     first, strides in bytes
    Out(x)           an output array the kernel writes (dense)
    Scratch(n, zero) n bytes the kernel uses: zeroed if zero, else any
    a number         a scalar
CUDA tensors pass their addresses and launch on PyTorch's current stream;
CPU arrays are copied to the emulator, outputs start poisoned (NaN bytes)
so an element the kernel leaves unwritten shows, and come back after."""

from ._tensors import address, contiguous, is_torch, torch_module


class In:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


class Map:
    __slots__ = ("x", "dims", "strides")

    def __init__(self, x, dims, strides):
        self.x, self.dims, self.strides = x, tuple(dims), tuple(strides)


class Out:
    __slots__ = ("x", "keep")

    def __init__(self, x, keep=False):
        # keep: the kernel leaves some elements alone (MoE rows no expert
        # owns): the emulator starts from x's contents instead of poison
        self.x, self.keep = x, keep


class Scratch:
    __slots__ = ("n", "zero")

    def __init__(self, n, zero):
        self.n, self.zero = n, zero


def _nbytes(x):
    return x.numel() * x.element_size() if is_torch(x) else x.nbytes


def _host(x):
    """A dense host copy of x (NumPy, or a CPU torch tensor)."""
    if is_torch(x):
        return x.detach().contiguous()
    return contiguous(x)[0]


def launch(dev, mod, vals):
    """Launches mod with vals (a dict by parameter name, above) on dev."""
    if dev.kind == "emu":
        _launch_emu(dev, mod, vals)
    else:
        _launch_cuda(dev, mod, vals)


def _launch_cuda(dev, mod, vals):
    torch = torch_module()
    keep, packed = [], []
    for name in mod.names:
        v = vals[name]
        if isinstance(v, (In, Out)):
            packed.append(v.x.data_ptr())
        elif isinstance(v, Map):
            packed.append((v.x.data_ptr(), v.dims, v.strides))
        elif isinstance(v, Scratch):
            words = -(-max(v.n, 16) // 4)
            t = (torch.zeros if v.zero else torch.empty)(words, dtype=torch.int32,
                                                          device="cuda:%d" % dev.ordinal)
            keep.append(t)  # back to the caching allocator once the launch is queued
            packed.append(t.data_ptr())
        else:
            packed.append(v)
    mod.launch(mod.pack(packed), torch._C._cuda_getCurrentRawStream(dev.ordinal))


def _launch_emu(dev, mod, vals):
    import numpy as np

    bufs, back, packed = [], [], []
    try:
        def put(src_addr, n, fill=None):
            p = dev.alloc(n + 16)
            bufs.append(p)
            if fill is not None:
                f = np.full(n, fill, np.uint8)
                dev.upload(p, f.__array_interface__["data"][0], n)
            elif n:
                dev.upload(p, src_addr, n)
            return p

        hold = []
        for name in mod.names:
            v = vals[name]
            if isinstance(v, (In, Map)):
                h = _host(v.x)
                hold.append(h)
                p = put(address(h), _nbytes(h))
                packed.append(p if isinstance(v, In) else (p, v.dims, v.strides))
            elif isinstance(v, Out):
                n = _nbytes(v.x)
                if v.keep:
                    h = _host(v.x)
                    hold.append(h)
                    p = put(address(h), n)
                else:
                    p = put(0, n, 0xFF)
                back.append((v.x, p, n))
                packed.append(p)
            elif isinstance(v, Scratch):
                packed.append(put(0, max(v.n, 16), 0 if v.zero else 0xFF))
            else:
                packed.append(v)
        mod.launch(mod.pack(packed), None)
        for x, p, n in back:
            dev.download(address(x), p, n)
    finally:
        for p in bufs:
            dev.free(p)
