typedef int kgen_placeholder_t; /* stub */
