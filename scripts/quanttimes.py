#!/usr/bin/env python3
"""What coarser host times would save (docs/BENCH.md, "Coarser host times"): a capture's host times
rounded down to multiples of Q ns (the RUN records' and the plain timed records' dts, rebuilt
from the rounded absolute times; library calls' host_ns rounded to Q), its chunks re-encoded as
the shim would (RUN columns, repeating RUNs as differences) and re-compressed with zstd -3. REP
records' times are left as they are (so the savings are a little understated). One-off; needs
python msgpack and zstandard.

usage: quanttimes.py CAPTURE LAUNCHES"""
import os, sys, msgpack, zstandard
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capbytes import payloads as chunks  # noqa: E402
def zz(v): return ((v<<1)^(v>>63)) & (2**64-1)
def unz(v): return (v>>1)^-(v&1)
def uv(b):
    out=[];x=0;s=0
    for c in b:
        x|=(c&127)<<s; s+=7
        if not c&128: out.append(x); x=0; s=0
    return out
def var(vals):
    o=bytearray()
    for v in vals:
        v&=2**64-1
        while v>=128: o.append(v&127|128); v>>=7
        o.append(v)
    return bytes(o)
TIMED={10,11,13,14,15,16,17,19,21,22,26}
def run(path, Q):
    cz=zstandard.ZstdCompressor(level=3); total=0; hdr=open(path,'rb').read(16)
    for p in chunks(path):
        u=msgpack.Unpacker(raw=True,strict_map_key=False); u.feed(p)
        out=[]; chain=0; qchain=0; prevd=None; prevh=None; newprevd=None; newprevh=None
        for r in u:
            t=r[0]
            if t==0: chain=r[2]; qchain=chain//Q*Q; out.append(r); continue
            if t==28:
                rep = r[4] is None
                d=[unz(x) for x in uv(r[5])]; h=uv(r[8])
                if rep:
                    d=[a+b for a,b in zip(prevd,d)]; h=[(a+unz(b))&(2**64-1) for a,b in zip(prevh,h)]
                prevd,prevh=d,h
                nd=[]
                for x in d:
                    chain+=x; q=chain//Q*Q; nd.append(q-qchain); qchain=q
                nh=[(x+Q//2)//Q*Q for x in h]
                if rep:
                    cd=[zz(a-b) for a,b in zip(nd,newprevd)]; ch=[zz(a-b) for a,b in zip(nh,newprevh)]
                else:
                    cd=[zz(a) for a in nd]; ch=nh
                newprevd,newprevh=nd,nh
                r=list(r); r[5]=var(cd); r[8]=var(ch)
                out.append(r); continue
            if t in TIMED and isinstance(r[1],int) and t!=18:
                chain+=r[1]; q=chain//Q*Q; r=list(r); r[1]=q-qchain; qchain=q
            out.append(r)
        total+=16+len(cz.compress(b''.join(msgpack.packb(x) for x in out)))
    return total+16
path=sys.argv[1]; n=int(sys.argv[2])
base=run(path,1)
for Q in (1,8,16,32,64,128,256,1024):
    b=run(path,Q); print(f'Q={Q}: {b} B, {b/n:.2f} B/launch, {100*(b-base)/base:+.1f} %')
