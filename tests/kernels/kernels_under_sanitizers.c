/* Every kernel of senti/kernels/kernels.c called once on small odd shapes, built with AddressSanitizer and
 * UndefinedBehaviorSanitizer by test_kernel_sanitizers.py: a read or write past a buffer, or undefined behaviour,
 * stops the program with the sanitizer's report. Each buffer is its own allocation of exactly the size the kernel's
 * comment gives, so an overrun lands in ASan's red zone. A few values are checked so a kernel that does nothing
 * fails too. Prints "ok" at the end. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* MKL's batched sgemm (the program links Paddle's MKL), handed to the kernels as native.py does */
void cblas_sgemm_batch(int layout, const int *trans_a, const int *trans_b, const int *m, const int *n, const int *k,
                       const float *alpha, const float **a, const int *lda, const float **b, const int *ldb,
                       const float *beta, float **c, const int *ldc, int group_count, const int *group_size);
void senti_use_gemm(void *batched_sgemm);
void senti_dropout_fwd(const float *x, float *y, uint8_t *keep, int64_t n, float p, uint64_t seed);
void senti_dropout_bwd(const float *dy, const uint8_t *keep, float *dx, int64_t n, float p);
void senti_to_bf16(const float *x, uint16_t *y, int64_t n);
void senti_bias_add(float *y, const float *bias, int64_t rows, int64_t cols);
void senti_column_sum(const float *dy, float *out, int64_t rows, int64_t cols);
void senti_gelu_fwd(const float *x, float *y, int64_t n);
void senti_gelu_bwd(const float *x, const float *dy, float *dx, int64_t n);
void senti_layer_norm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *rstd,
                          int64_t rows, int64_t cols, float eps);
void senti_layer_norm_bwd(const float *dy, const float *x, const float *gamma, const float *mean, const float *rstd,
                          float *dx, float *dgamma, float *dbeta, int64_t rows, int64_t cols);
void senti_attention_fwd(const float *q, const float *k, const float *v, const float *mask, float *out, float *probs,
                         uint8_t *keep, float *weights, const float **slots, int batch, int tokens, int heads,
                         int width, float scale, float p, uint64_t seed);
void senti_attention_bwd(const float *dout, const float *q, const float *k, const float *v, const float *probs,
                         const uint8_t *keep, float *dq, float *dk, float *dv, float *grad, float *weights,
                         const float **slots, int batch, int tokens, int heads, int width, float scale, float p);

static float *floats(int64_t n, unsigned seed) {
    float *a = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) a[i] = (float)((i * 2654435761u + seed) % 1000) / 500.0f - 1.0f;
    return a;
}

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "wrong result: %s\n", what);
        exit(2);
    }
}

static void elementwise(void) {
    const int64_t rows = 7, cols = 13, n = rows * cols;
    float *x = floats(n, 1), *y = floats(n, 2), *dx = floats(n, 3), *bias = floats(cols, 4), *sum = floats(cols, 5);
    uint8_t *keep = malloc((size_t)n);
    uint16_t *half = malloc(sizeof(uint16_t) * (size_t)n);
    senti_dropout_fwd(x, y, keep, n, 0.3f, 11);
    senti_dropout_bwd(x, keep, dx, n, 0.3f);
    x[0] = -1.0f;
    senti_to_bf16(x, half, n);
    check(half[0] == 0xbf80, "bf16 of -1");
    senti_bias_add(y, bias, rows, cols);
    senti_column_sum(x, sum, rows, cols);
    senti_gelu_fwd(x, y, n);
    senti_gelu_bwd(x, y, dx, n);
    float *gamma = floats(cols, 6), *beta = floats(cols, 7), *mean = malloc(sizeof(float) * rows);
    float *rstd = malloc(sizeof(float) * rows), *dgamma = floats(cols, 8), *dbeta = floats(cols, 9);
    senti_layer_norm_fwd(x, gamma, beta, y, mean, rstd, rows, cols, 1e-5f);
    check(isfinite(rstd[rows - 1]) && rstd[rows - 1] > 0, "layer norm's 1/std");
    senti_layer_norm_bwd(x, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols);
    free(x), free(y), free(dx), free(bias), free(sum), free(keep), free(half), free(gamma), free(beta), free(mean);
    free(rstd), free(dgamma), free(dbeta);
}

static void attention(float p) {
    const int batch = 3, tokens = 5, heads = 2, width = 4;
    const int64_t act = (int64_t)batch * tokens * heads * width, sq = (int64_t)batch * heads * tokens * tokens;
    float *q = floats(act, 1), *k = floats(act, 2), *v = floats(act, 3), *out = floats(act, 4), *mask = floats(batch * tokens, 5);
    float *probs = floats(sq, 6), *weights = floats(sq, 7), *grad = floats(sq, 8);
    float *dq = floats(act, 9), *dk = floats(act, 10), *dv = floats(act, 11);
    uint8_t *keep = malloc((size_t)sq);
    const float **slots = malloc(sizeof(float *) * 9 * batch * heads);
    senti_attention_fwd(q, k, v, mask, out, probs, keep, weights, slots, batch, tokens, heads, width, 0.5f, p, 3);
    float row = 0.0f;
    for (int j = 0; j < tokens; j++) row += probs[(sq - tokens) + j];
    check(fabsf(row - 1.0f) < 1e-5f, "a softmax row sums to 1");
    senti_attention_bwd(out, q, k, v, probs, keep, dq, dk, dv, grad, weights, slots, batch, tokens, heads, width,
                        0.5f, p);
    free(q), free(k), free(v), free(out), free(mask), free(probs), free(weights), free(grad), free(dq), free(dk);
    free(dv), free(keep), free(slots);
}

int main(void) {
    senti_use_gemm((void *)cblas_sgemm_batch);
    elementwise();
    attention(0.0f);
    attention(0.25f);
    puts("ok");
    return 0;
}
