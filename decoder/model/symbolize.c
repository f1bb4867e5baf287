/* tokprof decoder: pc -> module, function, offset from the modules' ELF symbol tables
 * (symbolize.h). Only 64-bit little-endian ELF (what the shim runs in) is read; anything else is
 * a module without symbols. Every offset read from a file is bounds-checked: a module path may
 * name any file on the decoding host. */
#include "model/symbolize.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/hash.h"
#include "base/sort.h"

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct sym {
    uint64_t addr, size;
    const char *raw;   /* in the mapped file */
    char *name, *sname; /* demangled and short, made on first use */
};

struct module {
    uint64_t id, base, size;
    char *path, *build_id, *file; /* file: basename of path */
    int loaded;                   /* 0 not yet, 1 read, -1 unusable */
    const char *problem;
    int needed;
    void *map;
    size_t map_len;
    struct sym *syms;
    size_t nsyms;
};

#define CACHE_SLOTS 4096 /* pc -> resolved frame; a power of two */

struct tkp_symbolizer {
    char *root;
    struct module *mods;
    size_t nmods, cap;
    struct {
        uint64_t pc;
        struct tkp_frame f;
    } cache[CACHE_SLOTS];
};

struct tkp_symbolizer *tkp_symbolizer_new(const char *root)
{
    struct tkp_symbolizer *s = calloc(1, sizeof *s);
    if (s && root && !(s->root = strdup(root))) return free(s), NULL;
    return s;
}

static void module_clear(struct module *m)
{
    for (size_t i = 0; i < m->nsyms; i++) free(m->syms[i].name), free(m->syms[i].sname);
    free(m->syms);
    if (m->map) munmap(m->map, m->map_len);
    free(m->path), free(m->build_id);
    memset(m, 0, sizeof *m);
}

void tkp_symbolizer_free(struct tkp_symbolizer *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->nmods; i++) module_clear(&s->mods[i]);
    free(s->mods);
    free(s->root);
    free(s);
}

int tkp_symbolizer_add_module(struct tkp_symbolizer *s, uint64_t id, const char *path,
                              const char *build_id, uint64_t base, uint64_t size)
{
    struct module *m = NULL;
    for (size_t i = 0; i < s->nmods; i++)
        if (s->mods[i].id == id) m = &s->mods[i];
    if (m && m->base == base && m->size == size && !strcmp(m->path, path)) return 0;
    if (m) {
        module_clear(m);
    } else {
        if (TKP_GROW_FROM(s->mods, s->cap, s->nmods + 1, 64)) return TKP_ERR_NOMEM;
        m = &s->mods[s->nmods++];
        memset(m, 0, sizeof *m);
    }
    m->id = id, m->base = base, m->size = size;
    m->path = strdup(path);
    m->build_id = strdup(build_id);
    if (!m->path || !m->build_id) return TKP_ERR_NOMEM;
    const char *slash = strrchr(m->path, '/');
    m->file = slash ? (char *)slash + 1 : m->path;
    memset(s->cache, 0, sizeof s->cache); /* a replaced module invalidates what was resolved */
    return 0;
}

/* ---- ELF ------------------------------------------------------------------------------------- */

static int in_file(size_t len, uint64_t off, uint64_t n)
{
    return off <= len && n <= len - off;
}

/* The build id in a mapped ELF's SHT_NOTE sections, as hex into out ("" when none). */
static void file_build_id(const unsigned char *f, size_t len, const Elf64_Shdr *sh, size_t nsh,
                          char *out, size_t cap)
{
    static const char x[] = "0123456789abcdef";
    out[0] = 0;
    for (size_t i = 0; i < nsh; i++) {
        if (sh[i].sh_type != SHT_NOTE || !in_file(len, sh[i].sh_offset, sh[i].sh_size)) continue;
        const unsigned char *p = f + sh[i].sh_offset, *end = p + sh[i].sh_size;
        while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
            const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
            uint64_t nsz = ((uint64_t)nh->n_namesz + 3) & ~3ull;
            uint64_t dsz = ((uint64_t)nh->n_descsz + 3) & ~3ull;
            const unsigned char *name = p + sizeof *nh;
            if (nsz > (size_t)(end - name) || dsz > (size_t)(end - name) - nsz) break;
            const unsigned char *desc = name + nsz;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t k = 0;
                for (; k < nh->n_descsz && 2 * k + 2 < cap; k++)
                    out[2 * k] = x[desc[k] >> 4], out[2 * k + 1] = x[desc[k] & 15];
                out[2 * k] = 0;
                return;
            }
            p = desc + dsz;
        }
    }
}

static int sym_cmp(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Maps path and reads its function symbols into m (.symtab, else .dynsym). Returns 1 when the
 * file has a .symtab, 0 when only .dynsym or none, -1 when unusable (m->problem says why). */
static int read_elf(struct module *m, const char *path, int check_id)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return m->problem = "cannot open", -1;
    struct stat st;
    void *map = MAP_FAILED;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return m->problem = "not a readable file", -1;
    const unsigned char *f = map;
    size_t len = (size_t)st.st_size;
    const Elf64_Ehdr *eh = map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        !in_file(len, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
        munmap(map, len);
        return m->problem = "not a 64-bit ELF file", -1;
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
    size_t nsh = eh->e_shnum;
    if (check_id && m->build_id[0]) {
        char id[136];
        file_build_id(f, len, sh, nsh, id, sizeof id);
        if (id[0] && strcmp(id, m->build_id)) {
            munmap(map, len);
            return m->problem = "build-id mismatch (the file changed since the capture)", -1;
        }
    }
    const Elf64_Shdr *tab = NULL;
    for (size_t i = 0; i < nsh; i++)
        if (sh[i].sh_type == SHT_SYMTAB) tab = &sh[i];
    int full = tab != NULL;
    for (size_t i = 0; !tab && i < nsh; i++)
        if (sh[i].sh_type == SHT_DYNSYM) tab = &sh[i];
    if (!tab || tab->sh_link >= nsh || !in_file(len, tab->sh_offset, tab->sh_size) ||
        !in_file(len, sh[tab->sh_link].sh_offset, sh[tab->sh_link].sh_size)) {
        m->map = map, m->map_len = len;
        return 0;
    }
    const Elf64_Sym *sy = (const Elf64_Sym *)(f + tab->sh_offset);
    size_t n = tab->sh_size / sizeof *sy;
    const char *str = (const char *)f + sh[tab->sh_link].sh_offset;
    size_t strn = sh[tab->sh_link].sh_size;
    struct sym *syms = calloc(n ? n : 1, sizeof *syms);
    if (!syms) {
        munmap(map, len);
        return m->problem = "out of memory", -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int type = ELF64_ST_TYPE(sy[i].st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sy[i].st_shndx == SHN_UNDEF ||
            !sy[i].st_value || sy[i].st_name >= strn || !memchr(str + sy[i].st_name, 0,
                                                                strn - sy[i].st_name))
            continue;
        syms[k].addr = sy[i].st_value;
        syms[k].size = sy[i].st_size;
        syms[k].raw = str + sy[i].st_name;
        k++;
    }
    tkp_sort(syms, k, sizeof *syms, sym_cmp);
    for (size_t i = 0; i < m->nsyms; i++) free(m->syms[i].name), free(m->syms[i].sname);
    free(m->syms);
    if (m->map) munmap(m->map, m->map_len);
    m->syms = syms, m->nsyms = k, m->map = map, m->map_len = len;
    return full;
}

static void load(struct tkp_symbolizer *s, struct module *m)
{
    char path[8192];
    snprintf(path, sizeof path, "%s%s", s->root ? s->root : "", m->path);
    int r = read_elf(m, path, 1);
    if (r < 0) {
        m->loaded = -1;
        return;
    }
    m->loaded = 1;
    /* stripped: the distribution's separate debug file, found by build id */
    if (r == 0 && strlen(m->build_id) > 2) {
        snprintf(path, sizeof path, "%s/usr/lib/debug/.build-id/%.2s/%s.debug",
                 s->root ? s->root : "", m->build_id, m->build_id + 2);
        struct module d = *m;
        d.syms = NULL, d.nsyms = 0, d.map = NULL;
        int dr = access(path, R_OK) == 0 ? read_elf(&d, path, 1) : -1;
        if (dr > 0) {
            for (size_t i = 0; i < m->nsyms; i++) free(m->syms[i].name), free(m->syms[i].sname);
            free(m->syms);
            munmap(m->map, m->map_len);
            m->syms = d.syms, m->nsyms = d.nsyms, m->map = d.map, m->map_len = d.map_len;
        } else if (dr == 0) {
            free(d.syms);
            if (d.map) munmap(d.map, d.map_len);
        }
    }
}

/* ---- names ----------------------------------------------------------------------------------- */

char *tkp_demangle(const char *name)
{
    if (name[0] == '_' && name[1] == 'Z') {
        int st = 0;
        char *d = __cxa_demangle(name, NULL, NULL, &st);
        if (d && !st) return d;
        free(d);
    }
    return strdup(name);
}

char *tkp_short_name(const char *name, char *buf, size_t n)
{
    size_t len = strlen(name);
    /* drop " [clone .constprop.0]" suffixes and trailing qualifiers */
    for (;;) {
        if (len && name[len - 1] == ']') {
            size_t at = len - 1;
            while (at > 0 && name[at] != '[') at--;
            if (at < 2 || name[at - 1] != ' ') break;
            len = at - 1;
            continue;
        }
        if (len > 6 && !memcmp(name + len - 6, " const", 6)) {
            len -= 6;
            continue;
        }
        break;
    }
    /* the parameter list: the parenthesis that matches the last one */
    if (len && name[len - 1] == ')') {
        int depth = 0;
        for (size_t i = len; i-- > 0;) {
            if (name[i] == ')') depth++;
            else if (name[i] == '(' && --depth == 0) {
                if (i > 0) len = i; /* "(anonymous namespace)" alone stays */
                break;
            }
        }
    }
    /* the return type: text before the last space outside <> and () */
    size_t start = 0;
    int angle = 0, paren = 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == '<') angle++;
        else if (c == '>' && angle) angle--;
        else if (c == '(') paren++;
        else if (c == ')' && paren) paren--;
        else if (c == ' ' && !angle && !paren && i + 1 < len &&
                 (i < 8 || memcmp(name + i - 8, "operator", 8)))
            start = i + 1;
    }
    /* a symbol version ("cublasGemmEx@@libcublas.so.13") is not part of the name */
    const char *at = memchr(name + start, '@', len - start);
    if (at && at > name + start && !memchr(at, '(', (size_t)(name + len - at))) len = (size_t)(at - name);
    size_t k = len - start < n - 1 ? len - start : n - 1;
    memcpy(buf, name + start, k);
    buf[k] = 0;
    return buf;
}

static void sym_names(struct sym *y)
{
    if (y->name) return;
    y->name = tkp_demangle(y->raw);
    if (!y->name) return;
    char b[1024];
    y->sname = strdup(tkp_short_name(y->name, b, sizeof b));
}

/* ---- lookup ---------------------------------------------------------------------------------- */

static void sym_resolve(struct tkp_symbolizer *s, uint64_t pc, struct tkp_frame *out)
{
    memset(out, 0, sizeof *out);
    out->pc = pc;
    struct module *m = NULL;
    for (size_t i = s->nmods; i-- > 0;) /* the newest module covering pc */
        if (pc >= s->mods[i].base && pc - s->mods[i].base < s->mods[i].size) {
            m = &s->mods[i];
            break;
        }
    if (!m) return;
    out->module = m->file;
    out->path = m->path;
    uint64_t addr = pc - m->base, at = addr ? addr - 1 : 0;
    out->offset = addr;
    m->needed = 1;
    if (!m->loaded) load(s, m);
    if (m->loaded < 0 || !m->nsyms) return;
    size_t lo = 0, hi = m->nsyms; /* the last symbol with addr <= at */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->syms[mid].addr <= at) lo = mid + 1;
        else hi = mid;
    }
    if (!lo) return;
    struct sym *y = &m->syms[lo - 1];
    /* a sized symbol must cover the pc; an unsized one (hand-written assembly) reaches the next */
    if (y->size ? at - y->addr >= y->size : lo < m->nsyms && at >= m->syms[lo].addr) return;
    sym_names(y);
    out->function = y->name;
    out->short_name = y->sname ? y->sname : y->name;
    out->offset = addr - y->addr;
}

void tkp_symbolize(struct tkp_symbolizer *s, uint64_t pc, struct tkp_frame *out)
{
    size_t slot = (size_t)tkp_mix64(pc) & (CACHE_SLOTS - 1);
    if (s->cache[slot].pc == pc && pc) {
        *out = s->cache[slot].f;
        return;
    }
    sym_resolve(s, pc, out);
    s->cache[slot].pc = pc;
    s->cache[slot].f = *out;
}

int tkp_symbolizer_problems(const struct tkp_symbolizer *s, FILE *f)
{
    int n = 0;
    for (size_t i = 0; i < s->nmods; i++) {
        const struct module *m = &s->mods[i];
        /* [vdso] and other pseudo-files are not files: not a problem */
        if (!m->needed || m->loaded >= 0 || m->path[0] != '/') continue;
        if (f) fprintf(f, "%s: %s\n", m->path, m->problem ? m->problem : "unusable");
        n++;
    }
    return n;
}
