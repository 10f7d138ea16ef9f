/*
 * lz4 frames as Kafka's clients write them (independent blocks, no checksums), read without the
 * lz4 package's frame API and its copies.
 *
 * lz4_frame_decompress decodes a frame straight into a Buffer the record decoder reads.
 * decode_lz4_records_arrow goes further: it decodes the frame one block at a time into a small
 * window and walks the records out of it as they complete, so the content never exists whole
 * (one pass over cache-sized memory instead of writing the content out and reading it back).
 * Its results and errors are those of decompressing and then decoding: corrupt frames raise
 * LZ4FrameError before any record error, then the record count is checked against the content,
 * then the records are walked in order.
 *
 * Blocks are decoded by the lz4 package's own LZ4_decompress_safe, whose address Python hands
 * over (set_lz4_block_decoder): no lz4 headers or library at build time. Frames using anything
 * else (block or content checksums, a dictionary, linked blocks, several frames, a bound past
 * max_bytes) return None and are left to the lz4 package.
 */
#include "_crecords.h"

typedef int (*lz4_block_fn)(const char *src, char *dst, int compressed_size, int dst_capacity);
static lz4_block_fn lz4_block_decompress = NULL;
PyObject *crec_LZ4FrameError = NULL;

PyObject *crec_set_lz4_block_decoder(PyObject *self, PyObject *arg) {
    unsigned long long address = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred()) return NULL;
    lz4_block_decompress = (lz4_block_fn)(uintptr_t)address;
    Py_RETURN_NONE;
}

#define LZ4_MAGIC 0x184D2204u
#define XXH_P1 2654435761u
#define XXH_P2 2246822519u
#define XXH_P3 3266489917u
#define XXH_P4 668265263u
#define XXH_P5 374761393u

static inline uint32_t rd32le(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* XXH32 with seed 0 of fewer than 16 bytes (a frame descriptor is 2 to 14). */
static uint32_t xxh32_short(const uint8_t *p, size_t len) {
    uint32_t h = XXH_P5 + (uint32_t)len;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) h = rotl32(h + rd32le(p + i) * XXH_P3, 17) * XXH_P4;
    for (; i < len; i++) h = rotl32(h + p[i] * XXH_P5, 11) * XXH_P1;
    h ^= h >> 15;
    h *= XXH_P2;
    h ^= h >> 13;
    h *= XXH_P3;
    h ^= h >> 16;
    return h;
}

typedef struct {
    size_t first_block; /* position of the first block's size field */
    size_t block_max;
    size_t content_size; /* SIZE_MAX: not stored */
    size_t bound;        /* the most the content can hold */
} FrameInfo;

/* 0: a frame for these paths (*f filled); 1: not for them; -1: corrupt (*err set). Walks the
 * block sizes only, so nothing is allocated before the frame is known to span `n` exactly. */
static int frame_scan(const uint8_t *p, size_t n, size_t max_bytes, FrameInfo *f, const char **err) {
    static const size_t block_max_by_id[8] = {0, 0, 0, 0, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
    if (n < 7 || rd32le(p) != LZ4_MAGIC) return 1;
    uint8_t flg = p[4], bd = p[5];
    if ((flg >> 6) != 1 || (flg & 0x02) || (bd & 0x8F)) return 1; /* version, reserved bits */
    if (!(flg & 0x20) || (flg & 0x10) || (flg & 0x04) || (flg & 0x01)) return 1;
    size_t block_max = block_max_by_id[(bd >> 4) & 7];
    if (!block_max) return 1;
    size_t pos = 6, content_size = SIZE_MAX;
    if (flg & 0x08) {
        if (n < 15) return 1;
        uint64_t cs = (uint64_t)rd32le(p + 6) | ((uint64_t)rd32le(p + 10) << 32);
        content_size = cs > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)cs;
        pos += 8;
    }
    if (((xxh32_short(p + 4, pos - 4) >> 8) & 0xFF) != p[pos]) {
        *err = "lz4 frame header checksum mismatch";
        return -1;
    }
    pos += 1;
    size_t first = pos, blocks = 0;
    for (;;) { /* the bound, and that the frame spans the input exactly */
        if (pos + 4 > n) return 1;
        uint32_t size = rd32le(p + pos);
        pos += 4;
        if (size == 0) break;
        size &= 0x7FFFFFFFu;
        if (size > block_max || size > n - pos) return 1;
        pos += size;
        blocks++;
    }
    if (pos != n) return 1;
    size_t bound = blocks * block_max;
    if (content_size < bound) bound = content_size;
    if (bound > max_bytes || bound > INT32_MAX) return 1;
    f->first_block = first;
    f->block_max = block_max;
    f->content_size = content_size;
    f->bound = bound;
    return 0;
}

/* Decodes the block whose size field is at *pos into `dst` (`room` bytes) and moves *pos to the
 * next one. Returns the bytes written, 0 at the end mark, -1 when corrupt (*err set). */
static long next_block(const uint8_t *p, size_t *pos, const FrameInfo *f, char *dst, size_t room,
                       const char **err) {
    uint32_t size = rd32le(p + *pos);
    *pos += 4;
    if (size == 0) return 0;
    int raw = (size & 0x80000000u) != 0;
    size &= 0x7FFFFFFFu;
    const char *src = (const char *)p + *pos;
    *pos += size;
    if (raw) {
        if (size > room) {
            *err = "lz4 frame decompresses past its bound";
            return -1;
        }
        memcpy(dst, src, size);
        return (long)size;
    }
    int got = lz4_block_decompress(src, dst, (int)size, (int)(room < f->block_max ? room : f->block_max));
    if (got < 0) {
        *err = "corrupt lz4 block";
        return -1;
    }
    return got;
}

static const char *content_size_error(const FrameInfo *f, size_t total) {
    return f->content_size != SIZE_MAX && total != f->content_size ? "lz4 frame content size mismatch" : NULL;
}

/* 0: decoded into *out (malloc'd, *out_len bytes); -1: corrupt (*err set; NULL: out of memory). */
static int frame_decompress(const uint8_t *p, const FrameInfo *f, char **out, size_t *out_len, const char **err) {
    char *dst = (char *)malloc(f->bound ? f->bound : 1);
    if (!dst) {
        *err = NULL;
        return -1;
    }
    size_t w = 0, pos = f->first_block;
    long got;
    while ((got = next_block(p, &pos, f, dst + w, f->bound - w, err)) > 0) w += (size_t)got;
    if (got == 0 && (*err = content_size_error(f, w)) == NULL) {
        *out = dst;
        *out_len = w;
        return 0;
    }
    free(dst);
    return -1;
}

PyObject *crec_lz4_frame_decompress(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long max_bytes;
    if (!PyArg_ParseTuple(args, "y*L", &in, &max_bytes)) return NULL;
    if (lz4_block_decompress == NULL || max_bytes < 0) {
        PyBuffer_Release(&in);
        Py_RETURN_NONE;
    }
    char *out = NULL;
    size_t out_len = 0;
    const char *err = "";
    FrameInfo f;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = frame_scan((const uint8_t *)in.buf, (size_t)in.len, (size_t)max_bytes, &f, &err);
    if (rc == 0) rc = frame_decompress((const uint8_t *)in.buf, &f, &out, &out_len, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (rc == 1) Py_RETURN_NONE;
    if (rc < 0) {
        if (err == NULL) return PyErr_NoMemory();
        PyErr_SetString(crec_LZ4FrameError, err);
        return NULL;
    }
    return crec_buffer_new(out, out_len);
}

/* How a streamed walk ended: `frame` (a corrupt frame) wins over `records`, as when the whole
 * content is decoded first; `oom` over both. */
typedef struct {
    const char *frame, *records;
    int oom;
} WalkErrors;

/* True when the window holds the next record whole (or bytes that more data cannot make a
 * record of: the walk then reports them). */
static int record_ready(const char *win, size_t wpos, size_t wlen) {
    const uint8_t *q = (const uint8_t *)win + wpos, *end = (const uint8_t *)win + wlen;
    int32_t rlen;
    if (rd_varint(&q, end, &rlen)) return 0;
    return rlen < 0 || (size_t)rlen <= (size_t)(end - q);
}

/* Decodes the frame block by block into a window and walks each record once it is whole in it. */
static void frame_walk(const uint8_t *p, const FrameInfo *f, size_t count, long long base_offset,
                       long long base_ts, DecodeOut *o, WalkErrors *e) {
    char *win = NULL;
    size_t wcap = 0, wlen = 0, wpos = 0, total = 0, i = 0, pos = f->first_block;
    e->records = crec_decode_begin(o, count, f->bound, &e->oom);
    if (e->records) return;
    for (;;) {
        if (wpos) { /* keep only the unwalked tail (a record not yet whole) */
            memmove(win, win + wpos, wlen - wpos);
            wlen -= wpos;
            wpos = 0;
        }
        if (wlen + f->block_max > wcap) {
            size_t cap = wcap ? wcap * 2 : 2 * f->block_max;
            if (cap < wlen + f->block_max) cap = wlen + f->block_max;
            char *grown = (char *)realloc(win, cap);
            if (!grown) {
                e->oom = 1;
                e->records = "out of memory";
                break;
            }
            win = grown;
            wcap = cap;
        }
        long got = next_block(p, &pos, f, win + wlen, f->bound - total, &e->frame);
        if (got < 0) break;
        if (got == 0) {
            e->frame = content_size_error(f, total);
            break;
        }
        total += (size_t)got;
        if (e->records) { /* a record already failed: only the frame's own errors can still win */
            wlen = wpos = 0;
            continue;
        }
        wlen += (size_t)got;
        while (i < count && record_ready(win, wpos, wlen)) {
            const uint8_t *q = (const uint8_t *)win + wpos;
            e->records = crec_decode_record(&q, (const uint8_t *)win + wlen, i, base_offset, base_ts, o, &e->oom);
            if (e->records) break;
            wpos = (size_t)(q - (const uint8_t *)win);
            i++;
        }
    }
    if (!e->frame && !e->oom) {
        const uint8_t *q = (const uint8_t *)win + wpos, *end = (const uint8_t *)win + wlen;
        if (count > total / MIN_RECORD_BYTES) {
            e->records = "record count larger than the records section can hold";
        } else if (!e->records) {
            for (; !e->records && i < count; i++)
                e->records = crec_decode_record(&q, end, i, base_offset, base_ts, o, &e->oom);
            if (!e->records && q != end) e->records = "bytes left after the last record";
            if (!e->records) crec_decode_end(o, count);
        }
    }
    free(win);
}

PyObject *crec_decode_lz4_records_arrow(PyObject *self, PyObject *args) {
    Py_buffer in;
    long long count, base_offset, base_ts, max_bytes;
    PyObject *importer, *schema;
    if (!PyArg_ParseTuple(args, "y*LLLLOO", &in, &count, &base_offset, &base_ts, &max_bytes, &importer, &schema))
        return NULL;
    FrameInfo f;
    const char *err = "";
    int rc = 1;
    if (lz4_block_decompress != NULL && max_bytes >= 0 && count >= 0)
        rc = frame_scan((const uint8_t *)in.buf, (size_t)in.len, (size_t)max_bytes, &f, &err);
    /* A count the content cannot hold is left to the two-step path, which checks it against the
     * whole content before allocating for it. */
    if (rc == 1 || (rc == 0 && (size_t)count > f.bound / MIN_RECORD_BYTES)) {
        PyBuffer_Release(&in);
        Py_RETURN_NONE;
    }
    if (rc < 0) {
        PyBuffer_Release(&in);
        PyErr_SetString(crec_LZ4FrameError, err);
        return NULL;
    }
    ArrowHolder *h = crec_holder_new();
    if (!h) {
        PyBuffer_Release(&in);
        return PyErr_NoMemory();
    }
    WalkErrors e = {NULL, NULL, 0};
    Py_BEGIN_ALLOW_THREADS
    frame_walk((const uint8_t *)in.buf, &f, (size_t)count, base_offset, base_ts, crec_holder_out(h), &e);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&in);
    if (e.oom || e.frame || e.records) {
        crec_holder_free(h);
        if (e.oom) return PyErr_NoMemory();
        PyErr_SetString(e.frame ? crec_LZ4FrameError : PyExc_ValueError, e.frame ? e.frame : e.records);
        return NULL;
    }
    return crec_holder_import(h, (int64_t)count, importer, schema);
}
