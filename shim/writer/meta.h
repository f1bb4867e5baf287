/* The META record (meta.c): what a capture file says about the process, the machine and the
 * configuration (docs/FORMAT.md, "META"). Writer thread. */
#ifndef TKP_WRITER_META_H
#define TKP_WRITER_META_H

#include <msgpack.h>
#include <stdint.h>

#include "sink/sink.h"

/* Packs one META record into pk; the sink adds its own keys (a flight snapshot's description). */
void tkp_meta_pack(msgpack_packer *pk, const struct tkp_sink *sink, uint64_t start_realtime_ns,
                   uint64_t start_monotonic_ns);

#endif
