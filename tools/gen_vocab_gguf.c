/* gen_vocab_gguf.c — writes a vocabulary-only GGUF (no tensors) from a line list, with the
 * repository's GGUF writer. Used to build test vocabularies from a tokenizer.json (see
 * tests/tokenizer/gen_gptoss.mjs, which writes the list). Lines, fields separated by a tab:
 *   S KEY VALUE   a string record           U KEY VALUE   a u32 record
 *   B KEY 0|1     a bool record             F KEY VALUE   an f32 record
 *   T TYPE TEXT   the next token (tokenizer.ggml.tokens and .token_type, in id order)
 *   M MERGE       the next merge "a b" (tokenizer.ggml.merges, in rank order)
 * Build and run:
 *   cc -Iinclude -Isrc -o /tmp/gen_vocab_gguf tools/gen_vocab_gguf.c build/libhmoe.a -lm -lpthread -fopenmp
 *   /tmp/gen_vocab_gguf LIST OUT.gguf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/gguf_write.h"

struct strs {
    struct hmoe_gguf_str *v;
    size_t n, cap;
};

static int push(struct strs *s, const char *p, size_t len) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        struct hmoe_gguf_str *v = realloc(s->v, cap * sizeof *v);
        if (!v) return 0;
        s->v = v;
        s->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return 0;
    memcpy(c, p, len);
    c[len] = 0;
    s->v[s->n++] = (struct hmoe_gguf_str){.ptr = c, .len = len};
    return 1;
}

static int fail(const char *what, const struct hmoe_err *err) {
    fprintf(stderr, "gen_vocab_gguf: %s%s%s\n", what, err ? ": " : "", err ? err->msg : "");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gen_vocab_gguf LIST OUT.gguf\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) return fail("cannot open the list", NULL);
    struct hmoe_err err = {0};
    struct hmoe_gguf_writer *w = NULL;
    if (hmoe_gguf_writer_init(&w, 32, &err)) return fail("init", &err);
    struct strs toks = {0}, merges = {0};
    int32_t *types = NULL;
    size_t cap_types = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long lineno = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] == '\n') line[--len] = 0;
        char *t1 = strchr(line, '\t');
        char *t2 = t1 && line[0] != 'M' ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || (line[0] != 'M' && !t2)) {
            fprintf(stderr, "gen_vocab_gguf: %s:%lu: expected tab-separated fields\n", argv[1], lineno);
            return 1;
        }
        if (t2) *t2 = 0;
        const char *key = t1 + 1, *val = t2 ? t2 + 1 : NULL;
        enum hmoe_status st = HMOE_OK;
        switch (line[0]) {
        case 'S': st = hmoe_gguf_writer_add_str(w, key, val, &err); break;
        case 'U': st = hmoe_gguf_writer_add_u32(w, key, (uint32_t)strtoul(val, NULL, 10), &err); break;
        case 'B': st = hmoe_gguf_writer_add_bool(w, key, val[0] == '1', &err); break;
        case 'F': st = hmoe_gguf_writer_add_f32(w, key, strtof(val, NULL), &err); break;
        case 'T':
            if (toks.n == cap_types) {
                cap_types = cap_types ? cap_types * 2 : 1024;
                int32_t *nt = realloc(types, cap_types * sizeof *nt);
                if (!nt) return fail("out of memory", NULL);
                types = nt;
            }
            types[toks.n] = (int32_t)strtol(key, NULL, 10);
            if (!push(&toks, val, strlen(val))) return fail("out of memory", NULL);
            break;
        case 'M':
            if (!push(&merges, key, strlen(key))) return fail("out of memory", NULL);
            break;
        default: fprintf(stderr, "gen_vocab_gguf: %s:%lu: unknown record '%c'\n", argv[1], lineno, line[0]); return 1;
        }
        if (st) return fail("metadata", &err);
    }
    fclose(f);
    free(line);
    if (hmoe_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks.v, toks.n, &err) ||
        hmoe_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", HMOE_GGUF_I32, types, toks.n, &err) ||
        hmoe_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges.v, merges.n, &err) ||
        hmoe_gguf_writer_open(w, argv[2], &err) || hmoe_gguf_writer_finish(w, &err))
        return fail(argv[2], &err);
    hmoe_gguf_writer_free(w);
    printf("%s: %zu tokens, %zu merges\n", argv[2], toks.n, merges.n);
    for (size_t i = 0; i < toks.n; i++) free((void *)toks.v[i].ptr);
    for (size_t i = 0; i < merges.n; i++) free((void *)merges.v[i].ptr);
    free(toks.v), free(merges.v), free(types);
    return 0;
}
