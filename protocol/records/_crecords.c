/*
 * Kafka RecordBatch v2 record section <-> Arrow column buffers.
 *
 * decode_records walks the varint record layout once and fills plain buffers
 * (int64 offsets and timestamps, Arrow binary/string offset arrays, validity
 * bitmaps and contiguous data) that Python wraps zero-copy with
 * pyarrow.Array.from_buffers, or (decode_records_arrow) hands to Arrow as
 * one struct array through the Arrow C data interface. encode_records does the reverse from the
 * buffers of Arrow arrays. Every length and varint is bounds-checked against
 * the bytes actually present; the record count from the batch header is never
 * used to size an allocation beyond what the remaining bytes can hold.
 * Malformed input raises ValueError (the Python layer maps it to
 * CorruptRecordBatch). The GIL is released while walking the bytes.
 * lz4 frames are read in _lz4records.c, which shares the walk (_crecords.h).
 *
 * Must behave exactly like protocol/records/_pyrecords.py.
 */
#include "_crecords.h"

/* ------------------------------------------------------------------ */
/* A read-only buffer that owns malloc'd memory, handed to Arrow.      */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
} BufObject;

static void Buf_dealloc(BufObject *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Buf_getbuffer(BufObject *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static Py_ssize_t Buf_length(BufObject *self) { return self->size; }

static PyBufferProcs Buf_as_buffer = {(getbufferproc)Buf_getbuffer, NULL};
static PySequenceMethods Buf_as_sequence = {.sq_length = (lenfunc)Buf_length};

static PyTypeObject BufType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pylog.protocol.records._crecords.Buffer",
    .tp_basicsize = sizeof(BufObject),
    .tp_dealloc = (destructor)Buf_dealloc,
    .tp_as_buffer = &Buf_as_buffer,
    .tp_as_sequence = &Buf_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only memory owned by the record codec (exported through the buffer protocol).",
};

/* ------------------------------------------------------------------ */
/* Growable byte buffer (GBuf, _crecords.h).                          */

static int gb_init(GBuf *b, size_t cap) {
    if (cap < 64) cap = 64;
    b->p = (char *)malloc(cap);
    b->len = 0;
    b->cap = b->p ? cap : 0;
    return b->p ? 0 : -1;
}

static void gb_free(GBuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int gb_reserve(GBuf *b, size_t extra) {
    size_t need = b->len + extra;
    if (need <= b->cap) return 0;
    size_t nc = b->cap ? b->cap : 64;
    while (nc < need) nc *= 2;
    char *np = (char *)realloc(b->p, nc);
    if (!np) return -1;
    b->p = np;
    b->cap = nc;
    return 0;
}

static inline int gb_append(GBuf *b, const void *src, size_t n) {
    if (gb_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static inline int gb_append_i32(GBuf *b, int32_t v) { return gb_append(b, &v, sizeof v); }

/* Sets bit `idx` of a growable bitmap to `valid`, zero-filling new bytes. */
static inline int gb_set_bit(GBuf *b, size_t idx, int valid) {
    size_t byte = idx >> 3;
    if (byte >= b->len) {
        size_t grow = byte + 1 - b->len;
        if (gb_reserve(b, grow)) return -1;
        memset(b->p + b->len, 0, grow);
        b->len = byte + 1;
    }
    if (valid) b->p[byte] |= (char)(1u << (idx & 7));
    return 0;
}

PyObject *crec_buffer_new(char *data, size_t size) {
    BufObject *o = PyObject_New(BufObject, &BufType);
    if (!o) {
        free(data);
        return NULL;
    }
    o->data = data;
    o->size = (Py_ssize_t)size;
    return (PyObject *)o;
}

/* Wraps the buffer's memory in a BufObject (takes ownership; frees on failure). */
static PyObject *gb_finish(GBuf *b) {
    size_t keep = b->len ? b->len : 1;
    if (keep < b->cap) {
        char *np = (char *)realloc(b->p, keep);
        if (np) b->p = np;
    }
    char *data = b->p;
    size_t len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return crec_buffer_new(data, len);
}

/* ------------------------------------------------------------------ */
/* Varints (Kafka's ByteUtils: zig-zag, at most 5 / 10 bytes).         */

static inline int rd_varlong(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    const uint8_t *p = *pp;
    uint64_t raw = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = (int64_t)((raw >> 1) ^ (0ull - (raw & 1ull)));
            return 0;
        }
    }
    return -1;
}

static inline uint32_t zz32(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

static inline int usz(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *wr_uvar(uint8_t *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Strict UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), as Python's decoder. */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 > 0x9F) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* decode_records                                                      */

#define N_GBUFS 14

static GBuf *dec_bufs(DecodeOut *o, int i) {
    GBuf *all[N_GBUFS] = {&o->offsets, &o->timestamps, &o->kvalid, &o->koff,  &o->kdata,
                          &o->vvalid,  &o->voff,       &o->vdata,  &o->hoff,  &o->hkoff,
                          &o->hkdata,  &o->hvvalid,    &o->hvoff,  &o->hvdata};
    return all[i];
}

void crec_decode_free(DecodeOut *o) {
    for (int i = 0; i < N_GBUFS; i++) gb_free(dec_bufs(o, i));
}

/* Appends a length-prefixed field; nullable fields record validity. Returns an error message or NULL. */
static inline const char *read_bytes_field(const uint8_t **pp, const uint8_t *rend, GBuf *data, GBuf *offs,
                                           GBuf *valid, size_t idx, int64_t *nulls, int *oom) {
    int32_t len;
    if (rd_varint(pp, rend, &len)) return "truncated length varint";
    if (len < 0) { /* Kafka reads any negative length as null */
        (*nulls)++;
        if (gb_set_bit(valid, idx, 0)) goto mem;
    } else {
        if ((size_t)len > (size_t)(rend - *pp)) return "field length past end of record";
        if (gb_append(data, *pp, (size_t)len)) goto mem;
        *pp += len;
        if (gb_set_bit(valid, idx, 1)) goto mem;
    }
    if (gb_append_i32(offs, (int32_t)data->len)) goto mem;
    return NULL;
mem:
    *oom = 1;
    return "out of memory";
}

const char *crec_decode_begin(DecodeOut *o, size_t n, size_t data_hint, int *oom) {
    memset(o, 0, sizeof *o);
    if (gb_init(&o->offsets, n * 8) || gb_init(&o->timestamps, n * 8) || gb_init(&o->kvalid, n / 8 + 1) ||
        gb_init(&o->koff, (n + 1) * 4) || gb_init(&o->kdata, 256) || gb_init(&o->vvalid, n / 8 + 1) ||
        gb_init(&o->voff, (n + 1) * 4) || gb_init(&o->vdata, data_hint) ||
        gb_init(&o->hoff, (n + 1) * 4) || gb_init(&o->hkoff, 64) || gb_init(&o->hkdata, 64) ||
        gb_init(&o->hvvalid, 64) || gb_init(&o->hvoff, 64) || gb_init(&o->hvdata, 64)) {
        *oom = 1;
        return "out of memory";
    }
    gb_append_i32(&o->koff, 0);
    gb_append_i32(&o->voff, 0);
    gb_append_i32(&o->hoff, 0);
    gb_append_i32(&o->hkoff, 0);
    gb_append_i32(&o->hvoff, 0);
    return NULL;
}

const char *crec_decode_record(const uint8_t **pp, const uint8_t *end, size_t i, long long base_offset,
                               long long base_ts, DecodeOut *o, int *oom) {
    const uint8_t *p = *pp;
    const char *err;
    int32_t rlen;
    if (rd_varint(&p, end, &rlen)) return "truncated record length";
    if (rlen < 0) return "negative record length";
    if ((size_t)rlen > (size_t)(end - p)) return "record length past end of batch";
    const uint8_t *rend = p + rlen;
    if (p >= rend) return "truncated record attributes";
    p++; /* record attributes: unused by Kafka */
    int64_t tsd;
    int32_t od;
    if (rd_varlong(&p, rend, &tsd)) return "bad timestamp delta";
    if (rd_varint(&p, rend, &od)) return "bad offset delta";
    ((int64_t *)o->offsets.p)[i] = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)od);
    ((int64_t *)o->timestamps.p)[i] = (int64_t)((uint64_t)base_ts + (uint64_t)tsd);
    err = read_bytes_field(&p, rend, &o->kdata, &o->koff, &o->kvalid, i, &o->knull, oom);
    if (err) return err;
    err = read_bytes_field(&p, rend, &o->vdata, &o->voff, &o->vvalid, i, &o->vnull, oom);
    if (err) return err;
    int32_t hc;
    if (rd_varint(&p, rend, &hc)) return "bad header count";
    if (hc < 0) return "negative header count";
    if ((size_t)hc > (size_t)(rend - p) / MIN_HEADER_BYTES) return "header count past end of record";
    for (int32_t h = 0; h < hc; h++) {
        int32_t hkl;
        if (rd_varint(&p, rend, &hkl)) return "bad header key length";
        if (hkl < 0) return "null header key";
        if ((size_t)hkl > (size_t)(rend - p)) return "header key past end of record";
        if (!utf8_valid(p, (size_t)hkl)) return "header key is not valid UTF-8";
        if (gb_append(&o->hkdata, p, (size_t)hkl)) goto mem;
        p += hkl;
        if (gb_append_i32(&o->hkoff, (int32_t)o->hkdata.len)) goto mem;
        err = read_bytes_field(&p, rend, &o->hvdata, &o->hvoff, &o->hvvalid, (size_t)o->nh, &o->hvnull, oom);
        if (err) return err;
        o->nh++;
    }
    if (gb_append_i32(&o->hoff, (int32_t)o->nh)) goto mem;
    if (p != rend) return "record length does not match its fields";
    *pp = p;
    return NULL;
mem:
    *oom = 1;
    return "out of memory";
}

void crec_decode_end(DecodeOut *o, size_t n) {
    o->offsets.len = n * 8;
    o->timestamps.len = n * 8;
    /* Validity bitmaps cover every element; drop them when nothing is null. */
    if (o->knull == 0) gb_free(&o->kvalid);
    if (o->vnull == 0) gb_free(&o->vvalid);
    if (o->hvnull == 0) gb_free(&o->hvvalid);
}

/* Walks `n` records of an uncompressed records section into `o` (call without the GIL). */
static const char *decode_walk(const uint8_t *p, const uint8_t *end, size_t n, long long base_offset,
                               long long base_ts, DecodeOut *o, int *oom) {
    const char *err = crec_decode_begin(o, n, (size_t)(end - p), oom);
    for (size_t i = 0; !err && i < n; i++) err = crec_decode_record(&p, end, i, base_offset, base_ts, o, oom);
    if (err) return err;
    if (p != end) return "bytes left after the last record";
    crec_decode_end(o, n);
    return NULL;
}

/* Checks the arguments shared by both decoders; sets a Python error and returns -1 when they are bad. */
static int decode_check(Py_buffer *in, long long count) {
    if (in->len > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "records section larger than 2 GiB");
        return -1;
    }
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "negative record count");
        return -1;
    }
    if (count > in->len / MIN_RECORD_BYTES) {
        PyErr_SetString(PyExc_ValueError, "record count larger than the records section can hold");
        return -1;
    }
    return 0;
}

/* Runs the walk without the GIL; on failure frees `o`, sets the Python error and returns -1. */
static int decode_run(Py_buffer *in, long long count, long long base_offset, long long base_ts, DecodeOut *o) {
    const char *err;
    int oom = 0;
    const uint8_t *p = (const uint8_t *)in->buf;
    Py_BEGIN_ALLOW_THREADS
    err = decode_walk(p, p + in->len, (size_t)count, base_offset, base_ts, o, &oom);
    Py_END_ALLOW_THREADS
    if (err) {
        crec_decode_free(o);
        if (oom)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, err);
        return -1;
    }
    return 0;
}

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long count, base_offset, base_ts;
    if (!PyArg_ParseTuple(args, "y*LLL", &in, &count, &base_offset, &base_ts)) return NULL;
    DecodeOut o;
    int bad = decode_check(&in, count) || decode_run(&in, count, base_offset, base_ts, &o);
    PyBuffer_Release(&in);
    if (bad) return NULL;

    PyObject *objs[N_GBUFS];
    for (int i = 0; i < N_GBUFS; i++) {
        GBuf *b = dec_bufs(&o, i);
        if (b->p == NULL) {
            Py_INCREF(Py_None);
            objs[i] = Py_None;
        } else {
            objs[i] = gb_finish(b);
        }
        if (!objs[i]) {
            for (int j = 0; j < i; j++) Py_DECREF(objs[j]);
            crec_decode_free(&o);
            return NULL;
        }
    }
    /* (offsets, timestamps, key_valid, key_offsets, key_data, value_valid, value_offsets, value_data,
        header_offsets, hkey_offsets, hkey_data, hvalue_valid, hvalue_offsets, hvalue_data,
        key_nulls, value_nulls, hvalue_nulls, header_count) */
    return Py_BuildValue("(NNNNNNNNNNNNNNLLLL)", objs[0], objs[1], objs[2], objs[3], objs[4], objs[5], objs[6],
                         objs[7], objs[8], objs[9], objs[10], objs[11], objs[12], objs[13], (long long)o.knull,
                         (long long)o.vnull, (long long)o.hvnull, (long long)o.nh);
}

/* ------------------------------------------------------------------ */
/* walk_records: the same checks as decode_records, but positions and  */
/* lengths into the section instead of copies of the bytes (format 2   */
/* segments point views at the producer's section).                    */

#define WALK_ROW 6  /* offset, timestamp, key at, key length, value at, value length */
#define WALK_HDR 4  /* key at, key length, value at, value length */

/* Whether the varint at [from, to) is the minimal encoding of its zig-zag value `zz`. */
static inline int minimal(const uint8_t *from, const uint8_t *to, uint64_t zz) { return (to - from) == usz(zz); }

/* A length-prefixed field: its position (just past the length) and length (-1: null). */
static inline const char *walk_field(const uint8_t *base, const uint8_t **pp, const uint8_t *rend,
                                     int64_t *at, int64_t *len, int *canon) {
    int32_t l;
    const uint8_t *from = *pp;
    if (rd_varint(pp, rend, &l)) return "truncated length varint";
    *canon &= minimal(from, *pp, zz32(l));
    *at = (int64_t)(*pp - base);
    if (l < 0) { /* Kafka reads any negative length as null */
        *len = -1;
        return NULL;
    }
    if ((size_t)l > (size_t)(rend - *pp)) return "field length past end of record";
    *len = l;
    *pp += l;
    return NULL;
}

/* Walks `n` records into `rows` (n * WALK_ROW), `hoff` (n + 1) and `hdrs` (WALK_HDR per header). */
static const char *walk_run(const uint8_t *base, const uint8_t *end, size_t n, long long base_offset,
                            long long base_ts, int64_t *rows, int32_t *hoff, GBuf *hdrs, int *canon, int *oom) {
    const uint8_t *p = base;
    const char *err;
    int64_t nh = 0;
    hoff[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t *row = rows + i * WALK_ROW;
        int32_t rlen;
        const uint8_t *from = p;
        if (rd_varint(&p, end, &rlen)) return "truncated record length";
        *canon &= minimal(from, p, zz32(rlen));
        if (rlen < 0) return "negative record length";
        if ((size_t)rlen > (size_t)(end - p)) return "record length past end of batch";
        const uint8_t *rend = p + rlen;
        if (p >= rend) return "truncated record attributes";
        p++;
        int64_t tsd;
        int32_t od;
        from = p;
        if (rd_varlong(&p, rend, &tsd)) return "bad timestamp delta";
        *canon &= minimal(from, p, zz64(tsd));
        from = p;
        if (rd_varint(&p, rend, &od)) return "bad offset delta";
        *canon &= minimal(from, p, zz32(od));
        row[0] = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)od);
        row[1] = (int64_t)((uint64_t)base_ts + (uint64_t)tsd);
        if ((err = walk_field(base, &p, rend, &row[2], &row[3], canon))) return err;
        if ((err = walk_field(base, &p, rend, &row[4], &row[5], canon))) return err;
        int32_t hc;
        from = p;
        if (rd_varint(&p, rend, &hc)) return "bad header count";
        *canon &= minimal(from, p, zz32(hc));
        if (hc < 0) return "negative header count";
        if ((size_t)hc > (size_t)(rend - p) / MIN_HEADER_BYTES) return "header count past end of record";
        if (hc && gb_reserve(hdrs, (size_t)hc * WALK_HDR * sizeof(int64_t))) {
            *oom = 1;
            return "out of memory";
        }
        for (int32_t h = 0; h < hc; h++) {
            int64_t *hd = (int64_t *)(hdrs->p + hdrs->len);
            int32_t hkl;
            from = p;
            if (rd_varint(&p, rend, &hkl)) return "bad header key length";
            *canon &= minimal(from, p, zz32(hkl));
            if (hkl < 0) return "null header key";
            if ((size_t)hkl > (size_t)(rend - p)) return "header key past end of record";
            if (!utf8_valid(p, (size_t)hkl)) return "header key is not valid UTF-8";
            hd[0] = (int64_t)(p - base);
            hd[1] = hkl;
            p += hkl;
            if ((err = walk_field(base, &p, rend, &hd[2], &hd[3], canon))) return err;
            hdrs->len += WALK_HDR * sizeof(int64_t);
            nh++;
        }
        hoff[i + 1] = (int32_t)nh;
        if (p != rend) return "record length does not match its fields";
    }
    if (p != end) return "bytes left after the last record";
    return NULL;
}

static PyObject *walk_records(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long count, base_offset, base_ts;
    if (!PyArg_ParseTuple(args, "y*LLL", &in, &count, &base_offset, &base_ts)) return NULL;
    if (decode_check(&in, count)) {
        PyBuffer_Release(&in);
        return NULL;
    }
    size_t n = (size_t)count;
    int64_t *rows = (int64_t *)malloc(n ? n * WALK_ROW * sizeof(int64_t) : 1);
    int32_t *hoff = (int32_t *)malloc((n + 1) * sizeof(int32_t));
    GBuf hdrs;
    int oom = 0, canon = 1;
    const char *err = NULL;
    if (!rows || !hoff || gb_init(&hdrs, 64)) {
        free(rows);
        free(hoff);
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    const uint8_t *p = (const uint8_t *)in.buf;
    Py_BEGIN_ALLOW_THREADS
    err = walk_run(p, p + in.len, n, base_offset, base_ts, rows, hoff, &hdrs, &canon, &oom);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (err) {
        free(rows);
        free(hoff);
        gb_free(&hdrs);
        if (oom) return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    int64_t nh = (int64_t)(hdrs.len / (WALK_HDR * sizeof(int64_t)));
    PyObject *r = crec_buffer_new((char *)rows, n * WALK_ROW * sizeof(int64_t));
    PyObject *h = crec_buffer_new((char *)hoff, (n + 1) * sizeof(int32_t));
    PyObject *d = gb_finish(&hdrs);
    if (!r || !h || !d) {
        Py_XDECREF(r);
        Py_XDECREF(h);
        Py_XDECREF(d);
        return NULL;
    }
    return Py_BuildValue("(NNNLN)", r, h, d, (long long)nh, PyBool_FromLong(canon));
}

/* ------------------------------------------------------------------ */
/* walk_views: the walk, then the columns of a format 2 segment built   */
/* from it: int64 offsets and timestamps, Arrow binary_view views of    */
/* the keys, values and header keys / values (a value of at most 12     */
/* bytes inline, a longer one its 4-byte prefix, buffer 0 and its       */
/* position), validity as one byte per value (None: no null).           */

#define VIEW_INLINE 12 /* pylog.model.BINARY_VIEW_INLINE */

/* One 16-byte binary_view of the value at `at` of `len` bytes (-1: null, an all-zero view). */
static inline void put_view(uint8_t *v, const uint8_t *base, int64_t at, int64_t len) {
    memset(v, 0, 16);
    if (len <= 0) return;
    int32_t l = (int32_t)len;
    memcpy(v, &l, 4);
    if (len <= VIEW_INLINE) {
        memcpy(v + 4, base + at, (size_t)len);
    } else {
        int32_t pos = (int32_t)at;
        memcpy(v + 4, base + at, 4);
        memcpy(v + 12, &pos, 4); /* buffer index (bytes 8..12) stays 0 */
    }
}

/* Views of `n` values whose (position, length) pairs are `stride` int64 apart from `pairs`;
 * the validity bytes (1 = present) when one is null, else NULL. Returns -1 out of memory. */
static int build_views(const uint8_t *base, const int64_t *pairs, size_t stride, size_t n, uint8_t *views,
                       uint8_t **valid) {
    size_t nulls = 0;
    for (size_t i = 0; i < n; i++) {
        const int64_t *pr = pairs + i * stride;
        put_view(views + 16 * i, base, pr[0], pr[1]);
        nulls += pr[1] < 0;
    }
    *valid = NULL;
    if (!nulls) return 0;
    uint8_t *v = (uint8_t *)malloc(n);
    if (!v) return -1;
    for (size_t i = 0; i < n; i++) v[i] = pairs[i * stride + 1] >= 0;
    *valid = v;
    return 0;
}

static PyObject *valid_or_none(uint8_t *valid, size_t n) {
    if (!valid) Py_RETURN_NONE;
    return crec_buffer_new((char *)valid, n);
}

static PyObject *walk_views(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long count, base_offset, base_ts;
    if (!PyArg_ParseTuple(args, "y*LLL", &in, &count, &base_offset, &base_ts)) return NULL;
    if (decode_check(&in, count)) {
        PyBuffer_Release(&in);
        return NULL;
    }
    size_t n = (size_t)count;
    size_t n1 = n ? n : 1;
    int64_t *rows = (int64_t *)malloc(n1 * WALK_ROW * sizeof(int64_t));
    int32_t *hoff = (int32_t *)malloc((n + 1) * sizeof(int32_t));
    int64_t *offs = (int64_t *)malloc(n1 * sizeof(int64_t));
    int64_t *tss = (int64_t *)malloc(n1 * sizeof(int64_t));
    uint8_t *kviews = (uint8_t *)malloc(n1 * 16);
    uint8_t *vviews = (uint8_t *)malloc(n1 * 16);
    uint8_t *hkviews = NULL, *hvviews = NULL, *kvalid = NULL, *vvalid = NULL, *hvvalid = NULL, *hkvalid = NULL;
    GBuf hdrs;
    int oom = 0, canon = 1, hdrs_ok = 0;
    const char *err = NULL;
    size_t nh = 0;
    if (rows && hoff && offs && tss && kviews && vviews && !gb_init(&hdrs, 64)) {
        hdrs_ok = 1;
        const uint8_t *p = (const uint8_t *)in.buf;
        Py_BEGIN_ALLOW_THREADS
        err = walk_run(p, p + in.len, n, base_offset, base_ts, rows, hoff, &hdrs, &canon, &oom);
        if (!err) {
            nh = hdrs.len / (WALK_HDR * sizeof(int64_t));
            for (size_t i = 0; i < n; i++) {
                offs[i] = rows[i * WALK_ROW];
                tss[i] = rows[i * WALK_ROW + 1];
            }
            hkviews = (uint8_t *)malloc(nh ? nh * 16 : 1);
            hvviews = (uint8_t *)malloc(nh ? nh * 16 : 1);
            const int64_t *hd = (const int64_t *)hdrs.p;
            if (!hkviews || !hvviews
                || build_views(p, rows + 2, WALK_ROW, n, kviews, &kvalid)
                || build_views(p, rows + 4, WALK_ROW, n, vviews, &vvalid)
                || build_views(p, hd, WALK_HDR, nh, hkviews, &hkvalid)
                || build_views(p, hd + 2, WALK_HDR, nh, hvviews, &hvvalid)) {
                oom = 1;
                err = "out of memory";
            }
        }
        Py_END_ALLOW_THREADS
    } else {
        oom = 1;
        err = "out of memory";
    }
    PyBuffer_Release(&in);
    free(rows);
    free(hkvalid); /* header keys are never null */
    if (hdrs_ok) gb_free(&hdrs);
    if (err) {
        free(hoff);
        free(offs);
        free(tss);
        free(kviews);
        free(vviews);
        free(hkviews);
        free(hvviews);
        free(kvalid);
        free(vvalid);
        free(hvvalid);
        if (oom) return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    PyObject *items[10];
    items[0] = crec_buffer_new((char *)offs, n * sizeof(int64_t));
    items[1] = crec_buffer_new((char *)tss, n * sizeof(int64_t));
    items[2] = crec_buffer_new((char *)kviews, n * 16);
    items[3] = valid_or_none(kvalid, n);
    items[4] = crec_buffer_new((char *)vviews, n * 16);
    items[5] = valid_or_none(vvalid, n);
    items[6] = crec_buffer_new((char *)hoff, (n + 1) * sizeof(int32_t));
    items[7] = crec_buffer_new((char *)hkviews, nh * 16);
    items[8] = crec_buffer_new((char *)hvviews, nh * 16);
    items[9] = valid_or_none(hvvalid, nh);
    for (int i = 0; i < 10; i++) {
        if (!items[i]) {
            for (int j = 0; j < 10; j++) Py_XDECREF(items[j]);
            return NULL;
        }
    }
    return Py_BuildValue("(NNNNNNNNNNLN)", items[0], items[1], items[2], items[3], items[4], items[5], items[6],
                         items[7], items[8], items[9], (long long)nh, PyBool_FromLong(canon));
}

/* walk_views_many: walk_views over consecutive Kafka batches at once (a follower's fetch), their
 * columns concatenated: a long view's buffer index is its batch's ordinal, header offsets run on.
 * A batch that does not parse stops the walk: the columns hold the batches before it. */
static PyObject *walk_views_many(PyObject *self, PyObject *args) {
    PyObject *raws, *counts, *offsets, *timestamps;
    if (!PyArg_ParseTuple(args, "OOOO", &raws, &counts, &offsets, &timestamps)) return NULL;
    if (!PyList_Check(raws) || !PyList_Check(counts) || !PyList_Check(offsets) || !PyList_Check(timestamps)
        || PyList_GET_SIZE(counts) != PyList_GET_SIZE(raws) || PyList_GET_SIZE(offsets) != PyList_GET_SIZE(raws)
        || PyList_GET_SIZE(timestamps) != PyList_GET_SIZE(raws)) {
        PyErr_SetString(PyExc_TypeError, "walk_views_many takes four lists of one length");
        return NULL;
    }
    Py_ssize_t k = PyList_GET_SIZE(raws);
    size_t total = 0;
    for (Py_ssize_t b = 0; b < k; b++) { /* sized by the batches that can hold their counts (the walk stops at
                                             the first that cannot) */
        long long c = PyLong_AsLongLong(PyList_GET_ITEM(counts, b));
        if (c == -1 && PyErr_Occurred()) return NULL;
        Py_ssize_t len = PyObject_Length(PyList_GET_ITEM(raws, b));
        if (len < 0) return NULL;
        if (c < 0 || c > len / MIN_RECORD_BYTES) break;
        total += (size_t)c;
    }
    size_t t1 = total ? total : 1;
    int64_t *offs = (int64_t *)malloc(t1 * 8), *tss = (int64_t *)malloc(t1 * 8);
    uint8_t *kviews = (uint8_t *)malloc(t1 * 16), *vviews = (uint8_t *)malloc(t1 * 16);
    uint8_t *kvalid = (uint8_t *)malloc(t1), *vvalid = (uint8_t *)malloc(t1);
    int32_t *hoff = (int32_t *)malloc((total + 1) * sizeof(int32_t));
    int64_t *canon_out = (int64_t *)malloc((size_t)(k ? k : 1) * 8);
    GBuf hk, hv, hvvalid;
    int ok = offs && tss && kviews && vviews && kvalid && vvalid && hoff && canon_out;
    int g1 = ok && !gb_init(&hk, 256), g2 = g1 && !gb_init(&hv, 256), g3 = g2 && !gb_init(&hvvalid, 64);
    size_t row = 0, nh = 0;
    int64_t knull = 0, vnull = 0, hvnull = 0;
    Py_ssize_t done = 0;
    PyObject *error = Py_None;
    Py_INCREF(Py_None);
    if (!g3) goto oom;
    hoff[0] = 0;
    for (; done < k; done++) {
        Py_buffer in;
        long long count = PyLong_AsLongLong(PyList_GET_ITEM(counts, done));
        long long base_offset = PyLong_AsLongLong(PyList_GET_ITEM(offsets, done));
        long long base_ts = PyLong_AsLongLong(PyList_GET_ITEM(timestamps, done));
        if (PyErr_Occurred()) goto fail;
        if (PyObject_GetBuffer(PyList_GET_ITEM(raws, done), &in, PyBUF_SIMPLE)) goto fail;
        if (decode_check(&in, count)) {
            PyBuffer_Release(&in);
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            Py_DECREF(error);
            error = value ? PyObject_Str(value) : PyUnicode_FromString("bad batch");
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            if (!error) goto fail;
            break;
        }
        size_t n = (size_t)count;
        int64_t *rows = (int64_t *)malloc((n ? n : 1) * WALK_ROW * sizeof(int64_t));
        GBuf hdrs;
        if (!rows || gb_init(&hdrs, 64)) {
            free(rows);
            PyBuffer_Release(&in);
            goto oom;
        }
        int oom = 0, canon = 1;
        const uint8_t *p = (const uint8_t *)in.buf;
        const char *err;
        Py_BEGIN_ALLOW_THREADS
        err = walk_run(p, p + in.len, n, base_offset, base_ts, rows, hoff + row, &hdrs, &canon, &oom);
        Py_END_ALLOW_THREADS
        size_t bnh = hdrs.len / (WALK_HDR * sizeof(int64_t));
        if (!err && (gb_reserve(&hk, bnh * 16) || gb_reserve(&hv, bnh * 16) || gb_reserve(&hvvalid, bnh))) {
            oom = 1;
            err = "out of memory";
        }
        if (err) {
            free(rows);
            gb_free(&hdrs);
            PyBuffer_Release(&in);
            hoff[row] = (int32_t)nh; /* the walk may have written past the last whole batch */
            if (oom) goto oom;
            Py_DECREF(error);
            error = PyUnicode_FromString(err);
            if (!error) goto fail;
            break;
        }
        const int32_t b32 = (int32_t)done;
        hoff[row] = (int32_t)nh; /* the walk started this batch's header offsets from 0 */
        for (size_t i = 0; i < n; i++) {
            const int64_t *r = rows + i * WALK_ROW;
            offs[row + i] = r[0];
            tss[row + i] = r[1];
            put_view(kviews + 16 * (row + i), p, r[2], r[3]);
            put_view(vviews + 16 * (row + i), p, r[4], r[5]);
            if (r[3] > VIEW_INLINE) memcpy(kviews + 16 * (row + i) + 8, &b32, 4);
            if (r[5] > VIEW_INLINE) memcpy(vviews + 16 * (row + i) + 8, &b32, 4);
            kvalid[row + i] = r[3] >= 0;
            vvalid[row + i] = r[5] >= 0;
            knull += r[3] < 0;
            vnull += r[5] < 0;
            hoff[row + i + 1] += (int32_t)nh;
        }
        const int64_t *hd = (const int64_t *)hdrs.p;
        for (size_t h = 0; h < bnh; h++) {
            const int64_t *x = hd + h * WALK_HDR;
            uint8_t *kvw = (uint8_t *)hk.p + hk.len, *vvw = (uint8_t *)hv.p + hv.len;
            put_view(kvw, p, x[0], x[1]);
            put_view(vvw, p, x[2], x[3]);
            if (x[1] > VIEW_INLINE) memcpy(kvw + 8, &b32, 4);
            if (x[3] > VIEW_INLINE) memcpy(vvw + 8, &b32, 4);
            hk.len += 16;
            hv.len += 16;
            hvvalid.p[hvvalid.len++] = (char)(x[3] >= 0);
            hvnull += x[3] < 0;
        }
        canon_out[done] = canon;
        row += n;
        nh += bnh;
        free(rows);
        gb_free(&hdrs);
        PyBuffer_Release(&in);
    }
    {
        PyObject *items[10];
        items[0] = crec_buffer_new((char *)offs, row * 8);
        items[1] = crec_buffer_new((char *)tss, row * 8);
        items[2] = crec_buffer_new((char *)kviews, row * 16);
        if (knull) items[3] = crec_buffer_new((char *)kvalid, row);
        else { free(kvalid); Py_INCREF(Py_None); items[3] = Py_None; }
        items[4] = crec_buffer_new((char *)vviews, row * 16);
        if (vnull) items[5] = crec_buffer_new((char *)vvalid, row);
        else { free(vvalid); Py_INCREF(Py_None); items[5] = Py_None; }
        items[6] = crec_buffer_new((char *)hoff, (row + 1) * sizeof(int32_t));
        items[7] = gb_finish(&hk);
        items[8] = gb_finish(&hv);
        if (hvnull) items[9] = gb_finish(&hvvalid);
        else { gb_free(&hvvalid); Py_INCREF(Py_None); items[9] = Py_None; }
        PyObject *canons = PyList_New(done);
        for (Py_ssize_t b = 0; canons && b < done; b++)
            PyList_SET_ITEM(canons, b, PyBool_FromLong((long)canon_out[b]));
        free(canon_out);
        int bad = !canons;
        for (int i = 0; i < 10; i++) bad |= !items[i];
        if (bad) {
            for (int i = 0; i < 10; i++) Py_XDECREF(items[i]);
            Py_XDECREF(canons);
            Py_DECREF(error);
            return NULL;
        }
        return Py_BuildValue("(NNNNNNNNNNLNN)", items[0], items[1], items[2], items[3], items[4], items[5],
                             items[6], items[7], items[8], items[9], (long long)nh, canons, error);
    }
oom:
    PyErr_NoMemory();
fail:
    Py_DECREF(error);
    free(offs);
    free(tss);
    free(kviews);
    free(vviews);
    free(kvalid);
    free(vvalid);
    free(hoff);
    free(canon_out);
    if (g1) gb_free(&hk);
    if (g2) gb_free(&hv);
    if (g3) gb_free(&hvvalid);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* decode_records_arrow: the same walk, handed to Arrow through the C  */
/* data interface as one struct array (one import instead of a dozen   */
/* Array.from_buffers calls).                                          */

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* Array slots: 0 the record batch, 1 offset, 2 timestamp, 3 key, 4 value, 5 headers list,
 * 6 header struct, 7 header key, 8 header value. */
#define N_ARRAYS 9

struct ArrowHolder {
    DecodeOut o;
    struct ArrowArray arrays[N_ARRAYS];
    struct ArrowArray *top_children[5];
    struct ArrowArray *list_children[1];
    struct ArrowArray *struct_children[2];
    const void *bufs[20];
};

static void child_release(struct ArrowArray *a) { a->release = NULL; }

static void holder_release(struct ArrowArray *a) {
    ArrowHolder *h = (ArrowHolder *)a->private_data;
    for (int i = 1; i < N_ARRAYS; i++)
        if (h->arrays[i].release) h->arrays[i].release(&h->arrays[i]);
    crec_decode_free(&h->o);
    free(h);
    a->release = NULL;
}

static void set_array(struct ArrowArray *a, int64_t length, int64_t nulls, int64_t n_buffers,
                      const void **buffers, int64_t n_children, struct ArrowArray **children, ArrowHolder *h,
                      int top) {
    a->length = length;
    a->null_count = nulls;
    a->offset = 0;
    a->n_buffers = n_buffers;
    a->n_children = n_children;
    a->buffers = buffers;
    a->children = children;
    a->dictionary = NULL;
    a->release = top ? holder_release : child_release;
    a->private_data = h;
}

/* Fills `h->arrays` over the decoded buffers (which stay owned by `h`). */
static void holder_build(ArrowHolder *h, int64_t n) {
    DecodeOut *o = &h->o;
    const void **b = h->bufs;
    b[0] = NULL;                                       /* batch validity */
    b[1] = NULL, b[2] = o->offsets.p;                  /* offset */
    b[3] = NULL, b[4] = o->timestamps.p;               /* timestamp */
    b[5] = o->kvalid.p, b[6] = o->koff.p, b[7] = o->kdata.p;     /* key */
    b[8] = o->vvalid.p, b[9] = o->voff.p, b[10] = o->vdata.p;    /* value */
    b[11] = NULL, b[12] = o->hoff.p;                   /* headers list */
    b[13] = NULL;                                      /* header struct */
    b[14] = NULL, b[15] = o->hkoff.p, b[16] = o->hkdata.p;       /* header key (string) */
    b[17] = o->hvvalid.p, b[18] = o->hvoff.p, b[19] = o->hvdata.p; /* header value */
    for (int i = 0; i < 5; i++) h->top_children[i] = &h->arrays[1 + i];
    h->list_children[0] = &h->arrays[6];
    h->struct_children[0] = &h->arrays[7];
    h->struct_children[1] = &h->arrays[8];
    set_array(&h->arrays[0], n, 0, 1, &b[0], 5, h->top_children, h, 1);
    set_array(&h->arrays[1], n, 0, 2, &b[1], 0, NULL, h, 0);
    set_array(&h->arrays[2], n, 0, 2, &b[3], 0, NULL, h, 0);
    set_array(&h->arrays[3], n, o->knull, 3, &b[5], 0, NULL, h, 0);
    set_array(&h->arrays[4], n, o->vnull, 3, &b[8], 0, NULL, h, 0);
    set_array(&h->arrays[5], n, 0, 2, &b[11], 1, h->list_children, h, 0);
    set_array(&h->arrays[6], o->nh, 0, 1, &b[13], 2, h->struct_children, h, 0);
    set_array(&h->arrays[7], o->nh, 0, 3, &b[14], 0, NULL, h, 0);
    set_array(&h->arrays[8], o->nh, o->hvnull, 3, &b[17], 0, NULL, h, 0);
}

ArrowHolder *crec_holder_new(void) { return (ArrowHolder *)calloc(1, sizeof(ArrowHolder)); }

DecodeOut *crec_holder_out(ArrowHolder *h) { return &h->o; }

void crec_holder_free(ArrowHolder *h) {
    crec_decode_free(&h->o);
    free(h);
}

PyObject *crec_holder_import(ArrowHolder *h, int64_t n, PyObject *importer, PyObject *schema) {
    holder_build(h, n);
    /* The array lives on the stack: the importer moves it out (marking it released) or fails. */
    struct ArrowArray top = h->arrays[0];
    h->arrays[0].release = NULL;
    PyObject *result = PyObject_CallFunction(importer, "KO", (unsigned long long)(uintptr_t)&top, schema);
    if (top.release) top.release(&top);
    return result;
}

static PyObject *decode_records_arrow(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long count, base_offset, base_ts;
    PyObject *importer, *schema;
    if (!PyArg_ParseTuple(args, "y*LLLOO", &in, &count, &base_offset, &base_ts, &importer, &schema)) return NULL;
    ArrowHolder *h = crec_holder_new();
    if (!h) {
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    int bad = decode_check(&in, count) || decode_run(&in, count, base_offset, base_ts, &h->o);
    PyBuffer_Release(&in);
    if (bad) {
        free(h);
        return NULL;
    }
    return crec_holder_import(h, (int64_t)count, importer, schema);
}

/* ------------------------------------------------------------------ */
/* encode_records                                                      */

typedef struct {
    Py_buffer buf;
    int held;
} Held;

/* A binary / string Arrow array given as buffers: validity (or none), int32 offsets, data, element offset. */
typedef struct {
    int present;
    Held valid, offs, data;
    int64_t off;
    int64_t n_offsets; /* number of int32 entries in offs */
} BinCol;

static int hold(PyObject *obj, Held *h) {
    if (obj == Py_None) {
        h->held = 0;
        return 0;
    }
    if (PyObject_GetBuffer(obj, &h->buf, PyBUF_SIMPLE) < 0) return -1;
    h->held = 1;
    return 0;
}

static void release(Held *h) {
    if (h->held) PyBuffer_Release(&h->buf);
    h->held = 0;
}

static int bincol_parse(PyObject *spec, BinCol *c) {
    memset(c, 0, sizeof *c);
    if (spec == Py_None) return 0;
    PyObject *v, *o, *d;
    long long off;
    if (!PyArg_ParseTuple(spec, "OOOL", &v, &o, &d, &off)) return -1;
    if (off < 0) {
        PyErr_SetString(PyExc_ValueError, "negative array offset");
        return -1;
    }
    if (hold(v, &c->valid) || hold(o, &c->offs) || hold(d, &c->data)) return -1;
    if (!c->offs.held) {
        PyErr_SetString(PyExc_ValueError, "binary column without offsets");
        return -1;
    }
    c->present = 1;
    c->off = off;
    c->n_offsets = c->offs.buf.len / 4;
    return 0;
}

static void bincol_release(BinCol *c) {
    release(&c->valid);
    release(&c->offs);
    release(&c->data);
}

/* Element i of the column: sets ptr and len (len = -1 for null). Returns -1 when buffers are inconsistent. */
static inline int bincol_get(const BinCol *c, int64_t i, const uint8_t **ptr, int64_t *len) {
    if (!c->present) {
        *len = -1;
        return 0;
    }
    int64_t k = c->off + i;
    if (c->valid.held) {
        if ((k >> 3) >= c->valid.buf.len) return -1;
        if (!((((const uint8_t *)c->valid.buf.buf)[k >> 3] >> (k & 7)) & 1)) {
            *len = -1;
            return 0;
        }
    }
    if (k + 1 >= c->n_offsets) return -1;
    const int32_t *o = (const int32_t *)c->offs.buf.buf;
    int32_t a = o[k], b = o[k + 1];
    if (a < 0 || b < a || (int64_t)b > (int64_t)(c->data.held ? c->data.buf.len : 0)) return -1;
    *ptr = (const uint8_t *)(c->data.held ? c->data.buf.buf : NULL) + a;
    *len = b - a;
    return 0;
}

static inline int64_t field_size(int64_t len) { return len < 0 ? 1 : usz(zz32((int32_t)len)) + len; }

static inline uint8_t *write_field(uint8_t *w, const uint8_t *src, int64_t len) {
    if (len < 0) {
        *w++ = 1; /* zig-zag -1 */
        return w;
    }
    w = wr_uvar(w, zz32((int32_t)len));
    if (len) memcpy(w, src, (size_t)len);
    return w + len;
}

typedef struct {
    int present;
    Held lvalid, loffs;
    int64_t loff;
    BinCol hk, hv;
} HdrCol;

static PyObject *encode_records(PyObject *self, PyObject *args) {
    long long base_offset, base_ts, n_ll, reserve;
    PyObject *offs_spec, *ts_spec, *key_spec, *val_spec, *hdr_spec;
    if (!PyArg_ParseTuple(args, "LLLLOOOOO", &base_offset, &base_ts, &n_ll, &reserve, &offs_spec, &ts_spec,
                          &key_spec, &val_spec, &hdr_spec))
        return NULL;
    if (n_ll < 0 || reserve < 0) {
        PyErr_SetString(PyExc_ValueError, "negative count or reserve");
        return NULL;
    }
    int64_t n = n_ll;
    Held offs = {0}, tss = {0};
    long long offs_off = 0, ts_off = 0;
    BinCol key, val;
    HdrCol hdr;
    memset(&key, 0, sizeof key);
    memset(&val, 0, sizeof val);
    memset(&hdr, 0, sizeof hdr);
    PyObject *result = NULL;
    int32_t *sizes = NULL;
    const char *err = NULL;

    PyObject *ob, *tb;
    if (!PyArg_ParseTuple(offs_spec, "OL", &ob, &offs_off) || !PyArg_ParseTuple(ts_spec, "OL", &tb, &ts_off))
        goto out;
    if (hold(ob, &offs) || hold(tb, &tss)) goto out;
    if (!offs.held || !tss.held || offs_off < 0 || ts_off < 0 || offs.buf.len / 8 < offs_off + n ||
        tss.buf.len / 8 < ts_off + n) {
        PyErr_SetString(PyExc_ValueError, "offset/timestamp buffers too short");
        goto out;
    }
    if (bincol_parse(key_spec, &key) || bincol_parse(val_spec, &val)) goto out;
    if (hdr_spec != Py_None) {
        PyObject *lv, *lo, *hks, *hvs;
        long long loff;
        if (!PyArg_ParseTuple(hdr_spec, "OOLOO", &lv, &lo, &loff, &hks, &hvs)) goto out;
        if (hold(lv, &hdr.lvalid) || hold(lo, &hdr.loffs)) goto out;
        if (bincol_parse(hks, &hdr.hk) || bincol_parse(hvs, &hdr.hv)) goto out;
        if (!hdr.loffs.held || !hdr.hk.present || loff < 0 || hdr.loffs.buf.len / 4 < loff + n + 1) {
            PyErr_SetString(PyExc_ValueError, "header list buffers inconsistent");
            goto out;
        }
        hdr.loff = loff;
        hdr.present = 1;
    }
    sizes = (int32_t *)malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    if (!sizes) {
        PyErr_NoMemory();
        goto out;
    }

    int64_t total = 0;
    int64_t max_ts = -1; /* Kafka's NO_TIMESTAMP for an empty batch */
    const int64_t *O = (const int64_t *)offs.buf.buf + offs_off;
    const int64_t *T = (const int64_t *)tss.buf.buf + ts_off;
    const int32_t *LO = hdr.present ? (const int32_t *)hdr.loffs.buf.buf + hdr.loff : NULL;
    const uint8_t *LV = hdr.present && hdr.lvalid.held ? (const uint8_t *)hdr.lvalid.buf.buf : NULL;

    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        int64_t od;
        if (__builtin_sub_overflow(O[i], (int64_t)base_offset, &od) || od < INT32_MIN || od > INT32_MAX) {
            err = "offset delta does not fit in int32";
            break;
        }
        int64_t tsd = (int64_t)((uint64_t)T[i] - (uint64_t)base_ts);
        if (i == 0 || T[i] > max_ts) max_ts = T[i];
        const uint8_t *ptr;
        int64_t kl, vl;
        if (bincol_get(&key, i, &ptr, &kl) || bincol_get(&val, i, &ptr, &vl)) {
            err = "inconsistent key/value buffers";
            break;
        }
        int64_t body = 1 + usz(zz64(tsd)) + usz(zz32((int32_t)od)) + field_size(kl) + field_size(vl);
        int64_t h0 = 0, h1 = 0;
        if (hdr.present) {
            int64_t li = hdr.loff + i;
            int is_null = LV && ((li >> 3) >= hdr.lvalid.buf.len || !((LV[li >> 3] >> (li & 7)) & 1));
            if (!is_null) {
                h0 = LO[i];
                h1 = LO[i + 1];
                if (h0 < 0 || h1 < h0) {
                    err = "inconsistent header list offsets";
                    break;
                }
            }
        }
        if (h1 - h0 > INT32_MAX) {
            err = "too many headers";
            break;
        }
        body += usz(zz32((int32_t)(h1 - h0)));
        for (int64_t j = h0; j < h1; j++) {
            int64_t hkl, hvl;
            if (bincol_get(&hdr.hk, j, &ptr, &hkl) || bincol_get(&hdr.hv, j, &ptr, &hvl)) {
                err = "inconsistent header buffers";
                break;
            }
            if (hkl < 0) {
                err = "null header key";
                break;
            }
            body += field_size(hkl) + field_size(hvl);
        }
        if (err) break;
        if (body > INT32_MAX) {
            err = "record larger than 2 GiB";
            break;
        }
        sizes[i] = (int32_t)body;
        total += usz(zz32((int32_t)body)) + body;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        PyErr_SetString(PyExc_ValueError, err);
        goto out;
    }
    if (total + reserve > PY_SSIZE_T_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "batch too large");
        goto out;
    }
    result = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(total + reserve));
    if (!result) goto out;
    uint8_t *w = (uint8_t *)PyByteArray_AS_STRING(result);
    memset(w, 0, (size_t)reserve);
    w += reserve;

    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        int64_t od = O[i] - (int64_t)base_offset;
        int64_t tsd = (int64_t)((uint64_t)T[i] - (uint64_t)base_ts);
        const uint8_t *kp = NULL, *vp = NULL;
        int64_t kl, vl;
        bincol_get(&key, i, &kp, &kl);
        bincol_get(&val, i, &vp, &vl);
        w = wr_uvar(w, zz32(sizes[i]));
        *w++ = 0; /* record attributes */
        w = wr_uvar(w, zz64(tsd));
        w = wr_uvar(w, zz32((int32_t)od));
        w = write_field(w, kp, kl);
        w = write_field(w, vp, vl);
        int64_t h0 = 0, h1 = 0;
        if (hdr.present) {
            int64_t li = hdr.loff + i;
            int is_null = LV && ((li >> 3) >= hdr.lvalid.buf.len || !((LV[li >> 3] >> (li & 7)) & 1));
            if (!is_null) {
                h0 = LO[i];
                h1 = LO[i + 1];
            }
        }
        w = wr_uvar(w, zz32((int32_t)(h1 - h0)));
        for (int64_t j = h0; j < h1; j++) {
            const uint8_t *hkp = NULL, *hvp = NULL;
            int64_t hkl, hvl;
            bincol_get(&hdr.hk, j, &hkp, &hkl);
            bincol_get(&hdr.hv, j, &hvp, &hvl);
            w = write_field(w, hkp, hkl);
            w = write_field(w, hvp, hvl);
        }
    }
    Py_END_ALLOW_THREADS
    {
        PyObject *pair = Py_BuildValue("(NL)", result, (long long)max_ts);
        result = pair; /* on failure Py_BuildValue released `result` (N) and returned NULL */
    }

out:
    free(sizes);
    release(&offs);
    release(&tss);
    bincol_release(&key);
    bincol_release(&val);
    release(&hdr.lvalid);
    release(&hdr.loffs);
    bincol_release(&hdr.hk);
    bincol_release(&hdr.hv);
    return result;
}

/* ------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(data, count, base_offset, base_timestamp) -> tuple of column buffers"},
    {"decode_records_arrow", decode_records_arrow, METH_VARARGS,
     "decode_records_arrow(data, count, base_offset, base_timestamp, importer, schema) -> importer(address"
     " of an ArrowArray holding the records as one struct array, schema)"},
    {"walk_records", walk_records, METH_VARARGS,
     "walk_records(data, count, base_offset, base_timestamp) -> (rows, header_offsets, headers, header_count, canonical):"
     " int64 rows of (offset, timestamp, key at, key length, value at, value length), int32 header list"
     " offsets, int64 headers of (key at, key length, value at, value length), their count, whether every"
     " varint is minimal); length -1 is null"},
    {"walk_views", walk_views, METH_VARARGS,
     "walk_views(data, count, base_offset, base_timestamp) -> (offsets, timestamps, key views, key validity,"
     " value views, value validity, header offsets, header key views, header value views, header value"
     " validity, header count, canonical): walk_records's checks, int64 offsets and timestamps, 16-byte"
     " binary_view views (a value longer than 12 bytes: buffer 0 at its position), one validity byte per"
     " value (None when none is null), int32 header list offsets"},
    {"walk_views_many", walk_views_many, METH_VARARGS,
     "walk_views_many(raws, counts, base_offsets, base_timestamps) -> walk_views's columns of consecutive"
     " batches concatenated (a long view's buffer index: its batch's ordinal; header offsets running on),"
     " each batch's canonical flag, and None or the message of the first batch that does not parse (the"
     " columns then hold the batches before it)"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(base_offset, base_timestamp, n, reserve, offsets, timestamps, key, value, headers)"
     " -> (bytearray, max_timestamp)"},
    {"lz4_frame_decompress", crec_lz4_frame_decompress, METH_VARARGS,
     "lz4_frame_decompress(data, max_bytes) -> Buffer of the frame's content, or None when the frame is"
     " left to the lz4 package (ValueError: corrupt)"},
    {"set_lz4_block_decoder", crec_set_lz4_block_decoder, METH_O,
     "set_lz4_block_decoder(address): the LZ4_decompress_safe the lz4 functions call (0: none)"},
    {"decode_lz4_records_arrow", crec_decode_lz4_records_arrow, METH_VARARGS,
     "decode_lz4_records_arrow(frame, count, base_offset, base_timestamp, max_bytes, importer, schema) ->"
     " decode_records_arrow of the frame's content, decoded block by block without the whole content in"
     " memory; None when the frame is left to the lz4 package (LZ4FrameError: corrupt frame, ValueError:"
     " bad records)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_crecords", "C accelerator for Kafka RecordBatch v2 <-> Arrow.", -1, methods,
};

PyMODINIT_FUNC PyInit__crecords(void) {
    if (PyType_Ready(&BufType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&BufType);
    if (PyModule_AddObject(m, "Buffer", (PyObject *)&BufType) < 0) {
        Py_DECREF(&BufType);
        Py_DECREF(m);
        return NULL;
    }
    crec_LZ4FrameError = PyErr_NewExceptionWithDoc(
        "pylog.protocol.records._crecords.LZ4FrameError", "A corrupt lz4 frame.", PyExc_ValueError, NULL);
    if (!crec_LZ4FrameError || PyModule_AddObjectRef(m, "LZ4FrameError", crec_LZ4FrameError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
