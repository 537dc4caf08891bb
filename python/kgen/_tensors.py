"""What the calls need to know of an array, for PyTorch tensors and NumPy
arrays alike: element type, shape, strides (elements), device, address;
and how to make outputs and bring CPU data to the emulator."""

_TORCH_DT = {}
_NP_DT = {"float16": "fp16", "bfloat16": "bf16", "float32": "f32", "int32": "s32",
          "float64": "f64", "uint8": "u8", "int8": "s8", "uint16": "u16",
          "float8_e4m3fn": "e4m3", "float8_e8m0fnu": "ue8m0"}
ESIZE = {"bf16": 2, "fp16": 2, "f32": 4, "s32": 4, "f64": 8, "u8": 1, "s8": 1, "e4m3": 1,
         "u16": 2}


try:  # optional: NumPy arrays run on the emulator without it
    import torch as _torch
except Exception:  # absent, or installed without its libraries
    _torch = None


def torch_module():
    return _torch


def is_torch(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def _torch_dtypes(torch):
    if not _TORCH_DT:
        _TORCH_DT.update({torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "f32",
                          torch.int32: "s32", torch.float64: "f64", torch.uint8: "u8",
                          torch.int8: "s8"})
        e4m3 = getattr(torch, "float8_e4m3fn", None)
        if e4m3 is not None:
            _TORCH_DT[e4m3] = "e4m3"
        e8m0 = getattr(torch, "float8_e8m0fnu", None)
        if e8m0 is not None:
            _TORCH_DT[e8m0] = "ue8m0"
        fp4x2 = getattr(torch, "float4_e2m1fn_x2", None)
        if fp4x2 is not None:
            _TORCH_DT[fp4x2] = "e2m1x2"
    return _TORCH_DT


class View:
    """One argument as the checks see it."""

    __slots__ = ("x", "name", "torch", "dtype", "shape", "strides", "device", "index", "ptr")

    def __init__(self, name, x):
        self.name, self.x = name, x
        if is_torch(x):
            self.torch = True
            self.dtype = _torch_dtypes(torch_module()).get(x.dtype, str(x.dtype))
            self.shape = tuple(x.shape)
            self.strides = tuple(x.stride())
            dev = x.device
            self.device = dev.type
            self.index = dev.index if dev.index is not None else 0
            self.ptr = x.data_ptr()
        elif hasattr(x, "__array_interface__") and hasattr(x, "dtype"):
            self.torch = False
            self.dtype = _NP_DT.get(x.dtype.name, x.dtype.name)
            self.shape = tuple(x.shape)
            isz = x.dtype.itemsize
            if any(s % isz for s in x.strides):
                raise ValueError("%s: strides %s bytes are not whole elements of %d bytes"
                                 % (name, x.strides, isz))
            self.strides = tuple(s // isz for s in x.strides)
            self.device, self.index = "cpu", 0
            self.ptr = x.__array_interface__["data"][0]
        else:
            raise TypeError("%s: a %s; kgen takes torch.Tensor (CPU or CUDA) or numpy.ndarray"
                            % (name, type(x).__name__))

    def where(self):
        return "cuda:%d" % self.index if self.device == "cuda" else self.device


def empty(like, shape, dtype):
    """A new contiguous array on like's device (like: a View)."""
    if like.torch:
        torch = torch_module()
        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "f32": torch.float32,
               "s32": torch.int32, "u8": torch.uint8,
               "e4m3": getattr(torch, "float8_e4m3fn", None)}[dtype]
        return torch.empty(shape, dtype=tdt, device=like.x.device)
    import numpy as np

    if dtype in ("bf16", "u16"):
        # a bf16 input's own dtype (ml_dtypes' bfloat16, or uint16 holding
        # bf16 bit patterns); from other inputs ml_dtypes' bfloat16 where
        # installed, else uint16 bit patterns
        ndt = like.x.dtype
        if ndt.name not in ("bfloat16", "uint16"):
            try:
                import ml_dtypes

                ndt = ml_dtypes.bfloat16
            except ImportError:
                ndt = np.uint16
    else:
        # E4M3 as uint8 codes
        ndt = {"fp16": np.float16, "f32": np.float32, "s32": np.int32, "u8": np.uint8,
               "e4m3": np.uint8}[dtype]
    return np.empty(shape, dtype=ndt)


def contiguous(x):
    """x with a dense row-major layout (a copy where needed), its address."""
    if is_torch(x):
        x = x.contiguous()
        return x, x.data_ptr()
    import numpy as np

    x = np.ascontiguousarray(x)
    return x, x.__array_interface__["data"][0]


def address(x):
    return x.data_ptr() if is_torch(x) else x.__array_interface__["data"][0]
