/* The global quality metric's search, in one call (critics.quality.GlobalQuality).

For each feature row: the squared distance to every reference point of the progress bin, each
reference's smallest, then the mean of the square roots of the k smallest references.

Right after a physics step the caches are cold, and the same search in numpy took some twenty calls,
each paying to bring numpy's dispatch back; this is one call. The arithmetic is the one the numpy
code did, operation for operation, so every episode keeps its bits:
- offsets are point - feature, squared; even and odd dimensions summed in two running sums
  (the order of the einsum the search began as), then added;
- the k smallest references are summed in ascending order, one after the other (Python 3.11's sum
  over a sorted list; 3.12's sum compensates, so the C gives the published bits on any Python).
Every CPU gives the same bits: the loops over points are elementwise (vectorised or not, each
distance gets the same operations) and the one sum, of the k nearest, runs in order (a C compiler
reorders it only under -ffast-math). Built with -ffp-contract=off (setup.py): a fused multiply-add
would round once where numpy rounds twice. tests/test_critics.py holds the numpy search and checks
the bits against it. Needs only the buffer protocol, not numpy's headers.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* A C-contiguous buffer of 8-byte items of one of ``formats`` ('d': float64; 'q' or 'l': int64). */
static int contiguous(PyObject *obj, Py_buffer *view, const char *formats, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *format = view->format[0] == '<' || view->format[0] == '=' ? view->format + 1 : view->format;
    if (view->itemsize != 8 || strlen(format) != 1 || !strchr(formats, format[0])) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous %s array, got format '%s'", name,
                     formats[0] == 'd' ? "float64" : "int64", view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Squared distances from feature row f to all n_points points (given dimension by dimension), into
even (odd is scratch): dimension by dimension over all points, loops a compiler vectorizes across
points, which leaves each distance's own order of operations as it is. */
static void squared_distances(const double *points, Py_ssize_t n_points, int dims, const double *f,
                              double *even, double *odd) {
    for (int d = 0; d < dims; d++) {
        const double *column = points + d * n_points, at = f[d];
        double *sum = d % 2 ? odd : even;
        if (d < 2)
            for (Py_ssize_t p = 0; p < n_points; p++) {
                double offset = column[p] - at;
                sum[p] = offset * offset;
            }
        else
            for (Py_ssize_t p = 0; p < n_points; p++) {
                double offset = column[p] - at;
                sum[p] = sum[p] + offset * offset;
            }
    }
    if (dims > 1)
        for (Py_ssize_t p = 0; p < n_points; p++)
            even[p] = even[p] + odd[p];
}

static PyObject *mean_nearest(PyObject *self, PyObject *args) {
    PyObject *points_obj, *starts_obj, *features_obj;
    int dims, k;
    if (!PyArg_ParseTuple(args, "OOOii", &points_obj, &starts_obj, &features_obj, &dims, &k))
        return NULL;
    Py_buffer points, starts, features;
    if (contiguous(points_obj, &points, "d", "points") < 0)
        return NULL;
    if (contiguous(starts_obj, &starts, "ql", "starts") < 0) {
        PyBuffer_Release(&points);
        return NULL;
    }
    if (contiguous(features_obj, &features, "d", "features") < 0) {
        PyBuffer_Release(&points);
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *out = NULL;
    Py_ssize_t n_points = points.len / (Py_ssize_t)sizeof(double) / (dims > 0 ? dims : 1);
    Py_ssize_t n_refs = starts.len / (Py_ssize_t)sizeof(int64_t);
    Py_ssize_t n_rows = features.len / (Py_ssize_t)sizeof(double) / (dims > 0 ? dims : 1);
    const int64_t *first = starts.buf;
    double *minima = NULL, *distances = NULL;
    if (dims < 1 || points.len != n_points * dims * (Py_ssize_t)sizeof(double)
        || features.len != n_rows * dims * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError, "points and features must both hold %d-dimensional rows", dims);
        goto done;
    }
    if (n_refs < 1 || k < 1 || k > n_refs) {
        PyErr_Format(PyExc_ValueError, "need 1 <= k <= references, got k=%d and %zd references", k, n_refs);
        goto done;
    }
    for (Py_ssize_t r = 0; r < n_refs; r++) {
        int64_t end = r + 1 < n_refs ? first[r + 1] : n_points;
        if (first[r] < 0 || first[r] >= end || end > n_points) {
            PyErr_SetString(PyExc_ValueError, "starts must rise strictly from 0 and stay below the point count");
            goto done;
        }
    }
    minima = PyMem_Malloc(n_refs * sizeof(double));
    distances = PyMem_Malloc(2 * n_points * sizeof(double));  /* even and odd sums */
    if (!minima || !distances) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(out = PyList_New(n_rows)))
        goto done;
    for (Py_ssize_t i = 0; i < n_rows; i++) {
        const double *f = (const double *)features.buf + i * dims;
        squared_distances(points.buf, n_points, dims, f, distances, distances + n_points);
        for (Py_ssize_t r = 0; r < n_refs; r++) {
            double best = distances[first[r]];
            for (Py_ssize_t p = first[r] + 1, end = r + 1 < n_refs ? first[r + 1] : n_points; p < end; p++)
                if (!(distances[p] >= best))  /* numpy's minimum: a NaN wins */
                    best = distances[p];
            minima[r] = best;
        }
        double sum = 0.0;
        for (int j = 0; j < k; j++) {  /* the j-th smallest, by selection: k is a handful */
            Py_ssize_t smallest = j;
            for (Py_ssize_t r = j + 1; r < n_refs; r++)
                if (minima[r] < minima[smallest])
                    smallest = r;
            double swap = minima[j];
            minima[j] = minima[smallest];
            minima[smallest] = swap;
            sum = sum + sqrt(minima[j]);
        }
        PyObject *mean = PyFloat_FromDouble(sum / k);
        if (!mean) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, mean);
    }
done:
    PyMem_Free(minima);
    PyMem_Free(distances);
    PyBuffer_Release(&points);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&features);
    return out;
}

static PyMethodDef methods[] = {
    {"mean_nearest", mean_nearest, METH_VARARGS,
     "mean_nearest(points, starts, features, dims, k) -> list[float]\n\n"
     "points: (dims, P) float64, C-contiguous; starts: int64, where each reference's points begin;\n"
     "features: (n, dims) float64. For each feature row, the mean of the square roots of the k\n"
     "smallest per-reference minimum squared distances."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nearest", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nearest(void) { return PyModule_Create(&module); }
