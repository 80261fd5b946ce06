"""fusegrad's dtypes and PyTorch's type-promotion rules.

A dtype wraps the NumPy dtype that stores it; bfloat16 comes from ml_dtypes."""
from __future__ import annotations

import numpy as np

try:  # ml_dtypes ships bfloat16 as a real NumPy dtype
    import ml_dtypes as _ml
    _BF16 = np.dtype(_ml.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BF16 = None

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class dtype:
    """A tensor element type, printed as ``fusegrad.float32``."""
    __slots__ = ("name", "np", "category", "rank", "itemsize")

    def __init__(self, name: str, npdt, category: int, rank: int):
        self.name = name
        self.np = np.dtype(npdt) if npdt is not None else None
        self.category = category
        self.rank = rank
        self.itemsize = self.np.itemsize if self.np is not None else 2

    @property
    def is_floating_point(self) -> bool:
        return self.category == _FLOAT

    @property
    def is_complex(self) -> bool:
        return self.category == _COMPLEX

    def to_real(self) -> "dtype":
        """The real dtype of a complex one's parts (``complex64.to_real()`` is float32); others
        are returned as they are."""
        return _REAL.get(self, self)

    def to_complex(self) -> "dtype":
        """The complex dtype with this float dtype's parts (float32: complex64; float16 and
        bfloat16, which have no complex dtype here, complex64); complex dtypes stay."""
        if self.category == _COMPLEX:
            return self
        if self.category != _FLOAT:
            raise RuntimeError(f"to_complex is only supported for floating point dtypes, got {self}")
        return complex128 if self.rank >= 4 else complex64

    @property
    def is_signed(self) -> bool:
        return not self.name.startswith("uint") and self.name != "bool"

    def __repr__(self) -> str:
        return "fusegrad." + self.name

    def __reduce__(self):
        return self.name


bool_ = dtype("bool", np.bool_, _BOOL, 0)
uint8 = dtype("uint8", np.uint8, _INT, 1)
int8 = dtype("int8", np.int8, _INT, 2)
int16 = dtype("int16", np.int16, _INT, 3)
int32 = dtype("int32", np.int32, _INT, 4)
int64 = dtype("int64", np.int64, _INT, 5)
# PyTorch's "shell" unsigned dtypes (16-bit images, hashes): stored and converted, no promotion
uint16 = dtype("uint16", np.uint16, _INT, 3)
uint32 = dtype("uint32", np.uint32, _INT, 4)
uint64 = dtype("uint64", np.uint64, _INT, 5)
_SHELL = (uint16, uint32, uint64)
float16 = dtype("float16", np.float16, _FLOAT, 1)
bfloat16 = dtype("bfloat16", _BF16, _FLOAT, 1)
float32 = dtype("float32", np.float32, _FLOAT, 3)
float64 = dtype("float64", np.float64, _FLOAT, 4)
complex64 = dtype("complex64", np.complex64, _COMPLEX, 3)
complex128 = dtype("complex128", np.complex128, _COMPLEX, 4)
_REAL = {complex64: float32, complex128: float64}

ALL = (bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64, complex64,
       complex128)


def np_half(d: np.dtype) -> bool:
    """Whether a NumPy dtype is float16 or bfloat16: sums over it accumulate in float32 on the
    CPU (PyTorch's accumulation type there)."""
    return d.itemsize == 2 and d.kind in "fV"


def np_floating(d: np.dtype) -> bool:
    """Whether a NumPy dtype is a float one (ml_dtypes' bfloat16 has NumPy kind "V", not "f")."""
    return d.kind == "f" or d == _BF16


def np_differentiable(d: np.dtype) -> bool:
    """Whether gradients flow through values of NumPy dtype ``d``: floats and complex numbers."""
    return d.kind in "fc" or d == _BF16
_BY_NP = {d.np: d for d in ALL if d.np is not None}
_BY_NAME = {d.name: d for d in ALL}


def from_numpy_dtype(npdt) -> dtype:
    """The fusegrad dtype stored as NumPy dtype ``npdt``."""
    try:
        return _BY_NP[npdt]
    except KeyError:
        npdt = np.dtype(npdt)
        if npdt in _BY_NP:
            return _BY_NP[npdt]
        raise TypeError(f"fusegrad has no dtype for NumPy dtype {npdt}") from None


def to_dtype(d) -> dtype:
    """Accept a fusegrad dtype, a NumPy dtype, a Python type (``float`` is float64, as in
    PyTorch) or a name."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return float64
    if d is int:
        return int64
    if d is bool:
        return bool_
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    return from_numpy_dtype(np.dtype(d))


class _Default:
    __slots__ = ("dtype",)

    def __init__(self):
        self.dtype = float32


_DEFAULT = _Default()  # the process-wide default float dtype, as in PyTorch


def get_default_dtype() -> dtype:
    """The dtype that Python floats and float factories produce."""
    return _DEFAULT.dtype


def set_default_dtype(d) -> None:
    """Set the default floating dtype (float32 or float64)."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _DEFAULT.dtype = d


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both ``a`` and ``b`` convert to, as torch.promote_types."""
    if a is b:
        return a
    if a in _SHELL or b in _SHELL:
        raise RuntimeError(f"Promotion for uint16, uint32, uint64 types is not supported, attempted to promote "
                           f"{SCALAR_NAMES[a.name]} and {SCALAR_NAMES[b.name]}")
    if a.category != b.category:
        hi, lo = (a, b) if a.category > b.category else (b, a)
        if hi.category == _COMPLEX and lo.category == _FLOAT and lo.rank > hi.rank:
            return complex128  # complex64 with float64: the parts need float64
        return hi
    if a.rank == b.rank:  # float16 with bfloat16
        return float32
    if a is uint8 or b is uint8:  # uint8 with a signed int needs the next signed width
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a.rank > b.rank else b


#: PyTorch's ScalarType names ("Float"), which its error messages print
SCALAR_NAMES = {"uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64", "int64": "Long", "int32": "Int",
                    "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool", "float32": "Float",
                    "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "complex64": "ComplexFloat",
                    "complex128": "ComplexDouble"}


def _scalar_dtype(v) -> dtype:
    if isinstance(v, bool):
        return bool_
    if isinstance(v, int):
        return int64
    if isinstance(v, complex):
        return get_default_dtype().to_complex()
    return get_default_dtype()


def result_type(*args) -> dtype:
    """PyTorch's result type: tensors with dimensions outrank 0-d tensors, which outrank
    Python scalars, except where a lower group has a higher category (bool < int < float)."""
    groups = [None, None, None]  # dimensioned tensors, 0-d tensors, Python scalars
    for a in args:
        if hasattr(a, "_data"):
            g, d = (0 if a._data.ndim else 1), from_numpy_dtype(a._data.dtype)
        elif isinstance(a, (bool, int, float, complex, np.number, np.bool_)):
            if isinstance(a, (np.number, np.bool_)):
                a = a.item()
            g, d = 2, _scalar_dtype(a)
        else:
            continue
        groups[g] = d if groups[g] is None else promote_types(groups[g], d)
    out = None
    for g, d in enumerate(groups):
        if d is None:
            continue
        if out is None:
            out = d
        elif d.category > out.category:
            if d.category == _COMPLEX and out.category == _FLOAT:
                out = out.to_complex()  # a float tensor keeps its precision (PyTorch's combine_categories)
            else:
                out = get_default_dtype() if (g == 2 and d.category == _FLOAT) else d
    return out if out is not None else get_default_dtype()
