/* lineedit.c — a minimal line editor for `hmoe chat` on a terminal, so no readline
 * dependency: raw mode through termios, single-line redraw with ANSI cursor moves (the view
 * scrolls sideways when the line is wider than the terminal), cursor movement by UTF-8
 * character, emacs-style control keys and an in-memory history. Keys: see chat_impl.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "chat_impl.h"

/* The line being edited: bytes buf[0..len), cursor at byte `pos` (always a character start). */
struct line {
    char *buf;
    size_t len, cap, pos;
};

static bool line_reserve(struct line *l, size_t extra) {
    if (l->len + extra + 1 <= l->cap) return true;
    size_t cap = HMOE_MAX(l->cap * 2, l->len + extra + 64);
    char *b = realloc(l->buf, cap);
    if (!b) return false;
    l->buf = b;
    l->cap = cap;
    return true;
}

static bool line_set(struct line *l, const char *s) {
    size_t n = strlen(s);
    l->len = l->pos = 0;
    if (!line_reserve(l, n)) return false;
    memcpy(l->buf, s, n);
    l->len = l->pos = n;
    l->buf[n] = 0;
    return true;
}

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Start of the character before byte i / after the character at byte i. */
static size_t prev_char(const struct line *l, size_t i) {
    if (i == 0) return 0;
    i--;
    while (i > 0 && is_cont((unsigned char)l->buf[i])) i--;
    return i;
}
static size_t next_char(const struct line *l, size_t i) {
    if (i >= l->len) return l->len;
    i++;
    while (i < l->len && is_cont((unsigned char)l->buf[i])) i++;
    return i;
}

static void line_delete(struct line *l, size_t from, size_t to) {
    memmove(l->buf + from, l->buf + to, l->len - to);
    l->len -= to - from;
    l->buf[l->len] = 0;
    if (l->pos > to) l->pos -= to - from;
    else if (l->pos > from) l->pos = from;
}

static bool line_insert(struct line *l, const char *s, size_t n) {
    if (!line_reserve(l, n)) return false;
    memmove(l->buf + l->pos + n, l->buf + l->pos, l->len - l->pos);
    memcpy(l->buf + l->pos, s, n);
    l->len += n;
    l->pos += n;
    l->buf[l->len] = 0;
    return true;
}

/* Terminal columns of a string: one per UTF-8 character, ANSI "ESC [ ... letter" ignored. */
static size_t columns(const char *s, size_t n) {
    size_t cols = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0x1b && i + 1 < n && s[i + 1] == '[') {
            i += 2;
            while (i < n && !((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) i++;
            continue;
        }
        if (!is_cont(c)) cols++;
    }
    return cols;
}

static int term_width(int fd) {
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

static void put(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* Bytes of one character starting at byte i (a lone continuation byte counts as one). */
static size_t char_len(const struct line *l, size_t i) { return next_char(l, i) - i; }

/* Redraw prompt + line, showing a window of the line that contains the cursor. Linear in the
 * line length (a pasted paragraph must not redraw quadratically). */
static void refresh(const struct hmoe_lineedit *le, const char *prompt, const struct line *l) {
    const size_t width = (size_t)term_width(le->fd_out), pcols = columns(prompt, strlen(prompt));
    const size_t avail = width > pcols + 1 ? width - pcols - 1 : 1;
    /* Window start: drop characters from the left until the cursor column fits. */
    size_t start = 0, ccols = columns(l->buf, l->pos);
    while (ccols >= avail && start < l->pos) {
        start += char_len(l, start);
        ccols--;
    }
    /* Window end: as many characters after `start` as fit. */
    size_t end = start, cols = 0;
    while (end < l->len && cols < avail) {
        end += char_len(l, end);
        cols++;
    }
    char *seq = malloc(strlen(prompt) + (end - start) + 64);
    if (!seq) return;
    size_t n = 0;
    n += (size_t)sprintf(seq + n, "\r%s", prompt);
    memcpy(seq + n, l->buf + start, end - start);
    n += end - start;
    n += (size_t)sprintf(seq + n, "\033[K\r");
    size_t col = pcols + ccols;
    if (col) n += (size_t)sprintf(seq + n, "\033[%zuC", col);
    put(le->fd_out, seq, n);
    free(seq);
}

/* True when more typed or pasted bytes are already waiting: redraw once they are in. */
static bool input_pending(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

void hmoe_lineedit_init(struct hmoe_lineedit *le, int fd_in, int fd_out) {
    memset(le, 0, sizeof *le);
    le->fd_in = fd_in;
    le->fd_out = fd_out;
}

void hmoe_lineedit_free(struct hmoe_lineedit *le) {
    for (int i = 0; i < le->n_hist; i++) free(le->hist[i]);
    free(le->hist);
    memset(le, 0, sizeof *le);
}

void hmoe_lineedit_history_add(struct hmoe_lineedit *le, const char *line) {
    if (!*line || (le->n_hist && strcmp(le->hist[le->n_hist - 1], line) == 0)) return;
    if (le->n_hist == le->cap_hist) {
        int cap = le->cap_hist ? 2 * le->cap_hist : 64;
        char **h = realloc(le->hist, (size_t)cap * sizeof *h);
        if (!h) return;
        le->hist = h;
        le->cap_hist = cap;
    }
    char *d = strdup(line);
    if (d) le->hist[le->n_hist++] = d;
}

static int read_byte(int fd) {
    unsigned char c;
    for (;;) {
        ssize_t r = read(fd, &c, 1);
        if (r == 1) return c;
        if (r < 0 && errno == EINTR) continue;
        return -1;
    }
}

/* Keys after ESC: arrows, Home/End, Delete (CSI and SS3 forms). Returns a control code the
 * main loop understands (Ctrl+B/F/P/N/A/E, or KEY_DELETE), or 0 to ignore. */
#define KEY_DELETE 0x100 /* outside the byte range: '~' is an ordinary key */

static int read_escape(int fd) {
    int c1 = read_byte(fd);
    if (c1 != '[' && c1 != 'O') return 0;
    int c2 = read_byte(fd);
    if (c2 >= '0' && c2 <= '9') {
        int c3 = read_byte(fd);
        while (c3 >= '0' && c3 <= ';') c3 = read_byte(fd); /* e.g. "1;5C": modifiers ignored */
        if (c3 != '~') return c3 == 'C' ? 0x06 : c3 == 'D' ? 0x02 : 0;
        return c2 == '3' ? KEY_DELETE : (c2 == '1' || c2 == '7') ? 0x01 : (c2 == '4' || c2 == '8') ? 0x05 : 0;
    }
    switch (c2) {
    case 'A': return 0x10; /* up = Ctrl+P */
    case 'B': return 0x0E; /* down = Ctrl+N */
    case 'C': return 0x06; /* right = Ctrl+F */
    case 'D': return 0x02; /* left = Ctrl+B */
    case 'H': return 0x01; /* home = Ctrl+A */
    case 'F': return 0x05; /* end = Ctrl+E */
    default: return 0;
    }
}

enum hmoe_lineedit_result hmoe_lineedit_read(struct hmoe_lineedit *le, const char *prompt, char **out) {
    *out = NULL;
    struct termios saved, raw;
    if (tcgetattr(le->fd_in, &saved) != 0) return HMOE_LINEEDIT_ERROR;
    raw = saved;
    /* No echo, byte at a time, no signals (Ctrl+C is a key here), no CR->NL or flow control. */
    raw.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cflag |= CS8;
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    /* TCSANOW, not TCSAFLUSH: typed-ahead or pasted lines must survive the mode switches. */
    if (tcsetattr(le->fd_in, TCSANOW, &raw) != 0) return HMOE_LINEEDIT_ERROR;

    struct line l = {0};
    enum hmoe_lineedit_result res = HMOE_LINEEDIT_ERROR;
    int hist_at = le->n_hist; /* == n_hist: the line being typed */
    char *typed = NULL;       /* the line being typed, kept while browsing history */
    int utf8_left = 0;        /* continuation bytes still expected */
    if (!line_set(&l, "")) goto done;
    refresh(le, prompt, &l);
    for (;;) {
        int c = read_byte(le->fd_in);
        if (c < 0) {
            res = HMOE_LINEEDIT_EOF;
            break;
        }
        if (c == 0x1b) c = read_escape(le->fd_in);
        switch (c) {
        case 0: break;
        case '\r':
        case '\n':
            res = HMOE_LINEEDIT_LINE;
            goto done;
        case 0x03: /* Ctrl+C */
            res = HMOE_LINEEDIT_INTERRUPT;
            goto done;
        case 0x04: /* Ctrl+D: end of input on an empty line, else delete */
            if (l.len == 0) {
                res = HMOE_LINEEDIT_EOF;
                goto done;
            }
            /* fall through */
        case KEY_DELETE:
            if (l.pos < l.len) line_delete(&l, l.pos, next_char(&l, l.pos));
            break;
        case 0x7F:
        case 0x08: /* Backspace */
            if (l.pos > 0) line_delete(&l, prev_char(&l, l.pos), l.pos);
            break;
        case 0x01: l.pos = 0; break;
        case 0x05: l.pos = l.len; break;
        case 0x02: l.pos = prev_char(&l, l.pos); break;
        case 0x06: l.pos = next_char(&l, l.pos); break;
        case 0x15: line_delete(&l, 0, l.pos); break;     /* Ctrl+U */
        case 0x0B: line_delete(&l, l.pos, l.len); break; /* Ctrl+K */
        case 0x17: {                                     /* Ctrl+W: the word before the cursor */
            size_t i = l.pos;
            while (i > 0 && l.buf[i - 1] == ' ') i--;
            while (i > 0 && l.buf[i - 1] != ' ') i--;
            line_delete(&l, i, l.pos);
            break;
        }
        case 0x0C: put(le->fd_out, "\033[H\033[2J", 7); break; /* Ctrl+L */
        case 0x10:                                              /* up / Ctrl+P */
        case 0x0E: {                                            /* down / Ctrl+N */
            int to = c == 0x10 ? hist_at - 1 : hist_at + 1;
            if (to < 0 || to > le->n_hist) break;
            if (hist_at == le->n_hist) {
                free(typed);
                typed = strdup(l.buf);
            }
            hist_at = to;
            if (!line_set(&l, to == le->n_hist ? (typed ? typed : "") : le->hist[to])) goto done;
            break;
        }
        default:
            if ((c >= 0x20 && c < 0x100) || c == '\t') {
                char ch = (char)c;
                if (!line_insert(&l, &ch, 1)) goto done;
            }
        }
        /* Redraw once a whole character is in, not between the bytes of one. */
        if (c >= 0xC0 && c < 0x100) utf8_left = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
        else if (c >= 0x80 && c < 0xC0 && utf8_left > 0) utf8_left--;
        else utf8_left = 0;
        if (utf8_left == 0 && !input_pending(le->fd_in)) refresh(le, prompt, &l);
    }
done:
    /* Redraws wait while input is pending: show the final line once (pasted text too). */
    if (res == HMOE_LINEEDIT_LINE || res == HMOE_LINEEDIT_INTERRUPT) refresh(le, prompt, &l);
    tcsetattr(le->fd_in, TCSANOW, &saved);
    if (res == HMOE_LINEEDIT_INTERRUPT) put(le->fd_out, "^C", 2);
    put(le->fd_out, "\r\n", 2);
    free(typed);
    if (res == HMOE_LINEEDIT_LINE) *out = l.buf;
    else free(l.buf);
    return res;
}
