/* Helpers of the emulator tests (emu_test.h). */
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_ref.h"
#include "emu_test.h"
#include "gemm_ref.h"
#include "tools/check.h"

char *
et_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		return NULL;
	}
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[n] = 0;
	*len = (size_t)n;
	return buf;
}

int
et_glob(const char *pattern, char ***paths)
{
	glob_t g;
	int r = glob(pattern, 0, NULL, &g);
	*paths = NULL;
	if (r == GLOB_NOMATCH)
		return 0;
	if (r)
		return -1;
	char **v = calloc(g.gl_pathc + 1, sizeof *v);
	for (size_t i = 0; v && i < g.gl_pathc; i++)
		v[i] = strdup(g.gl_pathv[i]);
	int n = (int)g.gl_pathc;
	globfree(&g);
	*paths = v;
	return v ? n : -1;
}

void
et_free_list(char **paths, int n)
{
	for (int i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

int
et_open_for(const char *target, KrtDevice **dev, KrtErr *err)
{
	int ordinal = strncmp(target, "sm_90", 5) == 0 ? 1 : 0;
	return krt_device_open(dev, "emu", ordinal, err);
}

/* ---- numbers -------------------------------------------------------------------- */

static uint64_t
rng(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
normal(uint64_t *s)
{
	double u1 = ((double)(rng(s) >> 11) + 1.0) / 9007199254740993.0;
	double u2 = (double)(rng(s) >> 11) / 9007199254740992.0;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint32_t
f32_bits(float f)
{
	uint32_t b;
	memcpy(&b, &f, 4);
	return b;
}

static float
bits_f32(uint32_t b)
{
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static uint16_t
to_bf16(float f)
{
	uint32_t b = f32_bits(f);
	b += 0x7fffu + ((b >> 16) & 1u);
	return (uint16_t)(b >> 16);
}

static double
from_bf16(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

/* |x| < 65504, normal range only: N(0,1) inputs */
static uint16_t
to_fp16(float f)
{
	uint32_t b = f32_bits(f);
	uint32_t s = (b >> 16) & 0x8000u;
	int e = (int)((b >> 23) & 0xff) - 127 + 15;
	uint32_t m = b & 0x7fffffu;
	if (e <= 0)
		return (uint16_t)s; /* flush tiny values: they are not drawn here */
	uint32_t r = (uint32_t)e << 10 | m >> 13;
	uint32_t rem = m & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (r & 1)))
		r++;
	return (uint16_t)(s | r);
}

static double
from_fp16(uint16_t h)
{
	int e = (h >> 10) & 0x1f;
	double m = h & 0x3ff;
	double v = e ? ldexp(1024.0 + m, e - 25) : ldexp(m, -24);
	return h & 0x8000 ? -v : v;
}

/* ---- gemm ---------------------------------------------------------------------------- */

static int
param_index(const KrtAbi *a, const char *name)
{
	for (int i = 0; i < a->nparams; i++)
		if (strcmp(a->params[i].name, name) == 0)
			return i;
	return -1;
}

static uint32_t
gemm_kblock(const KrtAbi *abi)
{
	const char *v = krt_abi_shape(abi, "kblock");
	return v ? (uint32_t)strtoul(v, NULL, 10) : 0;
}

uint32_t
et_gemm_k(const KrtAbi *abi, uint32_t K)
{
	uint32_t b = gemm_kblock(abi);
	return b ? (K + b - 1) / b * b : K;
}

/* Quantizes n values v (stride 1) at scale s into E4M3 codes q and their
 * exact dequantized values d. */
static void
bs_quant(const double *v, size_t n, float s, uint8_t *q, double *d, size_t stride)
{
	for (size_t i = 0; i < n; i++) {
		q[i * stride] = decode_f64_to_e4m3(v[i] / (double)s);
		d[i * stride] = decode_e4m3_to_f64(q[i * stride]) * (double)s;
	}
}

static float
bs_block(uint64_t *s, double *v, size_t n)
{
	double mul = ldexp(1.0, (int)(rng(s) % 7) - 3), amax = 0.0;
	for (size_t i = 0; i < n; i++) {
		v[i] = normal(s) * mul;
		amax = fmax(amax, fabs(v[i]));
	}
	return amax > 0 ? (float)(amax / 448.0) : 1.0f;
}

/* The block-scaled inputs: E4M3 codes into ha/hb (1 byte each), the
 * dequantized values into da/db, the scales into sa [K/blk][M] and sb
 * [cdiv(N,blk)][K/blk]. */
static void
bs_draw(uint64_t *s, uint32_t M, uint32_t N, uint32_t K, uint32_t blk, uint8_t *ha, uint8_t *hb,
        double *da, double *db, float *sa, float *sb, int e8)
{
	uint32_t nkb = K / blk;
	double v[128 * 128];
	for (uint32_t m = 0; m < M; m++)
		for (uint32_t kb = 0; kb < nkb; kb++) {
			float sc = bs_block(s, v, blk);
			size_t o = (size_t)m * K + (size_t)kb * blk;
			sa[(size_t)kb * M + m] = sc;
			bs_quant(v, blk, sc, ha + o, da + o, 1);
		}
	for (uint32_t nb = 0; nb * blk < N; nb++)
		for (uint32_t kb = 0; kb < nkb; kb++) {
			uint32_t rows = N - nb * blk < blk ? N - nb * blk : blk;
			float sc = bs_block(s, v, (size_t)rows * blk);
			if (e8) {
				/* UE8M0 SB (--scale-b ue8m0): the power of two at or above */
				int e = (int)ceil(log2((double)sc)) + 127;
				e = e < 1 ? 1 : e > 254 ? 254 : e;
				((uint8_t *)sb)[(size_t)nb * nkb + kb] = (uint8_t)e;
				sc = ldexpf(1.0f, e - 127);
			} else {
				sb[(size_t)nb * nkb + kb] = sc;
			}
			for (uint32_t i = 0; i < rows; i++) {
				size_t o = (size_t)(nb * blk + i) * K + (size_t)kb * blk;
				bs_quant(v + (size_t)i * blk, blk, sc, hb + o, db + o, 1);
			}
		}
}

/* MXFP8 (--scale mx32): E4M3 codes with a UE8M0 per 32 of K of every row,
 * the power of two that brings the block's largest value to at most 448;
 * the factors into 512-byte images (gemm_mx_sf_index; rows past `rows`
 * keep 127, i.e. 1). */
static void
mx_draw(uint64_t *s, uint32_t rows, uint32_t K, uint8_t *q, double *d, uint8_t *sf, size_t sfbytes)
{
	double v[32];
	memset(sf, 127, sfbytes);
	for (uint32_t m = 0; m < rows; m++)
		for (uint32_t k = 0; k < K; k += 32) {
			bs_block(s, v, 32);
			double amax = 0.0;
			for (int i = 0; i < 32; i++)
				amax = fmax(amax, fabs(v[i]));
			int e = amax > 0 ? (int)ceil(log2(amax / 448.0)) + 127 : 127;
			e = e < 1 ? 1 : e > 254 ? 254 : e;
			sf[gemm_mx_sf_index(m, k, K)] = (uint8_t)e;
			for (int i = 0; i < 32; i++) {
				size_t o = (size_t)m * K + k + (size_t)i;
				q[o] = decode_f64_to_e4m3(ldexp(v[i], 127 - e));
				d[o] = ldexp(decode_e4m3_to_f64(q[o]), e - 127);
			}
		}
}

static int et_check(KrtDevice *dev, KrtModule *mod, const CheckShape *sh, uint64_t seed, CheckFill fill,
                    EtFmha *res);

/* FP4 (A e2m1: MXFP4 or NVFP4; or B e2m1p under e4m3 A; docs/ABI.md
 * "gemm") runs through the checker (tools/check_gemm.c), edge fill: blocks
 * whose factors differ by up to 2^16 */
static int
gemm_fp4(KrtDevice *dev, KrtModule *mod, uint32_t M, uint32_t N, uint32_t K, uint64_t seed, EtGemm *res)
{
	CheckShape shape = {3, {M, N, K}};
	EtFmha f;
	int rc = et_check(dev, mod, &shape, seed, CHECK_FILL_EDGE, &f);

	res->max_err = f.max_err;
	res->tol = f.tol;
	res->bad = f.bad;
	res->rc = f.rc;
	res->err = f.err;
	snprintf(res->first_bad, sizeof res->first_bad, "%s", f.first_bad);
	return rc;
}

int
et_gemm(KrtDevice *dev, KrtModule *mod, uint32_t M, uint32_t N, uint32_t K, uint64_t seed,
        EtGemm *res)
{
	const KrtAbi *abi = krt_module_abi(mod);
	int keep = res->keep;
	memset(res, 0, sizeof *res);
	res->keep = keep;
	int ia = param_index(abi, "A"), ib = param_index(abi, "B"), ic = param_index(abi, "C");
	int im = param_index(abi, "M"), in_ = param_index(abi, "N"), ik = param_index(abi, "K");
	int isa = param_index(abi, "SA"), isb = param_index(abi, "SB");
	uint32_t blk = gemm_kblock(abi);
	if ((ia >= 0 && strcmp(abi->params[ia].dtype, "e2m1") == 0) ||
	    (ib >= 0 && strcmp(abi->params[ib].dtype, "e2m1p") == 0))
		return gemm_fp4(dev, mod, M, N, K, seed, res);
	if (ia < 0 || ib < 0 || ic < 0 || im < 0 || in_ < 0 || ik < 0 ||
	    (blk && (isa < 0 || isb < 0 || blk > 128 || K % blk))) {
		snprintf(res->err.msg, sizeof res->err.msg, "kernel %s: not a gemm ABI (A B C M N K, "
		         "and SA SB with K=%u a multiple of kblock <= 128 when block-scaled)", abi->kernel, K);
		return -1;
	}
	int mx = blk && strcmp(abi->params[isa].dtype, "ue8m0") == 0;
	int e8 = blk && !mx && strcmp(abi->params[isb].dtype, "ue8m0") == 0;
	int fp16 = strcmp(abi->params[ia].dtype, "fp16") == 0;
	int out32 = strcmp(abi->params[ic].dtype, "f32") == 0;
	size_t es = blk ? 1 : 2;
	size_t na = (size_t)M * K, nb = (size_t)N * K, nc = (size_t)M * N;
	/* scale bytes: fp32 per block (block128), or the mx32 images */
	size_t nsa = blk ? (size_t)(K / blk) * M * 4 : 0, nsb = blk ? (size_t)((N + blk - 1) / blk) * (K / blk) * 4 : 0;
	if (mx) {
		nsa = (size_t)(M + 127) / 128 * (K / 128) * 512;
		nsb = (size_t)(N + 127) / 128 * (K / 128) * 512;
	}
	uint8_t *ha = malloc(na * es), *hb = malloc(nb * es);
	double *da = malloc(na * sizeof *da), *db = malloc(nb * sizeof *db);
	float *hsa = malloc(nsa + 4), *hsb = malloc(nsb + 4);
	void *hc = malloc(nc * (out32 ? 4 : 2));
	uint64_t s = seed;
	int rc = -1;
	KrtPtr pa = 0, pb = 0, pc = 0, psa = 0, psb = 0;
	if (!ha || !hb || !da || !db || !hc || !hsa || !hsb)
		goto done;
	if (mx) {
		mx_draw(&s, M, K, ha, da, (uint8_t *)hsa, nsa);
		mx_draw(&s, N, K, hb, db, (uint8_t *)hsb, nsb);
	} else if (blk)
		bs_draw(&s, M, N, K, blk, ha, hb, da, db, hsa, hsb, e8);
	else
		for (size_t i = 0; i < na + nb; i++) {
			float v = (float)normal(&s);
			uint16_t h = fp16 ? to_fp16(v) : to_bf16(v);
			double d = fp16 ? from_fp16(h) : from_bf16(h);
			if (i < na) {
				((uint16_t *)ha)[i] = h;
				da[i] = d;
			} else {
				((uint16_t *)hb)[i - na] = h;
				db[i - na] = d;
			}
		}
	KrtErr *err = &res->err;
	if (krt_alloc(dev, na * es, &pa, err) || krt_alloc(dev, nb * es, &pb, err) ||
	    krt_alloc(dev, nc * (out32 ? 4 : 2), &pc, err) || krt_upload(dev, pa, ha, na * es, err) ||
	    krt_upload(dev, pb, hb, nb * es, err) ||
	    krt_memset8(dev, pc, 0xff, nc * (out32 ? 4 : 2), err))
		goto done;
	if (blk && (krt_alloc(dev, nsa, &psa, err) || krt_alloc(dev, nsb, &psb, err) ||
	            krt_upload(dev, psa, hsa, nsa, err) || krt_upload(dev, psb, hsb, nsb, err)))
		goto done;
	KrtArg args[KRT_MAX_PARAMS];
	memset(args, 0, sizeof args);
	args[ia].kind = KRT_ARG_TMAP;
	args[ia].v.t = (KrtTensor){.ptr = pa, .rank = 2, .dims = {K, M}, .strides = {es, (uint64_t)K * es}};
	args[ib].kind = KRT_ARG_TMAP;
	args[ib].v.t = (KrtTensor){.ptr = pb, .rank = 2, .dims = {K, N}, .strides = {es, (uint64_t)K * es}};
	args[ic].kind = KRT_ARG_PTR;
	args[ic].v.p = pc;
	if (blk) {
		args[isa].kind = args[isb].kind = KRT_ARG_PTR;
		args[isa].v.p = psa;
		args[isb].v.p = psb;
	}
	args[im].kind = KRT_ARG_U32;
	args[im].v.u32 = M;
	args[in_].kind = KRT_ARG_U32;
	args[in_].v.u32 = N;
	args[ik].kind = KRT_ARG_U32;
	args[ik].v.u32 = K;
	res->rc = krt_launch(mod, args, abi->nparams, NULL, err);
	if (res->rc)
		goto done;
	if (krt_download(dev, hc, pc, nc * (out32 ? 4 : 2), err))
		goto done;
	res->tol = out32 ? 1e-3 : 1e-2;
	/* sm_90a FP8: the wgmma's truncating accumulation may add up to
	 * GEMM_WGMMA_FP8_BOUND of Σ|a·b| to the tolerance's error */
	double fp8_bound = es == 1 && strncmp(abi->target, "sm_90", 5) == 0 ? GEMM_WGMMA_FP8_BOUND : 0.0;
	for (uint32_t m = 0; m < M; m++)
		for (uint32_t n = 0; n < N; n++) {
			double ref = 0, sq = 0, abs_sum = 0;
			for (uint32_t k = 0; k < K; k++) {
				double p = da[(size_t)m * K + k] * db[(size_t)n * K + k];
				ref += p;
				sq += p * p;
				abs_sum += fabs(p);
			}
			size_t i = (size_t)m * N + n;
			double got = out32 ? (double)((float *)hc)[i] : from_bf16(((uint16_t *)hc)[i]);
			double den = fmax(fabs(ref), sqrt(sq) / 8) + fp8_bound * abs_sum / res->tol;
			double e = den > 0 ? fabs(got - ref) / den : fabs(got - ref);
			if (!isfinite(got))
				e = INFINITY;
			if (e > res->max_err)
				res->max_err = e;
			if (!(e <= res->tol) && res->bad++ == 0)
				snprintf(res->first_bad, sizeof res->first_bad,
				         "C[%u][%u] = %.6g, reference %.6g (rel err %.3g)", m, n, got, ref, e);
		}
	rc = res->bad ? 1 : 0;
	if (keep) {
		res->out = hc;
		res->out_bytes = nc * (out32 ? 4 : 2);
		hc = NULL;
	}
done:
	krt_free(dev, psa, NULL);
	krt_free(dev, psb, NULL);
	krt_free(dev, pa, NULL);
	krt_free(dev, pb, NULL);
	krt_free(dev, pc, NULL);
	free(ha);
	free(hb);
	free(da);
	free(db);
	free(hsa);
	free(hsb);
	free(hc);
	return rc;
}

/* ---- fmha --------------------------------------------------------------------------- */

int
et_arg(const KrtAbi *abi, const char *name, int def)
{
	char key[64];
	snprintf(key, sizeof key, "--%s ", name);
	const char *s = strstr(abi->args, key);
	return s ? atoi(s + strlen(key)) : def;
}

const char *
et_args_word(const KrtAbi *abi, const char *name, char *buf, size_t n)
{
	char key[64];
	snprintf(key, sizeof key, "--%s ", name);
	const char *s = strstr(abi->args, key);
	buf[0] = 0;
	if (s) {
		s += strlen(key);
		size_t i = 0;
		while (s[i] && s[i] != ' ' && i + 1 < n) {
			buf[i] = s[i];
			i++;
		}
		buf[i] = 0;
	}
	return buf;
}

static uint16_t *
rand_half(size_t n, int fp16, uint64_t *s, double **exact)
{
	uint16_t *h = malloc(n * 2);
	*exact = malloc(n * sizeof **exact);
	for (size_t i = 0; h && *exact && i < n; i++) {
		float v = (float)normal(s);
		h[i] = fp16 ? to_fp16(v) : to_bf16(v);
		(*exact)[i] = fp16 ? from_fp16(h[i]) : from_bf16(h[i]);
	}
	return h;
}

int
et_fmha(KrtDevice *dev, KrtModule *mod, const EtFmhaShape *sh, uint64_t seed, EtFmha *res)
{
	const KrtAbi *abi = krt_module_abi(mod);
	int keep = res->keep;
	memset(res, 0, sizeof *res);
	res->keep = keep;
	int D = et_arg(abi, "head-dim", 128), Dv = et_arg(abi, "head-dim-v", 0);
	int Hq = et_arg(abi, "heads-q", 16), Hkv = et_arg(abi, "heads-kv", 16);
	int shared = et_arg(abi, "kv-shared", 0);
	char w[64];
	int causal = strcmp(et_args_word(abi, "mask", w, sizeof w), "causal") == 0;
	/* window: keys i+Sk-Sq-left .. i+Sk-Sq+right (docs/ABI.md) */
	int window = strcmp(et_args_word(abi, "mask", w, sizeof w), "window") == 0;
	int wleft = et_arg(abi, "window-left", 0), wright = et_arg(abi, "window-right", 0);
	int fp16 = strcmp(et_args_word(abi, "dtype", w, sizeof w), "fp16") == 0;
	if (Dv == 0)
		Dv = D;
	/* softmax_scale is a run-time f32 argument (docs/ABI.md): a seed-drawn
	 * one in [0.75, 1.25]/sqrt(D), so a kernel that ignored it and applied
	 * 1/sqrt(D) fails; the reference uses the same f32 value. */
	uint64_t ss = seed ^ 0x5ca1e;
	double scale = (double)(float)((0.75 + 0.5 * (double)(rng(&ss) >> 11) * 0x1p-53) /
	                               sqrt((double)D));
	int iq = param_index(abi, "Q"), ik = param_index(abi, "K"), iv = param_index(abi, "V");
	int io = param_index(abi, "O"), il = param_index(abi, "LSE");
	int icq = param_index(abi, "cu_seqlens_q"), ick = param_index(abi, "cu_seqlens_k");
	int imax = param_index(abi, "max_seqlen_q"), ib = param_index(abi, "batch");
	int isc = param_index(abi, "softmax_scale");
	if (iq < 0 || ik < 0 || io < 0 || icq < 0 || ick < 0 || imax < 0 || ib < 0 || isc < 0 ||
	    (iv < 0 && !shared) || sh->batch > 8) {
		snprintf(res->err.msg, sizeof res->err.msg, "kernel %s: not an fmha ABI", abi->kernel);
		return -1;
	}
	int32_t cuq[9], cuk[9];
	uint32_t maxq = 0;
	cuq[0] = cuk[0] = 0;
	for (uint32_t b = 0; b < sh->batch; b++) {
		cuq[b + 1] = cuq[b] + (int32_t)sh->sq[b];
		cuk[b + 1] = cuk[b] + (int32_t)sh->sk[b];
		if (sh->sq[b] > maxq)
			maxq = sh->sq[b];
	}
	size_t tq = (size_t)cuq[sh->batch], tk = (size_t)cuk[sh->batch];
	size_t nq = tq * (size_t)Hq * (size_t)D, nk = tk * (size_t)Hkv * (size_t)D;
	size_t nv = tk * (size_t)Hkv * (size_t)Dv, no = tq * (size_t)Hq * (size_t)Dv;
	uint64_t s = seed;
	double *dq = NULL, *dk = NULL, *dv = NULL;
	uint16_t *hq = rand_half(nq ? nq : 1, fp16, &s, &dq), *hk = rand_half(nk ? nk : 1, fp16, &s, &dk);
	uint16_t *hv = shared ? NULL : rand_half(nv ? nv : 1, fp16, &s, &dv);
	if (shared)
		dv = dk;
	uint16_t *ho = malloc((no ? no : 1) * 2);
	float *hl = malloc((tq ? tq : 1) * (size_t)Hq * 4);
	double *p = malloc((tk ? tk : 1) * sizeof *p);
	double *orow = malloc((size_t)Dv * sizeof *orow);
	KrtPtr bq = 0, bk = 0, bv = 0, bo = 0, bl = 0, bcq = 0, bck = 0;
	KrtErr *err = &res->err;
	int rc = -1;
	if (!hq || !hk || (!shared && !hv) || !ho || !hl || !p || !orow || !dq || !dk || !dv)
		goto done;
	if (krt_alloc(dev, nq * 2 + 16, &bq, err) || krt_alloc(dev, nk * 2 + 16, &bk, err) ||
	    (!shared && krt_alloc(dev, nv * 2 + 16, &bv, err)) || krt_alloc(dev, no * 2 + 16, &bo, err) ||
	    krt_alloc(dev, tq * (size_t)Hq * 4 + 16, &bl, err) || krt_alloc(dev, 64, &bcq, err) ||
	    krt_alloc(dev, 64, &bck, err) || krt_upload(dev, bq, hq, nq * 2 + (nq == 0), err) ||
	    krt_upload(dev, bk, hk, nk * 2 + (nk == 0), err) ||
	    (!shared && krt_upload(dev, bv, hv, nv * 2 + (nv == 0), err)) ||
	    krt_memset8(dev, bo, 0xff, no * 2 + 16, err) ||
	    krt_memset8(dev, bl, 0xff, tq * (size_t)Hq * 4 + 16, err) ||
	    krt_upload(dev, bcq, cuq, (sh->batch + 1) * 4, err) ||
	    krt_upload(dev, bck, cuk, (sh->batch + 1) * 4, err))
		goto done;
	KrtArg args[KRT_MAX_PARAMS];
	memset(args, 0, sizeof args);
	uint64_t rows_q = tq ? tq : 1, rows_k = tk ? tk : 1;
	args[iq].kind = KRT_ARG_TMAP;
	args[iq].v.t = (KrtTensor){.ptr = bq, .rank = 3, .dims = {(uint64_t)D, (uint64_t)Hq, rows_q},
	                           .strides = {2, (uint64_t)D * 2, (uint64_t)Hq * D * 2}};
	args[ik].kind = KRT_ARG_TMAP;
	args[ik].v.t = (KrtTensor){.ptr = bk, .rank = 3, .dims = {(uint64_t)D, (uint64_t)Hkv, rows_k},
	                           .strides = {2, (uint64_t)D * 2, (uint64_t)Hkv * D * 2}};
	if (iv >= 0) {
		args[iv].kind = KRT_ARG_TMAP;
		args[iv].v.t = (KrtTensor){.ptr = bv, .rank = 3,
		                           .dims = {(uint64_t)Dv, (uint64_t)Hkv, rows_k},
		                           .strides = {2, (uint64_t)Dv * 2, (uint64_t)Hkv * Dv * 2}};
	}
	args[io].kind = KRT_ARG_PTR;
	args[io].v.p = bo;
	if (il >= 0) {
		args[il].kind = KRT_ARG_PTR;
		args[il].v.p = bl;
	}
	args[icq].kind = KRT_ARG_PTR;
	args[icq].v.p = bcq;
	args[ick].kind = KRT_ARG_PTR;
	args[ick].v.p = bck;
	args[imax].kind = KRT_ARG_U32;
	args[imax].v.u32 = maxq;
	args[ib].kind = KRT_ARG_U32;
	args[ib].v.u32 = sh->batch;
	args[isc].kind = KRT_ARG_F32;
	args[isc].v.f32 = (float)scale;
	res->rc = krt_launch(mod, args, abi->nparams, NULL, err);
	if (res->rc)
		goto done;
	if (krt_download(dev, ho, bo, no * 2, err) ||
	    (il >= 0 && krt_download(dev, hl, bl, tq * (size_t)Hq * 4, err)))
		goto done;
	res->tol = 1e-2;
	res->lse_tol = 1e-3;
	for (uint32_t b = 0; b < sh->batch; b++) {
		int Sq = (int)sh->sq[b], Sk = (int)sh->sk[b];
		for (int h = 0; h < Hq; h++) {
			int kvh = h / (Hq / Hkv);
			for (int i = 0; i < Sq; i++) {
				size_t qrow = (size_t)(cuq[b] + i);
				const double *qv = dq + (qrow * (size_t)Hq + (size_t)h) * (size_t)D;
				int last = causal ? i + Sk - Sq : window ? i + Sk - Sq + wright : Sk - 1;
				int first = window ? i + Sk - Sq - wleft : 0;
				if (last > Sk - 1)
					last = Sk - 1;
				if (first < 0)
					first = 0;
				if (first > last + 1)
					first = last + 1;
				double mx = -INFINITY, sum = 0;
				for (int j = first; j <= last; j++) {
					const double *kv = dk + ((size_t)(cuk[b] + j) * (size_t)Hkv + (size_t)kvh) * (size_t)D;
					double dot = 0;
					for (int d = 0; d < D; d++)
						dot += qv[d] * kv[d];
					p[j] = scale * dot;
					if (p[j] > mx)
						mx = p[j];
				}
				for (int j = first; j <= last; j++) {
					p[j] = exp(p[j] - mx);
					sum += p[j];
				}
				double lse = last >= first ? mx + log(sum) : -INFINITY;
				/* O row against its largest element, as tools/check_fmha.c does:
				 * P is rounded to bf16 before P.V, so tiny entries of a row carry
				 * the row's absolute error */
				double rowmax = 0;
				for (int d = 0; d < Dv; d++) {
					double ref = 0;
					for (int j = first; j <= last; j++)
						ref += p[j] / sum *
						       dv[((size_t)(cuk[b] + j) * (size_t)Hkv + (size_t)kvh) * (size_t)Dv + (size_t)d];
					orow[d] = ref;
					rowmax = fmax(rowmax, fabs(ref));
				}
				for (int d = 0; d < Dv; d++) {
					double ref = orow[d];
					size_t at = (qrow * (size_t)Hq + (size_t)h) * (size_t)Dv + (size_t)d;
					double got = fp16 ? from_fp16(ho[at]) : from_bf16(ho[at]);
					double e = rowmax > 0 ? fabs(got - ref) / rowmax : fabs(got - ref);
					if (!isfinite(got))
						e = INFINITY;
					if (e > res->max_err)
						res->max_err = e;
					if (!(e <= res->tol) && res->bad++ == 0)
						snprintf(res->first_bad, sizeof res->first_bad,
						         "O[seq %u row %d head %d][%d] = %.6g, reference %.6g (rel err %.3g)",
						         b, i, h, d, got, ref, e);
				}
				if (il >= 0) {
					double got = hl[(size_t)h * tq + qrow];
					double e = isinf(lse) ? (isinf(got) && got < 0 ? 0 : INFINITY)
					                      : fabs(got - lse) / fmax(1.0, fabs(lse));
					if (e > res->lse_err)
						res->lse_err = e;
					if (!(e <= res->lse_tol) && res->bad++ == 0)
						snprintf(res->first_bad, sizeof res->first_bad,
						         "LSE[head %d][seq %u row %d] = %.8g, reference %.8g", h, b, i,
						         got, lse);
				}
			}
		}
	}
	rc = res->bad ? 1 : 0;
	if (keep && (res->out = malloc(no * 2 + tq * (size_t)Hq * 4 + 1)) != NULL) {
		memcpy(res->out, ho, no * 2);
		if (il >= 0)
			memcpy((char *)res->out + no * 2, hl, tq * (size_t)Hq * 4);
		res->o_bytes = no * 2;
		res->out_bytes = no * 2 + (il >= 0 ? tq * (size_t)Hq * 4 : 0);
	}
done:
	krt_free(dev, bq, NULL);
	krt_free(dev, bk, NULL);
	krt_free(dev, bv, NULL);
	krt_free(dev, bo, NULL);
	krt_free(dev, bl, NULL);
	krt_free(dev, bcq, NULL);
	krt_free(dev, bck, NULL);
	free(hq);
	free(hk);
	free(hv);
	free(dq);
	free(dk);
	if (!shared)
		free(dv);
	free(ho);
	free(hl);
	free(p);
	free(orow);
	return rc;
}

/* One case through the checker (check_run), its result in res. */
static int
et_check(KrtDevice *dev, KrtModule *mod, const CheckShape *sh, uint64_t seed, CheckFill fill, EtFmha *res)
{
	CheckShape shape = *sh;
	CheckResult cr;
	char *buf = NULL;
	size_t blen = 0;
	FILE *log = open_memstream(&buf, &blen);
	CheckOpts o = {.seed = seed, .fill = fill, .max_report = 1, .log = log};
	int rc;

	memset(res, 0, sizeof *res);
	memset(&cr, 0, sizeof cr);
	rc = check_run(dev, mod, &shape, &o, &cr, &res->err);
	if (log)
		fclose(log);
	if (buf) {
		/* the first mismatch line of the report */
		const char *l = strstr(buf, "\n  ");
		snprintf(res->first_bad, sizeof res->first_bad, "%.255s", l ? l + 3 : buf);
		free(buf);
	}
	res->max_err = cr.max_err;
	res->tol = cr.tol;
	res->lse_err = cr.lse_err;
	res->lse_tol = cr.lse_tol;
	res->bad = cr.bad + cr.unwritten + cr.guard_bad;
	if (rc)
		return res->rc = -1;
	return res->rc = cr.pass ? 0 : 1;
}

int
et_decode(KrtDevice *dev, KrtModule *mod, uint32_t batch, uint32_t sq, uint32_t splits, uint64_t seed,
          EtFmha *res)
{
	/* decode_merge (tools/check_decode_merge.c): batch x s_q x parts */
	int merge = strcmp(krt_module_abi(mod)->family, "decode_merge") == 0;
	CheckShape shape = merge ? (CheckShape){3, {batch, sq, splits}} : (CheckShape){6, {batch, sq, 0, 0, 0, splits}};

	return et_check(dev, mod, &shape, seed, CHECK_FILL_NORMAL, res);
}

int
et_indexer(KrtDevice *dev, KrtModule *mod, uint32_t batch, uint32_t sq, uint32_t max_len, uint32_t splits,
           uint64_t seed, EtFmha *res)
{
	CheckShape shape = {5, {batch, sq, max_len, 0, splits}};

	/* the edge fill: the k-th score shared by many keys in every pass */
	return et_check(dev, mod, &shape, seed, CHECK_FILL_EDGE, res);
}

int
et_gemm_moe(KrtDevice *dev, KrtModule *mod, uint32_t M, uint32_t N, uint32_t K, uint32_t E, uint64_t seed,
            EtFmha *res)
{
	CheckShape shape = {4, {M, N, K, E}};

	/* the edge fill: blocks whose scales differ by up to 2^16 */
	return et_check(dev, mod, &shape, seed, CHECK_FILL_EDGE, res);
}

int
et_topk(KrtDevice *dev, KrtModule *mod, uint32_t rows, uint32_t n, uint64_t seed, int edge, EtFmha *res)
{
	CheckShape shape = {2, {rows, n}};

	return et_check(dev, mod, &shape, seed, edge ? CHECK_FILL_EDGE : CHECK_FILL_NORMAL, res);
}
