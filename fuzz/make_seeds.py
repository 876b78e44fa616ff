#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/. Re-run after changing an input format."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [804680, 804681, 1197896, 1197897, 2008952, 2008953, 2008984, 2008985, 2008954, 1000]
MAGIC = 19920718


def patch(file_size, off, data):
    raw = -(-off * (1 << 24) // file_size)  # ceil
    assert raw * file_size // (1 << 24) == off, (off, raw)
    out = b""
    while data:  # patches carry at most 255 bytes
        chunk, data = data[:255], data[255:]
        out += struct.pack("<I", raw)[:3] + bytes([len(chunk)]) + chunk
        off += len(chunk)
        raw = -(-off * (1 << 24) // file_size)
        assert raw * file_size // (1 << 24) == off
    return out


def structured(selector, flags, patches):
    fs = SIZES[selector]
    return bytes([selector, flags]) + b"".join(patch(fs, o, d) for o, d in patches)


def v1_slot(base, pid, ctx, data, status=1, tag=False):
    p = [(base, struct.pack("<ii", pid, pid)),
         (base + 8, struct.pack("<5Q", ctx, 0, data, 0, ctx + data)),
         (base + 1032, struct.pack("<Q", ctx + data + (2 << 20))),
         (base + 1176, struct.pack("<Q", 7)),
         (base + 1928, struct.pack("<i", status))]
    if tag:
        p.append((base + 1944, struct.pack("<QQ", 123456, 0x31505043494D4148)))
    return p


def write(corpus, name, data):
    d = os.path.join(HERE, "corpus", corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


uuid = b"GPU-90496d2f-68cf-ad72-f361-08e59367de69\0"
v12 = [(56, struct.pack("<Q", 1)), (64, uuid),
       (1600, struct.pack("<16Q", *([4 << 30] * 16))), (1728, struct.pack("<16Q", *([30] * 16))),
       (2008896, struct.pack("<iiiiQ", 3, 1, 2, 0, 1795296631))]
v12 += v1_slot(1856, 620, 543162368, 1210188800)
v12 += v1_slot(1856 + 1960 * 2, 700, 1 << 20, 5 << 20, tag=True)
write("region_structured", "v12-upstream-like", structured(5, 3, v12))
write("region_structured", "v12-newer-minor", structured(5, 1, v12 + [(4, struct.pack("<II", 1, 7))]))
write("region_structured", "v12-bad-procnum", structured(4, 3, [(2008896, struct.pack("<i", -5))]))
v0 = [(48, struct.pack("<Q", 2)), (56, uuid), (1592, struct.pack("<Q", 1 << 30)),
      (1848, struct.pack("<ii", 9, 9)), (1848 + 8 + 32, struct.pack("<Q", 3 << 20)),
      (1848 + 1160, struct.pack("<i", 1)), (1848 + 1168 * 1024, struct.pack("<i", 1))]
write("region_structured", "v0", structured(2, 1, v0))
write("region_structured", "initial-2024", structured(1, 1, [(1848 + 776, struct.pack("<i", 1)),
                                                           (1848 + 784 * 1024, struct.pack("<i", 1))]))
write("region_structured", "v11-atomics", structured(6, 1, [(4, struct.pack("<II", 1, 1)),
                                                           (1888 + 1936, struct.pack("<i", 1)),
                                                           (1888 + 1960 * 1024, struct.pack("<i", 1))]))
write("region_structured", "wrong-size", structured(8, 3, []))
write("region_structured", "tiny", structured(9, 1, []))

head = struct.pack("<iII", MAGIC, 1, 2)
write("region_raw", "v12-header", struct.pack("<Q", 2008953) + head)
write("region_raw", "v2-header", struct.pack("<Q", 2008953) + struct.pack("<iII", MAGIC, 2, 0))
write("region_raw", "short", struct.pack("<Q", 11) + head[:11])
write("region_raw", "huge-claim", struct.pack("<Q", 1 << 63) + head)

PACE_MAGIC = 0x45434150494D4148  # "HAMIPACE"


def pace(version=1, magic=PACE_MAGIC, boot=b"00000000-1111-2222-3333-444444444444"):
    clocks = b"".join(struct.pack("<qq", 10**12 + d, 10**12 + 2 * d).ljust(64, b"\0") for d in range(16))
    return struct.pack("<QII", magic, version, 16) + boot.ljust(40, b"\0") + struct.pack("<Q", 0) + clocks


assert len(pace()) == 1088
write("pace_clocks", "other-boot", struct.pack("<Q", 1088) + pace())
write("pace_clocks", "zeros", struct.pack("<Q", 1088) + bytes(1088))
write("pace_clocks", "empty", struct.pack("<Q", 0))
write("pace_clocks", "short", struct.pack("<Q", 100) + pace()[:100])
write("pace_clocks", "foreign-magic", struct.pack("<Q", 1088) + pace(magic=0x3154584554534F50))
write("pace_clocks", "version-2", struct.pack("<Q", 1088) + pace(version=2))

write("proc_stat", "bash", b"1234 (bash) S 1 1234 1234 34816 1234 4194560 1039 0 0 0 1 0 0 0 20 0 1 0 "
      b"987654 8527872 1120 18446744073709551615 1 1 0 0 0 0 65536 3670020 1266777851 0 0 0 17 1\n")
write("proc_stat", "odd-comm", b"77 (a) b (c) )) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 555\n")

write("limits", "plugin", b"CUDA_DEVICE_MEMORY_LIMIT_0=3000m\nCUDA_DEVICE_SM_LIMIT=30\n\x004g")
write("limits", "corrupt", b"# c\nCUDA_DEVICE_MEMORY_LIMIT=1g\nbad line\n\x00lots")
write("limits", "edges", b"CUDA_TASK_PRIORITY=0\nCUDA_DEVICE_SM_LIMIT_3=0\nX=1\n\x0018446744073709551615")
