"""What a GGUF file is, read from its header without touching the weights.

``gguf.GGUFReader`` builds numpy views of every metadata array and needs ~10 s
for the starter model's 150k-token vocabulary; llama.cpp would load the
weights.  This module walks the header itself: magic, version, the key/value
section (scalars kept, arrays skipped) and the tensor infos, reading only the
first few megabytes of the file.

Every count and length in the file is checked against the file size before it
is used, so a hostile or damaged file gets a :class:`ModelFileError` with a
plain sentence, never a crash or a multi-gigabyte allocation.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from agenvoy_desktop.core.errors import KnownError

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS: llama.cpp refuses tensors with more
_MAX_NESTING = 4  # arrays of arrays: nothing real nests deeper than 1
_READ_CHUNK = 1 << 20

# GGUF value types (gguf.GGUFValueType) -> struct code of the scalar.
_STRING, _ARRAY = 8, 9
_SCALAR_CODES = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}

# Architectures llama.cpp runs as sentence embedders (no chat).
EMBEDDING_ARCHITECTURES = frozenset(
    {
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "jina-bert-v3",
        "modern-bert",
        "neo-bert",
    }
)


class ModelFileError(KnownError, ValueError):
    """A model file that is missing, unreadable, not GGUF, damaged or truncated."""


@dataclass(frozen=True)
class GgufInfo:
    """The facts about a model file that a person choosing a model wants to see."""

    path: Path
    size_bytes: int
    gguf_version: int
    tensor_count: int
    architecture: str | None
    name: str | None
    size_label: str | None
    parameters: int | None
    """Sum of the tensors' element counts (None when the file has no tensors)."""
    context_length: int | None
    embedding_length: int | None
    block_count: int | None
    quantisation: str | None
    """From ``general.file_type`` (e.g. ``Q4_K_M``), else the type holding most bytes."""
    tokenizer_model: str | None
    pooling_type: int | None
    has_chat_template: bool
    chat_template: str | None

    @property
    def likely_embedding(self) -> bool:
        """True for sentence-embedding models (BERT family, or a pooling type set)."""
        return self.architecture in EMBEDDING_ARCHITECTURES or bool(self.pooling_type)

    def to_json(self, *, with_template: bool = False) -> dict[str, Any]:
        """Plain JSON types; the chat template (often several KB) only on request."""
        data = dataclasses.asdict(self)
        data["path"] = str(self.path)
        if not with_template:
            data.pop("chat_template")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GgufInfo:
        """Inverse of :meth:`to_json`; raises ``KeyError``/``TypeError`` on a bad record."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in fields}
        values["path"] = Path(values["path"])
        values.setdefault("chat_template", None)
        return cls(**values)


def read_gguf_info(path: Path) -> GgufInfo:
    """Read *path*'s header; raise :class:`ModelFileError` naming it if it is unusable."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            st = os.fstat(handle.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ModelFileError(f"{path}: not a regular file")
            return _parse(_Cursor(handle, st.st_size, path), path)
    except IsADirectoryError as exc:
        raise ModelFileError(f"{path}: is a folder, not a GGUF file") from exc
    except FileNotFoundError as exc:
        raise ModelFileError(f"{path}: file not found") from exc
    except PermissionError as exc:
        raise ModelFileError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc


def has_gguf_magic(path: Path) -> bool:
    """Cheap test (4 bytes) for files whose name says nothing, like Ollama blobs."""
    try:
        with Path(path).open("rb") as handle:
            return handle.read(4) == GGUF_MAGIC
    except OSError:
        return False


class _Cursor:
    """Forward reader over the file's head, growing an in-memory buffer on demand.

    Reads (not mmap) so that a file shrinking under us is an error, not SIGBUS.
    """

    def __init__(self, handle: BinaryIO, size: int, path: Path) -> None:
        self.handle = handle
        self.size = size
        self.path = path
        self.buf = bytearray()
        self.off = 0
        self.endian = "<"

    def fail(self, what: str) -> ModelFileError:
        return ModelFileError(f"{self.path}: {what}")

    def truncated(self, needed: int) -> ModelFileError:
        return self.fail(f"truncated: expected at least {needed} bytes, file has {self.size}")

    def need(self, n: int) -> None:
        """Make ``buf[off:off+n]`` available or raise 'truncated'."""
        end = self.off + n
        if end > self.size:
            raise self.truncated(end)
        if end > len(self.buf):
            want = min(self.size, max(end, len(self.buf) * 2, _READ_CHUNK)) - len(self.buf)
            self.handle.seek(len(self.buf))
            chunk = self.handle.read(want)
            self.buf += chunk
            if end > len(self.buf):  # the file shrank while we read it
                raise self.truncated(end)

    def scalar(self, code: str) -> Any:
        fmt = struct.Struct(self.endian + code)
        self.need(fmt.size)
        (value,) = fmt.unpack_from(self.buf, self.off)
        self.off += fmt.size
        return value

    def u32(self) -> int:
        value: int = self.scalar("I")
        return value

    def u64(self) -> int:
        value: int = self.scalar("Q")
        return value

    def string(self, what: str) -> str:
        length = self.u64()
        if length > self.size - self.off:
            raise self.fail(f"bad {what}: string length {length} is larger than the file")
        self.need(length)
        raw = bytes(self.buf[self.off : self.off + length])
        self.off += length
        return raw.decode("utf-8", errors="replace")

    def skip(self, n: int) -> None:
        if n > self.size - self.off:
            raise self.truncated(self.off + n)
        self.off += n

    def skip_strings(self, count: int) -> None:
        """Skip *count* length-prefixed strings: the hot loop for vocabularies.

        ``unpack_from`` raises ``struct.error`` past the buffer's end; only
        then is the buffer grown, so the loop itself does no bounds checks.
        """
        unpack = struct.Struct(self.endian + "Q").unpack_from
        start, off = 0, self.off
        while start < count:
            self.off = off
            self.need(8)
            buf = self.buf
            try:
                for i in range(start, count):  # noqa: B007 (i is read in the handler)
                    off += 8 + unpack(buf, off)[0]
            except (struct.error, OverflowError):  # past the buffer (or absurdly far)
                start = i
                continue
            start = count
        if off > self.size:
            raise self.truncated(off)
        self.off = off


def _parse(cur: _Cursor, path: Path) -> GgufInfo:
    if cur.size == 0:
        raise cur.fail("empty file, not a GGUF model")
    if cur.size < 4:
        raise cur.fail("not a GGUF file (bad magic)")
    cur.need(4)
    if bytes(cur.buf[:4]) != GGUF_MAGIC:
        raise cur.fail("not a GGUF file (bad magic)")
    cur.off = 4
    version = _read_version(cur)
    tensor_count = cur.u64()
    kv_count = cur.u64()
    _check_count(cur, kv_count, 8 + 4 + 1, "metadata entries")
    kv = _read_kv(cur, kv_count)
    _check_count(cur, tensor_count, 8 + 4 + 4 + 8, "tensors")
    tensors = _read_tensor_infos(cur, tensor_count)
    alignment = kv.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"bad general.alignment {alignment!r} (must be a power of two)")
    data_start = -(-cur.off // alignment) * alignment
    _check_tensor_data(cur, tensors, data_start, alignment)
    return _info(path, cur.size, version, kv, tensors)


def _read_version(cur: _Cursor) -> int:
    version = cur.u32()
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped not in SUPPORTED_VERSIONS:
            raise cur.fail(f"unsupported GGUF version {version} (this app reads 2 and 3)")
        cur.endian, version = ">", swapped  # a big-endian GGUF (s390x builds)
    return version


def _check_count(cur: _Cursor, count: int, min_bytes: int, what: str) -> None:
    needed = cur.off + count * min_bytes
    if needed > cur.size:  # a cut file, or a garbage count: either way, say both numbers
        raise cur.fail(
            f"truncated or damaged: {count} {what} need at least {needed} bytes, "
            f"file has {cur.size}"
        )


def _read_kv(cur: _Cursor, count: int) -> dict[str, Any]:
    kv: dict[str, Any] = {}
    for _ in range(count):
        key = cur.string("metadata key")
        value_type = cur.u32()
        kv[key] = _read_value(cur, key, value_type, depth=0)
    return kv


def _read_value(cur: _Cursor, key: str, value_type: int, depth: int) -> Any:
    """Scalars and strings are returned; arrays are skipped and returned as their length."""
    code = _SCALAR_CODES.get(value_type)
    if code is not None:
        return cur.scalar(code)
    if value_type == _STRING:
        return cur.string(f"value of {key}")
    if value_type != _ARRAY:
        raise cur.fail(f"damaged metadata: {key} has unknown value type {value_type}")
    item_type = cur.u32()
    count = cur.u64()
    if depth >= _MAX_NESTING:
        raise cur.fail(f"damaged metadata: {key} nests arrays too deeply")
    item_code = _SCALAR_CODES.get(item_type)
    if item_code is not None:
        item_size = struct.calcsize("<" + item_code)
        _check_count(cur, count, item_size, f"items in {key}")
        cur.skip(count * item_size)
    elif item_type == _STRING:
        _check_count(cur, count, 8, f"strings in {key}")
        cur.skip_strings(count)
    elif item_type == _ARRAY:
        _check_count(cur, count, 12, f"arrays in {key}")
        for _ in range(count):
            _read_value(cur, key, _ARRAY, depth + 1)
    else:
        raise cur.fail(f"damaged metadata: {key} has unknown item type {item_type}")
    return _ArrayLength(count)


class _ArrayLength(int):
    """Marks a skipped array in the metadata dict (its value is the item count)."""


@dataclass(frozen=True, slots=True)
class _TensorInfo:
    name: str
    n_elements: int
    ggml_type: int
    offset: int


def _read_tensor_infos(cur: _Cursor, count: int) -> list[_TensorInfo]:
    tensors = []
    for _ in range(count):
        name = cur.string("tensor name")
        n_dims = cur.u32()
        if n_dims > MAX_DIMS:
            raise cur.fail(f"damaged tensor info: {name!r} has {n_dims} dimensions")
        n_elements = 1
        for _ in range(n_dims):
            n_elements *= cur.u64()
        ggml_type = cur.u32()
        offset = cur.u64()
        tensors.append(_TensorInfo(name, n_elements, ggml_type, offset))
    return tensors


def _check_tensor_data(
    cur: _Cursor, tensors: list[_TensorInfo], data_start: int, alignment: int
) -> None:
    """Every tensor must be aligned and end inside the file (unknown types: offset only)."""
    sizes = _quant_sizes()
    needed = data_start if tensors else 0
    for tensor in tensors:
        if tensor.offset % alignment:
            raise cur.fail(f"damaged tensor info: {tensor.name!r} is not aligned")
        block = sizes.get(tensor.ggml_type)
        nbytes = 0
        if block is not None:
            block_size, type_size = block
            if tensor.n_elements % block_size:
                raise cur.fail(f"damaged tensor info: {tensor.name!r} has a partial block")
            nbytes = tensor.n_elements // block_size * type_size
        needed = max(needed, data_start + tensor.offset + nbytes)
    if needed > cur.size:
        raise cur.truncated(needed)


def _info(
    path: Path, size: int, version: int, kv: dict[str, Any], tensors: list[_TensorInfo]
) -> GgufInfo:
    arch = _text(kv.get("general.architecture"))

    def arch_int(suffix: str) -> int | None:
        return _int(kv.get(f"{arch}.{suffix}")) if arch else None

    template = _text(kv.get("tokenizer.chat_template"))
    return GgufInfo(
        path=path,
        size_bytes=size,
        gguf_version=version,
        tensor_count=len(tensors),
        architecture=arch,
        name=_text(kv.get("general.name")),
        size_label=_text(kv.get("general.size_label")),
        parameters=sum(t.n_elements for t in tensors) if tensors else None,
        context_length=arch_int("context_length"),
        embedding_length=arch_int("embedding_length"),
        block_count=arch_int("block_count"),
        quantisation=_quantisation(_int(kv.get("general.file_type")), tensors),
        tokenizer_model=_text(kv.get("tokenizer.ggml.model")),
        pooling_type=arch_int("pooling_type"),
        has_chat_template=bool(template),
        chat_template=template or None,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or isinstance(value, _ArrayLength):
        return None
    return value


def _quantisation(file_type: int | None, tensors: list[_TensorInfo]) -> str | None:
    names = _file_type_names()
    if file_type is not None and file_type in names:
        return names[file_type]
    by_type: dict[int, int] = {}
    sizes = _quant_sizes()
    for tensor in tensors:
        block_size, type_size = sizes.get(tensor.ggml_type, (1, 0))
        by_type[tensor.ggml_type] = by_type.get(tensor.ggml_type, 0) + (
            tensor.n_elements // block_size * type_size
        )
    if not by_type:
        return None
    dominant = max(by_type, key=lambda t: by_type[t])
    return _type_names().get(dominant, f"type {dominant}")


@functools.cache
def _quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type -> (block size, bytes per block), from the gguf package (kept current)."""
    import gguf

    return {int(t): (int(b), int(s)) for t, (b, s) in gguf.GGML_QUANT_SIZES.items()}


@functools.cache
def _type_names() -> dict[int, str]:
    import gguf

    return {int(t): t.name for t in gguf.GGMLQuantizationType}


@functools.cache
def _file_type_names() -> dict[int, str]:
    """``general.file_type`` -> ``Q4_K_M``, ``F16``, ``F32``... (GUESSED is left out)."""
    import gguf

    names = {}
    for member in gguf.LlamaFileType:
        if member.name != "GUESSED":
            names[int(member)] = member.name.removeprefix("MOSTLY_").removeprefix("ALL_")
    return names


@dataclass(frozen=True)
class TensorLayout:
    """A model's scalar metadata and each tensor's size in bytes (GPU offload planning)."""

    metadata: dict[str, Any]
    """Scalar and string values; arrays are present as their length."""
    tensor_bytes: dict[str, int]
    """Bytes of each tensor by name (``blk.3.attn_q.weight``); 0 for an unknown type."""


def read_tensor_layout(path: Path) -> TensorLayout:
    """What :func:`read_gguf_info` checks, plus the metadata values and tensor sizes."""
    info = read_gguf_info(path)  # every check and its message
    try:
        with Path(path).open("rb") as handle:
            cur = _Cursor(handle, info.size_bytes, Path(path))
            cur.need(4)
            cur.off = 4
            _read_version(cur)
            tensor_count, kv_count = cur.u64(), cur.u64()
            metadata = _read_kv(cur, kv_count)
            tensors = _read_tensor_infos(cur, tensor_count)
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    sizes = _quant_sizes()
    tensor_bytes = {}
    for tensor in tensors:
        block_size, type_size = sizes.get(tensor.ggml_type, (1, 0))
        tensor_bytes[tensor.name] = tensor.n_elements // block_size * type_size
    return TensorLayout(metadata, tensor_bytes)
