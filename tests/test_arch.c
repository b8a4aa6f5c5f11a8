/* test_arch.c — the architecture table (arch.h): every GGUF architecture name llama.cpp writes
 * for the families hmoe runs resolves to one entry and no other name does; every entry has the
 * hooks a model load and a CPU forward need; the tiny fixture models (converted by llama.cpp)
 * load with the entry of their general.architecture; and the properties the CLI and the GPU
 * backend ask of an entry (recurrent state, GPU path, default chat family, pre-tokenizer,
 * routing rule) are those the reference documents give for each family.
 */
#include <string.h>

#include "harness.h"
#include "hmoe/arch.h"
#include "hmoe/gguf.h"
#include "hmoe/model.h"

/* The names of general.architecture in llama.cpp's conversions (qwen3moe.md, qwen35moe.md,
 * nemotron_h_moe.md, gpt-oss.md). */
static const char *const known[] = {"qwen3moe", "qwen35moe", "nemotron_h_moe", "nemotron_h", "gpt-oss"};

static void test_lookup(void) {
    bool all = true, distinct = true;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const struct hmoe_arch *a = hmoe_arch_find(known[i]);
        all = all && a != NULL;
        if (a) {
            bool named = false;
            for (int j = 0; j < HMOE_ARCH_MAX_NAMES && a->names[j]; j++) named |= !strcmp(a->names[j], known[i]);
            all = all && named;
        }
    }
    t_check(all, "arch_find: every supported name resolves to an entry that lists it", "a name is missing");
    t_check(!hmoe_arch_find("qwen3") && !hmoe_arch_find("llama") && !hmoe_arch_find("") && !hmoe_arch_find(NULL) &&
                !hmoe_arch_find("qwen3moe ") && !hmoe_arch_find_str((struct hmoe_gguf_str){.ptr = "qwen3moe", .len = 5}),
            "arch_find: other names and prefixes are not found", "an unknown name resolved");
    t_check(hmoe_arch_find_str((struct hmoe_gguf_str){.ptr = "gpt-oss-extra", .len = 7}) == hmoe_arch_find("gpt-oss"),
            "arch_find_str: matches the counted string, not what follows", "mismatch");
    size_t n_names = 0;
    for (size_t i = 0; i < hmoe_arch_count(); i++)
        for (int j = 0; j < HMOE_ARCH_MAX_NAMES && hmoe_arch_get(i)->names[j]; j++) {
            n_names++;
            distinct = distinct && hmoe_arch_find(hmoe_arch_get(i)->names[j]) == hmoe_arch_get(i);
        }
    t_check(distinct && n_names == sizeof known / sizeof known[0] && !hmoe_arch_get(hmoe_arch_count()),
            "arch table: each name in exactly one entry, no others", "%zu names", n_names);
    char want[256] = "";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "", known[i]);
    t_check(!strcmp(hmoe_model_supported_archs(), want), "supported list names every entry's names", "'%s'",
            hmoe_model_supported_archs());
}

static void test_hooks(void) {
    bool ok = true;
    for (size_t i = 0; i < hmoe_arch_count(); i++) {
        const struct hmoe_arch *a = hmoe_arch_get(i);
        ok = ok && a->names[0] && a->summary && a->doc && a->bind_layer && a->forward_cpu && a->tokenizer_pre;
        if (a->gpu) ok = ok && a->gpu->layer && (!a->gpu->init || a->gpu->free);
        if (a->own_layer_keys) ok = ok && a->read_config;
    }
    t_check(ok, "every entry: binder, CPU forward, pre-tokenizer; a GPU path has a layer step", "an entry lacks a hook");
}

/* What each family's reference document says, as the entry must report it. */
static void test_properties(void) {
    const struct hmoe_arch *q3 = hmoe_arch_find("qwen3moe"), *q35 = hmoe_arch_find("qwen35moe"),
                           *nh = hmoe_arch_find("nemotron_h_moe"), *go = hmoe_arch_find("gpt-oss");
    if (!q3 || !q35 || !nh || !go) {
        t_check(false, "arch properties", "an entry is missing");
        return;
    }
    t_check(!q3->rec_dims && q35->rec_dims && nh->rec_dims && !go->rec_dims,
            "recurrent state: qwen35moe (DeltaNet) and nemotron_h (Mamba-2) only", "wrong");
    t_check(q3->gpu && q3->gpu->fused_decode && q35->gpu && !q35->gpu->fused_decode && q35->gpu->init,
            "GPU path: qwen3moe (fused decode) and qwen35moe (own state, unfused)", "wrong");
    t_check(nh->gpu && nh->gpu->init && !nh->gpu->fused_decode && nh->gpu->own_experts && !q3->gpu->own_experts &&
                !q35->gpu->own_experts,
            "GPU path: nemotron_h (own state, unfused, its own sigmoid router and ungated experts)", "wrong");
    t_check(q3->moe.gating == HMOE_MOE_SOFTMAX && q35->moe.gating == HMOE_MOE_SOFTMAX &&
                nh->moe.gating == HMOE_MOE_SIGMOID && go->moe.gating == HMOE_MOE_TOPK_SOFTMAX &&
                nh->moe.act == HMOE_MOE_RELU2 && go->moe.act == HMOE_MOE_SWIGLU_OAI && q3->moe.act == HMOE_MOE_SWIGLU,
            "routing rule and expert activation per family", "wrong");
    t_check(q35->moe.shared_expert && nh->moe.shared_expert && !q3->moe.shared_expert && go->moe.expert_bias &&
                nh->moe.latent,
            "shared expert, expert biases, latent MoE per family", "wrong");
    t_check(q35->chat_family == HMOE_CHAT_TEMPLATE_QWEN35 && q3->chat_family == HMOE_CHAT_TEMPLATE_UNKNOWN,
            "default chat family: Qwen3.5 for qwen35moe, none implied for qwen3moe", "wrong");
    t_check(!strcmp(q3->tokenizer_pre, "qwen2") && !strcmp(q35->tokenizer_pre, "qwen35") &&
                !strcmp(nh->tokenizer_pre, "pixtral"),
            "pre-tokenizer per family (tokenizer.md)", "wrong");
}

/* llama.cpp-converted fixtures, one per architecture. */
static const struct {
    const char *file, *arch;
} fx[] = {
        {"fixtures/models/tiny-qwen3moe-A-mini-F32.gguf", "qwen3moe"},
        {"fixtures/moe-tiny/qwen35moe-tiny.gguf", "qwen35moe"},
        {"fixtures/moe-tiny/nemotron_h-tiny.gguf", "nemotron_h"},
        {"fixtures/moe-tiny/nemotron_h_moe-latent-tiny.gguf", "nemotron_h_moe"},
        {"fixtures/moe-tiny/gpt-oss-tiny.gguf", "gpt-oss"},
};

/* They load with their architecture's entry. */
static void test_fixtures(void) {
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        char path[4096], name[160];
        snprintf(path, sizeof path, "%s", t_shared(fx[i].file));
        snprintf(name, sizeof name, "fixture %s loads as %s", fx[i].file, fx[i].arch);
        struct hmoe_model *m = NULL;
        struct hmoe_err err = {0};
        if (hmoe_model_load(path, NULL, &m, &err)) {
            t_check(false, name, "%s", err.msg);
            continue;
        }
        const struct hmoe_arch *a = hmoe_model_arch(m);
        t_check(a == hmoe_arch_find(fx[i].arch) && !strcmp(m->cfg.arch, fx[i].arch) &&
                    a == hmoe_arch_of_gguf(m->gguf),
                name, "entry %s, cfg.arch %s", a ? a->names[0] : "NULL", m->cfg.arch);
        hmoe_model_free(m);
    }
}

/* An entry without a GPU path (the first fixture's architecture with gpu == NULL): --gpu on is
 * refused naming the architecture, --gpu auto runs on the CPU. */
static void test_no_gpu_path(void) {
    size_t i = 0;
    while (i < sizeof fx / sizeof fx[0] && hmoe_arch_find(fx[i].arch)->gpu) i++;
    if (i == sizeof fx / sizeof fx[0]) {
        t_check(true, "no GPU path: every architecture with a fixture has one (nothing to refuse)", "%s", "");
        return;
    }
    struct hmoe_model *m = NULL;
    struct hmoe_err err = {0};
    if (hmoe_model_load(t_shared(fx[i].file), NULL, &m, &err)) {
        t_check(false, "no GPU path: fixture loads", "%s: %s", fx[i].file, err.msg);
        return;
    }
    char want[96];
    snprintf(want, sizeof want, "no GPU path for %s", fx[i].arch);
    struct hmoe_ctx_params p;
    hmoe_ctx_params_default(&p);
    p.n_ctx = 64;
    p.n_threads = 1;
    p.gpu = HMOE_GPU_ON;
    struct hmoe_ctx *c = NULL;
    enum hmoe_status st = hmoe_ctx_init(m, &p, &c, &err);
    t_check(st == HMOE_ERR_UNSUPPORTED && !c && strstr(err.msg, want) && strstr(err.msg, "--gpu off"),
            "no GPU path: --gpu on is refused with the architecture's name", "status %d: %s", (int)st, err.msg);
    hmoe_ctx_free(c);
    p.gpu = HMOE_GPU_AUTO;
    c = NULL;
    st = hmoe_ctx_init(m, &p, &c, &err);
    t_check(st == HMOE_OK && c && !strcmp(hmoe_ctx_backend(c), "cpu"), "no GPU path: --gpu auto runs on the CPU",
            "status %d: %s", (int)st, err.msg);
    hmoe_ctx_free(c);
    hmoe_model_free(m);
}

int main(void) {
    test_lookup();
    test_hooks();
    test_properties();
    test_fixtures();
    test_no_gpu_path();
    return t_summary();
}
