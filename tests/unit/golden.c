/* The golden capture (see golden.h). Times are chosen so every host_ns is easy to check by hand:
 * chunk 0 has base 1,000,000, chunk 1 base 2,000,000, chunk 2 base 1,999,000. */
#include "golden.h"

#include "tokprof/format.h"

void golden_build(struct capw *w, size_t off[GOLDEN_CHUNKS])
{
    const uint32_t g128[3] = {128, 1, 1}, b256[3] = {256, 1, 1}, g4[3] = {4, 2, 1},
                   b128[3] = {128, 1, 1}, g1[3] = {1, 1, 1};

    capw_chunk_begin(w, 1000000);
    capw_name(w, 1, "sgemm_128x64");
    capw_name(w, 2, "attn \"fwd\"\\v2");
    capw_name(w, 3, "decode");
    capw_meta(w, "minillm", 4242);
    capw_thread(w, 0, 5001);
    capw_thread(w, 1, 5002);
    capw_marker(w, 100, 0, 0, TKP_MARK_STEP_BEGIN, 7);              /* 1000100 */
    capw_launch(w, 50, 0, 0, 1, 0, TKP_VIA_RUNTIME, g128, b256, 0); /* 1000150 */
    capw_launch(w, 25, 0, 0, 2, 0x7f00aa, TKP_VIA_DRIVER | TKP_VIA_PTSZ, g4, b128, 49152);
    capw_nvtx(w, -75, 1, 0, TKP_NVTX_RANGE_START, 3, 9); /* 1000100 */
    capw_copy(w, 200, 0, 0, TKP_COPY_MEMCPY, TKP_DIR_DTOH, 4, 0x7f00aa,
              TKP_COPY_ASYNC | TKP_COPY_PINNED);       /* 1000300 */
    capw_event_record(w, 10, 0, 0, 0xe1, 0x7f00aa);    /* 1000310 */
    capw_stream_wait(w, 5, 1, 0, 0x7f00bb, 0xe1);      /* 1000315 */
    capw_sync(w, 5, 0, 0, TKP_SYNC_EVENT, 0xe1, 1000); /* 1000320 */
    capw_step(w, 0, 0, TKP_STEP_OUTSIDE, 1000100, 1000300, 1001320, TKP_CLOSE_EVENT_SYNC, 2, 0, 1);
    off[0] = capw_chunk_end(w);

    const struct capw_node nodes[3] = {
        {.node = 0, .type = TKP_NODE_KERNEL, .name = 4, .grid = {1, 1, 1}, .block = {32, 1, 1}},
        {.node = 1,
         .type = TKP_NODE_KERNEL,
         .name = 1,
         .grid = {2, 1, 1},
         .block = {64, 1, 1},
         .ndeps = 1,
         .deps = {0}},
        {.node = 2, .type = TKP_NODE_MEMCPY, .name = 4, .ndeps = 2, .deps = {0, 1}},
    };
    capw_chunk_begin(w, 2000000);
    capw_name(w, 1, "sgemm_128x64");
    capw_name(w, 4, "graph_kernel");
    capw_thread(w, 0, 5001);
    capw_graph(w, 7, 3, nodes);
    capw_graph_launch(w, 0, 0, 1, 7, 0x7f00aa, TKP_VIA_GRAPH_RT);                  /* 2000000 */
    capw_launch(w, 1000, 0, 1, 1, 2, TKP_VIA_RUNTIME | TKP_VIA_PTSZ, g1, b128, 0); /* 2001000 */
    capw_copy(w, 100, 0, 1, TKP_COPY_MEMSET, TKP_DIR_DTOD, 4096, 0, 0);            /* 2001100 */
    capw_sync(w, 50, 0, 1, TKP_SYNC_STREAM, 0x7f00aa, 5000);                       /* 2001150 */
    capw_step(w, 1, 0, TKP_STEP_TOKEN, 2000000, 2001100, 2006150, TKP_CLOSE_STREAM_SYNC, 1, 1, 1);
    capw_marker(w, 10, 0, 1, TKP_MARK_STEP_END, -3); /* 2001160 */
    capw_loss(w, 0, 3);
    off[1] = capw_chunk_end(w);

    capw_chunk_begin(w, 1999000);
    capw_name(w, 1, "sgemm_128x64");
    capw_thread(w, 0, 5001);
    capw_thread(w, 1, 5002);
    capw_loss(w, 0, 5);
    capw_loss(w, 1, 2);
    /* a record type from the future: skipped whole */
    msgpack_pack_array(capw_pk(w), 3);
    msgpack_pack_uint64(capw_pk(w), 99);
    msgpack_pack_str_with_body(capw_pk(w), "x", 1);
    msgpack_pack_array(capw_pk(w), 0);
    capw_launch(w, 3000, 1, 2, 1, 0, TKP_VIA_DRIVER, g1, b128, 0); /* 2002000 */
    capw_sync(w, 10, 1, 2, TKP_SYNC_DEVICE, 0, 300);               /* 2002010 */
    capw_step(w, 2, 1, TKP_STEP_TOKEN, 2002000, 2002000, 2002310, TKP_CLOSE_DEVICE_SYNC, 1, 0, 0);
    off[2] = capw_chunk_end(w);
}
