/* The C API the Python package calls through ctypes (kgen/_native.py):
 * the generator (gen/kgen.h) and libkrt (runtime/krt.h) are linked whole
 * into this library and called directly; the few functions here only turn
 * their error structs into caller-owned message buffers and report the
 * struct sizes that the Python side lays out by hand. The Python module
 * init is empty: the library is an extension module only to be importable
 * wherever the package is installed (KGP_NO_PYTHON builds it without: a
 * plain shared library for KGEN_NATIVE). */
#ifndef KGP_NO_PYTHON
#include <Python.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen/kgen.h"
#include "runtime/krt.h"

#define KGP_API __attribute__((visibility("default")))

/* Generates family's PTX with CLI-style arguments; on failure copies the
 * generator's one-line message into msg. *ptx is freed with kgp_free. */
KGP_API int
kgp_generate(const char *family, int nargs, const char *const *args, char **ptx, size_t *len,
             char *msg, size_t n)
{
	KgErr err = {{0}};
	int rc = kgen_generate(family, nargs, args, ptx, len, &err);

	if (rc && n)
		snprintf(msg, n, "%s", err.msg);
	return rc;
}

KGP_API void
kgp_free(void *p)
{
	free(p);
}

/* sizeof(KrtArg) and sizeof(KrtErr), checked against the Python layout. */
KGP_API size_t
kgp_sizeof_arg(void)
{
	return sizeof(KrtArg);
}

KGP_API size_t
kgp_sizeof_err(void)
{
	return sizeof(KrtErr);
}

#ifndef KGP_NO_PYTHON
static struct PyModuleDef knative_module = {
	PyModuleDef_HEAD_INIT, "_knative",
	"kgen's generator and libkrt, called through ctypes (kgen._native)", -1, NULL,
	NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__knative(void);

PyMODINIT_FUNC
PyInit__knative(void)
{
	return PyModule_Create(&knative_module);
}
#endif
