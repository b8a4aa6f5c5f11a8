/* arch_table.c — the architecture table: the one list of the architectures hmoe runs (each
 * entry is defined in its own src/model/arch/<id>*.c), and the lookups by GGUF name. Adding
 * an architecture is one line in HMOE_ARCHS. Order: the order of the supported list in
 * messages and --help.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hmoe/arch.h"
#include "model/model_impl.h"

/* X(id): the entry hmoe_arch_<id> of src/model/arch/<id>*.c; one line each, above the last. */
#define HMOE_ARCHS(X) \
    X(qwen3moe)       \
    X(qwen35moe)      \
    X(nemotron_h)     \
    X(gptoss)         \
    /* end of the list */

#define DECLARE(id) extern const struct hmoe_arch hmoe_arch_##id;
HMOE_ARCHS(DECLARE)
#define ENTRY(id) &hmoe_arch_##id,
static const struct hmoe_arch *const table[] = {HMOE_ARCHS(ENTRY)};

size_t hmoe_arch_count(void) { return HMOE_ARRAY_LEN(table); }

const struct hmoe_arch *hmoe_arch_get(size_t i) { return i < HMOE_ARRAY_LEN(table) ? table[i] : NULL; }

const struct hmoe_arch *hmoe_arch_find_str(struct hmoe_gguf_str name) {
    for (size_t i = 0; i < HMOE_ARRAY_LEN(table); i++)
        for (int j = 0; j < HMOE_ARCH_MAX_NAMES && table[i]->names[j]; j++)
            if (strlen(table[i]->names[j]) == name.len && memcmp(table[i]->names[j], name.ptr, name.len) == 0)
                return table[i];
    return NULL;
}

const struct hmoe_arch *hmoe_arch_find(const char *name) {
    return name ? hmoe_arch_find_str((struct hmoe_gguf_str){.ptr = name, .len = strlen(name)}) : NULL;
}

const struct hmoe_arch *hmoe_arch_of_gguf(const struct hmoe_gguf *g) {
    struct hmoe_gguf_str a;
    return hmoe_gguf_get_str(g, "general.architecture", &a, NULL) == HMOE_OK ? hmoe_arch_find_str(a) : NULL;
}

const struct hmoe_arch *hmoe_model_arch(const struct hmoe_model *m) { return m->cfg.arch_entry; }

enum hmoe_chat_template hmoe_arch_default_chat_family(const struct hmoe_gguf *g) {
    const struct hmoe_arch *a = hmoe_arch_of_gguf(g);
    return a ? a->chat_family : HMOE_CHAT_TEMPLATE_UNKNOWN;
}

/* "qwen3moe, qwen35moe, nemotron_h_moe, nemotron_h, gpt-oss": every name of every entry,
 * built once (error paths of several threads may ask at the same time). */
static char supported[256];
static void build_supported(void) {
    size_t n = 0;
    for (size_t i = 0; i < HMOE_ARRAY_LEN(table); i++)
        for (int j = 0; j < HMOE_ARCH_MAX_NAMES && table[i]->names[j] && n < sizeof supported; j++)
            n += (size_t)snprintf(supported + n, sizeof supported - n, "%s%s", n ? ", " : "", table[i]->names[j]);
}

const char *hmoe_model_supported_archs(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, build_supported);
    return supported;
}
