/*
 * What the record codec (_crecords.c) shares with the lz4 frame reader (_lz4records.c): the
 * column buffers a record walk fills, the walk one record at a time, and the hand-over of the
 * result to Python (a Buffer, or Arrow through the C data interface).
 */
#ifndef PYLOG_CRECORDS_H
#define PYLOG_CRECORDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Smallest encoded record: length, attributes, timestamp delta, offset delta,
 * key length, value length, header count -- one byte each. */
#define MIN_RECORD_BYTES 7
#define MIN_HEADER_BYTES 2

/* A zig-zag varint of at most 5 bytes (Kafka's ByteUtils); -1 when truncated or too long. */
static inline int rd_varint(const uint8_t **pp, const uint8_t *end, int32_t *out) {
    const uint8_t *p = *pp;
    uint32_t raw = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end) return -1;
        uint8_t b = *p++;
        raw |= (uint32_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = (int32_t)((raw >> 1) ^ (0u - (raw & 1u)));
            return 0;
        }
    }
    return -1;
}

/* Growable byte buffer. */
typedef struct {
    char *p;
    size_t len;
    size_t cap;
} GBuf;

/* The columns of a record walk, as Arrow buffers. */
typedef struct {
    GBuf offsets, timestamps;
    GBuf kvalid, koff, kdata;
    GBuf vvalid, voff, vdata;
    GBuf hoff;
    GBuf hkoff, hkdata, hvvalid, hvoff, hvdata;
    int64_t knull, vnull, hvnull, nh;
} DecodeOut;

/* The walk (no GIL needed). Each returns NULL or an error message, with *oom set when the error
 * is an allocation failure. `begin` sizes the buffers for `n` records and about `data_hint`
 * bytes of values; `record` decodes record `i` from *pp (it must lie wholly before `end`) and
 * moves *pp past it; `end_walk` closes the columns of `n` records. `crec_decode_free` frees
 * whatever was allocated (also after a failure). */
const char *crec_decode_begin(DecodeOut *o, size_t n, size_t data_hint, int *oom);
const char *crec_decode_record(const uint8_t **pp, const uint8_t *end, size_t i, long long base_offset,
                               long long base_ts, DecodeOut *o, int *oom);
void crec_decode_end(DecodeOut *o, size_t n);
void crec_decode_free(DecodeOut *o);

/* Decoded records owned until Arrow releases them. */
typedef struct ArrowHolder ArrowHolder;
ArrowHolder *crec_holder_new(void);
DecodeOut *crec_holder_out(ArrowHolder *h);
void crec_holder_free(ArrowHolder *h); /* before the import only */
/* importer(address of an ArrowArray, schema) over `n` decoded records; takes `h` either way. */
PyObject *crec_holder_import(ArrowHolder *h, int64_t n, PyObject *importer, PyObject *schema);

/* A read-only Python buffer over malloc'd memory (takes `data`; frees it on failure). */
PyObject *crec_buffer_new(char *data, size_t size);

/* lz4 frames (_lz4records.c). */
PyObject *crec_set_lz4_block_decoder(PyObject *self, PyObject *arg);
PyObject *crec_lz4_frame_decompress(PyObject *self, PyObject *args);
PyObject *crec_decode_lz4_records_arrow(PyObject *self, PyObject *args);
extern PyObject *crec_LZ4FrameError;

#endif
