/*
 * Avro binary records of a flat schema -> Arrow column buffers, many payloads per call.
 *
 * decode_flat(fields, data, offsets, skip, null_on_error) walks every payload (the bytes between
 * offsets[i] + skip and offsets[i + 1] of `data`; `offsets` is int64) once and appends each field
 * to its column: fixed-width values (bool as one byte, int / enum as int32, long as int64, float,
 * double, fixed as `size` bytes) or int32 offsets + bytes for string / bytes, plus one validity
 * byte per row. A field is (kind, null_branch, size): null_branch >= 0 makes it a two-branch union
 * with null at that branch. Every varint and length is bounds-checked against the payload. A
 * payload that runs out or holds a bad union branch fails its row: with null_on_error its row is
 * marked bad (row_ok 0) and decoding goes on, otherwise decoding stops at that row. The GIL is
 * released while walking the bytes.
 *
 * Must behave exactly like pylog/schema_registry/_pyavro.py.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { K_NULL = 0, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_STRING, K_ENUM, K_FIXED };

typedef struct {
    int kind;
    int null_branch;
    Py_ssize_t size;      /* value width in bytes (fixed-width kinds) */
    char *values;         /* fixed-width values, n * size */
    int32_t *offsets;     /* string / bytes: n + 1 */
    char *data;           /* string / bytes payload */
    Py_ssize_t data_len, data_cap;
    uint8_t *valid;
} Column;

static int width_of(int kind, Py_ssize_t size) {
    switch (kind) {
    case K_BOOLEAN: return 1;
    case K_INT: case K_ENUM: case K_FLOAT: return 4;
    case K_LONG: case K_DOUBLE: return 8;
    case K_FIXED: return (int)size;
    default: return 0;
    }
}

/* zig-zag varint (up to 10 bytes); 0 on success */
static inline int read_long(const uint8_t **p, const uint8_t *end, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    while (1) {
        if (*p >= end || shift > 63) return -1;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
    }
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

static int grow(Column *c, Py_ssize_t need) {
    if (c->data_len + need <= c->data_cap) return 0;
    Py_ssize_t cap = c->data_cap ? c->data_cap : 1024;
    while (cap < c->data_len + need) cap *= 2;
    char *d = realloc(c->data, cap);
    if (!d) return -1;
    c->data = d;
    c->data_cap = cap;
    return 0;
}

/* Append a null / zero entry for row i. */
static void put_null(Column *c, Py_ssize_t i) {
    c->valid[i] = 0;
    if (c->kind == K_STRING) c->offsets[i + 1] = (int32_t)c->data_len;
    else if (c->values) memset(c->values + i * c->size, 0, c->size);
}

/* Decode one field of row i; 0 ok, -1 malformed, -2 out of memory. */
static int read_field(Column *c, Py_ssize_t i, const uint8_t **p, const uint8_t *end) {
    if (c->null_branch >= 0) {
        int64_t branch;
        if (read_long(p, end, &branch)) return -1;
        if (branch == c->null_branch) { put_null(c, i); return 0; }
        if (branch != 1 - c->null_branch) return -1;
    }
    c->valid[i] = 1;
    int64_t v;
    switch (c->kind) {
    case K_NULL:
        c->valid[i] = 0;
        return 0;
    case K_BOOLEAN:
        if (*p >= end) return -1;
        c->values[i] = (char)(*(*p)++ != 0);
        return 0;
    case K_INT: case K_ENUM: {
        if (read_long(p, end, &v)) return -1;
        int32_t x = (int32_t)v;
        memcpy(c->values + i * 4, &x, 4);
        return 0;
    }
    case K_LONG:
        if (read_long(p, end, &v)) return -1;
        memcpy(c->values + i * 8, &v, 8);
        return 0;
    case K_FLOAT: case K_DOUBLE: case K_FIXED:
        if (end - *p < c->size) return -1;
        memcpy(c->values + i * c->size, *p, c->size);
        *p += c->size;
        return 0;
    case K_STRING:
        if (read_long(p, end, &v) || v < 0 || v > end - *p) return -1;
        if (c->data_len + v > INT32_MAX) return -1;
        if (grow(c, (Py_ssize_t)v)) return -2;
        memcpy(c->data + c->data_len, *p, (size_t)v);
        c->data_len += (Py_ssize_t)v;
        *p += v;
        c->offsets[i + 1] = (int32_t)c->data_len;
        return 0;
    }
    return -1;
}

static PyObject *decode_flat(PyObject *self, PyObject *args) {
    PyObject *fields;
    Py_buffer data, offs;
    Py_ssize_t skip;
    int null_on_error;
    if (!PyArg_ParseTuple(args, "Oy*y*np", &fields, &data, &offs, &skip, &null_on_error)) return NULL;
    PyObject *result = NULL;
    Column *cols = NULL;
    PyObject *row_ok = NULL;
    Py_ssize_t k = 0, n = offs.len / 8 - 1;
    if (n < 0) n = 0;
    fields = PySequence_Fast(fields, "fields must be a sequence");
    if (!fields) goto done;
    k = PySequence_Fast_GET_SIZE(fields);
    cols = calloc(k ? k : 1, sizeof(Column));
    if (!cols) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t j = 0; j < k; j++) {
        int kind, nb;
        Py_ssize_t size;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fields, j), "iin", &kind, &nb, &size)) goto done;
        if (kind < K_NULL || kind > K_FIXED || size < 0) {
            PyErr_SetString(PyExc_ValueError, "bad field spec");
            goto done;
        }
        Column *c = &cols[j];
        c->kind = kind;
        c->null_branch = nb;
        c->size = width_of(kind, size);
        c->valid = malloc(n ? n : 1);
        if (!c->valid) { PyErr_NoMemory(); goto done; }
        if (kind == K_STRING) {
            c->offsets = malloc((n + 1) * sizeof(int32_t));
            if (!c->offsets) { PyErr_NoMemory(); goto done; }
            c->offsets[0] = 0;
        } else if (c->size) {
            c->values = malloc(n * c->size ? n * c->size : 1);
            if (!c->values) { PyErr_NoMemory(); goto done; }
        }
    }
    row_ok = PyByteArray_FromStringAndSize(NULL, n);
    if (!row_ok) goto done;
    uint8_t *ok = (uint8_t *)PyByteArray_AS_STRING(row_ok);
    const int64_t *o = (const int64_t *)offs.buf;
    const uint8_t *base = (const uint8_t *)data.buf;
    Py_ssize_t error_row = -1;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t a = o[i] + skip, b = o[i + 1];
        ok[i] = 1;
        Py_ssize_t j = 0;
        if (a > b || b > data.len || o[i] < 0) status = -1;
        else {
            const uint8_t *p = base + a, *end = base + b;
            for (; j < k; j++) {
                status = read_field(&cols[j], i, &p, end);
                if (status) break;
            }
        }
        if (status) {
            if (status == -2 || !null_on_error) { error_row = i; break; }
            ok[i] = 0;
            for (; j < k; j++) put_null(&cols[j], i);
            status = 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (status == -2) { PyErr_NoMemory(); goto done; }
    PyObject *out = PyList_New(k);
    if (!out) goto done;
    for (Py_ssize_t j = 0; j < k; j++) {
        Column *c = &cols[j];
        Py_ssize_t rows = error_row >= 0 ? error_row : n;
        PyObject *valid = PyByteArray_FromStringAndSize((char *)c->valid, rows);
        PyObject *item;
        if (c->kind == K_STRING) {
            PyObject *ob = PyByteArray_FromStringAndSize((char *)c->offsets, (rows + 1) * sizeof(int32_t));
            PyObject *db = PyByteArray_FromStringAndSize(c->data ? c->data : "", c->data_len);
            item = Py_BuildValue("(NNN)", valid, ob, db);
        } else {
            PyObject *vb = PyByteArray_FromStringAndSize(c->values ? c->values : "", rows * c->size);
            item = Py_BuildValue("(NN)", valid, vb);
        }
        if (!item) { Py_DECREF(out); goto done; }
        PyList_SET_ITEM(out, j, item);
    }
    result = Py_BuildValue("(NOn)", out, row_ok, error_row);
done:
    if (cols) {
        for (Py_ssize_t j = 0; j < k; j++) {
            free(cols[j].values);
            free(cols[j].offsets);
            free(cols[j].data);
            free(cols[j].valid);
        }
        free(cols);
    }
    Py_XDECREF(row_ok);
    Py_XDECREF(fields);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_flat", decode_flat, METH_VARARGS,
     "decode_flat(fields, data, offsets, skip, null_on_error) -> (columns, row_ok, error_row)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_cavro", "C accelerator: flat Avro records -> Arrow column buffers.", -1, methods,
};

PyMODINIT_FUNC PyInit__cavro(void) { return PyModule_Create(&moduledef); }
