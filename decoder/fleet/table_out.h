/* tokprof decoder: rows in ClickHouse's input formats — TSVWithNames, JSONEachRow and Native —
 * compressed with zstd or gzip (or not), handed to a sink by blocks. No CLI knowledge: the
 * command (cmd/table.c) and the ingester (ingest.c) give it a sink.
 *
 *     struct tkp_tab_out *o;
 *     tkp_tab_out_new(&spec, sink_fn, sink_arg, &o);
 *     tkp_tab_u64(o, 7); tkp_tab_str(o, "a\tb"); ...  // one value per column, in order
 *     tkp_tab_row_end(o);                             // checks the row had every column
 *     tkp_tab_out_finish(o); tkp_tab_out_free(o);
 *
 * Formats, as ClickHouse 18.16 and current ClickHouse read them:
 *   - TSVWithNames: a first line of column names (18.16 matches TSV columns by position: send
 *     the same explicit column list in the INSERT, tkp_tab_columns()), then one line per row;
 *     strings escape backslash, tab, newline, CR, NUL, BS, FF as \\ \t \n \r \0 \b \f; arrays are
 *     ['a','b'] with ' and \ escaped inside.
 *   - JSONEachRow: one object per line; strings JSON-escaped byte for byte (control bytes as
 *     \u00XX, other bytes as they are); 64-bit integers unquoted.
 *   - Native: blocks of TKP_TAB_BLOCK_ROWS rows, each "ncols nrows" (varints), then per column
 *     its name, type name and values (little-endian integers, varint-prefixed strings, arrays
 *     as UInt64 end offsets then the elements, Nullable as one byte per row (1: NULL) then the
 *     values, 0 in a NULL's place). No block info: the HTTP/file form.
 * A NULL is \N in TSV and null in JSONEachRow.
 * Memory: one block of rows (Native) or TKP_TAB_STAGE bytes (text) plus the compressor's window,
 * whatever the number of rows. */
#ifndef TKP_TABLE_OUT_H
#define TKP_TABLE_OUT_H

#include <stddef.h>
#include <stdint.h>

#define TKP_TAB_BLOCK_ROWS 65536   /* Native rows per block */
#define TKP_TAB_STAGE (256u << 10) /* text bytes staged before they are compressed */
#define TKP_TAB_COLS_MAX 48

/* TKP_COL_NU64: Nullable(UInt64), written with tkp_tab_u64 or tkp_tab_null (a GPU figure of a step
 * that was not timed: model.h, tkp_mstep_timed). In Native its null map precedes its values. */
enum tkp_tab_type { TKP_COL_U64, TKP_COL_I64, TKP_COL_STR, TKP_COL_STRS, TKP_COL_NU64 };
enum tkp_tab_fmt { TKP_FMT_TSV, TKP_FMT_JSON, TKP_FMT_NATIVE };
enum tkp_tab_z { TKP_Z_ZSTD, TKP_Z_GZIP, TKP_Z_NONE };

struct tkp_tab_col {
    const char *name;
    int type; /* enum tkp_tab_type */
};

/* Receives the encoded (and compressed) bytes. Returns 0 or a negative tkp_err. */
typedef int tkp_tab_sink_fn(void *arg, const void *buf, size_t n);

struct tkp_tab_out;

/* The ClickHouse type name of a column type ("UInt64", "Array(String)"). */
const char *tkp_tab_type_name(int type);
/* A format's ClickHouse name ("TSVWithNames", "JSONEachRow", "Native"); the words the CLI takes
 * ("tsv", "json", "native" or the ClickHouse names) -> enum, -1 unknown. */
const char *tkp_tab_fmt_name(int fmt);
int tkp_tab_fmt_parse(const char *s);
int tkp_tab_z_parse(const char *s); /* "zstd", "gzip", "none" -> enum, -1 unknown */

/* A writer of rows of `ncols` columns `cols` (not copied: they must outlive it) in format fmt,
 * compression z (level: 0 for the default). Nothing is written until the first row or
 * tkp_tab_out_finish (which writes the TSV header even with no rows). Returns 0 or NOMEM. */
int tkp_tab_out_new(const struct tkp_tab_col *cols, int ncols, int fmt, int z, int level,
                    tkp_tab_sink_fn *sink, void *arg, struct tkp_tab_out **out);
/* Column values of the current row, in column order; the type must match the column's. Errors
 * (a sink failure, NOMEM, a wrong type or count) are kept and returned by tkp_tab_row_end and
 * tkp_tab_out_finish. */
void tkp_tab_u64(struct tkp_tab_out *o, uint64_t v);
void tkp_tab_i64(struct tkp_tab_out *o, int64_t v);
void tkp_tab_str(struct tkp_tab_out *o, const char *s); /* NULL reads as "" */
void tkp_tab_strs(struct tkp_tab_out *o, const char *const *v, size_t n);
void tkp_tab_null(struct tkp_tab_out *o); /* a NULL, in a TKP_COL_NU64 column only */
int tkp_tab_row_end(struct tkp_tab_out *o);
/* Text formats: the bytes of the current row's columns so far and their count (*ncols), which
 * tkp_tab_row_again() writes again as the first columns of a later row, to repeat columns that are
 * the same on many rows (the identity columns) without encoding them again. Valid until the next
 * call on o; NULL for Native, before the row's first column, or after an error. */
const void *tkp_tab_row_text(const struct tkp_tab_out *o, size_t *len, int *ncols);
void tkp_tab_row_again(struct tkp_tab_out *o, const void *text, size_t len, int ncols);
/* Rows ended so far. */
uint64_t tkp_tab_rows(const struct tkp_tab_out *o);
/* Writes what is staged and ends the compressed stream. Returns 0 or the first error. */
int tkp_tab_out_finish(struct tkp_tab_out *o);
void tkp_tab_out_free(struct tkp_tab_out *o); /* accepts NULL */

#endif
