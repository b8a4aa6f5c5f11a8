/* hybrid_stats.c — what the hybrid scheduler reports (sched.h): the statistics since the last
 * reset (cache hit rate, CPU and GPU time per token, handoff latencies, PCIe copies, the prefill
 * split's totals) and the text of `-v`'s plan and stats. Reads only: the counters are kept (and
 * reset) by hybrid.c (decode), hybrid_cpu.c (the CPU half's stamps) and hybrid_split.c (prefill).
 */
#include <stdio.h>
#include <string.h>

#include "sched/hybrid_impl.h"

void hmoe_sched_hybrid_get_stats(const struct hmoe_sched_hybrid *h, struct hmoe_sched_hybrid_stats *o) {
    memset(o, 0, sizeof *o);
    uint64_t uses = 0, hits = 0, gw = 0, gn = 0, cw = 0;
    for (int l = 0; l < h->n_layer; l++) {
        uses += h->L[l].uses;
        hits += h->L[l].hits;
        gw += h->L[l].gpu_wait_ns;
        gn += h->L[l].gpu_waits;
        cw += h->L[l].cpu_wait_ns;
    }
    o->hit_rate = uses ? (double)hits / (double)uses : 0.0;
    o->cpu_expert_ms_per_token = h->steps ? h->cpu_ms / (double)h->steps : 0.0;
    o->gpu_wait_us_per_layer = gn ? (double)gw / (double)gn / 1e3 : 0.0;
    o->cpu_wait_us_per_layer = h->steps && h->n_ram ? (double)cw / (double)(h->steps * (uint64_t)h->n_ram) / 1e3 : 0.0;
    o->pcie_gbps = h->t_last > h->t_first ? (double)h->fill_bytes / (h->t_last - h->t_first) / 1e9 : 0.0;
    o->h2d_gbps_probe = h->h2d_probe_gbps;
    o->fills = h->fills;
    o->steps = h->steps;
    o->prefill_stream_min = h->stream ? h->stream_min : 0;
    o->ram_experts = (uint64_t)h->n_ram * (uint64_t)h->E;
    o->cached_experts = (uint64_t)hmoe_sched_cache_n_valid(h->cache);
    o->prefill_streamed_experts = h->stream_experts_total;
    o->prefill_streamed_bytes = h->stream_bytes_total;
    bool pinned = h->n_ram > 0;
    for (int l = 0; l < h->n_layer; l++) pinned &= !h->L[l].ram || h->L[l].pinned;
    o->pinned = pinned;
    o->pinned_bytes = h->pin_bytes;
    for (int l = 0; l < h->n_layer; l++) o->xfer_experts += h->L[l].xfers;
    o->prefetch_pred = h->pf_pred;
    o->prefetch_correct = h->pf_correct;
    o->prefetch_fills = h->pf_fills;
    o->prefetch_used = h->pf_used;
    o->n_transfer_layers = h->n_transfer;
    o->prefill_split_layers = h->sp_total.layers;
    o->prefill_cpu_experts = h->sp_total.nc;
    o->prefill_split_cpu_ms = h->sp_total.cpu_ms;
    o->prefill_split_gpu_ms = h->sp_total.gpu_ms;
    o->cpu_phase_gbps = h->cpu_phase_ns ? (double)h->cpu_phase_bytes / (double)h->cpu_phase_ns : 0.0;
    o->cpu_phase_us_per_layer = h->cpu_phases ? (double)h->cpu_phase_ns / (double)h->cpu_phases / 1e3 : 0.0;
    o->ram_probe_gbps = h->ram_probe_gbps;
    o->handoff_in_us = h->ho_in_n ? (double)h->ho_in_ns / (double)h->ho_in_n / 1e3 : 0.0;
    o->handoff_out_us = h->ho_out_n ? (double)h->ho_out_ns / (double)h->ho_out_n / 1e3 : 0.0;
    o->handoff_rt_us = h->ho_rt_n ? (double)h->ho_rt_ns / (double)h->ho_rt_n / 1e3 : 0.0;
    o->clock_rtt_us = h->clk_ok ? (double)h->clk_rtt_ns / 1e3 : 0.0;
    o->clock_drift_ppm = h->clk_drift_ppm;
}

void hmoe_sched_hybrid_report(const struct hmoe_sched_hybrid *h, char *buf, size_t cap) {
    struct hmoe_sched_hybrid_stats s;
    hmoe_sched_hybrid_get_stats(h, &s);
    size_t o = 0;
    uint64_t pool = 0;
    for (int l = 0; l < h->n_layer; l++) pool += h->L[l].pool.bytes;
#define OUT(...) (o += o < cap ? (size_t)snprintf(buf + o, cap - o, __VA_ARGS__) : 0)
    OUT("  hybrid: %d RAM layers, expert cache %.1f MiB, %s policy, %d copies/token%s, prefill %s\n", h->n_ram,
        (double)pool / 1048576.0, h->sp.cache_policy == HMOE_CACHE_LRU ? "LRU" : "LFU", h->fills_per_token,
        h->profile_loaded ? ", hot set from the routing profile" : "",
        h->stream ? "streams experts (double-buffered chunks)" : "on CPU threads");
    if (h->stream) OUT("  prefill streaming: %d experts per chunk, 2 x %.1f MiB, micro-batches >= %d tokens\n",
                       h->chunk_experts, (double)h->chunk_bytes / 1048576.0, h->stream_min);
    OUT("  misses: %d CPU threads, --moe-miss %s; pinned expert ranges: %s (%d of %d RAM layers, %.1f GB: read %.1f s, "
        "locked %.1f s); host->device %.1f GB/s\n",
        h->nt, h->miss_why, s.pinned ? "yes" : "no", h->pin_layers, h->pin_tried, (double)h->pin_bytes / 1e9, h->touch_s,
        h->pin_s, s.h2d_gbps_probe);
    if (h->prefetch)
        OUT("  prefetch: next layer's router on this layer's state, up to %d copies per layer and token into dynamic slots\n",
            h->pf_max);
    if (h->profile_on) OUT("  routing profile: %s (%s)\n", h->profile_path, h->profile_loaded ? "loaded" : "new");
    if (pool) OUT("  cache filled at load: %d experts (%s); now %llu of %llu RAM-layer experts in VRAM\n", h->load_seeded,
                  h->profile_loaded ? "profile's hot set" : "no profile: experts 0..slots-1 of each layer",
                  (unsigned long long)s.cached_experts, (unsigned long long)s.ram_experts);
    if (s.prefill_streamed_experts)
        OUT("  prefill streamed %llu expert copies (%.2f GB) since the last reset\n",
            (unsigned long long)s.prefill_streamed_experts, (double)s.prefill_streamed_bytes / 1e9);
    if (h->stream) {
        const struct hyb_split_acc *a = &h->sp_total;
        const double L = a->layers ? (double)a->layers : 1.0, G = a->gpu_layers ? (double)a->gpu_layers : 1.0;
        if (!h->split_on) OUT("  prefill split: off (one-token micro-batches): every uncached expert streams\n");
        else if (h->split_share == 0)
            OUT("  prefill split: no CPU part (CPU share 0); experts without tokens are still skipped\n");
        else if (h->split_share > 0)
            OUT("  prefill split: CPU threads take %.0f%% of each layer's uncached experts (forced share)\n",
                100.0 * h->split_share);
        else OUT("  prefill split: adaptive (the default): after each layer's router CPU threads take the experts with "
                 "the fewest tokens as far as the measured costs allow; experts without tokens are skipped\n");
        if (a->layers)
            OUT("  prefill split: %llu micro-batches, %llu layers: per layer %.1f experts on CPU threads / %.1f streamed / "
                "%.1f cached, CPU %.2f ms, GPU %.2f ms (streamed part %.2f); rates CPU %.3f ms/expert at %.0f tokens, "
                "streamed %.3f ms/expert, cached %.4f ms/expert\n",
                (unsigned long long)a->batches, (unsigned long long)a->layers, (double)a->nc / L, (double)a->ns / L,
                (double)a->ncached / L, a->cpu_ms / L, a->gpu_ms / G, a->gpu_stream_ms / G, h->r_cpu_ms, h->r_cpu_tok,
                h->r_gpu_ms, h->r_cached_ms);
        if (a->layers)
            OUT("  prefill split planner: n_cpu %llu-%llu over layers, window %.2f ms per layer; layers with a CPU part "
                "%.1f %%: CPU start %.2f ms, GPU waited for the CPU %.3f ms, add %.3f ms per such layer; %llu layer "
                "visits latched off\n",
                (unsigned long long)a->nc_min, (unsigned long long)a->nc_max, a->window_ms / G,
                100.0 * (double)a->cpu_layers / L, a->cpu_layers ? a->fixed_ms / (double)a->cpu_layers : 0.0,
                a->cpu_layers ? a->wait_ms / (double)a->cpu_layers : 0.0,
                a->cpu_layers ? a->add_ms / (double)a->cpu_layers : 0.0, (unsigned long long)a->off_layers);
        if (h->split_on && a->layers)
            OUT("  prefill split by count: %llu layers; totals: %llu prefetched, %llu skipped (no tokens), %llu on CPU "
                "threads (%llu pairs), %llu streamed after the router; copy engine dry at the decision in %llu; "
                "lightest-first violations %llu\n",
                (unsigned long long)a->layers, (unsigned long long)a->n0, (unsigned long long)a->nskip,
                (unsigned long long)a->nc, (unsigned long long)a->pairs, (unsigned long long)(a->ns - a->n0),
                (unsigned long long)a->idle, (unsigned long long)a->light_bad);
    }
    if (h->notes[0]) OUT("  note: %s\n", h->notes);
    if (s.steps) {
        OUT("  decode: %llu steps, hit rate %.1f%%, CPU experts %.3f ms/token, GPU waits %.1f us per layer with misses, "
            "CPU waits %.1f us per layer, cache copies %llu (%.2f GB/s)\n",
            (unsigned long long)s.steps, 100.0 * s.hit_rate, s.cpu_expert_ms_per_token, s.gpu_wait_us_per_layer,
            s.cpu_wait_us_per_layer, (unsigned long long)s.fills, s.pcie_gbps);
        if (h->cpu_phases) {
            OUT("  CPU expert phase: %.1f GB/s (%.2f MB in %.1f us per layer with CPU misses, %.1f such layers per "
                "token, work items, %d threads); the team's RAM read probe at init (8-byte loads over one pinned layer) "
                "%.1f GB/s%s",
                s.cpu_phase_gbps, (double)h->cpu_phase_bytes / (double)h->cpu_phases / 1e6, s.cpu_phase_us_per_layer,
                (double)h->cpu_phases / (double)s.steps,
                h->nt, s.ram_probe_gbps,
                s.ram_probe_gbps > 0 ? "" : " (no pinned layer to probe)");
            if (s.ram_probe_gbps > 0) OUT(" -> %.0f %% of it", 100.0 * s.cpu_phase_gbps / s.ram_probe_gbps);
            OUT("\n");
            OUT("  handoff per layer with misses: GPU publish -> CPU sees %.1f us (%llu layers where the CPU waited), "
                "CPU release -> GPU sees %.1f us (%llu where the GPU waited); clock offset +- %.1f us, drift %.2f ppm; "
                "sum of both %.1f us without the clock (%llu layers where both waited)\n",
                s.handoff_in_us, (unsigned long long)h->ho_in_n, s.handoff_out_us, (unsigned long long)h->ho_out_n,
                s.clock_rtt_us / 2, s.clock_drift_ppm, s.handoff_rt_us, (unsigned long long)h->ho_rt_n);
        }
        if (s.xfer_experts)
            OUT("  transfer: %llu missed experts read over PCIe and computed by the GPU (%.2f per token)\n",
                (unsigned long long)s.xfer_experts, (double)s.xfer_experts / (double)s.steps);
        if (h->prefetch)
            OUT("  prefetch: accuracy %.1f%% (%llu of %llu predicted experts chosen by the router), %llu copies (%.2f per "
                "token), %.1f%% of them used in the same token\n",
                s.prefetch_pred ? 100.0 * (double)s.prefetch_correct / (double)s.prefetch_pred : 0.0,
                (unsigned long long)s.prefetch_correct, (unsigned long long)s.prefetch_pred,
                (unsigned long long)s.prefetch_fills, (double)s.prefetch_fills / (double)s.steps,
                s.prefetch_fills ? 100.0 * (double)s.prefetch_used / (double)s.prefetch_fills : 0.0);
        OUT("  hit rate per layer:");
        for (int l = 0; l < h->n_layer; l++)
            if (h->L[l].ram) OUT(" %d:%.0f%%", l, h->L[l].uses ? 100.0 * (double)h->L[l].hits / (double)h->L[l].uses : 0.0);
        OUT("\n");
    }
#undef OUT
}
