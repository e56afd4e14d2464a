/* senti's CPU training kernels: float32, contiguous row-major tensors, forward and backward.
 *
 * Built ahead of time at install where a C compiler is there (setup.py), else on first use (native.py), with the
 * flags of build.py: no -march=native; each exported kernel is compiled for x86-64-v4 (AVX-512), v3 (AVX2, FMA) and
 * the baseline, and the loader picks the clone this CPU runs (GCC's target_clones, resolved once at load). Called
 * through ctypes on the buffers of Paddle tensors (native.py; docs/results/training-speed.md measures each).
 *
 * Each kernel covers a gap in Paddle's CPU build (3.0-3.3), named above it with its time against PyTorch's (same CPU,
 * shapes and threads; docs/results/training-speed.md): when Paddle closes that gap, the kernel and its binding can
 * go. The attention core reads and writes its heads in place inside [batch, tokens, heads x head width] through
 * MKL's batched sgemm (Paddle's wheel has it: native.py hands its address to senti_use_gemm), so no
 * head is split, transposed or merged by a copy.
 *
 * Threads: the matrix products run on MKL's threads, as Paddle's own do; the element-wise loops run on the calling
 * thread, vectorized. A second thread pool for the loops (OpenMP) measured slower in a whole training step than one
 * thread: its workers spin against MKL's on the same cores.
 *
 * Dropout draws no state: element i of a call keeps when a hash of (seed, i) is at or above p x 2^32, so a mask
 * depends on the seed alone.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifndef SENTI_ISA /* -DSENTI_ISA= builds one version for the compiler's target (experiments/kernel_isa.py) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SENTI_ISA __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SENTI_ISA
#endif
#endif

#ifndef SENTI_SOURCE_DIGEST
#define SENTI_SOURCE_DIGEST "unknown"
#endif

/* The digest of this file when it was built (build.py passes it): a library built from an older source is not
 * loaded. */
const char *senti_source_digest(void) { return SENTI_SOURCE_DIGEST; }

/* MKL's CBLAS batched sgemm (LP64), as exported by Paddle's libmklml_intel.so; its address comes from native.py, so
 * the library links to no MKL of its own and can be built before Paddle is installed. */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_batch_fn)(int layout, const int *trans_a, const int *trans_b, const int *m, const int *n,
                               const int *k, const float *alpha, const float **a, const int *lda, const float **b,
                               const int *ldb, const float *beta, float **c, const int *ldc, int group_count,
                               const int *group_size);
static sgemm_batch_fn sgemm_batch = NULL;

void senti_use_gemm(void *batched_sgemm) { sgemm_batch = (sgemm_batch_fn)batched_sgemm; }

/* glibc's vector math (libmvec) has erff and expf for every SIMD width: this lets the loops below call them. */
float erff(float) __attribute__((simd("notinbranch")));
float expf(float) __attribute__((simd("notinbranch")));

static inline uint32_t keep_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static inline uint32_t drop_threshold(float p) {
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xffffffffu : (uint32_t)t;
}

/* ---- dropout: y = x * keep / (1 - p) ---- */
/* Paddle gap: its CPU dropout, forward and backward, 2.3x PyTorch's time on [32, 128, 1248]. */
SENTI_ISA
void senti_dropout_fwd(const float *x, float *y, uint8_t *keep, int64_t n, float p, uint64_t seed) {
    const uint32_t threshold = drop_threshold(p);
    const float scale = 1.0f / (1.0f - p);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        uint8_t k = keep_hash(seed + (uint64_t)i) >= threshold;
        keep[i] = k;
        y[i] = k ? x[i] * scale : 0.0f;
    }
}

SENTI_ISA
void senti_dropout_bwd(const float *dy, const uint8_t *keep, float *dx, int64_t n, float p) {
    const float scale = 1.0f / (1.0f - p);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] = keep[i] ? dy[i] * scale : 0.0f;
}

/* ---- bfloat16: y = x rounded to the nearest bfloat16 (ties to even), as the top 16 bits of its float32; a NaN stays
 * a (quiet) NaN. The matrix products in bfloat16 are oneDNN's (bf16.py); this only feeds them. */
/* Paddle gap: no bfloat16 matmul kernel on CPU, so the cast to feed oneDNN's GEMM is ours. */
SENTI_ISA
void senti_to_bf16(const float *x, uint16_t *y, int64_t n) {
    const uint32_t *u = (const uint32_t *)x;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = u[i];
        uint32_t rounded = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
        y[i] = (uint16_t)((v & 0x7fffffffu) > 0x7f800000u ? (v >> 16) | 0x40u : rounded);
    }
}

/* ---- a Linear's bias: y[r, :] += bias, and its gradient, the column sums of dy ---- */
/* Paddle gap: its CPU Linear, forward and backward, 2.7x PyTorch's time; its column sum for the bias's gradient
 * was slower than the matmul beside it. */
SENTI_ISA
void senti_bias_add(float *y, const float *bias, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) yr[j] += bias[j];
    }
}

SENTI_ISA
void senti_column_sum(const float *dy, float *out, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; j++) out[j] = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        const float *dyr = dy + r * cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) out[j] += dyr[j];
    }
}

/* ---- GELU, the exact (erf) form: y = x/2 (1 + erf(x / sqrt 2)) ---- */
/* Paddle gap: its CPU GELU (erf), forward and backward, 12.1x PyTorch's time. */
SENTI_ISA
void senti_gelu_fwd(const float *x, float *y, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

static inline float gelu_slope(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

SENTI_ISA
void senti_gelu_bwd(const float *x, const float *dy, float *dx, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * gelu_slope(x[i]);
}

/* ---- layer norm over the last axis (width `cols`), with the row means and 1/std kept for the backward ---- */
/* Paddle gap: its CPU layer norm, forward and backward, 7.6x PyTorch's time. */
SENTI_ISA
void senti_layer_norm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *rstd,
                          int64_t rows, int64_t cols, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float sum = 0.0f, sq = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < cols; j++) sum += xr[j];
        const float mu = sum / (float)cols;
#pragma omp simd reduction(+ : sq)
        for (int64_t j = 0; j < cols; j++) sq += (xr[j] - mu) * (xr[j] - mu);
        const float rs = 1.0f / sqrtf(sq / (float)cols + eps);
        mean[r] = mu;
        rstd[r] = rs;
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) yr[j] = (xr[j] - mu) * rs * gamma[j] + beta[j];
    }
}

SENTI_ISA
void senti_layer_norm_bwd(const float *dy, const float *x, const float *gamma, const float *mean, const float *rstd,
                          float *dx, float *dgamma, float *dbeta, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; j++) dgamma[j] = dbeta[j] = 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        const float mu = mean[r], rs = rstd[r];
        float a = 0.0f, c = 0.0f;
#pragma omp simd reduction(+ : a, c)
        for (int64_t j = 0; j < cols; j++) {
            float gy = dyr[j] * gamma[j];
            a += gy;
            c += gy * (xr[j] - mu) * rs;
        }
        a /= (float)cols;
        c /= (float)cols;
#pragma omp simd
        for (int64_t j = 0; j < cols; j++) {
            float xhat = (xr[j] - mu) * rs;
            dxr[j] = rs * (dyr[j] * gamma[j] - a - xhat * c);
            dgamma[j] += dyr[j] * xhat;
            dbeta[j] += dyr[j];
        }
    }
}

/* ---- attention core: out = dropout(softmax(scale q k^T + mask)) v, every head in place ----
 * q, k, v, out: [batch, tokens, heads * width]; mask: [batch, tokens] added to every query's scores (NULL: none);
 * probs: [batch, heads, tokens, tokens], the softmax before dropout, kept for the backward; keep: the same shape,
 * the dropout mask (unused when p = 0). */
typedef struct {
    int batch, tokens, heads, width;
} Shape;

/* The address of every head's block, in at[0 .. batch x heads): in a [batch, tokens, heads * width] tensor, or
 * (square) the [tokens, tokens] squares of a [batch, heads, tokens, tokens] one. Returns `at`. */
static const float **heads_of(const float *base, Shape s, int square, const float **at) {
    for (int bh = 0; bh < s.batch * s.heads; bh++)
        at[bh] = square ? base + (int64_t)bh * s.tokens * s.tokens
                        : base + (int64_t)(bh / s.heads) * s.tokens * s.heads * s.width + (int64_t)(bh % s.heads) * s.width;
    return at;
}

/* c[i] = alpha op(a[i]) op(b[i]) for every head i, on MKL's threads. */
static void every_head(Shape s, int trans_a, int trans_b, int m, int n, int k, float alpha, const float **a, int lda,
                       const float **b, int ldb, const float **c, int ldc) {
    const float beta = 0.0f;
    const int count = s.batch * s.heads;
    sgemm_batch(ROW_MAJOR, &trans_a, &trans_b, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, (float **)c, &ldc, 1,
                      &count);
}

/* Scratch, allocated by the caller (Paddle): `weights`, [batch, heads, tokens, tokens] floats when p > 0 (the dropped
 * probabilities; unused otherwise), and `slots`, room for 6 (forward) or 9 (backward) x batch x heads addresses. */
/* Paddle gap: MultiHeadAttention's core 1.5x PyTorch's time on CPU, and its split of the heads (reshape,
 * transpose) 121x. */
SENTI_ISA
void senti_attention_fwd(const float *q, const float *k, const float *v, const float *mask, float *out, float *probs,
                         uint8_t *keep, float *weights, const float **slots, int batch, int tokens, int heads,
                         int width, float scale, float p, uint64_t seed) {
    const Shape s = {batch, tokens, heads, width};
    const int row = heads * width;
    const int64_t all = (int64_t)batch * heads * tokens * tokens;
    const int n = batch * heads;
    const float **qh = heads_of(q, s, 0, slots), **kh = heads_of(k, s, 0, slots + n), **vh = heads_of(v, s, 0, slots + 2 * n);
    const float **oh = heads_of(out, s, 0, slots + 3 * n), **ph = heads_of(probs, s, 1, slots + 4 * n);
    every_head(s, NO_TRANS, TRANS, tokens, tokens, width, scale, qh, row, kh, row, ph, tokens);
    for (int64_t i = 0; i < (int64_t)batch * heads * tokens; i++) { /* each query's row of scores */
        float *si = probs + i * tokens;
        float top = -INFINITY, total = 0.0f;
        if (mask) {
            const float *mb = mask + (i / ((int64_t)heads * tokens)) * tokens;
#pragma omp simd
            for (int j = 0; j < tokens; j++) si[j] += mb[j];
        }
#pragma omp simd reduction(max : top)
        for (int j = 0; j < tokens; j++) top = si[j] > top ? si[j] : top;
#pragma omp simd reduction(+ : total)
        for (int j = 0; j < tokens; j++) {
            si[j] = expf(si[j] - top);
            total += si[j];
        }
        const float inv = 1.0f / total;
#pragma omp simd
        for (int j = 0; j < tokens; j++) si[j] *= inv;
    }
    if (p > 0.0f) senti_dropout_fwd(probs, weights, keep, all, p, seed);
    const float **wh = heads_of(p > 0.0f ? weights : probs, s, 1, slots + 5 * n);
    every_head(s, NO_TRANS, NO_TRANS, tokens, width, tokens, 1.0f, wh, tokens, vh, row, oh, row);
}

/* Scratch, allocated by the caller: `grad`, [batch, heads, tokens, tokens] floats; `weights`, the same when p > 0;
 * `slots`, room for 9 x batch x heads addresses. */
SENTI_ISA
void senti_attention_bwd(const float *dout, const float *q, const float *k, const float *v, const float *probs,
                         const uint8_t *keep, float *dq, float *dk, float *dv, float *grad, float *weights,
                         const float **slots, int batch, int tokens, int heads, int width, float scale, float p) {
    const Shape s = {batch, tokens, heads, width};
    const int row = heads * width;
    const int64_t all = (int64_t)batch * heads * tokens * tokens;
    if (p > 0.0f) senti_dropout_bwd(probs, keep, weights, all, p); /* the dropped weights again, as in the forward */
    const int n = batch * heads;
    const float **qh = heads_of(q, s, 0, slots), **kh = heads_of(k, s, 0, slots + n), **vh = heads_of(v, s, 0, slots + 2 * n);
    const float **doh = heads_of(dout, s, 0, slots + 3 * n), **dqh = heads_of(dq, s, 0, slots + 4 * n);
    const float **dkh = heads_of(dk, s, 0, slots + 5 * n), **dvh = heads_of(dv, s, 0, slots + 6 * n);
    const float **gh = heads_of(grad, s, 1, slots + 7 * n);
    const float **wh = heads_of(p > 0.0f ? weights : probs, s, 1, slots + 8 * n);
    /* the gradient of the weights after dropout, then of v */
    every_head(s, NO_TRANS, TRANS, tokens, tokens, width, 1.0f, doh, row, vh, row, gh, tokens);
    every_head(s, TRANS, NO_TRANS, tokens, width, tokens, 1.0f, wh, tokens, doh, row, dvh, row);
    /* through dropout and softmax: ds = s (dp - sum(dp s)) */
    if (p > 0.0f) senti_dropout_bwd(grad, keep, grad, all, p);
    for (int64_t i = 0; i < (int64_t)batch * heads * tokens; i++) {
        float *gi = grad + i * tokens;
        const float *si = probs + i * tokens;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < tokens; j++) dot += gi[j] * si[j];
#pragma omp simd
        for (int j = 0; j < tokens; j++) gi[j] = si[j] * (gi[j] - dot);
    }
    every_head(s, NO_TRANS, NO_TRANS, tokens, width, tokens, scale, gh, tokens, kh, row, dqh, row);
    every_head(s, TRANS, NO_TRANS, tokens, width, tokens, scale, gh, tokens, qh, row, dkh, row);
}
