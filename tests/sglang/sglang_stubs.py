# SPDX-License-Identifier: Apache-2.0
"""Stubs for the imports of SGLang's pinned tree that Debian 12 cannot
satisfy, and shims for what its code needs from a torch newer than Debian's
1.13. Only imports are stubbed: no SGLang module is replaced, and SGLang's
disaggregation code (srt/disaggregation/) runs as it is. install() must run
before the first `import sglang`.

Third-party modules stubbed (not in Debian 12, or only in an incompatible
version); the Debian packages that are there are installed instead
(scripts/lib.sh KVF_PKGS_SGLANG: torch 1.13, torchvision 0.14, zmq, requests,
aiohttp, psutil, pil, tqdm, dill, ipython, regex, sentencepiece, packaging,
starlette (srt/utils/common.py imports its routing);
numpy from KVF_PKGS_BUILD):

| module | imported by (first hit) | why a stub is enough |
|---|---|---|
| orjson | srt/utils/common.py | JSON of HTTP responses; no server runs |
| pybase64 | srt/utils/common.py | base64 of multimodal inputs |
| triton | srt/utils/common.py, kernels/ | GPU kernels; a call with no arguments raises (no driver), as SGLang's CPU fallbacks expect; @triton.jit returns the function. The paged allocator's kernel is replaced by SGLang's own alloc_extend_naive in harness.py |
| transformers | srt/configs/ | model configs; the harness's ServerArgs has the "dummy" model |
| pydantic, pydantic_core | srt/entrypoints/openai/protocol.py | Debian has pydantic 1.10; SGLang needs the 2.x API (field_validator, ConfigDict); only OpenAI API models use it |
| safetensors | srt/connector/serde/ | weight files |
| openai | srt/entrypoints/openai/ | OpenAI client types |
| partial_json_parser, xgrammar | srt/function_call/ | tool-call parsing, grammars |
| huggingface_hub | srt/utils/hf_transformers/ | model downloads |
| einops | srt/layers/ | tensor reshapes in model layers |
| compressed_tensors, gguf | srt/layers/quantization/ | quantized weight formats |
| msgspec | kernels/spec.py, srt/ (119 Structs) | Struct is a dataclass here (frozen, kw_only kept); its msgpack/json codecs are stubs (ZMQ messages: none are sent) |
| torch.distributed._symmetric_memory | srt/distributed/ | torch >= 2.5 CUDA symmetric memory |

torch 1.13 shims (SGLang pins torch 2.11); each is what a newer torch has,
or the nearest honest equivalent:

| shim | needed by | what it is |
|---|---|---|
| torch.utils._contextlib._DecoratorContextManager | srt/utils/common.py | torch 1.13's torch.autograd.grad_mode one |
| torch.float8_*, float4_e2m1fn_x2 | srt/utils/common.py, kernels/jit | distinct placeholder dtypes (quantized ones no harness tensor uses); torch.finfo answers their real limits |
| torch.uint16/32/64 | MetadataBuffers.bootstrap_room (uint64) | the signed dtype of the same width (rooms < 2**63) |
| torch.library.Library(kind="FRAGMENT") | srt/utils/common.py | 1.13's C++ side has FRAGMENT; only its Python check refused it |
| torch.library.infer_schema, Library._register_fake | srt/utils/custom_op.py | the op schema from the annotations; fake impls are for torch.compile only |
| torch.cpu.is_available, torch.xpu | srt/utils/common.py, platforms | True / an XPU that is not there |
| ReduceOp.SUM... as RedOpType | srt/distributed/parallel_state.py int(ReduceOp.SUM) | what torch 2 has; all_reduce takes them |
| torch.get_device_module | parallel_state.py annotations | torch.cuda (classes only; nothing runs on it) |
| torch.compiler, torch.compile | kernels/, srt/layers | no compilation: identity decorators, is_compiling() False |
| torch.amp.custom_fwd/custom_bwd, and SGLang's torch_release seen as >= 2.4 | kernels/ops/attention/fla/utils.py (asserts CUDA on torch < 2.4) | torch.cuda.amp's decorators; torch_release is raised to (2, 4) only |
| torch.cuda.MemPool, use_mem_pool, torch.cuda.memory.CUDAPluggableAllocator & co | pynccl_allocator.py, MetadataBuffers annotations | present, raising StubError if called |
| torch.func.functional_call | srt/utils/offloader.py | 1.13's torch.nn.utils.stateless.functional_call |
| torch.dtype.itemsize, Tensor.nbytes, Tensor.itemsize | memory_pool.py (KV buffer descriptors), MetadataBuffers.get_buf_infos | element_size() based properties |
"""
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import typing

import torch

MISSING = ["orjson", "pybase64", "triton", "transformers", "pydantic", "pydantic_core", "safetensors",
           "openai", "partial_json_parser", "xgrammar", "huggingface_hub", "einops", "compressed_tensors",
           "gguf", "torch.distributed._symmetric_memory"]


class StubError(RuntimeError):
    """A stubbed module was used for real (not only imported)."""


class _StubMeta(type):
    def __getattr__(cls, n):
        return _attr(f"{cls.__module__}.{cls.__qualname__}", n)


class _StubBase(metaclass=_StubMeta):
    """What a class deriving from a stubbed class (transformers.PretrainedConfig, ...) derives from."""
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__()

    def __init__(self, *args, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


_made = {}


def _attr(owner, n):
    """owner.n of a stub: a class for a capitalised name (so that it can be
    derived from, used in isinstance and in `X | None`), else a _Stub; the
    same object every time."""
    if n.startswith("__"):
        raise AttributeError(n)
    key = f"{owner}.{n}"
    if key not in _made:
        _made[key] = type(n, (_StubBase,), {"__module__": owner}) if n[:1].isupper() and not n.isupper() else _Stub(key)
    return _made[key]


class _Stub:
    def __init__(self, name): self._name = name
    def __getattr__(self, n):
        return _attr(self._name, n)
    def __or__(self, o): return typing.Any
    __ror__ = __or__
    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]                      # @decorator
        if not a and not k and self._name.startswith("triton."):
            # triton.runtime.driver.active.get_current_target() & co: no
            # GPU driver here, as SGLang's "except BaseException" expects
            raise StubError(f"{self._name}() called: the module is a stub (tests/sglang/sglang_stubs.py)")
        return _Stub(f"{self._name}(...)")   # @decorator(args) / Config(...)
    def __mro_entries__(self, bases): return (_StubBase,)
    def __getitem__(self, k): return _Stub(f"{self._name}[]")
    def __setitem__(self, k, v): pass
    def __iter__(self): return iter(())
    def __contains__(self, k): return False
    def __len__(self): return 0


class _StubModule(types.ModuleType):
    def __getattr__(self, n):
        return _attr(self.__name__, n)

class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if any(name == m or name.startswith(m + ".") for m in MISSING):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        m = _StubModule(spec.name); m.__path__ = []; return m
    def exec_module(self, m): pass

def _msgspec():
    import dataclasses
    m = types.ModuleType("msgspec")
    class Struct:
        def __init_subclass__(cls, frozen=False, kw_only=False, **_ignored):
            super().__init_subclass__()
            dataclasses.dataclass(cls, frozen=frozen, kw_only=kw_only)
    m.Struct = Struct
    m.NODEFAULT = dataclasses.MISSING
    def field(default=dataclasses.MISSING, default_factory=dataclasses.MISSING, name=None):
        return dataclasses.field(default=default, default_factory=default_factory)
    m.field = field
    st = types.ModuleType("msgspec.structs")
    st.replace, st.asdict, st.astuple, st.fields = (dataclasses.replace, dataclasses.asdict,
                                                     dataclasses.astuple, dataclasses.fields)
    st.force_setattr = object.__setattr__
    m.structs = st
    m.to_builtins = lambda o, **k: dataclasses.asdict(o)
    subs = {"msgspec": m, "msgspec.structs": st}
    for sub in ("msgpack", "json"):   # ZMQ wire codecs: the harness sends nothing over them
        sm = _StubModule(f"msgspec.{sub}")
        setattr(m, sub, sm)
        subs[f"msgspec.{sub}"] = sm
    return subs

def _infer_schema(fn, mutates_args=(), op_name=None):
    """torch.library.infer_schema (torch >= 2.5) for torch 1.13: the op's
    schema string "(args) -> ret" from fn's annotations."""
    import inspect
    import typing
    hints = typing.get_type_hints(fn)
    T = torch.Tensor
    base = {T: "Tensor", int: "int", float: "float", bool: "bool", str: "str",
            torch.dtype: "ScalarType", torch.device: "Device", type(None): "()"}

    def ty(a):
        if a in base:
            return base[a]
        origin, args = typing.get_origin(a), typing.get_args(a)
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            return ty([x for x in args if x is not type(None)][0]) + "?"
        if origin in (list, typing.List, typing.Sequence) or str(origin) == "collections.abc.Sequence":
            return ty(args[0]) + "[]"
        if origin in (tuple,):
            return "(" + ", ".join(ty(x) for x in args) + ")"
        raise TypeError(f"infer_schema shim: no schema type for {a!r} in {fn.__name__}")

    def default(v):
        if v is None or isinstance(v, (bool, int, float)):
            return repr(v) if not isinstance(v, bool) else str(v)
        if isinstance(v, str):
            return '"' + v + '"'
        raise TypeError(f"infer_schema shim: default {v!r} in {fn.__name__}")

    out, alias = [], 0
    mutates = set(mutates_args or ())
    for name, prm in inspect.signature(fn).parameters.items():
        t = ty(hints.get(name, prm.annotation))
        if name in mutates:
            t = t.replace("Tensor", f"Tensor(a{alias}!)", 1)
            alias += 1
        d = "" if prm.default is inspect.Parameter.empty else "=" + default(prm.default)
        out.append(f"{t} {name}{d}")
    ret = ty(hints.get("return", type(None)))
    return "(" + ", ".join(out) + ") -> " + ret


class _AfterExec(importlib.abc.MetaPathFinder):
    """Runs fix(module) right after one SGLang module has executed."""
    def __init__(self, name, fix): self.name, self.fix = name, fix
    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        real_exec, fix = spec.loader.exec_module, self.fix
        class _L(importlib.abc.Loader):
            def create_module(self, s): return None
            def exec_module(self, m):
                real_exec(m)
                fix(m)
        spec.loader = _L()
        return spec


def _torch_release_24(common):
    common.torch_release = max(tuple(common.torch_release), (2, 4, 0))


# torch >= 2.1 dtypes torch 1.13 lacks. The unsigned ones alias the signed
# type of the same width (MetadataBuffers' bootstrap_room column is uint64:
# same 8-byte rows, rooms < 2**63). The float8/float4 ones are distinct
# placeholder dtypes that no harness tensor uses (the KV pools are float16/
# bfloat16), with torch.finfo answering their real limits.
_FP_PLACEHOLDERS = {  # name: (placeholder, finfo max, finfo min, eps, tiny)
    "float8_e4m3fn": ("quint4x2", 448.0, -448.0, 0.125, 2.0 ** -6),
    "float8_e5m2": ("quint2x4", 57344.0, -57344.0, 0.25, 2.0 ** -14),
    "float8_e4m3fnuz": ("qint32", 240.0, -240.0, 0.125, 2.0 ** -7),
    "float8_e5m2fnuz": ("quint8", 57344.0, -57344.0, 0.25, 2.0 ** -15),
    "float8_e8m0fnu": ("complex32", 2.0 ** 127, 2.0 ** -127, 1.0, 2.0 ** -127),
    "float4_e2m1fn_x2": ("qint8", 6.0, -6.0, 0.5, 1.0),
}
_UNSIGNED = {"uint16": "int16", "uint32": "int32", "uint64": "int64"}


def _dtypes():
    finfo_of = {}
    for n, (ph, mx, mn, eps, tiny) in _FP_PLACEHOLDERS.items():
        if not hasattr(torch, n):
            setattr(torch, n, getattr(torch, ph))
            finfo_of[getattr(torch, ph)] = types.SimpleNamespace(
                max=mx, min=mn, eps=eps, tiny=tiny, smallest_normal=tiny, bits=8, dtype=n)
    for n, signed in _UNSIGNED.items():
        if not hasattr(torch, n):
            setattr(torch, n, getattr(torch, signed))
    if finfo_of and not getattr(torch.finfo, "_kvf_shim", False):
        real = torch.finfo

        def finfo(dtype=None):
            if dtype in finfo_of:
                return finfo_of[dtype]
            return real() if dtype is None else real(dtype)
        finfo._kvf_shim = True
        torch.finfo = finfo


def _unavailable(qualname):
    """A torch >= 2 CUDA internal that only a GPU run would call."""
    def f(*a, **k):
        raise StubError(f"{qualname}: not in torch {torch.__version__} (tests/sglang/sglang_stubs.py)")
    name = qualname.rsplit(".", 1)[-1]
    if name[:1].isupper():  # a class: annotations and isinstance work, instances do not
        return type(name, (), {"__init__": lambda self, *a, **k: f()})
    f.__name__ = name
    return f


# torch >= 2 names that SGLang modules import at import time (CUDA memory
# pools, NCCL allocator): present, and raising StubError if ever called.
_TORCH_UNAVAILABLE = {
    "torch.cuda.memory": ["CUDAPluggableAllocator", "_cuda_beginAllocateCurrentThreadToPool",
                          "_cuda_endAllocateToPool", "_cuda_releasePool"],
    "torch.cuda": ["MemPool", "use_mem_pool"],
}


_installed = False


def install():
    """Install the stubs and shims (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.meta_path.insert(0, _AfterExec("sglang.srt.utils.common", _torch_release_24))
    import torch.amp
    if not hasattr(torch.amp, "custom_fwd"):
        def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
            if fwd is None:
                return lambda f: custom_fwd(f, device_type=device_type, cast_inputs=cast_inputs)
            return torch.cuda.amp.custom_fwd(fwd, cast_inputs=cast_inputs)
        def custom_bwd(bwd=None, *, device_type):
            if bwd is None:
                return lambda f: custom_bwd(f, device_type=device_type)
            return torch.cuda.amp.custom_bwd(bwd)
        torch.amp.custom_fwd, torch.amp.custom_bwd = custom_fwd, custom_bwd
    if "msgspec" not in sys.modules:
        sys.modules.update(_msgspec())
    sys.meta_path.insert(0, _Finder())
    import torch.autograd.grad_mode as gm
    m = types.ModuleType("torch.utils._contextlib"); m._DecoratorContextManager = gm._DecoratorContextManager
    sys.modules["torch.utils._contextlib"] = m
    _dtypes()
    import torch.library as tl
    if not getattr(tl.Library, "_kvf_shim", False):
        _L = tl.Library
        class Library(_L):
            _kvf_shim = True
            def __init__(self, ns, kind, dispatch_key=""):
                if kind != "FRAGMENT":
                    return _L.__init__(self, ns, kind, dispatch_key)
                self.m = torch._C._dispatch_library(kind, ns, dispatch_key, __file__, 0)
                self.ns, self._op_impls, self.kind, self.dispatch_key = ns, set(), kind, dispatch_key
        Library._register_fake = lambda self, name, fn: None  # fake (meta) impls: torch.compile only
        tl.Library = Library
    if not hasattr(tl, "infer_schema"):
        tl.infer_schema = _infer_schema
    if not hasattr(torch.cpu, "is_available"):
        torch.cpu.is_available = lambda: True
    import torch.distributed as dist
    R = dist.ReduceOp
    for n in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "AVG", "PREMUL_SUM"):
        if hasattr(R.RedOpType, n) and not isinstance(getattr(R, n, None), R.RedOpType):
            setattr(R, n, getattr(R.RedOpType, n))
    if not hasattr(torch, "get_device_module"):
        torch.get_device_module = lambda device=None: torch.cuda
    if not hasattr(torch, "compiler"):  # torch >= 2.1; nothing is compiled here
        c = types.ModuleType("torch.compiler")
        def _identity(fn=None, *a, **k):
            return fn if callable(fn) else (lambda f: f)
        c.disable = c.assume_constant_result = c.allow_in_graph = _identity
        c.is_compiling = c.is_dynamo_compiling = lambda: False
        c.set_stance = lambda *a, **k: None
        torch.compiler = c
        sys.modules["torch.compiler"] = c
    for modname, names in _TORCH_UNAVAILABLE.items():
        mod = importlib.import_module(modname)
        for n in names:
            if not hasattr(mod, n):
                setattr(mod, n, _unavailable(f"{modname}.{n}"))
    if "torch.func" not in sys.modules:  # torch >= 2.0; 1.13 has functional_call elsewhere
        try:
            importlib.import_module("torch.func")
        except ImportError:
            from torch.nn.utils.stateless import functional_call
            fm = types.ModuleType("torch.func")
            fm.functional_call = functional_call
            sys.modules["torch.func"] = torch.func = fm
    if not hasattr(torch, "compile"):  # torch >= 2.0: eager here (the harness runs no model)
        def compile(model=None, **kwargs):
            return model if model is not None else (lambda f: f)
        torch.compile = compile
    if not hasattr(torch.float16, "itemsize"):  # torch >= 2.1: dtype.itemsize
        import ctypes
        import gc
        gc.get_referents(torch.dtype.__dict__)[0]["itemsize"] = property(
            lambda self: torch.empty((), dtype=self).element_size())
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(torch.dtype))
    if not hasattr(torch.Tensor, "nbytes"):  # torch >= 2.1
        torch.Tensor.nbytes = property(lambda t: t.numel() * t.element_size())
    if not hasattr(torch.Tensor, "itemsize"):
        torch.Tensor.itemsize = property(lambda t: t.element_size())
    if not hasattr(torch, "xpu"):
        torch.xpu = types.SimpleNamespace(is_available=lambda: False)
