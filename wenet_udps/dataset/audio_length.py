"""Whether an audio file holds all the data its header declares: a cut file is refused, never read short.

libsndfile reads a WAV, RF64, W64, AIFF, AU, CAF or NIST SPHERE file whose data was cut off as a shorter
recording (a .sph cut to half its bytes gives 31,744 of the 64,000 samples its header counts), and an Ogg stream
cut before its last page as a shorter stream (13,440 of 64,000 samples), without an error. :func:`missing_data`
compares the data size each of these headers declares with the bytes present. Ogg declares no length: its last
page must be whole and carry the end-of-stream flag, which only the encoder's final page has. A cut FLAC file fails
in libsndfile itself, and a cut MP3 reads fewer frames than libsndfile announces (``audio.read_frames`` checks
that).
"""
import struct
from typing import BinaryIO, Dict, Optional

_W64_TAIL = bytes.fromhex("F3ACD3118CD100C04F8EDB8A")   # the GUID bytes after a four-letter W64 chunk name
_W64_RIFF = b"riff" + bytes.fromhex("2E91CF11A5D628DB04C10000")
_UNKNOWN32 = 0xFFFFFFFF                                   # a streamed file's size field: nothing to compare
_OGG_MAX_PAGE = 27 + 255 + 255 * 255                      # header, lacing values, payload
_NIST_CODINGS = ("pcm", "ulaw", "mu-law", "alaw")         # uncompressed: data bytes = samples x channels x width


def missing_data(f: BinaryIO, size: int) -> Optional[str]:
    """Why the file of ``size`` bytes open as ``f`` is cut (e.g. "the NIST header's sample_count 64000 (x 1 channel
    x 2 bytes) needs 128000 bytes of data, 63488 are present"), or None when it is whole or its format declares no
    length. Large metadata chunks are skipped with seeks, not read."""
    head = f.read(16)
    if head[:4] in (b"RIFF", b"RF64") and head[8:12] == b"WAVE":
        return _riff(f, size, head[:4] == b"RF64")
    if head == _W64_RIFF:
        return _w64(f, size)
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return _chunks_to_data(f, size, 12, b"SSND", ">I", "AIFF")
    if head[:4] == b"caff":
        return _caf(f, size)
    if head[:4] == b".snd" and len(head) >= 12:
        offset, length = struct.unpack(">II", head[4:12])
        return None if length == _UNKNOWN32 else _compare("AU header", offset + length, size)
    if head[:8] == b"NIST_1A\n":
        return _nist(f, size)
    if head[:4] == b"OggS":
        return _ogg(f, size)
    return None


def _compare(what: str, end: int, size: int) -> Optional[str]:
    if end <= size:
        return None
    return f"the {what} declares data up to byte {end}, the file has {size} bytes ({end - size} missing)"


def _riff(f: BinaryIO, size: int, rf64: bool) -> Optional[str]:
    """RIFF/RF64 WAVE: the ``data`` chunk's declared size (RF64: the 64-bit one of its ``ds64`` chunk)."""
    wide = None
    pos = 12
    while pos + 8 <= size:
        f.seek(pos)
        chunk = f.read(16)
        if len(chunk) < 8:
            return None
        (length,) = struct.unpack("<I", chunk[4:8])
        if rf64 and chunk[:4] == b"ds64" and len(chunk) >= 16:
            f.seek(pos + 16)
            (wide,) = struct.unpack("<Q", f.read(8).ljust(8, b"\0"))
        if chunk[:4] == b"data":
            if length == _UNKNOWN32 and wide is not None:
                length = wide
            elif length in (0, _UNKNOWN32):
                return None
            return _compare("WAV header", pos + 8 + length, size)
        pos += 8 + length + (length & 1)
    return None


def _w64(f: BinaryIO, size: int) -> Optional[str]:
    """Sony Wave64: 16-byte GUID chunk names, 64-bit sizes counting the 24-byte chunk header, 8-byte aligned."""
    pos = 40
    while pos + 24 <= size:
        f.seek(pos)
        chunk = f.read(24)
        (length,) = struct.unpack("<Q", chunk[16:24])
        if chunk[:16] == b"data" + _W64_TAIL:
            return _compare("W64 header", pos + length, size)
        if length < 24:
            return None
        pos += (length + 7) & ~7
    return None


def _chunks_to_data(f: BinaryIO, size: int, pos: int, name: bytes, fmt: str, what: str) -> Optional[str]:
    """IFF chunks (name, size, even padding) from ``pos`` up to chunk ``name``, whose declared end is compared."""
    while pos + 8 <= size:
        f.seek(pos)
        chunk = f.read(8)
        (length,) = struct.unpack(fmt, chunk[4:8])
        if chunk[:4] == name:
            return _compare(f"{what} header", pos + 8 + length, size)
        pos += 8 + length + (length & 1)
    return None


def _caf(f: BinaryIO, size: int) -> Optional[str]:
    """Apple CAF: chunks of a 4-byte type and a signed 64-bit big-endian size after an 8-byte file header; the
    ``data`` chunk's size -1 means "to the end of the file" (nothing to compare)."""
    pos = 8
    while pos + 12 <= size:
        f.seek(pos)
        chunk = f.read(12)
        (length,) = struct.unpack(">q", chunk[4:12])
        if chunk[:4] == b"data":
            return None if length < 0 else _compare("CAF header", pos + 12 + length, size)
        if length < 0:
            return None
        pos += 12 + length
    return None


def _nist(f: BinaryIO, size: int) -> Optional[str]:
    """NIST SPHERE (TIMIT, AN4, WSJ, Switchboard): ``sample_count`` x ``channel_count`` x ``sample_n_bytes``
    after a header of the size its second line gives. Compressed codings (shorten, wavpack) declare no byte
    length."""
    f.seek(0)
    lines = f.read(1024).split(b"\n")
    try:
        header_bytes = int(lines[1])
    except (IndexError, ValueError):
        return None
    if header_bytes > 1024:
        f.seek(0)
        lines = f.read(header_bytes).split(b"\n")
    fields: Dict[str, str] = {}
    for line in lines[2:]:
        parts = line.decode("ascii", "replace").split(None, 2)
        if parts and parts[0] == "end_head":
            break
        if len(parts) == 3:
            fields[parts[0]] = parts[2].strip()
    try:
        samples = int(fields["sample_count"])
        channels = int(fields.get("channel_count", "1"))
        width = int(fields.get("sample_n_bytes", "2"))
    except (KeyError, ValueError):
        return None
    if fields.get("sample_coding", "pcm").split(",")[0] not in _NIST_CODINGS:
        return None
    need = samples * channels * width
    if header_bytes + need <= size:
        return None
    return (f"the NIST header's sample_count {samples} (x {channels} channel x {width} bytes) needs {need} bytes "
            f"of data, {max(0, size - header_bytes)} are present")


def _ogg(f: BinaryIO, size: int) -> Optional[str]:
    """The file must end with a whole Ogg page flagged end-of-stream (header type bit 0x04)."""
    start = max(0, size - _OGG_MAX_PAGE)
    f.seek(start)
    tail = f.read()
    pos = tail.rfind(b"OggS")
    while pos >= 0:
        if pos + 27 <= len(tail) and tail[pos + 4] == 0:
            lacing = tail[pos + 27:pos + 27 + tail[pos + 26]]
            if pos + 27 + len(lacing) + sum(lacing) == len(tail) and len(lacing) == tail[pos + 26]:
                if tail[pos + 5] & 0x04:
                    return None
                return "its last Ogg page does not end the stream: the stream was cut after a page"
        pos = tail.rfind(b"OggS", 0, pos)
    return "its last Ogg page is cut off"
