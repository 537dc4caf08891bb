/* The names of launch-argument kinds (KrtArgKind) as messages and the
 * //@args header spell them, for every file that reports on arguments. */
#include "internal.h"
#include "krt.h"

static const char *const kind_names[] = {
	[KRT_ARG_TMAP] = "tmap", [KRT_ARG_PTR] = "ptr", [KRT_ARG_U32] = "u32",
	[KRT_ARG_S32] = "s32",   [KRT_ARG_U64] = "u64", [KRT_ARG_F32] = "f32",
};

const char *
krt_arg_kind_name(KrtArgKind k)
{
	return (unsigned)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k] : "?";
}
