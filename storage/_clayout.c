/*
 * The small buffers of a format 2 ("one copy") record batch message laid out in one call: the
 * storage side of storage/FORMAT.md, kept apart from the Kafka codec's accelerator because it
 * knows nothing of Kafka. Must behave exactly like storage/onecopy.py's `_layout_py`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VIEW_INLINE 12 /* pylog.model.BINARY_VIEW_INLINE: longer values are views into a buffer */

/* ------------------------------------------------------------------ */
/* onecopy_layout: the small buffers of a format 2 record batch message */
/* (storage/FORMAT.md, "Record batch message, byte for byte") laid out  */
/* in one pass: validity bitmaps packed from one byte per value, each   */
/* buffer 8-aligned (after an int64 -1 when the message is compressed), */
/* the nodes, every buffer's (offset, length) including the sections    */
/* after the small buffers, and the variadic buffer counts.             */

typedef struct {
    char *p;
    size_t len, cap;
    int64_t *spans;
    size_t nspans, spans_cap;
    int prefix;
} Layout;

static int lay_reserve(Layout *l, size_t extra) {
    if (l->len + extra <= l->cap) return 0;
    size_t cap = l->cap ? l->cap : 256;
    while (cap < l->len + extra) cap *= 2;
    char *np = (char *)realloc(l->p, cap);
    if (!np) return -1;
    l->p = np;
    l->cap = cap;
    return 0;
}

static int lay_span(Layout *l, int64_t at, int64_t len) {
    if (l->nspans == l->spans_cap) {
        size_t cap = l->spans_cap ? 2 * l->spans_cap : 32;
        int64_t *ns = (int64_t *)realloc(l->spans, cap * 2 * sizeof(int64_t));
        if (!ns) return -1;
        l->spans = ns;
        l->spans_cap = cap;
    }
    l->spans[2 * l->nspans] = at;
    l->spans[2 * l->nspans + 1] = len;
    l->nspans++;
    return 0;
}

/* One small buffer of `len` bytes from `src` (NULL with len 0: an empty buffer). When `bits`,
 * `src` holds `len` bytes of 0/1 packed into a little-endian bitmap of (len + 7) / 8 bytes. */
static int lay_add(Layout *l, const uint8_t *src, size_t len, int bits) {
    if (!len) return lay_span(l, (int64_t)l->len, 0);
    size_t size = bits ? (len + 7) / 8 : len;
    if (lay_reserve(l, size + 16)) return -1;
    size_t at = l->len;
    if (l->prefix) {
        int64_t none = -1;
        memcpy(l->p + l->len, &none, 8);
        l->len += 8;
    }
    if (bits) {
        uint8_t *out = (uint8_t *)l->p + l->len;
        memset(out, 0, size);
        for (size_t i = 0; i < len; i++)
            if (src[i]) out[i >> 3] |= (uint8_t)(1u << (i & 7));
    } else {
        memcpy(l->p + l->len, src, len);
    }
    l->len += size;
    if (lay_span(l, (int64_t)at, (int64_t)(l->len - at))) return -1;
    size_t pad = (8 - (l->len & 7)) & 7;
    memset(l->p + l->len, 0, pad);
    l->len += pad;
    return 0;
}

/* A Python buffer argument or None (an empty view). */
static int get_buf(PyObject *o, Py_buffer *b) {
    if (o == Py_None) {
        memset(b, 0, sizeof *b);
        return 0;
    }
    return PyObject_GetBuffer(o, b, PyBUF_SIMPLE);
}

static int64_t count_zero(const uint8_t *v, size_t n) {
    int64_t z = 0;
    for (size_t i = 0; i < n; i++) z += !v[i];
    return z;
}

static int any_long(const uint8_t *views, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t l;
        memcpy(&l, views + 16 * i, 4);
        if (l > VIEW_INLINE) return 1;
    }
    return 0;
}

static PyObject *onecopy_layout(PyObject *self, PyObject *args) {
    PyObject *objs[11];
    int prefix;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOp", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &objs[8], &objs[9], &objs[10], &prefix))
        return NULL;
    /* offset, timestamp, key, key validity, value, value validity, header offsets, header key,
     * header value, header value validity, section sizes */
    Py_buffer b[11];
    int got = 0;
    for (; got < 11; got++)
        if (get_buf(objs[got], &b[got])) break;
    PyObject *result = NULL;
    Layout l = {0};
    l.prefix = prefix;
    if (got < 11) goto done;
    size_t n = (size_t)b[0].len / 8, nh = (size_t)b[7].len / 16, k = (size_t)b[10].len / 8;
    if ((size_t)b[1].len != 8 * n || (size_t)b[2].len != 16 * n || (size_t)b[4].len != 16 * n
        || (b[3].buf && (size_t)b[3].len != n) || (b[5].buf && (size_t)b[5].len != n)
        || (size_t)b[6].len != 4 * (n + 1) || (size_t)b[8].len != 16 * nh
        || (b[9].buf && (size_t)b[9].len != nh)) {
        PyErr_SetString(PyExc_ValueError, "column buffers of inconsistent lengths");
        goto done;
    }
    const uint8_t *kv = (const uint8_t *)b[2].buf, *vv = (const uint8_t *)b[4].buf;
    const uint8_t *hkv = (const uint8_t *)b[7].buf, *hvv = (const uint8_t *)b[8].buf;
    int64_t knull = b[3].buf ? count_zero((const uint8_t *)b[3].buf, n) : 0;
    int64_t vnull = b[5].buf ? count_zero((const uint8_t *)b[5].buf, n) : 0;
    int64_t hvnull = b[9].buf ? count_zero((const uint8_t *)b[9].buf, nh) : 0;
    int64_t variadic[4];
    variadic[0] = n && any_long(kv, n) ? (int64_t)k : 0;
    variadic[1] = (int64_t)k;
    variadic[2] = nh && any_long(hkv, nh) ? (int64_t)k : 0;
    variadic[3] = nh && any_long(hvv, nh) ? (int64_t)k : 0;
    int64_t nodes[16] = {(int64_t)n, 0, (int64_t)n, 0, (int64_t)n, knull, (int64_t)n, vnull,
                         (int64_t)n, 0, (int64_t)nh, 0, (int64_t)nh, 0, (int64_t)nh, hvnull};
    /* where each variadic reference goes: the span index of its column's first reference */
    size_t refs_at[4];
    int bad = lay_add(&l, NULL, 0, 0) || lay_add(&l, (const uint8_t *)b[0].buf, 8 * n, 0)
              || lay_add(&l, NULL, 0, 0) || lay_add(&l, (const uint8_t *)b[1].buf, 8 * n, 0)
              || lay_add(&l, (const uint8_t *)b[3].buf, b[3].buf ? n : 0, 1) || lay_add(&l, kv, 16 * n, 0);
    refs_at[0] = l.nspans;
    for (int64_t i = 0; !bad && i < variadic[0]; i++) bad = lay_span(&l, 0, 0);
    bad = bad || lay_add(&l, (const uint8_t *)b[5].buf, b[5].buf ? n : 0, 1) || lay_add(&l, vv, 16 * n, 0);
    refs_at[1] = l.nspans;
    for (int64_t i = 0; !bad && i < variadic[1]; i++) bad = lay_span(&l, 0, 0);
    bad = bad || lay_add(&l, NULL, 0, 0) || lay_add(&l, (const uint8_t *)b[6].buf, 4 * (n + 1), 0)
          || lay_add(&l, NULL, 0, 0) || lay_add(&l, NULL, 0, 0) || lay_add(&l, hkv, 16 * nh, 0);
    refs_at[2] = l.nspans;
    for (int64_t i = 0; !bad && i < variadic[2]; i++) bad = lay_span(&l, 0, 0);
    bad = bad || lay_add(&l, (const uint8_t *)b[9].buf, b[9].buf ? nh : 0, 1) || lay_add(&l, hvv, 16 * nh, 0);
    refs_at[3] = l.nspans;
    for (int64_t i = 0; !bad && i < variadic[3]; i++) bad = lay_span(&l, 0, 0);
    if (bad) {
        PyErr_NoMemory();
        goto done;
    }
    /* the sections after the small buffers, each 8-aligned, each once */
    const int64_t *sizes = (const int64_t *)b[10].buf;
    int64_t pos = (int64_t)l.len;
    for (size_t i = 0; i < k; i++) {
        int64_t at = pos, len = sizes[i] + (prefix ? 8 : 0);
        pos += len;
        pos += (8 - (pos & 7)) & 7;
        for (int c = 0; c < 4; c++)
            if ((int64_t)i < variadic[c]) {
                l.spans[2 * (refs_at[c] + i)] = at;
                l.spans[2 * (refs_at[c] + i) + 1] = len;
            }
    }
    result = Py_BuildValue("(y#y#y#(LLLL)L)", l.p ? l.p : "", (Py_ssize_t)l.len, (const char *)nodes,
                           (Py_ssize_t)sizeof nodes, (const char *)l.spans, (Py_ssize_t)(l.nspans * 16),
                           (long long)variadic[0], (long long)variadic[1], (long long)variadic[2],
                           (long long)variadic[3], (long long)pos);
done:
    for (int i = 0; i < got; i++)
        if (b[i].obj || b[i].buf) PyBuffer_Release(&b[i]);
    free(l.p);
    free(l.spans);
    return result;
}

static PyMethodDef methods[] = {
    {"onecopy_layout", onecopy_layout, METH_VARARGS,
     "onecopy_layout(offset, timestamp, key, key_valid, value, value_valid, header_offsets, header_key,"
     " header_value, header_value_valid, section_sizes, compressed) -> (small buffers, nodes, buffers,"
     " variadic counts, body length): a format 2 message's small buffers laid out (validity: one byte per"
     " value or None; views: 16 bytes each; section_sizes: int64), its 8 nodes and every buffer's"
     " (offset, length) as int64 pairs, the sections placed after the small buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_clayout", "C accelerator for the format 2 segment message layout.", -1, methods,
};

PyMODINIT_FUNC PyInit__clayout(void) { return PyModule_Create(&moduledef); }
