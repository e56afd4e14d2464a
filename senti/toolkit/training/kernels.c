/* senti's CPU training kernels: float32, contiguous row-major tensors, forward and backward.
 *
 * Built on first use by senti/toolkit/training/native.py (gcc -O3 -march=native -fopenmp) and called through ctypes
 * on the buffers of Paddle tensors. Each replaces a Paddle CPU kernel that measured far slower than PyTorch's on the
 * same shapes (docs/results/training-speed.md): GELU, layer norm, dropout, and the attention core, whose heads are
 * read and written in place inside [batch, tokens, heads x head width] with strided matrix products (MKL's sgemm,
 * from Paddle's wheel), so no head is split, transposed or merged by a copy.
 *
 * Dropout draws no state: element i of a call keeps when a hash of (seed, i) is at or above p x 2^32, so a mask
 * depends on the seed alone, never on the thread count or the order of work.
 */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* MKL's CBLAS (LP64), as exported by Paddle's libmklml_intel.so. */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
void cblas_sgemm(int layout, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
int MKL_Set_Num_Threads_Local(int n); /* the C binding (lower case is Fortran's, by pointer) */

/* glibc's vector math (libmvec) has erff and expf for every SIMD width: this lets the loops below call them. */
float erff(float) __attribute__((simd("notinbranch")));
float expf(float) __attribute__((simd("notinbranch")));

#define SMALL 16384 /* below this many elements a loop runs on one thread */

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
void senti_dropout_fwd(const float *x, float *y, uint8_t *keep, int64_t n, float p, uint64_t seed, int threads) {
    const uint32_t threshold = drop_threshold(p);
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd num_threads(n < SMALL ? 1 : threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint8_t k = keep_hash(seed + (uint64_t)i) >= threshold;
        keep[i] = k;
        y[i] = k ? x[i] * scale : 0.0f;
    }
}

void senti_dropout_bwd(const float *dy, const uint8_t *keep, float *dx, int64_t n, float p, int threads) {
    const float scale = 1.0f / (1.0f - p);
#pragma omp parallel for simd num_threads(n < SMALL ? 1 : threads) schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] = keep[i] ? dy[i] * scale : 0.0f;
}

/* ---- GELU, the exact (erf) form: y = x/2 (1 + erf(x / sqrt 2)) ---- */
void senti_gelu_fwd(const float *x, float *y, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(n < SMALL ? 1 : threads) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

void senti_gelu_bwd(const float *x, const float *dy, float *dx, int64_t n, int threads) {
#pragma omp parallel for simd num_threads(n < SMALL ? 1 : threads) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * 0.70710678118654752f));
        float pdf = 0.39894228040143268f * expf(-0.5f * x[i] * x[i]);
        dx[i] = dy[i] * (cdf + x[i] * pdf);
    }
}

/* ---- layer norm over the last axis (width `cols`), with the row means and 1/std kept for the backward ---- */
void senti_layer_norm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *rstd,
                          int64_t rows, int64_t cols, float eps, int threads) {
#pragma omp parallel for num_threads(rows * cols < SMALL ? 1 : threads) schedule(static)
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

void senti_layer_norm_bwd(const float *dy, const float *x, const float *gamma, const float *mean, const float *rstd,
                          float *dx, float *dgamma, float *dbeta, int64_t rows, int64_t cols, int threads) {
    int nt = rows * cols < SMALL ? 1 : threads;
    float *partial = calloc((size_t)nt * 2 * cols, sizeof(float)); /* per thread: dgamma, dbeta */
#pragma omp parallel num_threads(nt)
    {
        float *dg = partial + (size_t)omp_get_thread_num() * 2 * cols;
        float *db = dg + cols;
#pragma omp for schedule(static)
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
                dg[j] += dyr[j] * xhat;
                db[j] += dyr[j];
            }
        }
    }
    for (int64_t j = 0; j < cols; j++) {
        float g = 0.0f, b = 0.0f;
        for (int t = 0; t < nt; t++) {
            g += partial[(size_t)t * 2 * cols + j];
            b += partial[(size_t)t * 2 * cols + cols + j];
        }
        dgamma[j] = g;
        dbeta[j] = b;
    }
    free(partial);
}

/* ---- attention core: out = dropout(softmax(scale q k^T + mask)) v, every head in place ----
 * q, k, v, out: [batch, tokens, heads * width]; mask: [batch, tokens] added to every query's scores (NULL: none);
 * probs: [batch, heads, tokens, tokens], the softmax before dropout, kept for the backward; keep: the same shape,
 * the dropout mask (unused when p = 0). */
static void dropped(const float *probs, const uint8_t *keep, float *to, int64_t n, float p) {
    const float scale = 1.0f / (1.0f - p);
#pragma omp simd
    for (int64_t i = 0; i < n; i++) to[i] = keep[i] ? probs[i] * scale : 0.0f;
}

void senti_attention_fwd(const float *q, const float *k, const float *v, const float *mask, float *out, float *probs,
                         uint8_t *keep, int batch, int tokens, int heads, int width, float scale, float p,
                         uint64_t seed, int threads) {
    const int row = heads * width;
    const int64_t square = (int64_t)tokens * tokens;
    const uint32_t threshold = drop_threshold(p);
#pragma omp parallel num_threads(threads)
    {
        int before = MKL_Set_Num_Threads_Local(1);
        float *buffer = p > 0.0f ? malloc(sizeof(float) * square) : NULL;
#pragma omp for schedule(static)
        for (int bh = 0; bh < batch * heads; bh++) {
            const int b = bh / heads, h = bh % heads;
            const int64_t at = (int64_t)b * tokens * row + (int64_t)h * width;
            float *s = probs + bh * square;
            cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, tokens, tokens, width, scale, q + at, row, k + at, row, 0.0f, s,
                        tokens);
            for (int i = 0; i < tokens; i++) {
                float *si = s + (int64_t)i * tokens;
                float top = -INFINITY, total = 0.0f;
                if (mask) {
                    const float *mb = mask + (int64_t)b * tokens;
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
            const float *weights = s;
            if (p > 0.0f) {
                uint8_t *kb = keep + bh * square;
                const uint64_t base = seed + (uint64_t)(bh * square);
#pragma omp simd
                for (int64_t i = 0; i < square; i++) kb[i] = keep_hash(base + (uint64_t)i) >= threshold;
                dropped(s, kb, buffer, square, p);
                weights = buffer;
            }
            cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, tokens, width, tokens, 1.0f, weights, tokens, v + at, row, 0.0f,
                        out + at, row);
        }
        free(buffer);
        MKL_Set_Num_Threads_Local(before);
    }
}

void senti_attention_bwd(const float *dout, const float *q, const float *k, const float *v, const float *probs,
                         const uint8_t *keep, float *dq, float *dk, float *dv, int batch, int tokens, int heads,
                         int width, float scale, float p, int threads) {
    const int row = heads * width;
    const int64_t square = (int64_t)tokens * tokens;
    const float unscale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
#pragma omp parallel num_threads(threads)
    {
        int before = MKL_Set_Num_Threads_Local(1);
        float *grad = malloc(sizeof(float) * square);
        float *buffer = p > 0.0f ? malloc(sizeof(float) * square) : NULL;
#pragma omp for schedule(static)
        for (int bh = 0; bh < batch * heads; bh++) {
            const int b = bh / heads, h = bh % heads;
            const int64_t at = (int64_t)b * tokens * row + (int64_t)h * width;
            const float *s = probs + bh * square;
            const uint8_t *kb = p > 0.0f ? keep + bh * square : NULL;
            const float *weights = s;
            if (kb) {
                dropped(s, kb, buffer, square, p);
                weights = buffer;
            }
            /* the gradient of the weights after dropout, then of v */
            cblas_sgemm(ROW_MAJOR, NO_TRANS, TRANS, tokens, tokens, width, 1.0f, dout + at, row, v + at, row, 0.0f,
                        grad, tokens);
            cblas_sgemm(ROW_MAJOR, TRANS, NO_TRANS, tokens, width, tokens, 1.0f, weights, tokens, dout + at, row, 0.0f,
                        dv + at, row);
            /* through dropout and softmax: ds = s (dp - sum(dp s)) */
            for (int i = 0; i < tokens; i++) {
                float *gi = grad + (int64_t)i * tokens;
                const float *si = s + (int64_t)i * tokens;
                float dot = 0.0f;
                if (kb) {
                    const uint8_t *ki = kb + (int64_t)i * tokens;
#pragma omp simd
                    for (int j = 0; j < tokens; j++) gi[j] = ki[j] ? gi[j] * unscale : 0.0f;
                }
#pragma omp simd reduction(+ : dot)
                for (int j = 0; j < tokens; j++) dot += gi[j] * si[j];
#pragma omp simd
                for (int j = 0; j < tokens; j++) gi[j] = si[j] * (gi[j] - dot);
            }
            cblas_sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, tokens, width, tokens, scale, grad, tokens, k + at, row, 0.0f,
                        dq + at, row);
            cblas_sgemm(ROW_MAJOR, TRANS, NO_TRANS, tokens, width, tokens, scale, grad, tokens, q + at, row, 0.0f,
                        dk + at, row);
        }
        free(grad);
        free(buffer);
        MKL_Set_Num_Threads_Local(before);
    }
}
