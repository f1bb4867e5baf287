#!/usr/bin/env python3
"""Where a capture's bytes are (docs/BENCH.md "Capture size"): every chunk decompressed, its
records split by type (RUN records by column, REP records by column), each part re-compressed
alone with zstd -3. The parts' sizes do not add up to the file's (zstd finds matches across
them), but they rank what is left. Needs python3-msgpack and python3-zstandard (pip install
msgpack zstandard); a one-off tool, not a test.

usage: capbytes.py CAPTURE..."""
import collections, struct, sys
import msgpack, zstandard

NAMES = {0: "CHUNK", 1: "NAME", 2: "META", 3: "THREAD", 10: "LAUNCH", 11: "GRAPH_LAUNCH",
         12: "GRAPH", 13: "LAUNCH_T", 14: "COPY", 15: "SYNC", 16: "EVENT_RECORD",
         17: "STREAM_WAIT", 18: "STEP", 19: "NVTX", 20: "LOSS", 21: "MARKER", 22: "LIB_CALL",
         23: "STACK", 24: "MODULE", 25: "TMPL", 26: "LIB_CALL_T", 27: "LIB_TMPL", 28: "RUN",
         29: "COLS", 30: "GPU_KERNEL", 31: "GPU_COPY", 32: "GPU_INFO", 33: "REP", 34: "SHADOW"}
RUN_COLS = ["step", "n", "call", "kinds", "dts", "tmpls", "calls", "host_ns"]


def payloads(path):
    d = open(path, "rb").read()
    off = struct.unpack_from("<I", d, 12)[0]
    dz = zstandard.ZstdDecompressor()
    while off + 16 <= len(d):
        clen, rlen, _ = struct.unpack_from("<III", d, off + 4)
        yield dz.decompress(d[off + 16:off + 16 + clen], max_output_size=rlen)
        off += 16 + clen


def main(path):
    parts, counts = collections.defaultdict(bytearray), collections.Counter()
    for p in payloads(path):
        u = msgpack.Unpacker(raw=True, strict_map_key=False)
        u.feed(p)
        for rec in u:
            name = NAMES.get(rec[0], str(rec[0]))
            counts[name] += 1
            if rec[0] == 28:
                for i, c in enumerate(RUN_COLS):
                    v = rec[1 + i]
                    parts["RUN." + c] += v if isinstance(v, bytes) else msgpack.packb(v)
            elif rec[0] == 33:
                parts["REP.times"] += rec[3]
                parts["REP.others"] += rec[4]
                parts["REP.n,back"] += msgpack.packb(rec[1:3])
            else:
                parts[name] += msgpack.packb(rec)
    cz = zstandard.ZstdCompressor(level=3)
    size = len(open(path, "rb").read())
    print(f"{path}: {size} B")
    print("| part | records | raw B | zstd -3 alone, B |\n|---|---|---|---|")
    for z, k, r in sorted(((len(cz.compress(bytes(v))), k, len(v)) for k, v in parts.items()),
                          reverse=True):
        print(f"| {k} | {counts.get(k.split('.')[0], '')} | {r} | {z} |")


if __name__ == "__main__":
    for a in sys.argv[1:]:
        main(a)
