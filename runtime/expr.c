typedef int kgen_placeholder_t; /* stub: replaced by its owner */
