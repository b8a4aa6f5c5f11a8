/* cmd_tokenize.c — `hmoe tokenize`: text -> token ids in llama-tokenize's formats
 * (`id -> 'piece'` lines by default, `[1, 2, 3]` with --ids), or one `id<TAB>piece` line
 * per token with --pieces, the piece escaped C-style (\n, \t, \\, \xNN for control bytes and
 * bytes of an incomplete UTF-8 sequence) so every byte stays visible.
 * Relies on hmoe/text.h (tokenizer.md §4) and the gguf reader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hmoe/gguf.h"
#include "hmoe/json.h" /* hmoe_read_file */
#include "hmoe/text.h"

static const char *usage = "hmoe tokenize -m FILE [--ids | --pieces] [--no-parse-special] (TEXT | -p TEXT | -f FILE | --stdin)";

/* Length of the well-formed UTF-8 character at s (n bytes left), or 0. */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (k == 0 || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

static void print_escaped(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_char_len(s + i, n - i);
        if (s[i] == '\\') fputs("\\\\", stdout);
        else if (s[i] == '\n') fputs("\\n", stdout);
        else if (s[i] == '\t') fputs("\\t", stdout);
        else if (s[i] == '\r') fputs("\\r", stdout);
        else if (k == 0 || s[i] < 0x20 || s[i] == 0x7F) printf("\\x%02X", s[i]);
        else {
            fwrite(s + i, 1, k, stdout);
            i += k;
            continue;
        }
        i++;
    }
}

static int read_stdin(char **out, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, stdin)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) { free(buf); buf = NULL; }
            else buf = b;
        }
    }
    if (!buf || ferror(stdin)) {
        free(buf);
        return -1;
    }
    *out = buf;
    *len = n;
    return 0;
}

int hmoe_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL, *file = NULL;
    bool ids = false, pieces = false, no_parse_special = false, no_bos = false, use_stdin = false, show_count = false;
    bool ignored = false;
    const struct hmoe_opt opts[] = {
        {"--model", "-m", "FILE", "GGUF file with the tokenizer (a model or a vocab-only file)", HMOE_OPT_STR, &model},
        {"--prompt", "-p", "TEXT", "text to tokenize (also accepted as a positional argument)", HMOE_OPT_STR, &prompt},
        {"--file", "-f", "FILE", "tokenize the exact bytes of FILE (no newline stripping, no escapes)", HMOE_OPT_STR, &file},
        {"--stdin", NULL, NULL, "tokenize standard input", HMOE_OPT_FLAG, &use_stdin},
        {"--ids", NULL, NULL, "print only the ids, as [1, 2, 3] (llama-tokenize --ids)", HMOE_OPT_FLAG, &ids},
        {"--pieces", NULL, NULL, "print one line per token: id, a tab, the piece with C-style escapes", HMOE_OPT_FLAG, &pieces},
        {"--no-parse-special", NULL, NULL, "treat <|im_start|> etc. as plain text (default: parse them)", HMOE_OPT_FLAG,
         &no_parse_special},
        {"--no-bos", NULL, NULL, "never add BOS/EOS even if the vocab asks for them (Qwen never does)", HMOE_OPT_FLAG, &no_bos},
        {"--show-count", NULL, NULL, "also print the number of tokens", HMOE_OPT_FLAG, &show_count},
        {"--no-escape", NULL, NULL, "accepted for llama-tokenize compatibility (hmoe never processes escapes)",
         HMOE_OPT_FLAG, &ignored},
        {"--log-disable", NULL, NULL, "accepted for llama-tokenize compatibility (hmoe logs nothing here)", HMOE_OPT_FLAG,
         &ignored},
        {NULL, NULL, NULL, NULL, HMOE_OPT_FLAG, NULL},
    };
    const char *pos[1];
    int n_pos = 0;
    int rc = hmoe_opts_parse(usage, opts, argc, argv, pos, 1, &n_pos);
    if (rc) return rc < 0 ? HMOE_EXIT_OK : rc;
    if (n_pos == 1) {
        if (prompt) {
            fprintf(stderr, "hmoe: give the text either as -p TEXT or as an argument, not both\nusage: %s\n", usage);
            return HMOE_EXIT_USAGE;
        }
        prompt = pos[0];
    }
    if (!model) {
        fprintf(stderr, "hmoe: -m FILE is required\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if ((prompt != NULL) + (file != NULL) + use_stdin != 1) {
        fprintf(stderr, "hmoe: give exactly one of TEXT, -p TEXT, -f FILE or --stdin\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }
    if (ids && pieces) {
        fprintf(stderr, "hmoe: --ids and --pieces are exclusive\nusage: %s\n", usage);
        return HMOE_EXIT_USAGE;
    }

    struct hmoe_err err = {0};
    char *text = NULL;
    size_t len = 0;
    if (file && hmoe_read_file(file, &text, &len, &err) != HMOE_OK) return hmoe_cli_fail(&err);
    if (use_stdin && read_stdin(&text, &len) != 0) {
        fprintf(stderr, "hmoe: error: could not read standard input\n");
        return HMOE_EXIT_ERROR;
    }
    struct hmoe_gguf *g = NULL;
    struct hmoe_vocab *v = NULL;
    int32_t *toks = NULL;
    size_t n = 0;
    if (hmoe_gguf_open(model, &g, &err) != HMOE_OK || hmoe_vocab_load(g, &v, &err) != HMOE_OK ||
        hmoe_tokenize(v, prompt ? prompt : text, prompt ? strlen(prompt) : len, !no_bos, !no_parse_special, &toks, &n,
                      &err) != HMOE_OK) {
        rc = hmoe_cli_fail(&err);
        goto done;
    }
    if (ids) {
        printf("[");
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", toks[i]);
        printf("]\n");
    } else {
        for (size_t i = 0; i < n; i++) {
            size_t pl;
            const char *p = hmoe_token_to_piece(v, toks[i], true, &pl);
            if (pieces) {
                printf("%d\t", toks[i]);
                print_escaped(p, pl);
                printf("\n");
            } else {
                printf("%6d -> '", toks[i]);
                fwrite(p, 1, pl, stdout);
                printf("'\n");
            }
        }
    }
    if (show_count) printf("Total number of tokens: %zu\n", n);
    rc = fflush(stdout) == 0 ? HMOE_EXIT_OK : HMOE_EXIT_ERROR;
done:
    free(toks);
    hmoe_vocab_free(v);
    hmoe_gguf_free(g);
    free(text);
    return rc;
}
