/* The MoE layouts' expert tables (docs/ABI.md, "MoE layouts") checked on
 * the caller's host copy before a launch: the kernel clamps what it reads
 * into the rows it owns, so a bad table cannot write outside C, but it
 * would silently compute the wrong experts. */
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "krt.h"

int
krt_moe_check(const KrtAbi *abi, const int32_t *v, uint32_t E, uint32_t M, KrtErr *err)
{
	const char *lay = krt_abi_shape(abi, "moe");

	if (!lay)
		return KRT_OK;
	int masked = strcmp(lay, "masked") == 0;
	if (!masked && strcmp(lay, "contiguous") != 0)
		return krt_errf(err, KRT_EABI, "kernel %s: //@shape moe=%s: expected contiguous or masked",
		                abi->kernel, lay);
	if (E == 0)
		return krt_errf(err, KRT_EINVAL, "kernel %s: E=0: a MoE launch needs at least one expert",
		                abi->kernel);
	if (!v)
		return krt_errf(err, KRT_EINVAL, "kernel %s: %s: no host copy given", abi->kernel,
		                masked ? "counts" : "offsets");
	if (masked) {
		for (uint32_t e = 0; e < E; e++)
			if (v[e] < 0 || (uint32_t)v[e] > M)
				return krt_errf(err, KRT_EINVAL,
				                "kernel %s: counts[%u]=%d: must be in 0..M=%u (the rows of "
				                "expert %u's slab)", abi->kernel, e, (int)v[e], M, e);
		return KRT_OK;
	}
	if (v[0] < 0)
		return krt_errf(err, KRT_EINVAL, "kernel %s: offsets[0]=%d: must be >= 0 (a row of A)",
		                abi->kernel, (int)v[0]);
	for (uint32_t e = 0; e < E; e++)
		if (v[e + 1] < v[e])
			return krt_errf(err, KRT_EINVAL,
			                "kernel %s: offsets[%u]=%d: must be >= offsets[%u]=%d (non-decreasing: "
			                "expert %u owns rows offsets[%u]..offsets[%u]-1)", abi->kernel, e + 1,
			                (int)v[e + 1], e, (int)v[e], e, e, e + 1);
	if ((uint32_t)v[E] > M)
		return krt_errf(err, KRT_EINVAL, "kernel %s: offsets[%u]=%d: must be <= M=%u (the rows of A "
		                "and C)", abi->kernel, E, (int)v[E], M);
	return KRT_OK;
}
