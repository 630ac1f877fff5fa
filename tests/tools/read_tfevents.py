#!/usr/bin/env python3
"""Reads TensorBoard event files with the Python standard library only.

Independent of mixprec's C++ code: parses the TFRecord framing, verifies both masked CRC-32C
checksums of every record, and decodes Event / Summary / Summary.Value / HistogramProto from the
protobuf wire format.

  read_tfevents.py FILE_OR_DIR...            print every event, one line each (a directory is
                                             searched recursively; none found is an error)
  read_tfevents.py --writer PROGRAM          run PROGRAM DIR (a fresh temporary directory), then
                                             check the events it wrote against the sample below
  read_tfevents.py --check-sample DIR        the same check on a directory written earlier

Exit status 0 when everything reads back and matches, 1 otherwise (with the reason on stderr).
The sample is what tests/tools/tfevents_sample.cpp writes.
"""

import math
import os
import struct
import subprocess
import sys
import tempfile


def _crc32c_table():
    table = []
    for b in range(256):
        r = b
        for _ in range(8):
            r = (r >> 1) ^ 0x82F63B78 if r & 1 else r >> 1
        table.append(r)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    r = 0xFFFFFFFF
    for byte in data:
        r = _TABLE[(r ^ byte) & 0xFF] ^ (r >> 8)
    return r ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def read_records(raw):
    """The data of every TFRecord in `raw`; FormatError on a bad CRC or a truncated record."""
    records = []
    at = 0
    while at < len(raw):
        if len(raw) - at < 12:
            raise FormatError("truncated record header at byte %d" % at)
        header = raw[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", raw[at + 8:at + 12])
        if masked_crc32c(header) != length_crc:
            raise FormatError("bad length CRC at byte %d" % at)
        end = at + 12 + length
        if end + 4 > len(raw):
            raise FormatError("truncated record at byte %d" % at)
        data = raw[at + 12:end]
        (data_crc,) = struct.unpack("<I", raw[end:end + 4])
        if masked_crc32c(data) != data_crc:
            raise FormatError("bad data CRC at byte %d" % at)
        records.append(data)
        at = end + 4
    return records


def _varint(buf, at):
    value = 0
    shift = 0
    while True:
        if at >= len(buf):
            raise FormatError("truncated varint")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, at
        shift += 7
        if shift >= 70:
            raise FormatError("varint too long")


def fields(buf):
    """(field number, wire type, value) of each field; value: int, or bytes for wire type 2."""
    out = []
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(buf, at)
        elif wire == 1:
            if at + 8 > len(buf):
                raise FormatError("truncated fixed64")
            value = buf[at:at + 8]
            at += 8
        elif wire == 5:
            if at + 4 > len(buf):
                raise FormatError("truncated fixed32")
            value = buf[at:at + 4]
            at += 4
        elif wire == 2:
            n, at = _varint(buf, at)
            if at + n > len(buf):
                raise FormatError("truncated length-delimited field")
            value = buf[at:at + n]
            at += n
        else:
            raise FormatError("unsupported wire type %d" % wire)
        out.append((number, wire, value))
    return out


def _double(wire, value):
    if wire != 1:
        raise FormatError("expected a double")
    return struct.unpack("<d", value)[0]


def _doubles(wire, value):
    if wire == 1:
        return [struct.unpack("<d", value)[0]]
    if wire != 2 or len(value) % 8:
        raise FormatError("bad packed doubles")
    return list(struct.unpack("<%dd" % (len(value) // 8), value))


def decode_histo(buf):
    h = {"min": 0.0, "max": 0.0, "num": 0.0, "sum": 0.0, "sum_squares": 0.0,
         "bucket_limit": [], "bucket": []}
    names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
    for number, wire, value in fields(buf):
        if number in names:
            h[names[number]] = _double(wire, value)
        elif number == 6:
            h["bucket_limit"] += _doubles(wire, value)
        elif number == 7:
            h["bucket"] += _doubles(wire, value)
        else:
            raise FormatError("unexpected HistogramProto field %d" % number)
    return h


def decode_value(buf):
    v = {"tag": None}
    for number, wire, value in fields(buf):
        if number == 1 and wire == 2:
            v["tag"] = value.decode("utf-8")
        elif number == 2 and wire == 5:
            v["simple_value"] = struct.unpack("<f", value)[0]
        elif number == 5 and wire == 2:
            v["histo"] = decode_histo(value)
        else:
            raise FormatError("unexpected Summary.Value field %d" % number)
    return v


def decode_event(buf):
    e = {"wall_time": 0.0, "step": 0, "values": []}
    for number, wire, value in fields(buf):
        if number == 1:
            e["wall_time"] = _double(wire, value)
        elif number == 2 and wire == 0:
            e["step"] = value - (1 << 64) if value >= (1 << 63) else value
        elif number == 3 and wire == 2:
            e["file_version"] = value.decode("utf-8")
        elif number == 5 and wire == 2:
            for n, w, sv in fields(value):
                if n != 1 or w != 2:
                    raise FormatError("unexpected Summary field %d" % n)
                e["values"].append(decode_value(sv))
        else:
            raise FormatError("unexpected Event field %d" % number)
    return e


def read_events(path):
    with open(path, "rb") as f:
        raw = f.read()
    return [decode_event(r) for r in read_records(raw)]


def event_files(path):
    """The event files of a file or a directory, searched recursively as TensorBoard's --logdir is
    (a log directory holds its runs, such as train/ and validation/, as subdirectories)."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, names in os.walk(path):
        dirs.sort()
        found.extend(os.path.join(root, n) for n in sorted(names)
                     if n.startswith("events.out.tfevents."))
    return found


# ---- the sample written by tests/tools/tfevents_sample.cpp ----

SAMPLE_HISTOGRAM = [-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0]  # plus a NaN, left out


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def check_histogram(h, values):
    check(h["num"] == len(values), "num %r" % h["num"])
    check(h["min"] == min(values) and h["max"] == max(values), "min/max %r %r" % (h["min"], h["max"]))
    check(math.isclose(h["sum"], sum(values)), "sum %r" % h["sum"])
    check(math.isclose(h["sum_squares"], sum(v * v for v in values)), "sum_squares")
    limits, counts = h["bucket_limit"], h["bucket"]
    check(len(limits) == len(counts) and limits, "bucket lengths")
    check(all(a < b for a, b in zip(limits, limits[1:])), "limits not increasing")
    check(sum(counts) == len(values), "bucket counts %r" % counts)
    check(all(math.isfinite(x) for x in limits + counts), "non-finite bucket data")
    # Every value falls in its bucket: [previous limit (or min), limit).
    for v in values:
        lower = h["min"]
        placed = False
        for limit, count in zip(limits, counts):
            if lower <= v < limit:
                check(count > 0, "value %r in an empty bucket" % v)
                placed = True
                break
            lower = limit
        check(placed, "value %r in no bucket" % v)


def check_sample(directory):
    files = event_files(directory)
    check(len(files) == 1, "expected one event file in %s, found %d" % (directory, len(files)))
    name = os.path.basename(files[0])
    parts = name.split(".")
    check(name.startswith("events.out.tfevents.") and name.endswith(".v2"), "file name " + name)
    check(parts[3].isdigit() and parts[-2].isdigit() and parts[-3] == str(int(parts[-3])),
          "file name " + name)
    events = read_events(files[0])
    check(events[0].get("file_version") == "brain.Event:2", "first event %r" % events[0])
    check(not events[0]["values"], "first event has values")
    check(all(e["wall_time"] > 1.6e9 for e in events), "wall_time")
    rest = events[1:]
    check(len(rest) == 8, "expected 8 events after the file version, got %d" % len(rest))
    for step in range(5):
        e = rest[step]
        check(e["step"] == step and len(e["values"]) == 1, "loss event %r" % e)
        v = e["values"][0]
        check(v["tag"] == "loss", "tag %r" % v["tag"])
        expected = struct.unpack("<f", struct.pack("<f", 1.0 / (step + 1)))[0]
        check(v.get("simple_value") == expected, "loss at %d: %r" % (step, v.get("simple_value")))
    big = rest[5]
    check(big["step"] == 1 << 40 and big["values"][0]["tag"] == "na\u00efve/\u03bc",
          "big step event %r" % big)
    check(big["values"][0]["simple_value"] == -3.5, "big step value")
    neg = rest[6]
    check(neg["step"] == -7 and neg["values"][0]["simple_value"] == 0.0, "negative step event")
    hist = rest[7]
    check(hist["step"] == 3 and hist["values"][0]["tag"] == "weights", "histogram event %r" % hist)
    check("simple_value" not in hist["values"][0], "histogram has a simple_value")
    check_histogram(hist["values"][0]["histo"], SAMPLE_HISTOGRAM)


def main(argv):
    if len(argv) >= 2 and argv[0] == "--writer":
        with tempfile.TemporaryDirectory(prefix="mixprec-tfevents-") as d:
            subprocess.run([argv[1], d], check=True)
            check_sample(d)
        print("read_tfevents: sample OK (framing, CRCs, Event/Summary/Value/HistogramProto)")
        return 0
    if len(argv) == 2 and argv[0] == "--check-sample":
        check_sample(argv[1])
        print("read_tfevents: sample OK")
        return 0
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    for path in argv:
        files = event_files(path)
        if not files:
            raise FormatError("no event files (events.out.tfevents.*) in %s or below" % path)
        for f in files:
            for e in read_events(f):
                print(f, e)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (FormatError, AssertionError, OSError, subprocess.CalledProcessError) as err:
        print("read_tfevents: error: %s" % err, file=sys.stderr)
        sys.exit(1)
