/* place.c — where the experts live under a VRAM budget (sched.h "Placement"). Attention, norms,
 * router, LM head, KV cache and buffers ("fixed") must be on the GPU. Then:
 *  - explicit placement (--cpu-moe, --n-cpu-moe N, -ot rules on expert tensors, llama.cpp's
 *    meanings): those layers' experts stay in RAM, every other layer's experts are resident;
 *  - automatic: all experts resident when they fit, else every layer keeps its experts in RAM
 *    and gets the same number of VRAM cache slots (whole experts: gate+up+down of one expert),
 *    after an optional streaming buffer for hybrid prefill (at most half of what is left);
 *  - automatic for a backend without an expert cache (whole_layers): the streaming buffer (if it
 *    takes at most half of what is left), then the last layers' experts resident while they fit,
 *    the first ones in RAM (what --n-cpu-moe would pick for that budget).
 * Pure arithmetic, no device calls: tests/test_sched_place.c checks it with made-up budgets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmoe/sched.h"

void hmoe_sched_gpu_params_default(struct hmoe_sched_gpu_params *p) {
    memset(p, 0, sizeof *p);
    p->moe_miss = HMOE_MOE_MISS_AUTO;
    p->cache_policy = HMOE_CACHE_LFU;
    p->cache_fills_per_token = -1;
}

bool hmoe_moe_miss_from_name(const char *name, enum hmoe_moe_miss *out) {
    if (!strcmp(name, "cpu")) *out = HMOE_MOE_MISS_CPU;
    else if (!strcmp(name, "transfer")) *out = HMOE_MOE_MISS_TRANSFER;
    else if (!strcmp(name, "auto")) *out = HMOE_MOE_MISS_AUTO;
    else return false;
    return true;
}

static void note(struct hmoe_sched_plan *p, const char *fmt, const char *arg) {
    size_t len = strlen(p->notes);
    if (len + 1 < sizeof p->notes) snprintf(p->notes + len, sizeof p->notes - len, fmt, arg);
}

/* -1: no rule, 0: CPU, 1: GPU for layer il's expert tensors (a CPU rule on any of the three wins:
 * the scheduler moves an expert as gate+up+down together). */
static int ot_layer(const struct hmoe_sched_place_req *r, int il) {
    static const char *const parts[] = {"gate", "up", "down"};
    int res = -1;
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", il, parts[i]);
        int m = hmoe_sched_override_match(r->ot, r->n_ot, name);
        if (m < 0) continue;
        if (!r->ot[m].to_gpu) return 0;
        res = 1;
    }
    return res;
}

enum hmoe_status hmoe_sched_place(const struct hmoe_sched_place_req *r, struct hmoe_sched_plan *p,
                                  struct hmoe_err *err) {
    memset(p, 0, sizeof *p);
    const double MiB = 1048576.0;
    if (r->n_layer <= 0 || r->n_expert <= 0)
        return HMOE_RAISE(err, HMOE_ERR_ARG, "placement: %d layers, %d experts", r->n_layer, r->n_expert);
    p->n_layer = r->n_layer;
    p->n_expert = r->n_expert;
    p->where = calloc((size_t)r->n_layer, sizeof *p->where);
    p->n_slots = calloc((size_t)r->n_layer, sizeof *p->n_slots);
    if (!p->where || !p->n_slots) {
        hmoe_sched_plan_free(p);
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory");
    }
    if (r->fixed_bytes > r->budget_bytes) {
        hmoe_sched_plan_free(p);
        return HMOE_RAISE(err, HMOE_ERR_RANGE,
                          "VRAM budget %.0f MiB is below the %.0f MiB that attention weights, LM head, KV cache and "
                          "buffers need on the GPU; raise --vram-budget, lower -c/--ctx-size or -ub, or use --gpu off",
                          (double)r->budget_bytes / MiB, (double)r->fixed_bytes / MiB);
    }
    uint64_t avail = r->budget_bytes - r->fixed_bytes, all = 0;
    for (int il = 0; il < r->n_layer; il++) all += r->expert_bytes[il] * (uint64_t)r->n_expert;

    /* Rules that touch non-expert tensors are not followed: attention stays on the GPU. */
    static const char *const dense_names[] = {"token_embd.weight", "output.weight", "blk.0.attn_q.weight",
                                              "blk.0.ffn_gate_inp.weight", "blk.0.attn_norm.weight"};
    for (size_t i = 0; i < sizeof dense_names / sizeof *dense_names; i++) {
        int m = hmoe_sched_override_match(r->ot, r->n_ot, dense_names[i]);
        if (m >= 0 && !r->ot[m].to_gpu) note(p, "-ot %s: only expert tensors can stay in RAM (rule ignored for the rest); ", r->ot[m].text);
    }
    int forced = 0;
    for (int il = 0; il < r->n_layer; il++) {
        int o = ot_layer(r, il);
        if (o >= 0) forced = 1;
        bool ram = o == 0 || (o < 0 && (r->cpu_moe || il < r->n_cpu_moe));
        p->where[il] = ram ? HMOE_PLACE_RAM : HMOE_PLACE_GPU;
    }
    p->explicit_placement = forced || r->cpu_moe || r->n_cpu_moe > 0;

    if (p->explicit_placement) {
        for (int il = 0; il < r->n_layer; il++)
            if (p->where[il] == HMOE_PLACE_GPU) p->resident_bytes += r->expert_bytes[il] * (uint64_t)r->n_expert;
        if (p->resident_bytes > avail) {
            char msg[160];
            snprintf(msg, sizeof msg, "%.0f MiB", (double)p->resident_bytes / MiB);
            hmoe_sched_plan_free(p);
            return HMOE_RAISE(err, HMOE_ERR_RANGE,
                              "the experts placed on the GPU (%s) do not fit the %.0f MiB left of the %.0f MiB VRAM "
                              "budget; keep more layers in RAM (--n-cpu-moe) or raise --vram-budget",
                              msg, (double)avail / MiB, (double)r->budget_bytes / MiB);
        }
        avail -= p->resident_bytes;
    } else if (all <= avail) {
        for (int il = 0; il < r->n_layer; il++) p->where[il] = HMOE_PLACE_GPU;
        p->resident_bytes = all;
        avail -= all;
    } else if (r->whole_layers) {
        /* the streaming buffer first (if it takes at most half): prefill of every RAM layer gains more
         * from it than from one more resident layer */
        const uint64_t keep = r->stream_bytes <= avail / 2 ? r->stream_bytes : 0;
        for (int il = r->n_layer - 1; il >= 0; il--) {
            const uint64_t b = r->expert_bytes[il] * (uint64_t)r->n_expert;
            const bool fits = b + keep <= avail && (il == r->n_layer - 1 || p->where[il + 1] == HMOE_PLACE_GPU);
            p->where[il] = fits ? HMOE_PLACE_GPU : HMOE_PLACE_RAM;
            if (fits) p->resident_bytes += b, avail -= b;
        }
    } else {
        for (int il = 0; il < r->n_layer; il++) p->where[il] = HMOE_PLACE_RAM;
    }
    bool any_ram = false;
    for (int il = 0; il < r->n_layer; il++) any_ram |= p->where[il] == HMOE_PLACE_RAM;
    if (any_ram && r->stream_bytes > 0) {
        if (r->stream_bytes <= (p->explicit_placement || r->whole_layers ? avail : avail / 2)) {
            p->stream = true;
            avail -= r->stream_bytes;
        } else {
            note(p, "%s", "no room for the prefill streaming buffer: prefill of RAM layers runs on CPU threads; ");
        }
    }
    if (any_ram && r->whole_layers) {
        note(p, "%s", "no expert cache on this architecture: experts of RAM layers run on CPU threads; ");
    } else if (any_ram && !p->explicit_placement) {
        uint64_t per_slot = 0; /* one slot in every RAM layer */
        for (int il = 0; il < r->n_layer; il++)
            if (p->where[il] == HMOE_PLACE_RAM) per_slot += r->expert_bytes[il];
        int s = per_slot ? (int)(avail / per_slot) : 0;
        if (s > r->n_expert - 1) s = r->n_expert - 1;
        for (int il = 0; il < r->n_layer; il++)
            if (p->where[il] == HMOE_PLACE_RAM) {
                p->n_slots[il] = s;
                p->cache_bytes += (uint64_t)s * r->expert_bytes[il];
            }
        if (s == 0) note(p, "%s", "no VRAM left for an expert cache: every expert runs on CPU threads; ");
    } else if (any_ram) {
        note(p, "%s", "explicit placement (--cpu-moe / --n-cpu-moe / -ot): experts in RAM run on CPU threads, no cache; ");
    }
    p->total_bytes = r->fixed_bytes + p->resident_bytes + p->cache_bytes + (p->stream ? r->stream_bytes : 0);
    return HMOE_OK;
}

void hmoe_sched_plan_free(struct hmoe_sched_plan *p) {
    if (!p) return;
    free(p->where);
    free(p->n_slots);
    p->where = NULL;
    p->n_slots = NULL;
}

void hmoe_sched_plan_describe(const struct hmoe_sched_plan *p, const uint64_t *expert_bytes, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int a = 0; a < p->n_layer && o < cap;) {
        int b = a;
        while (b + 1 < p->n_layer && p->where[b + 1] == p->where[a] && p->n_slots[b + 1] == p->n_slots[a]) b++;
        char range[32];
        if (a == b) snprintf(range, sizeof range, "layer %d", a);
        else snprintf(range, sizeof range, "layers %d-%d", a, b);
        if (p->where[a] == HMOE_PLACE_GPU)
            o += (size_t)snprintf(buf + o, cap - o, "  %s: experts resident in VRAM (%.1f MiB per layer)\n", range,
                                  (double)expert_bytes[a] * p->n_expert / 1048576.0);
        else
            o += (size_t)snprintf(buf + o, cap - o, "  %s: experts in RAM, %d VRAM cache slots each (%.2f MiB per expert)\n",
                                  range, p->n_slots[a], (double)expert_bytes[a] / 1048576.0);
        a = b + 1;
    }
    if (o < cap && p->notes[0]) snprintf(buf + o, cap - o, "  note: %s\n", p->notes);
}
