"""Whether an audio file holds all the data its header declares: whole, or refused. Never "unknown, so whole".

libsndfile reads most formats cut short as a shorter recording, without an error: a .sph cut to half its bytes
gives 31,744 of the 64,000 samples its header counts, an Ogg stream cut before its last page 13,440 of 64,000, and a
VOC, IRCAM, AVR, SVX, MAT4/5, MPC2K, PAF, PVF or WVE file half its samples (libsndfile 1.2.2, 2026-11-29). It also
detects the format from the content, so a VOC file named ``.wav`` is read as VOC. So only the formats in
:data:`FORMATS` are read: for each the length its header declares is compared with what the file holds
(:func:`length_problem`, by libsndfile's own name of the format it detected). Any other format is refused by name,
and so is a file of a read format whose header declares no length (a streamed WAV's size 0xFFFFFFFF, a CAF data
size of -1, an MP3 without a Xing/Info or VBRI header): a cut copy of it could not be told from a whole one.

- WAV, RF64, W64, AIFF, AU, CAF and (uncompressed) NIST SPHERE: the data size the header declares against the bytes
  present;
- Ogg (Vorbis, Opus) declares no length: its last page must be whole and carry the end-of-stream flag, which only
  the encoder's final page has;
- FLAC (STREAMINFO's total samples) and MP3 (the Xing/Info or VBRI header's frame count; its byte count, when
  given, against the bytes present): libsndfile announces the declared length, and ``audio.read_frames`` refuses a
  file that reads fewer frames than announced (a cut FLAC also fails in libsndfile itself).
"""
import struct
from dataclasses import dataclass
from typing import BinaryIO, Callable, Dict, Optional, Tuple

_W64_TAIL = bytes.fromhex("F3ACD3118CD100C04F8EDB8A")   # the GUID bytes after a four-letter W64 chunk name
_W64_RIFF = b"riff" + bytes.fromhex("2E91CF11A5D628DB04C10000")
_UNKNOWN32 = 0xFFFFFFFF                                   # a streamed file's size field: nothing to compare
_OGG_MAX_PAGE = 27 + 255 + 255 * 255                      # header, lacing values, payload
_NIST_CODINGS = ("pcm", "ulaw", "mu-law", "alaw")         # uncompressed: data bytes = samples x channels x width
_MP3_SYNC_SEARCH = 1 << 16                                # padding after an ID3v2 tag searched for the first frame
_REWRITE = "write it again with its length (e.g. sox in out.wav, or ffmpeg to a file, not a pipe)"


@dataclass(frozen=True)
class LengthProblem:
    """Why a file is not read: ``cut`` (less data than its header declares) or not (its length cannot be
    checked: a format not read, or a header declaring no length); ``detail`` says it in words."""
    cut: bool
    detail: str


def _cut(what: str, end: int, size: int) -> Optional[LengthProblem]:
    if end <= size:
        return None
    return LengthProblem(True, f"the {what} declares data up to byte {end}, the file has {size} bytes "
                               f"({end - size} missing)")


def _unknown(detail: str) -> LengthProblem:
    return LengthProblem(False, f"its length cannot be checked: {detail}, so a cut copy would read as a shorter "
                                f"recording")


def _riff(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """RIFF/RF64 WAVE: the ``data`` chunk's declared size (RF64: the 64-bit one of its ``ds64`` chunk)."""
    f.seek(0)
    head = f.read(12)
    if head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
        return _unknown(f"the file does not start as a RIFF WAVE file does ({head[:4]!r})")
    rf64 = head[:4] == b"RF64"
    wide = None
    pos = 12
    while pos + 8 <= size:
        f.seek(pos)
        chunk = f.read(16)
        (length,) = struct.unpack("<I", chunk[4:8])
        if rf64 and chunk[:4] == b"ds64" and len(chunk) >= 16:
            f.seek(pos + 16)
            (wide,) = struct.unpack("<Q", f.read(8).ljust(8, b"\0"))
        if chunk[:4] == b"data":
            if length == _UNKNOWN32 and wide is not None:
                length = wide
            elif length in (0, _UNKNOWN32):
                return _unknown(f"its WAV header declares the data size {length:#x} (a streamed file: {_REWRITE})")
            return _cut("WAV header", pos + 8 + length, size)
        pos += 8 + length + (length & 1)
    return _unknown("no data chunk was found in its WAV header")


def _w64(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """Sony Wave64: 16-byte GUID chunk names, 64-bit sizes counting the 24-byte chunk header, 8-byte aligned."""
    f.seek(0)
    if f.read(16) != _W64_RIFF:
        return _unknown("the file does not start as a W64 file does")
    pos = 40
    while pos + 24 <= size:
        f.seek(pos)
        chunk = f.read(24)
        (length,) = struct.unpack("<Q", chunk[16:24])
        if chunk[:16] == b"data" + _W64_TAIL:
            return _cut("W64 header", pos + length, size)
        if length < 24:
            break
        pos += (length + 7) & ~7
    return _unknown("no data chunk was found in its W64 header")


def _aiff(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """AIFF/AIFC: IFF chunks (name, big-endian size, even padding) up to ``SSND``, whose declared end is compared."""
    f.seek(0)
    head = f.read(12)
    if head[:4] != b"FORM" or head[8:12] not in (b"AIFF", b"AIFC"):
        return _unknown("the file does not start as an AIFF file does")
    pos = 12
    while pos + 8 <= size:
        f.seek(pos)
        chunk = f.read(8)
        (length,) = struct.unpack(">I", chunk[4:8])
        if chunk[:4] == b"SSND":
            return _cut("AIFF header", pos + 8 + length, size)
        pos += 8 + length + (length & 1)
    return _unknown("no SSND chunk was found in its AIFF header")


def _caf(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """Apple CAF: chunks of a 4-byte type and a signed 64-bit big-endian size after an 8-byte file header; the
    ``data`` chunk's size -1 means "to the end of the file", a length not declared."""
    f.seek(0)
    if f.read(4) != b"caff":
        return _unknown("the file does not start as a CAF file does")
    pos = 8
    while pos + 12 <= size:
        f.seek(pos)
        chunk = f.read(12)
        (length,) = struct.unpack(">q", chunk[4:12])
        if chunk[:4] == b"data":
            if length < 0:
                return _unknown(f"its CAF header declares the data size -1 (to the end of the file: {_REWRITE})")
            return _cut("CAF header", pos + 12 + length, size)
        if length < 0:
            break
        pos += 12 + length
    return _unknown("no data chunk was found in its CAF header")


def _au(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """Sun/NeXT AU: data offset and size after ``.snd`` (big-endian) or ``dns.`` (little-endian)."""
    f.seek(0)
    head = f.read(12)
    order = {b".snd": ">II", b"dns.": "<II"}.get(head[:4])
    if order is None or len(head) < 12:
        return _unknown("the file does not start as an AU file does")
    offset, length = struct.unpack(order, head[4:12])
    if length == _UNKNOWN32:
        return _unknown(f"its AU header declares the data size 0xffffffff (a streamed file: {_REWRITE})")
    return _cut("AU header", offset + length, size)


def _nist(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """NIST SPHERE (TIMIT, AN4, WSJ, Switchboard): ``sample_count`` x ``channel_count`` x ``sample_n_bytes``
    after a header of the size its second line gives. A compressed coding (shorten, wavpack) declares no byte
    length (and libsndfile reads none)."""
    f.seek(0)
    lines = f.read(1024).split(b"\n")
    if lines[0] != b"NIST_1A":
        return _unknown("the file does not start as a NIST SPHERE file does")
    try:
        header_bytes = int(lines[1])
    except (IndexError, ValueError):
        return _unknown("the NIST header's size line is not a number")
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
    coding = fields.get("sample_coding", "pcm").split(",")[0]
    if coding not in _NIST_CODINGS:
        return _unknown(f"the NIST header's sample_coding {coding!r} is compressed")
    try:
        samples = int(fields["sample_count"])
        channels = int(fields.get("channel_count", "1"))
        width = int(fields.get("sample_n_bytes", "2"))
    except (KeyError, ValueError):
        return _unknown("the NIST header has no numeric sample_count, channel_count or sample_n_bytes")
    need = samples * channels * width
    if header_bytes + need <= size:
        return None
    return LengthProblem(True, f"the NIST header's sample_count {samples} (x {channels} channel x {width} bytes) "
                               f"needs {need} bytes of data, {max(0, size - header_bytes)} are present")


def _ogg(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """The file must end with a whole Ogg page flagged end-of-stream (header type bit 0x04)."""
    f.seek(0)
    if f.read(4) != b"OggS":
        return _unknown("the file does not start with an Ogg page")
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
                return LengthProblem(True, "its last Ogg page does not end the stream: the stream was cut after "
                                           "a page")
        pos = tail.rfind(b"OggS", 0, pos)
    return LengthProblem(True, "its last Ogg page is cut off")


def _after_id3(f: BinaryIO) -> int:
    """The offset after an ID3v2 tag at the start of the file (0 without one)."""
    f.seek(0)
    head = f.read(10)
    if head[:3] != b"ID3" or len(head) < 10:
        return 0
    body = (head[6] << 21) | (head[7] << 14) | (head[8] << 7) | head[9]
    return 10 + body + (10 if head[5] & 0x10 else 0)


def _flac(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """FLAC: STREAMINFO (the first metadata block) declares the total samples; 0 means not known."""
    f.seek(_after_id3(f))
    head = f.read(8 + 34)
    if head[:4] != b"fLaC" or head[4] & 0x7F != 0 or len(head) < 42:
        return _unknown("no FLAC STREAMINFO block was found")
    info = head[8:]
    total = ((info[13] & 0x0F) << 32) | int.from_bytes(info[14:18], "big")
    if total == 0:
        return _unknown(f"its FLAC STREAMINFO declares 0 total samples (unknown, as a streamed encoder writes: "
                        f"{_REWRITE})")
    return None


def _mp3(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """MPEG audio: the first frame's Xing/Info (after the side information) or VBRI (32 bytes after the frame
    header) header must declare the frame count; an MP3 without one has only libsndfile's estimate from the file
    size, which a cut file shrinks with it. A declared byte count is compared with the bytes present."""
    start = _after_id3(f)
    f.seek(start)
    window = f.read(_MP3_SYNC_SEARCH + 4 + 32 + 18)
    pos = next((i for i in range(min(len(window) - 4, _MP3_SYNC_SEARCH))
                if window[i] == 0xFF and window[i + 1] & 0xE0 == 0xE0 and (window[i + 1] >> 3) & 3 != 1
                and (window[i + 1] >> 1) & 3 != 0), None)
    if pos is None:
        return _unknown("no MPEG frame header was found")
    version, layer, mono = (window[pos + 1] >> 3) & 3, (window[pos + 1] >> 1) & 3, (window[pos + 3] >> 6) == 3
    side = (17 if mono else 32) if version == 3 else (9 if mono else 17)
    xing = window[pos + 4 + side:pos + 4 + side + 16]
    vbri = window[pos + 36:pos + 36 + 18]
    declared = None
    if layer == 1 and xing[:4] in (b"Xing", b"Info") and len(xing) >= 12 and xing[7] & 1:
        flags = xing[7]
        if flags & 2 and len(xing) >= 16:
            declared = int.from_bytes(xing[12:16], "big")
    elif vbri[:4] == b"VBRI" and len(vbri) >= 18:
        declared = int.from_bytes(vbri[10:14], "big")
    else:
        return _unknown("the MP3 stream has no Xing/Info or VBRI header declaring its frames (convert it, e.g. "
                        "to FLAC)")
    return None if declared is None else _cut("MP3 Xing/VBRI header", start + pos + declared, size)


@dataclass(frozen=True)
class AudioFormat:
    """A format that is read: its file name extensions (those the shard reader takes as audio) and its check."""
    extensions: Tuple[str, ...]
    check: Callable[[BinaryIO, int], Optional[LengthProblem]]


# The formats read, by libsndfile's name of the format it detected: the one set of audio formats.
FORMATS: Dict[str, AudioFormat] = {
    "WAV": AudioFormat(("wav", "wave"), _riff), "WAVEX": AudioFormat(("wav",), _riff),
    "RF64": AudioFormat(("rf64",), _riff), "W64": AudioFormat(("w64",), _w64),
    "FLAC": AudioFormat(("flac",), _flac), "OGG": AudioFormat(("ogg", "oga", "opus"), _ogg),
    "MP3": AudioFormat(("mp3",), _mp3), "NIST": AudioFormat(("sph", "nist"), _nist),
    "AIFF": AudioFormat(("aiff", "aif", "aifc"), _aiff), "AU": AudioFormat(("au", "snd"), _au),
    "CAF": AudioFormat(("caf",), _caf),
}


def length_problem(f: BinaryIO, size: int, fmt: str, description: str = "") -> Optional[LengthProblem]:
    """Why the file of ``size`` bytes open as ``f``, which libsndfile reads as format ``fmt`` (its name, e.g.
    "NIST"; ``description`` its long name), is not read, or None when its header declares no more data than the
    file holds. Large metadata chunks are skipped with seeks, not read."""
    known = FORMATS.get(fmt)
    if known is None:
        read = ", ".join(sorted(FORMATS))
        return LengthProblem(False, f"libsndfile reads it as {description or fmt} (whatever its name), a format "
                                    f"whose length is not checked, so a cut copy would read as a shorter "
                                    f"recording; convert it to one of {read} (e.g. with sox)")
    return known.check(f, size)


def cut_before_open(f: BinaryIO, size: int) -> Optional[LengthProblem]:
    """For a file libsndfile cannot open (a cut CAF header): the cut a read format's header shows, else None, so
    that the error says "truncated" rather than only libsndfile's words."""
    for known in FORMATS.values():
        problem = known.check(f, size)
        if problem is not None and problem.cut:
            return problem
    return None
