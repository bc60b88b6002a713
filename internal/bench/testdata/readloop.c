// readloop.c: an independent read floor for cmd/bench --cfloor.
//
// A plain streaming read of a float32 buffer with OpenMP threads, a static
// schedule (each thread one contiguous share) and the widest vector loads
// the compiler targets (-march=native: 512-bit with AVX-512, 256-bit with
// AVX2, 128-bit with NEON, scalar otherwise), summing into independent
// accumulators so nothing but the loads bounds it. It shares no code with
// umbra: its time is what this machine reads that many bytes in, against
// which umbra's own read floor and search are judged.
//
// cmd/bench builds it at run time (gcc -O3 -march=native -fopenmp) and
// drives it over pipes, so that its passes take turns with umbra's in one
// run:
//
//	readloop FLOATS THREADS
//
// allocates FLOATS floats (64-byte aligned), writes them on the threads
// that will read them (same static schedule), prints "ready <threads>
// <isa>", then for each line "pass" on stdin times one pass and prints
// "<nanoseconds> <sum>"; end of input ends it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

static long long now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

#if defined(__AVX512F__)
#define ISA "avx512"
#define LANES 16
#elif defined(__AVX2__)
#define ISA "avx2"
#define LANES 8
#elif defined(__ARM_NEON)
#define ISA "neon"
#define LANES 4
#else
#define ISA "scalar"
#define LANES 1
#endif
#define STEP (4 * LANES)

// pass reads d[0:n) once; n is a multiple of STEP.
static float pass(const float *d, long n) {
	float total = 0;
#pragma omp parallel reduction(+ : total)
	{
#if defined(__AVX512F__)
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
		for (long i = 0; i < n; i += STEP) {
			a0 = _mm512_add_ps(a0, _mm512_load_ps(d + i));
			a1 = _mm512_add_ps(a1, _mm512_load_ps(d + i + 16));
			a2 = _mm512_add_ps(a2, _mm512_load_ps(d + i + 32));
			a3 = _mm512_add_ps(a3, _mm512_load_ps(d + i + 48));
		}
		total += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(__AVX2__)
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
		for (long i = 0; i < n; i += STEP) {
			a0 = _mm256_add_ps(a0, _mm256_load_ps(d + i));
			a1 = _mm256_add_ps(a1, _mm256_load_ps(d + i + 8));
			a2 = _mm256_add_ps(a2, _mm256_load_ps(d + i + 16));
			a3 = _mm256_add_ps(a3, _mm256_load_ps(d + i + 24));
		}
		float o[8];
		_mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
		for (int k = 0; k < 8; k++) total += o[k];
#elif defined(__ARM_NEON)
		float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
#pragma omp for schedule(static)
		for (long i = 0; i < n; i += STEP) {
			a0 = vaddq_f32(a0, vld1q_f32(d + i));
			a1 = vaddq_f32(a1, vld1q_f32(d + i + 4));
			a2 = vaddq_f32(a2, vld1q_f32(d + i + 8));
			a3 = vaddq_f32(a3, vld1q_f32(d + i + 12));
		}
		total += vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
#else
		float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp for schedule(static)
		for (long i = 0; i < n; i += STEP) {
			a0 += d[i];
			a1 += d[i + 1];
			a2 += d[i + 2];
			a3 += d[i + 3];
		}
		total += (a0 + a1) + (a2 + a3);
#endif
	}
	return total;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: readloop FLOATS THREADS\n");
		return 2;
	}
	long n = atol(argv[1]);
	int threads = atoi(argv[2]);
	if (n <= 0 || threads <= 0) {
		fprintf(stderr, "readloop: FLOATS and THREADS must be positive\n");
		return 2;
	}
	n = (n + STEP - 1) / STEP * STEP;
	omp_set_num_threads(threads);
	float *d = aligned_alloc(64, (size_t)n * sizeof(float));
	if (d == NULL) {
		fprintf(stderr, "readloop: cannot allocate %ld floats\n", n);
		return 1;
	}
	// First touch on the reading threads, in the reading schedule.
#pragma omp parallel for schedule(static)
	for (long i = 0; i < n; i += STEP)
		for (long j = 0; j < STEP; j++) d[i + j] = (float)((i + j) % 7) * 0.125f;
	int got = 0;
#pragma omp parallel
	{
#pragma omp single
		got = omp_get_num_threads();
	}
	printf("ready %d %s\n", got, ISA);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) != NULL) {
		if (strncmp(line, "pass", 4) != 0) {
			fprintf(stderr, "readloop: unknown command %s", line);
			return 2;
		}
		long long t0 = now_ns();
		float s = pass(d, n);
		long long t = now_ns() - t0;
		printf("%lld %g\n", t, s);
		fflush(stdout);
	}
	free(d);
	return 0;
}
