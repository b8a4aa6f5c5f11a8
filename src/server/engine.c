/* engine.c — the one thread that owns the model context and its -np slots (one sequence
 * each). Requests wait in a bounded FIFO queue and join a free slot at the next step, in
 * arrival order, on the slot whose cached tokens share the longest prefix with the prompt
 * (the prompt cache per slot: agents resend the whole conversation every turn). Every step
 * runs each active slot once, as one batch (model.h hmoe_ctx_decode_batch): a prefill chunk
 * (--prefill-chunk tokens, default -ub) of a new prompt beside the other slots' next tokens,
 * so a long prompt delays the others' streams by one chunk per step; the order rotates each
 * step. Before each step it checks whether a client hung up (a peek at its socket) or the
 * server stops: a cancelled request leaves its slot within one step.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/server_impl.h"

struct srv_job *srv_job_new(struct hmoe_server *s, enum srv_kind kind) {
    struct srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 1;
    j->srv = s;
    j->kind = kind;
    j->fd = -1;
    j->http_status = 200;
    return j;
}

void srv_job_unref(struct srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    const int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    for (int i = 0; i < j->gp.n_stop; i++) free(j->gp.stop[i]);
    srv_grammar_free(&j->gp);
    json_decref(j->lp_all);
    json_decref(j->lp_pending);
    free(j->ids);
    free(j->prompt_text);
    hmoe_toolcall_stream_free(j->tcs);
    srv_buf_free(&j->out);
    srv_buf_free(&j->content);
    srv_buf_free(&j->reasoning);
    srv_buf_free(&j->body);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void srv_job_wake(struct srv_job *j) {
    if (j->suspended && !j->released) {
        j->suspended = false;
        MHD_resume_connection(j->conn);
    }
}

bool srv_engine_submit(struct hmoe_server *s, struct srv_job *j) {
    pthread_mutex_lock(&s->qmu);
    if (s->q_len >= s->p.queue_max + (s->n_slots > 0 ? s->n_slots : 1) || s->stopping) { /* + the running ones */
        pthread_mutex_unlock(&s->qmu);
        return false;
    }
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
    j->next = NULL;
    if (s->q_tail) s->q_tail->next = j;
    else s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    atomic_fetch_add(&s->m.deferred, 1);
    pthread_cond_signal(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    return true;
}

/* The client closed its end (peek reads 0 bytes or a reset), or the request was completed. */
static bool job_abandoned(struct srv_job *j) {
    if (atomic_load(&j->srv->stopping)) return true;
    pthread_mutex_lock(&j->mu);
    bool gone = j->cancelled || j->released;
    if (!gone && j->fd >= 0) {
        char c;
        const ssize_t r = recv(j->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) gone = true;
    }
    if (gone) j->cancelled = true;
    pthread_mutex_unlock(&j->mu);
    return gone;
}

/* llama.cpp's penalties step over the last repeat_last_n tokens: repeat penalty (divide a
 * positive logit, multiply a negative one), then frequency * count + presence. */
static const float *apply_penalties(struct hmoe_server *s, const struct srv_gen_params *gp, const float *logits,
                                    const int32_t *hist, int n_hist) {
    const struct hmoe_sampler_params *sp = &gp->sp;
    const bool on = sp->repeat_penalty != 1.0f || gp->frequency_penalty != 0.0f || gp->presence_penalty != 0.0f;
    const int win = sp->repeat_last_n < 0 ? n_hist : HMOE_MIN(sp->repeat_last_n, n_hist);
    if (!on || win <= 0) return logits;
    const int n_vocab = s->model->cfg.n_vocab;
    memcpy(s->logits_pen, logits, (size_t)n_vocab * sizeof *logits);
    for (int i = n_hist - win; i < n_hist; i++) s->pen_count[hist[i]]++;
    for (int i = n_hist - win; i < n_hist; i++) {
        const int32_t id = hist[i];
        const int cnt = s->pen_count[id];
        if (!cnt) continue; /* already done for an earlier occurrence */
        float *l = &s->logits_pen[id];
        *l = *l <= 0 ? *l * sp->repeat_penalty : *l / sp->repeat_penalty;
        *l -= (float)cnt * gp->frequency_penalty + gp->presence_penalty;
        s->pen_count[id] = 0;
    }
    return s->logits_pen;
}

/* Generated text through stop strings and the reasoning splitter to the response writer.
 * `pend` holds what may still be the start of a stop string. Returns true on a stop string. */
static bool feed_text(struct srv_job *j, struct srv_buf *pend, const char *s, size_t n, bool final) {
    srv_buf_add(pend, s, n);
    int which;
    size_t keep;
    const size_t at = srv_stop_scan(&j->gp, pend->s ? pend->s : "", pend->n, &which, &keep);
    size_t emit_n = pend->n - (final ? 0 : keep);
    if (which >= 0) emit_n = at;
    pthread_mutex_lock(&j->mu);
    if (emit_n) srv_emit_text(j, pend->s, emit_n);
    if (which >= 0) {
        snprintf(j->stopping_word, sizeof j->stopping_word, "%s", j->gp.stop[which]);
        j->finish = SRV_FINISH_STOP_WORD;
    }
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
    if (which >= 0) {
        pend->n = 0;
        return true;
    }
    memmove(pend->s, pend->s + emit_n, pend->n - emit_n);
    pend->n -= emit_n;
    return false;
}

/* One slot: a sequence of the context, the request running on it (NULL: free) and the tokens
 * its KV cache holds (the slot's prompt cache). */
struct srv_slot {
    int seq;
    struct srv_job *job;
    int32_t *kv_ids;               /* [n_ctx] tokens held in the slot's KV cache */
    int n_kv;
    /* the running request */
    int pos;                       /* prefill: next prompt position to run */
    int ck;                        /* position to checkpoint the recurrent state at, -1: none */
    bool gen;                      /* the prompt is in: generating */
    int32_t next_id;               /* generating: the token to decode in the next step */
    int limit;
    struct hmoe_sampler *smp;
    int32_t *hist;                 /* prompt + generated tokens, for the penalties */
    int n_hist;
    struct hmoe_detok_stream ds;
    struct srv_buf pend;
    double t0, t1;
    bool abandoned, done;
    enum hmoe_status st;
    struct hmoe_err err;
    int share;                     /* index of its logits in the step, -1: none */
    uint64_t last_used;            /* s->slot_clock when a request last took it */
};

/* Start j on slot sl: reuse the slot's cached prefix, rewind its sequence to it. */
static void slot_start(struct hmoe_server *s, struct srv_slot *sl, struct srv_job *j) {
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    sl->job = j;
    sl->done = sl->abandoned = sl->gen = false;
    sl->st = HMOE_OK;
    memset(&sl->err, 0, sizeof sl->err);
    int p = 0;
    if (j->gp.cache_prompt)
        while (p < j->n_ids && p < sl->n_kv && sl->kv_ids[p] == j->ids[p]) p++;
    if (p == j->n_ids) p = j->n_ids - 1; /* the last prompt token is run again for its logits */
    hmoe_ctx_use_seq(s->ctx, sl->seq, &sl->err);
    hmoe_ctx_truncate(s->ctx, p);
    sl->n_kv = p;
    j->n_cached = p;
    j->n_prompt_eval = j->n_ids - p;
    sl->pos = p;
    /* a recurrent model keeps a checkpoint before the last turn's <|im_start|>, where the next
     * request's common prefix will end */
    const int32_t im_start = hmoe_vocab_find(s->vocab, "<|im_start|>", 12);
    sl->ck = -1;
    for (int i = j->n_ids - 1; i >= p && im_start != HMOE_TOKEN_NONE && sl->ck < 0; i--)
        if (j->ids[i] == im_start) sl->ck = i;
    struct hmoe_sampler_params sp = j->gp.sp;
    sp.repeat_penalty = 1.0f; /* applied here, with frequency and presence */
    sl->smp = NULL;
    sl->hist = malloc((size_t)(n_ctx + 1) * sizeof *sl->hist);
    hmoe_detok_stream_init(&sl->ds, s->vocab, false);
    sl->pend = (struct srv_buf){0};
    sl->n_hist = 0;
    sl->st = sl->hist ? hmoe_sampler_init(&sp, s->model->cfg.n_vocab, &sl->smp, &sl->err)
                      : HMOE_RAISE(&sl->err, HMOE_ERR_NOMEM, "out of memory");
    /* a prompt past the slot's context: hmoe_ctx_decode's check names the sizes (nothing runs) */
    if (!sl->st && j->n_ids > n_ctx)
        sl->st = hmoe_ctx_decode(s->ctx, j->ids + p, j->n_ids - p, p, HMOE_LOGITS_NONE, NULL, &sl->err);
    sl->t0 = sl->t1 = hmoe_time_s();
    if (sl->st) sl->done = true;
}

/* Sample the slot's next token from its logits; decides whether it goes on. */
static void slot_sample(struct hmoe_server *s, struct srv_slot *sl, const float *logits) {
    struct srv_job *j = sl->job;
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    const int32_t id =
        srv_sample(s, j, sl->smp, apply_penalties(s, &j->gp, logits, sl->hist, sl->n_hist), sl->limit - j->n_gen);
    if (id < 0) { /* the grammar allows no token: "length" */
        sl->done = true;
        return;
    }
    if (!j->gp.ignore_eos && hmoe_vocab_is_eog(s->vocab, id)) {
        j->finish = SRV_FINISH_STOP_EOG;
        sl->done = true;
        return;
    }
    j->n_gen++;
    sl->hist[sl->n_hist++] = id;
    size_t len = 0;
    const char *piece = hmoe_detok_stream_push(&sl->ds, id, &len);
    if ((piece && len && feed_text(j, &sl->pend, piece, len, false)) || j->n_gen >= sl->limit ||
        sl->n_kv >= n_ctx || sl->n_hist > n_ctx) { /* context full: "length" */
        sl->done = true;
        return;
    }
    sl->next_id = id;
}

/* The prompt is in: the first token from its logits. */
static void slot_prompt_done(struct hmoe_server *s, struct srv_slot *sl, const float *logits) {
    struct srv_job *j = sl->job;
    sl->t1 = hmoe_time_s();
    j->prompt_ms = (sl->t1 - sl->t0) * 1e3;
    atomic_fetch_add(&s->m.prompt_tokens, (unsigned long long)j->n_prompt_eval);
    atomic_fetch_add(&s->m.prompt_us, (unsigned long long)(j->prompt_ms * 1e3));
    memcpy(sl->hist, j->ids, (size_t)j->n_ids * sizeof *sl->hist);
    sl->n_hist = j->n_ids;
    sl->limit = j->gp.n_predict < 0 ? hmoe_ctx_n_ctx(s->ctx) : j->gp.n_predict;
    j->finish = SRV_FINISH_LENGTH;
    sl->gen = true;
    if (j->n_gen < sl->limit) slot_sample(s, sl, logits);
    else sl->done = true;
}

/* The request leaves its slot: the answer's end, an error or the cancellation. */
static void slot_finish(struct hmoe_server *s, struct srv_slot *sl) {
    struct srv_job *j = sl->job;
    if (!sl->gen) { /* ended before its prompt was in */
        sl->t1 = hmoe_time_s();
        j->prompt_ms = (sl->t1 - sl->t0) * 1e3;
        atomic_fetch_add(&s->m.prompt_tokens, (unsigned long long)j->n_prompt_eval);
        atomic_fetch_add(&s->m.prompt_us, (unsigned long long)(j->prompt_ms * 1e3));
    } else if (!sl->st && !sl->abandoned && j->finish != SRV_FINISH_STOP_WORD) {
        size_t len = 0;
        const char *rest = hmoe_detok_stream_flush(&sl->ds, &len);
        feed_text(j, &sl->pend, rest ? rest : "", rest ? len : 0, true);
    }
    j->gen_ms = sl->gen ? (hmoe_time_s() - sl->t1) * 1e3 : 0;
    atomic_fetch_add(&s->m.gen_tokens, (unsigned long long)j->n_gen);
    atomic_fetch_add(&s->m.gen_us, (unsigned long long)(j->gen_ms * 1e3));
    pthread_mutex_lock(&j->mu);
    if (sl->st) {
        /* the slot's KV cache may hold a partial batch: forget it rather than trust it */
        struct hmoe_err e2 = {0};
        if (!hmoe_ctx_use_seq(s->ctx, sl->seq, &e2)) hmoe_ctx_reset(s->ctx);
        sl->n_kv = 0;
        srv_job_fail(j, sl->err.code == HMOE_ERR_RANGE ? 400 : 500, sl->err.msg);
        atomic_fetch_add(&s->m.requests_error, 1);
    } else if (sl->abandoned || j->cancelled) {
        j->cancelled = true;
        if (atomic_load(&s->stopping)) srv_job_fail(j, 503, "the server is shutting down");
        atomic_fetch_add(&s->m.requests_cancelled, 1);
    } else {
        srv_emit_end(j);
        srv_job_complete(j);
        atomic_fetch_add(&s->m.requests_ok, 1);
    }
    j->state = SRV_JOB_DONE;
    srv_job_wake(j);
    pthread_mutex_unlock(&j->mu);
    srv_buf_free(&sl->pend);
    hmoe_detok_stream_free(&sl->ds);
    hmoe_sampler_free(sl->smp);
    sl->smp = NULL;
    free(sl->hist);
    sl->hist = NULL;
    sl->job = NULL;
    atomic_fetch_sub(&s->m.processing, 1);
    struct hmoe_ctx_stats st;
    hmoe_ctx_get_stats(s->ctx, &st);
    pthread_mutex_lock(&s->qmu);
    s->q_len--;
    s->stats = st;
    s->n_kv_seen = sl->n_kv;
    pthread_mutex_unlock(&s->qmu);
    srv_job_unref(j);
}

/* One step of every active slot: a prefill chunk or the next token each, in one batch. */
static void step(struct hmoe_server *s) {
    const int n_slots = s->n_slots, V = s->model->cfg.n_vocab;
    const int chunk = s->prefill_chunk;
    struct hmoe_seq_tokens sh[HMOE_MAX_SEQ];
    struct srv_slot *who[HMOE_MAX_SEQ];
    int n_sh = 0, n_lg = 0;
    for (int i = 0; i < n_slots; i++) {
        struct srv_slot *sl = &s->slots[(s->rr + i) % n_slots]; /* rotating order: no slot always first */
        sl->share = -1;
        if (!sl->job || sl->done) continue;
        if (job_abandoned(sl->job)) {
            sl->abandoned = sl->done = true;
            continue;
        }
        struct srv_job *j = sl->job;
        if (!sl->gen) {
            int m = HMOE_MIN(chunk, j->n_ids - sl->pos);
            if (sl->pos < sl->ck) m = HMOE_MIN(m, sl->ck - sl->pos);
            if (sl->pos == sl->ck && !hmoe_ctx_use_seq(s->ctx, sl->seq, &sl->err)) hmoe_ctx_checkpoint(s->ctx);
            const bool last = sl->pos + m == j->n_ids;
            sh[n_sh] = (struct hmoe_seq_tokens){.seq = sl->seq, .ids = j->ids + sl->pos, .n = m, .pos0 = sl->pos,
                                                .logits = last};
            if (last) sl->share = n_lg++;
        } else {
            sh[n_sh] = (struct hmoe_seq_tokens){.seq = sl->seq, .ids = &sl->next_id, .n = 1, .pos0 = sl->n_kv,
                                                .logits = true};
            sl->share = n_lg++;
        }
        who[n_sh++] = sl;
    }
    s->rr = (s->rr + 1) % n_slots;
    if (n_sh == 0) return;
    struct hmoe_err err = {0};
    enum hmoe_status st;
    const float *rows = s->logits;
    if (s->spec) /* one slot: its next token through the drafts (model.h hmoe_spec_decode); a prompt chunk as
                    one decode, which keeps the MTP block's cache in step */
        st = who[0]->gen ? hmoe_spec_decode(s->spec, sh[0].ids[0], sh[0].pos0, &rows, &err)
                         : hmoe_ctx_decode(s->ctx, sh[0].ids, sh[0].n, sh[0].pos0,
                                           sh[0].logits ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE, s->logits, &err);
    else st = hmoe_ctx_decode_batch(s->ctx, sh, n_sh, s->logits, &err);
    for (int i = 0; i < n_sh; i++) {
        struct srv_slot *sl = who[i];
        if (st) {
            sl->st = st;
            sl->err = err;
            sl->done = true;
            continue;
        }
        memcpy(sl->kv_ids + sh[i].pos0, sh[i].ids, (size_t)sh[i].n * sizeof *sh[i].ids);
        sl->n_kv = sh[i].pos0 + sh[i].n;
        if (!sl->gen) {
            sl->pos += sh[i].n;
            if (sl->share >= 0) slot_prompt_done(s, sl, rows + (size_t)sl->share * V);
        } else {
            atomic_fetch_add(&s->m.n_decode, 1);
            slot_sample(s, sl, rows + (size_t)sl->share * V);
        }
    }
}

/* The free slot for j: the one whose cached tokens j continues (a common prefix of at least
 * half of what it holds: a returning conversation finds its own cache), the longest such
 * prefix first; else the free slot used least recently, so that one conversation's cache is
 * not overwritten by another that only shares the template's first tokens. */
static struct srv_slot *pick_slot(struct hmoe_server *s, const struct srv_job *j) {
    struct srv_slot *best = NULL, *lru = NULL;
    int best_p = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct srv_slot *sl = &s->slots[i];
        if (sl->job) continue;
        if (!lru || sl->last_used < lru->last_used) lru = sl;
        int p = 0;
        while (p < j->n_ids && p < sl->n_kv && sl->kv_ids[p] == j->ids[p]) p++;
        if (p > best_p && 2 * p >= sl->n_kv) best = sl, best_p = p;
    }
    struct srv_slot *sl = best ? best : lru;
    sl->last_used = ++s->slot_clock;
    return sl;
}

static void *engine_main(void *arg) {
    struct hmoe_server *s = arg;
    for (;;) {
        int active = 0;
        for (int i = 0; i < s->n_slots; i++) active += s->slots[i].job != NULL;
        /* admit queued requests into free slots, in arrival order */
        pthread_mutex_lock(&s->qmu);
        while (!active && !s->q_head && !atomic_load(&s->stopping)) pthread_cond_wait(&s->qcv, &s->qmu);
        struct srv_job *admit[HMOE_MAX_SEQ];
        int n_admit = 0;
        while (s->q_head && active + n_admit < s->n_slots) {
            struct srv_job *j = s->q_head;
            s->q_head = j->next;
            if (!s->q_head) s->q_tail = NULL;
            admit[n_admit++] = j;
        }
        pthread_mutex_unlock(&s->qmu);
        if (!active && !n_admit) break; /* stopping with nothing left */
        for (int a = 0; a < n_admit; a++) {
            struct srv_job *j = admit[a];
            atomic_fetch_sub(&s->m.deferred, 1);
            atomic_fetch_add(&s->m.processing, 1);
            pthread_mutex_lock(&j->mu);
            const bool skip = j->cancelled || j->released || atomic_load(&s->stopping);
            j->state = SRV_JOB_RUNNING;
            pthread_mutex_unlock(&j->mu);
            struct srv_slot *sl = pick_slot(s, j);
            if (skip) {
                pthread_mutex_lock(&j->mu);
                j->cancelled = true;
                srv_job_fail(j, 503, "the server is shutting down");
                j->state = SRV_JOB_DONE;
                srv_job_wake(j);
                pthread_mutex_unlock(&j->mu);
                atomic_fetch_add(&s->m.requests_cancelled, 1);
                atomic_fetch_sub(&s->m.processing, 1);
                pthread_mutex_lock(&s->qmu);
                s->q_len--;
                pthread_mutex_unlock(&s->qmu);
                srv_job_unref(j);
                continue;
            }
            slot_start(s, sl, j);
        }
        step(s);
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].job && s->slots[i].done) slot_finish(s, &s->slots[i]);
    }
    return NULL;
}

enum hmoe_status srv_engine_start(struct hmoe_server *s, struct hmoe_err *err) {
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx), n_vocab = s->model->cfg.n_vocab;
    s->n_slots = hmoe_ctx_n_seq(s->ctx);
    s->prefill_chunk = s->p.prefill_chunk > 0 ? s->p.prefill_chunk : hmoe_ctx_get_params(s->ctx)->n_ubatch;
    s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
    s->logits = malloc((size_t)s->n_slots * (size_t)n_vocab * sizeof *s->logits);
    s->logits_pen = malloc((size_t)n_vocab * sizeof *s->logits_pen);
    s->pen_count = calloc((size_t)n_vocab, sizeof *s->pen_count);
    bool ok = s->slots && s->logits && s->logits_pen && s->pen_count;
    for (int i = 0; ok && i < s->n_slots; i++) {
        s->slots[i].seq = i;
        ok = (s->slots[i].kv_ids = malloc((size_t)n_ctx * sizeof *s->slots[i].kv_ids)) != NULL;
        struct hmoe_err e2 = {0};
        if (ok && !hmoe_ctx_use_seq(s->ctx, i, &e2)) hmoe_ctx_reset(s->ctx);
    }
    if (!ok)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the server's buffers (%d slots of %d tokens, %d logits)",
                          s->n_slots, n_ctx, n_vocab);
    if (pthread_create(&s->engine, NULL, engine_main, s))
        return HMOE_RAISE(err, HMOE_ERR_INTERNAL, "cannot start the server's engine thread");
    s->engine_started = true;
    return HMOE_OK;
}

void srv_engine_stop(struct hmoe_server *s) {
    pthread_mutex_lock(&s->qmu);
    atomic_store(&s->stopping, true);
    pthread_cond_broadcast(&s->qcv);
    pthread_mutex_unlock(&s->qmu);
    if (s->engine_started) pthread_join(s->engine, NULL);
    s->engine_started = false;
    /* jobs the engine never took (it drains the queue before leaving, this is belt and braces) */
    while (s->q_head) {
        struct srv_job *j = s->q_head;
        s->q_head = j->next;
        srv_job_unref(j);
    }
    s->q_tail = NULL;
    for (int i = 0; s->slots && i < s->n_slots; i++) free(s->slots[i].kv_ids);
    free(s->slots);
    s->slots = NULL;
    free(s->logits);
    free(s->logits_pen);
    free(s->pen_count);
    s->logits = s->logits_pen = NULL;
    s->pen_count = NULL;
}
