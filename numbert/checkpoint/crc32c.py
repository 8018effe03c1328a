"""CRC-32C (Castagnoli), the checksum TensorFlow stores for every tensor of a checkpoint, in NumPy.

The stdlib has none (zlib.crc32 is another polynomial), and a byte-at-a-time Python loop runs at
a few MB/s: minutes for bert-base's 440 MB. A CRC is linear over GF(2), which gives two tricks:

1. Many chunks side by side. Cut the data into N equal chunks and run N CRC registers at once,
   one NumPy array of N uint32. Each step feeds every register its next 4 bytes with two lookups
   in 65536-entry tables (the register after 32 more bits depends linearly on its low and high
   halves, so f(x) = f(low) ^ f(high)).
2. Combining. With a zero initial register the CRC of a concatenation is
   raw(A || B) = shift(raw(A), len(B)) ^ raw(B), where shift(c, n) is c times x^(8n) modulo the
   polynomial. Adjacent chunks are merged pairwise, N -> N/2 -> ... -> 1, a level at a time.

The standard CRC (initial register and final xor 0xFFFFFFFF) is then
crc(M) = raw(M) ^ shift(0xFFFFFFFF, len(M)) ^ 0xFFFFFFFF.

Fast enough that a TensorFlow checkpoint's tensors are checked by default (docs/performance.md). When the
`google-crc32c` package (hardware CRC instructions; `pip install google-crc32c`, numbert's [crc] extra) is
installed it is used instead, several times faster (scripts/bench_load.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

POLY = 0x82F63B78  # x^32 + x^28 + ... (Castagnoli), bit-reflected
MASK_DELTA = 0xA282EAD8  # LevelDB / TensorFlow store crcs "masked", so a crc of crcs is not trivial
CHUNKS = 1 << 16  # registers run side by side on large inputs
ROWS = 32  # 4-byte rows transposed at a time (CHUNKS * ROWS * 4 bytes = 8 MB per block)


def crc32c(data: bytes | np.ndarray) -> int:
    """CRC-32C of the bytes of `data` (any C-contiguous array or bytes-like object)."""
    data = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    fast = _hardware_crc32c()
    if fast is not None:
        return fast(data)
    return raw_crc(data) ^ shift(0xFFFFFFFF, data.size) ^ 0xFFFFFFFF


def masked(crc: int) -> int:
    """The stored form of a crc: rotated right by 15 bits, plus a constant."""
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


@functools.cache
def _hardware_crc32c() -> Callable[[np.ndarray], int] | None:
    """CRC-32C by google_crc32c when the package and its C extension are installed, else None.

    Its C function takes only immutable bytes, so the data goes through in 8 MB copies.
    """
    try:
        import google_crc32c
    except ImportError:
        return None
    if google_crc32c.implementation != "c":
        return None

    def value(data: np.ndarray) -> int:
        crc = 0
        for start in range(0, data.size, 1 << 23):
            crc = google_crc32c.extend(crc, data[start : start + (1 << 23)].tobytes())
        return crc

    return value


# ---------------------------------------------------------------------------------------------
# The register, a byte and a word at a time


@functools.cache
def _byte_table() -> np.ndarray:
    """(256,) uint32: the register after shifting out one byte b (b xor'ed into its low byte)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(POLY), table >> 1).astype(np.uint32)
    return table


@functools.cache
def _word_tables() -> tuple[np.ndarray, np.ndarray]:
    """Two (65536,) uint32 tables: the register after 32 bits, from its low half and its high half."""
    byte = _byte_table()

    def advance(register: np.ndarray, nbytes: int) -> np.ndarray:
        for _ in range(nbytes):
            register = byte[register & 0xFF] ^ (register >> 8)
        return register

    half = np.arange(1 << 16, dtype=np.uint32)
    return advance(half, 4), advance(half << 16, 4)


def _raw_bytes(register: int, data: np.ndarray) -> int:
    """The register after feeding `data` one byte at a time (for short inputs)."""
    byte = _byte_table()
    for b in data.tolist():
        register = int(byte[(register ^ b) & 0xFF]) ^ (register >> 8)
    return register


def raw_crc(data: np.ndarray) -> int:
    """CRC-32C of uint8 `data` with a zero initial register and no final xor (a linear function)."""
    n = data.size
    chunks = CHUNKS
    while chunks > 1 and n < chunks * 256:  # each register should take at least 256 bytes
        chunks //= 2
    if chunks == 1:
        return _raw_bytes(0, data)
    length = n // chunks // 4 * 4  # bytes per chunk, whole words
    registers = _chunk_registers(data[: chunks * length], chunks, length)
    head = _combine(registers, length)
    tail = data[chunks * length :]
    return shift(head, tail.size) ^ raw_crc(tail)


def _chunk_registers(data: np.ndarray, chunks: int, length: int) -> np.ndarray:
    """(chunks,) uint32: the raw crc of each of `chunks` consecutive pieces of `length` bytes."""
    low, high = _word_tables()
    words = data.view("<u4").reshape(chunks, length // 4)  # row c holds chunk c
    registers = np.zeros(chunks, np.uint32)
    index, from_low = np.empty(chunks, np.uint32), np.empty(chunks, np.uint32)
    for start in range(0, words.shape[1], ROWS):
        block = np.ascontiguousarray(words[:, start : start + ROWS].T)  # (rows, chunks): row r = word r of each
        for row in block:
            registers ^= row
            np.take(low, np.bitwise_and(registers, 0xFFFF, out=index), out=from_low)
            np.take(high, np.right_shift(registers, 16, out=index), out=registers)
            registers ^= from_low
    return registers


def _combine(registers: np.ndarray, length: int) -> int:
    """The raw crc of the concatenated chunks, from each chunk's raw crc (all of `length` bytes)."""
    while registers.size > 1:
        registers = _shift_array(registers[0::2], length) ^ registers[1::2]
        length *= 2
    return int(registers[0])


# ---------------------------------------------------------------------------------------------
# Multiplying by x^(8n) modulo the polynomial: appending n zero bytes to a zero-initialised crc


def _multiply(a: int, b: int) -> int:
    """a * b modulo the polynomial, both bit-reflected (bit 31 is x^0)."""
    product = 0
    for bit in range(32):
        if a & (0x80000000 >> bit):
            product ^= b
        b = (b >> 1) ^ (POLY if b & 1 else 0)
    return product


def _x_power_8n(n: int) -> int:
    """x^(8n) modulo the polynomial, reflected, by square and multiply."""
    result, power = 0x80000000, 0x00800000  # x^0 and x^8
    while n:
        if n & 1:
            result = _multiply(result, power)
        power = _multiply(power, power)
        n >>= 1
    return result


def shift(register: int, nbytes: int) -> int:
    """A zero-initialised crc register after `nbytes` more zero bytes."""
    return _multiply(register, _x_power_8n(nbytes)) if nbytes else register


def _shift_array(registers: np.ndarray, nbytes: int) -> np.ndarray:
    """`shift` on many registers at once: the linear map applied a byte at a time, by table."""
    tables = _shift_tables(nbytes)
    result = tables[0][registers & np.uint32(0xFF)]
    for byte in range(1, 4):
        result ^= tables[byte][(registers >> np.uint32(8 * byte)) & np.uint32(0xFF)]
    return result


@functools.lru_cache(maxsize=1024)  # tensors of one shape are cut into chunks of the same lengths
def _shift_tables(nbytes: int) -> np.ndarray:
    """(4, 256) uint32: for each byte of a register and each value of it, its image under `shift(., nbytes)`."""
    images = [_x_power_8n(nbytes)]  # the image of x^0 (bit 31), then of x^1 (bit 30), ...: times x each time
    for _ in range(31):
        images.append((images[-1] >> 1) ^ (POLY if images[-1] & 1 else 0))
    basis = np.array(images[::-1], np.uint32)  # basis[bit]: the image of the register with only `bit` set
    bits = ((np.arange(256, dtype=np.uint32)[:, None] >> np.arange(8, dtype=np.uint32)) & 1).astype(bool)  # (256, 8)
    return np.stack(
        [
            np.bitwise_xor.reduce(np.where(bits, basis[8 * byte : 8 * byte + 8], np.uint32(0)), axis=1)
            for byte in range(4)
        ]
    )
