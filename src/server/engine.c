/* engine.c — the one thread that owns the model context. It takes jobs from a bounded FIFO
 * queue in arrival order and runs each to the end: reuse the longest common token prefix
 * of the KV cache (the prompt cache: agents resend the whole conversation every turn),
 * prefill the rest in micro-batches, then sample and decode token by token. Between two
 * micro-batches and after every token it checks whether the client hung up (a peek at its
 * socket) or the server stops, so a cancelled request ends within one token.
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
    if (s->q_len >= s->p.queue_max + 1 || s->stopping) { /* +1: the one running */
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
static const float *apply_penalties(struct hmoe_server *s, const struct srv_gen_params *gp, const int32_t *hist,
                                    int n_hist) {
    const struct hmoe_sampler_params *sp = &gp->sp;
    const bool on = sp->repeat_penalty != 1.0f || gp->frequency_penalty != 0.0f || gp->presence_penalty != 0.0f;
    const int win = sp->repeat_last_n < 0 ? n_hist : HMOE_MIN(sp->repeat_last_n, n_hist);
    if (!on || win <= 0) return s->logits;
    const int n_vocab = s->model->cfg.n_vocab;
    memcpy(s->logits_pen, s->logits, (size_t)n_vocab * sizeof *s->logits);
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

/* Prefill ids[p..n) after keeping the cached prefix p; a recurrent model keeps a checkpoint
 * before the last turn's <|im_start|>, where the next request's common prefix will end. */
static enum hmoe_status prefill(struct hmoe_server *s, struct srv_job *j, int p, bool *abandoned,
                                struct hmoe_err *err) {
    const int32_t *ids = j->ids;
    const int n = j->n_ids;
    const int step = hmoe_ctx_get_params(s->ctx)->n_ubatch;
    const int32_t im_start = hmoe_vocab_find(s->vocab, "<|im_start|>", 12);
    int ck = -1;
    for (int i = n - 1; i >= p && im_start != HMOE_TOKEN_NONE && ck < 0; i--)
        if (ids[i] == im_start) ck = i;
    for (int pos = p, m; pos < n; pos += m) {
        if (job_abandoned(j)) {
            *abandoned = true;
            return HMOE_OK;
        }
        m = HMOE_MIN(step, n - pos);
        if (pos < ck) m = HMOE_MIN(m, ck - pos);
        if (pos == ck) hmoe_ctx_checkpoint(s->ctx);
        const bool last = pos + m == n;
        enum hmoe_status st = hmoe_ctx_decode(s->ctx, ids + pos, m, pos, last ? HMOE_LOGITS_LAST : HMOE_LOGITS_NONE,
                                              s->logits, err);
        if (st) return st;
        memcpy(s->kv_ids + pos, ids + pos, (size_t)m * sizeof *ids);
        s->n_kv = pos + m;
    }
    return HMOE_OK;
}

static void run_job(struct hmoe_server *s, struct srv_job *j) {
    struct hmoe_err err = {0};
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx);
    int p = 0;
    if (j->gp.cache_prompt)
        while (p < j->n_ids && p < s->n_kv && s->kv_ids[p] == j->ids[p]) p++;
    if (p == j->n_ids) p = j->n_ids - 1; /* the last prompt token is run again for its logits */
    hmoe_ctx_truncate(s->ctx, p);
    s->n_kv = p;
    j->n_cached = p;
    j->n_prompt_eval = j->n_ids - p;

    struct hmoe_sampler_params sp = j->gp.sp;
    sp.repeat_penalty = 1.0f; /* applied here, with frequency and presence */
    struct hmoe_sampler *smp = NULL;
    int32_t *hist = malloc((size_t)(n_ctx + 1) * sizeof *hist);
    struct hmoe_detok_stream ds;
    hmoe_detok_stream_init(&ds, s->vocab, false);
    struct srv_buf pend = {0};
    bool abandoned = false;
    enum hmoe_status st = hist ? hmoe_sampler_init(&sp, s->model->cfg.n_vocab, &smp, &err)
                               : HMOE_RAISE(&err, HMOE_ERR_NOMEM, "out of memory");
    const double t0 = hmoe_time_s();
    if (!st) st = prefill(s, j, p, &abandoned, &err);
    const double t1 = hmoe_time_s();
    j->prompt_ms = (t1 - t0) * 1e3;
    atomic_fetch_add(&s->m.prompt_tokens, (unsigned long long)j->n_prompt_eval);
    atomic_fetch_add(&s->m.prompt_us, (unsigned long long)(j->prompt_ms * 1e3));
    int n_hist = 0;
    if (!st && !abandoned) {
        memcpy(hist, j->ids, (size_t)j->n_ids * sizeof *hist);
        n_hist = j->n_ids;
        int n_past = j->n_ids;
        const int limit = j->gp.n_predict < 0 ? n_ctx : j->gp.n_predict;
        j->finish = SRV_FINISH_LENGTH;
        while (j->n_gen < limit) {
            const int32_t id = srv_sample(s, j, smp, apply_penalties(s, &j->gp, hist, n_hist), limit - j->n_gen);
            if (id < 0) break; /* the grammar allows no token: "length" */
            if (!j->gp.ignore_eos && hmoe_vocab_is_eog(s->vocab, id)) {
                j->finish = SRV_FINISH_STOP_EOG;
                break;
            }
            j->n_gen++;
            hist[n_hist++] = id;
            size_t len = 0;
            const char *piece = hmoe_detok_stream_push(&ds, id, &len);
            if (piece && len && feed_text(j, &pend, piece, len, false)) break;
            if (j->n_gen >= limit) break;
            if (n_past >= n_ctx || n_hist > n_ctx) break; /* context full: "length" */
            if (job_abandoned(j)) {
                abandoned = true;
                break;
            }
            if ((st = hmoe_ctx_decode(s->ctx, &id, 1, n_past, HMOE_LOGITS_LAST, s->logits, &err))) break;
            atomic_fetch_add(&s->m.n_decode, 1);
            s->kv_ids[n_past++] = id;
            s->n_kv = n_past;
        }
        if (!st && !abandoned && j->finish != SRV_FINISH_STOP_WORD) {
            size_t len = 0;
            const char *rest = hmoe_detok_stream_flush(&ds, &len);
            feed_text(j, &pend, rest ? rest : "", rest ? len : 0, true);
        }
    }
    j->gen_ms = (hmoe_time_s() - t1) * 1e3;
    atomic_fetch_add(&s->m.gen_tokens, (unsigned long long)j->n_gen);
    atomic_fetch_add(&s->m.gen_us, (unsigned long long)(j->gen_ms * 1e3));
    pthread_mutex_lock(&j->mu);
    if (st) {
        /* the KV cache may hold a partial batch: forget it rather than trust it */
        hmoe_ctx_reset(s->ctx);
        s->n_kv = 0;
        srv_job_fail(j, err.code == HMOE_ERR_RANGE ? 400 : 500, err.msg);
        atomic_fetch_add(&s->m.requests_error, 1);
    } else if (abandoned || j->cancelled) {
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
    srv_buf_free(&pend);
    hmoe_detok_stream_free(&ds);
    hmoe_sampler_free(smp);
    free(hist);
}

static void *engine_main(void *arg) {
    struct hmoe_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->qmu);
        while (!s->q_head && !atomic_load(&s->stopping)) pthread_cond_wait(&s->qcv, &s->qmu);
        struct srv_job *j = s->q_head;
        if (j) {
            s->q_head = j->next;
            if (!s->q_head) s->q_tail = NULL;
        }
        pthread_mutex_unlock(&s->qmu);
        if (!j) break;
        atomic_fetch_sub(&s->m.deferred, 1);
        atomic_fetch_add(&s->m.processing, 1);
        pthread_mutex_lock(&j->mu);
        const bool skip = j->cancelled || j->released || atomic_load(&s->stopping);
        j->state = SRV_JOB_RUNNING;
        pthread_mutex_unlock(&j->mu);
        if (skip) {
            pthread_mutex_lock(&j->mu);
            j->cancelled = true;
            srv_job_fail(j, 503, "the server is shutting down");
            j->state = SRV_JOB_DONE;
            srv_job_wake(j);
            pthread_mutex_unlock(&j->mu);
            atomic_fetch_add(&s->m.requests_cancelled, 1);
        } else {
            run_job(s, j);
        }
        atomic_fetch_sub(&s->m.processing, 1);
        struct hmoe_ctx_stats st;
        hmoe_ctx_get_stats(s->ctx, &st);
        pthread_mutex_lock(&s->qmu);
        s->q_len--;
        s->stats = st;
        s->n_kv_seen = s->n_kv;
        pthread_mutex_unlock(&s->qmu);
        srv_job_unref(j);
    }
    return NULL;
}

enum hmoe_status srv_engine_start(struct hmoe_server *s, struct hmoe_err *err) {
    const int n_ctx = hmoe_ctx_n_ctx(s->ctx), n_vocab = s->model->cfg.n_vocab;
    s->kv_ids = malloc((size_t)n_ctx * sizeof *s->kv_ids);
    s->logits = malloc((size_t)n_vocab * sizeof *s->logits);
    s->logits_pen = malloc((size_t)n_vocab * sizeof *s->logits_pen);
    s->pen_count = calloc((size_t)n_vocab, sizeof *s->pen_count);
    if (!s->kv_ids || !s->logits || !s->logits_pen || !s->pen_count)
        return HMOE_RAISE(err, HMOE_ERR_NOMEM, "out of memory for the server's buffers (%d tokens, %d logits)", n_ctx,
                          n_vocab);
    s->n_kv = 0;
    hmoe_ctx_reset(s->ctx);
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
    free(s->kv_ids);
    free(s->logits);
    free(s->logits_pen);
    free(s->pen_count);
    s->kv_ids = NULL;
    s->logits = s->logits_pen = NULL;
    s->pen_count = NULL;
}
