/* hybrid_impl.h — private to src/sched: the state of the hybrid CPU+GPU scheduler shared by
 * hybrid.c (setup, decode enqueue, cache copies, statistics), hybrid_cpu.c (the CPU thread
 * team's half of a decode step), hybrid_prefill.c (streamed or CPU prefill of RAM layers),
 * hybrid_pin.c (page-locking the mapping, bandwidth probes) and hybrid_xfer.c (--moe-miss
 * transfer/auto and the next-layer prefetch).
 */
#ifndef HMOE_SCHED_HYBRID_IMPL_H
#define HMOE_SCHED_HYBRID_IMPL_H

#include "hmoe/sched.h"

#define HYB_TIMEOUT_MS 10000 /* a side that waits longer than this gives up (error, no hang) */
#define HYB_MAX_PENDING 256  /* cache copies in flight */
#define HYB_MAX_EXPERT 512   /* experts per layer the scheduler handles */
#define HYB_PLAN_CLASSES 16  /* prefill split planner: micro-batch size classes floor(log2 n) */

struct hyb_layer {
    bool ram;                          /* experts live in RAM */
    int n_slots;                       /* VRAM cache slots */
    struct hmoe_cuda_buf pool;
    struct hmoe_cuda_experts gate, up, down; /* the slots as expert stacks (n_expert = n_slots) */
    bool pinned;                       /* its expert ranges of the mapping are page-locked */
    uint64_t uses, hits;               /* expert selections, and those served by VRAM */
    uint64_t gpu_wait_ns, gpu_waits;   /* GPU spinning for the CPU (steps with misses) */
    uint64_t cpu_wait_ns;              /* CPU spinning for the GPU's mailbox */
    /* page-locked chunks of the mapping: pin_chunks of pin_chunk bytes from pin_lo (last one shorter) */
    uint8_t *pin_lo;
    size_t pin_chunk, pin_len;
    int pin_chunks;
    uint8_t *copy_buf;                 /* HMOE_PIN=copy: page-locked copy the views point into */
    bool src_ok;                       /* pinned and readable by kernels at the host address */
    struct hmoe_cuda_expert_src src;   /* gate, up, down of expert e at base + e * bytes */
    bool transfer;                     /* decode misses: read over PCIe and computed by the GPU */
    bool pf_target;                    /* filled by the prefetch from the previous layer's state */
    uint64_t xfers;
    /* this decode step, host clock (hmoe_hyb_now_ns): the first CPU thread to see the mailbox
     * started waiting at h_wait_ns and saw it at h_seen_ns; the result was released at h_rel_ns */
    uint64_t h_wait_ns, h_seen_ns, h_rel_ns;
};

struct hyb_sync; /* hybrid_cpu.c: claim counters of one layer */

struct hyb_pending {
    struct hmoe_sched_cache_fill f;
    void *ev;                          /* recorded after the copy */
};

struct hmoe_sched_hybrid {
    struct hmoe_cuda_ctx *cu;
    struct hmoe_moe_weights *moe;      /* [n_layer] copy of the views */
    int n_layer, d, E, k, F, n_ub, nt;
    struct hmoe_sched_gpu_params sp;
    struct hyb_layer *L;
    int n_ram;
    /* mapped page-locked host memory: mailboxes, hidden states, CPU results */
    void *mapped;
    struct hmoe_cuda_mailbox *mb;      /* [n_layer] */
    float *h_host, *res_host;          /* [n_layer][d] each */
    /* device: slot maps and the streamed-chunk maps */
    struct hmoe_cuda_buf dev;
    int32_t *d_slot_of;                /* [n_layer][E] */
    int32_t *d_chunk_map;              /* [n_layer][n_chunks][E] expert -> place in a streamed chunk, or -1 */
    int32_t *map_host;                 /* page-locked mirror of d_slot_of, then of d_chunk_map */
    int32_t *chunk_host;               /* = map_host + its [n_layer][E] part */
    /* expert cache */
    struct hmoe_sched_cache *cache;
    void *fill_stream, *ev_maps;
    struct hyb_pending pend[HYB_MAX_PENDING];
    void *ev_pool[HYB_MAX_PENDING];
    int n_pend, n_ev_free;
    int fills_per_token;
    bool seeded, profile_loaded, profile_on;
    uint64_t *counts;                  /* [n_layer][E] selections seen in this session */
    uint64_t *profile;                 /* [n_layer][E] loaded from the profile file */
    char profile_path[4096];
    /* CPU team buffers */
    size_t ag, au, ad;                 /* activation bytes: gate/up input (d), down input (F) */
    uint8_t *xq_g, *xq_u;              /* [nt][ag], [nt][au] */
    float *g, *u;                      /* [k][F] */
    uint8_t *zq;                       /* [k][ad] */
    float *tmp;                        /* [nt][d] */
    /* prefill streaming */
    bool stream;
    int chunk_experts, n_chunks, stream_min;
    size_t chunk_bytes;
    struct hmoe_cuda_buf stage[2];
    struct hmoe_cuda_experts sg[2], su[2], sd[2];
    void *ev_copy[2], *ev_used[2];
    bool pf_valid;
    int pf_layer, pf_chunk, pf_buf, last_buf;
    float *pf_h, *pf_out;              /* page-locked [n_ub][d] */
    struct hmoe_sched_moe *cpu_moe;
    /* statistics */
    double t_first, t_last, cpu_ms;
    uint64_t steps, fills, fill_bytes, stream_bytes_total, stream_experts_total;
    int load_seeded;                   /* experts copied into the cache at init */
    double h2d_probe_gbps;
    char notes[1024];
    /* pinning (hybrid_pin.c) */
    bool file_in_ram;                  /* the weights are an anonymous copy (--no-mmap): keep its pages */
    double pin_s, touch_s, ram_probe_gbps;
    uint64_t pin_bytes;
    int pin_layers, pin_tried;
    bool pin_stopped;
    int pin_abandoned;                 /* registrations given up on at their deadline (pin_bounded.c) */
    bool pin_ram_capped;               /* pinning stopped to leave RAM available (hybrid_pin.c) */
    /* the driver calls of the pin pass: hmoe_cuda_host_register/unregister unless a test injects
     * slow or failing ones (tests/test_hyb_pin.c) */
    enum hmoe_status (*pin_register)(void *p, size_t bytes, bool read_only, struct hmoe_err *err);
    void (*pin_unregister)(void *p);
    /* transfer (hybrid_xfer.c) */
    int n_transfer;
    struct hmoe_cuda_buf xfer_buf;     /* k + 1 scratch expert slots per matrix (slot 0 all zeros) + slot ids */
    size_t xfer_max[3];                /* largest gate, up, down matrix of the transfer layers (bytes) */
    int32_t *d_xfer_gids;
    double xfer_probe_gbps;            /* the transfer kernel's zero-copy read rate at start (auto) */
    char miss_why[256];
    /* next-layer prefetch (hybrid_xfer.c) */
    bool prefetch;
    int pf_max, pf_cand, last_ram;
    const float **d_router;            /* [n_layer] router of each layer (device) */
    /* expert biases of each layer on the device ([n_layer] each, NULL: none) for the GPU's share */
    const float **d_gate_bias, **d_up_bias, **d_down_bias;
    int32_t *d_bias_expert;            /* [E] prefill: index of a renumbered stack -> expert (its bias rows) */
    void *pf_stream, **ev_fork, *ev_join;
    bool pf_forked;
    struct hmoe_cuda_buf pref_buf;
    int32_t *d_lock, *d_closed, *d_queue, *d_cand;
    float *d_snap, *d_pf_logits;
    unsigned int *d_pf_counter;
    int32_t *cand_host;                /* page-locked [n_layer][2][pf_cand]: slots, experts */
    struct hmoe_cuda_prefetch_rec *pf_rec; /* mapped [n_layer] */
    uint64_t pf_pred, pf_correct, pf_fills, pf_used;
    /* prefill split between CPU threads and streaming (hybrid_prefill.c, hybrid_split.c): per RAM
     * layer of a streamed micro-batch the CPU computes some of the uncached experts, with the GPU's
     * routing copied to page-locked memory, while the GPU streams and computes the others */
    bool split_on;                     /* streaming and micro-batches of more than one token */
    double split_share;                /* forced share of a layer's uncached experts (0..1), < 0: planned */
    float *sp_h;                       /* page-locked [n_ub][d]: the layer's normalised rows */
    int32_t *sp_ids;                   /* page-locked [n_ub][k]: the GPU's routed experts */
    float *sp_wts;                     /* page-locked [n_ub][k]: their weights */
    float *sp_out;                     /* mapped [n_ub][d]: the CPU's sum, read by the GPU's add */
    uint8_t *sp_mask;                  /* [2][E] experts the CPU computes, per event set */
    void *sp_stream;                   /* routing to the host, then the CPU job (a host function) */
    void *ev_sp[2][5];                 /* two sets (alternate layers): start, routing copied, cached done,
                                          streamed done, CPU done */
    struct hyb_split_meas {
        bool pending;                  /* events recorded, not read yet */
        int n, ns, nc, ncached;        /* tokens; experts streamed, on the CPU, cached */
        int il;                        /* the layer */
        int n0, n_after;               /* experts of the prefetched first chunk; streamed after the
                                          router's counts */
        uint64_t pairs;                /* (token, expert) pairs of the CPU's experts */
    } sp_meas[2];
    struct hyb_split_job {             /* argument of the CPU job of the layer using the set */
        struct hmoe_sched_hybrid *h;
        int il, n;
        const uint8_t *mask;
        enum hmoe_status st;
        struct hmoe_err err;
        uint64_t t0_ns, t1_ns;         /* host clock: the job's start and end (hmoe_hyb_now_ns) */
    } sp_job[2];
    int sp_set;
    /* measured rates (EWMA; 0 = not measured yet) */
    double r_cpu_ms, r_cpu_tok;        /* CPU ms per expert, at r_cpu_tok tokens per micro-batch */
    double r_gpu_ms;                   /* GPU ms per streamed expert (copy + GEMMs, chunks overlapped) */
    double r_cached_ms;                /* GPU ms per cached expert (the cached group) */
    /* statistics: this micro-batch (logged with -v at its last RAM layer) and since the last reset */
    struct hyb_split_acc {
        uint64_t batches, layers, gpu_layers, nc, ns, ncached;
        double cpu_ms, gpu_ms, gpu_stream_ms;
        uint64_t cpu_layers, nc_min, nc_max, off_layers; /* layers with a CPU part; n_cpu range; latched off */
        double window_ms, wait_ms, fixed_ms, add_ms;      /* sums: window (all layers), the GPU waiting for
                                                            the CPU, CPU start, the add (CPU layers) */
        uint64_t n0_unused;                               /* prefetched experts without tokens */
        uint64_t n0, nskip, pairs, idle, light_bad;       /* prefetched, skipped (no tokens), CPU pairs,
                                                            layers whose copy engine had run dry at the
                                                            decision, lightest-first violations */
        double pred_cpu_ms, pred_gpu_ms;                  /* the model's ends (CPU layers) */
    } sp_batch, sp_total;
    /* CPU team of a decode step (hybrid_cpu.c) */
    int cpu_items;                     /* work items per thread and phase (hybrid_cpu.c) */
    struct hyb_sync *sync;             /* [n_layer] */
    float *ypart;                      /* [k][d] each missed expert's down output */
    /* CPU expert phase and handoff statistics (hybrid.c, from the step's stamps) */
    uint64_t cpu_phases, cpu_phase_ns, cpu_phase_bytes; /* layers with CPU misses: seen -> released */
    uint64_t ho_in_n, ho_out_n, ho_rt_n;
    int64_t ho_in_ns, ho_out_ns, ho_rt_ns;            /* sums over the counted layers */
    struct hmoe_cuda_clock_sync *clk;  /* mapped: GPU clock calibration */
    bool clk_ok;
    int64_t clk_off_ns;                /* globaltimer ~= host monotonic ns + clk_off_ns */
    int64_t clk_rtt_ns;                /* round trip of the best calibration ping (uncertainty x 2) */
    uint64_t clk_at_ns;                /* host time of that calibration */
    double clk_drift_ppm;              /* offset change between the last two calibrations */
    /* the prefill split's planner (hybrid_split.c, split_count.c): a streamed layer's first chunk
     * (the experts predicted heaviest) is prefetched before its router; after the router the host
     * reads the routed ids, skips the other uncached experts without tokens, gives CPU threads the
     * lightest by the cost model and streams the rest. State per RAM layer and micro-batch size
     * class (floor(log2 n)), and per size class the CPU side's measured rates. */
    void *ev_sp_end[2];                /* per event set: the CPU's sum added (layers with a CPU part) */
    struct hyb_plan_layer {
        int strikes;                   /* visits in a row where the split measured slower */
        bool off;                      /* latched off: streams everything */
    } *plan_l;                         /* [n_layer][HYB_PLAN_CLASSES] */
    struct hyb_plan_rates {
        double fixed_ms;               /* router done -> the CPU's first expert (rows to the host, host
                                          function start): CPU done - job time */
        double add_ms;                 /* max(GPU groups, CPU) done -> the sum added */
        int n;                         /* samples (the first, cold one is replaced by the second) */
    } plan_r[HYB_PLAN_CLASSES];
    double *sp_w0s;                    /* [n_layer] scratch: the layers' GPU parts (their median) */
    float *cnt_hist;                   /* [n_layer][E] tokens per expert of earlier micro-batches (decaying) */
    uint32_t *cnt_tok;                 /* [E] this layer's tokens per expert */
    int *pf_first;                     /* [E] experts of the prefetched first chunk (pf_layer) */
    int pf_n0;
    struct hmoe_sched_cost_fit cnt_fit[HYB_PLAN_CLASSES]; /* CPU job ms = c + a experts + b pairs */
    int cnt_jobs[HYB_PLAN_CLASSES];    /* CPU jobs seen per size class (the first is cold: not fitted) */
    struct hyb_count_layer {
        double gpu_ms;                 /* GPU after the router with no candidate streamed: t3 - copy * n_after */
        double wait_ms;                /* the GPU waiting for the CPU (EWMA): added to the margin */
        int samples, wait_n;
    } *cnt_l;                          /* [n_layer][HYB_PLAN_CLASSES] */
    double cnt_med[HYB_PLAN_CLASSES];  /* median of the layers' gpu_ms at the last micro-batch's end */
};

/* hybrid_pin.c: page-lock the RAM layers' expert ranges (time-bounded, logged), unpin them. */
void hmoe_hyb_pin(struct hmoe_sched_hybrid *h, const void *file_base, uint64_t file_size);
void hmoe_hyb_unpin(struct hmoe_sched_hybrid *h);
/* pin_bounded.c: registrations on a worker thread, each waited for until a deadline (hmoe_time_s
 * clock; a -v line every 5 s names `layer`); one that misses it is abandoned (*timed_out) and
 * undone by the worker when it returns.
 * start: NULL when no thread can be made; dev: CUDA device for the worker, -1 to leave it. */
typedef enum hmoe_status (*hyb_pin_register_fn)(void *p, size_t bytes, bool read_only, struct hmoe_err *err);
typedef void (*hyb_pin_unregister_fn)(void *p);
struct hyb_pin_worker;
struct hyb_pin_worker *hmoe_hyb_pin_worker_start(hyb_pin_register_fn reg, hyb_pin_unregister_fn unreg, int dev);
enum hmoe_status hmoe_hyb_pin_worker_register(struct hyb_pin_worker *w, void *p, size_t n, double deadline,
                                              int layer, bool *timed_out, struct hmoe_err *err);
void hmoe_hyb_pin_worker_stop(struct hyb_pin_worker *w);
/* RAM read bandwidth of the CPU team over one pinned (resident) expert range, GB/s (0: none). */
double hmoe_hyb_probe_ram(struct hmoe_sched_hybrid *h);

/* hybrid_split.c: the split's planner and statistics (see there). count_init sets the cost-model
 * priors (after h->d, n_ub); wait_event waits for an event without spinning a core (the CPU job's
 * team needs all of them); collect reads event set `set` of an earlier layer into the estimates
 * and passes on its CPU job's failure; end_batch closes a micro-batch (-v log). */
void hmoe_hyb_count_init(struct hmoe_sched_hybrid *h);
enum hmoe_status hmoe_hyb_wait_event(void *ev, struct hmoe_err *err);
enum hmoe_status hmoe_hyb_split_collect(struct hmoe_sched_hybrid *h, int set, struct hmoe_err *err);
enum hmoe_status hmoe_hyb_split_end_batch(struct hmoe_sched_hybrid *h, int n, struct hmoe_err *err);
void hmoe_hyb_split_decide(const struct hmoe_sched_hybrid *h, int il, int n, int nu, int n0, const int *cand, int m,
                           int *cpu, int *gpu, struct hmoe_sched_count_split *cs);
void hmoe_hyb_split_record(struct hmoe_sched_hybrid *h, int il, int n, int nu, int n0, const int *first,
                           const struct hmoe_sched_count_split *cs, const int *cpu, const int *gpu, bool idle);

/* hybrid_xfer.c */
/* Whether these settings can put a layer on the transfer path (which needs the pinned mapping). */
bool hmoe_hyb_xfer_possible(const struct hmoe_sched_gpu_params *sp);
enum hmoe_status hmoe_hyb_xfer_init(struct hmoe_sched_hybrid *h, struct hmoe_err *err);
void hmoe_hyb_xfer_free(struct hmoe_sched_hybrid *h);
/* Publish of a decode step's layer with the transfer / prefetch options, the GPU's share of a
 * transfer layer's misses, and the fork of the next layer's prefetch. */
enum hmoe_status hmoe_hyb_publish(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids, const float *d_wts,
                                  const float *d_h, int32_t *d_gids, int32_t *d_nmiss, const uint32_t *d_seq,
                                  void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_hyb_xfer_compute(struct hmoe_sched_hybrid *h, int il, const int32_t *d_ids, const float *d_wts,
                                       const int32_t *d_gids, const void *d_hq, size_t hq_stride, float *d_z,
                                       void *d_zq, float *d_x, void *stream, struct hmoe_err *err);
enum hmoe_status hmoe_hyb_prefetch_fork(struct hmoe_sched_hybrid *h, int il, const uint32_t *d_seq, void *stream,
                                        struct hmoe_err *err);
enum hmoe_status hmoe_hyb_prefetch_join(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err);
/* After a step: the prefetch's copies into the cache bookkeeping and its accuracy (before the
 * routing of the step is counted); then, last, the victim lists for the next step. */
void hmoe_hyb_prefetch_collect(struct hmoe_sched_hybrid *h);
enum hmoe_status hmoe_hyb_prefetch_upload(struct hmoe_sched_hybrid *h, void *stream, struct hmoe_err *err);

/* hybrid_cpu.c */
enum hmoe_status hmoe_hyb_cpu_step(struct hmoe_sched_hybrid *h, uint32_t seq, struct hmoe_err *err);
/* Team buffers and the work-item count (after h->n_layer, k, d, nt, ad). */
enum hmoe_status hmoe_hyb_cpu_init(struct hmoe_sched_hybrid *h, struct hmoe_err *err);
void hmoe_hyb_cpu_free(struct hmoe_sched_hybrid *h);
/* Host monotonic clock, ns (the stamps of the handoff statistics). */
uint64_t hmoe_hyb_now_ns(void);

/* Activation bytes / conversion for a weight type (F32 partners take f32 rows). */
size_t hmoe_hyb_act_bytes(enum hmoe_type t, int64_t n);
void hmoe_hyb_act_quantize(enum hmoe_type t, const float *x, void *dst, int64_t n);

#endif
