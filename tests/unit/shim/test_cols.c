/* The column writers (shim/record/col.h) behind RUN and COLS records (docs/FORMAT.md "Runs",
 * "Columns"): LEB128 varints, zigzag, room that grows, and columns packed as msgpack bins and
 * emptied for the next record. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <string.h>

#include "record/col.h"

static void put(struct tkp_col *c, uint64_t v)
{
    cr_assert_eq(tkp_col_room(c), 0);
    tkp_col_put(c, v);
}

Test(shim_cols, varints_are_leb128)
{
    struct tkp_col c = {0};
    put(&c, 0), put(&c, 127), put(&c, 128), put(&c, 300), put(&c, UINT64_MAX);
    static const uint8_t want[] = {0x00, 0x7f, 0x80, 0x01, 0xac, 0x02, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    cr_assert_eq(c.n, sizeof want);
    cr_assert_arr_eq(c.p, want, sizeof want);
    free(c.p);
}

Test(shim_cols, zigzag_keeps_small_deltas_small)
{
    cr_assert_eq(tkp_zigzag(0), 0);
    cr_assert_eq(tkp_zigzag(-1), 1);
    cr_assert_eq(tkp_zigzag(1), 2);
    cr_assert_eq(tkp_zigzag(-2), 3);
    cr_assert_eq(tkp_zigzag(INT64_MAX), UINT64_MAX - 1);
    cr_assert_eq(tkp_zigzag(INT64_MIN), UINT64_MAX);
}

Test(shim_cols, room_grows_and_keeps_what_was_written)
{
    struct tkp_col c = {0};
    for (uint64_t i = 0; i < 100000; i++)
        put(&c, i);
    cr_assert_geq(c.cap, c.n);
    uint64_t v = 0, shift = 0, k = 0;
    for (uint32_t i = 0; i < c.n; i++) {
        v |= (uint64_t)(c.p[i] & 0x7f) << shift;
        shift += 7;
        if (!(c.p[i] & 0x80)) {
            cr_assert_eq(v, k, "value %llu", (unsigned long long)k);
            k++, v = 0, shift = 0;
        }
    }
    cr_assert_eq(k, 100000);
    free(c.p);
}

Test(shim_cols, columns_pack_as_bins_and_empty)
{
    struct tkp_col c[3] = {{0}};
    cr_assert_eq(tkp_cols_room(c, 3), 0);
    tkp_col_put(&c[0], 1);
    tkp_col_put(&c[2], 300);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    tkp_cols_pack(&pk, c, 3);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(c[k].n, 0, "column %d emptied", k);
    static const uint8_t want[] = {0xc4, 1, 0x01, 0xc4, 0, 0xc4, 2, 0xac, 0x02};
    cr_assert_eq(sb.size, sizeof want);
    cr_assert_arr_eq(sb.data, want, sizeof want);
    msgpack_sbuffer_destroy(&sb);
    for (int k = 0; k < 3; k++)
        free(c[k].p);
}
