/*
 * What the C programs of the provider's tests share: the pass/fail count that each prints as
 * "N passed, N failed" (provider/tests/provider.rs looks for " passed, 0 failed"), the CHECK
 * that counts, a monotonic clock and a bounded read of one completion.
 */
#ifndef RINGFAB_TESTS_CHECK_H
#define RINGFAB_TESTS_CHECK_H

#include <stdio.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

static int passed, failed;

/* Counts `cond`; a failure prints where, the condition and the printf-style message. */
#define CHECK(cond, ...)                                                                       \
	do {                                                                                   \
		if (cond) {                                                                    \
			passed++;                                                              \
		} else {                                                                       \
			failed++;                                                              \
			printf("FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
			printf(__VA_ARGS__);                                                   \
			printf("\n");                                                          \
		}                                                                              \
	} while (0)

/* Seconds on the monotonic clock. */
static inline double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads one entry of `cq` (data format), retrying -FI_EAGAIN for up to 5 s: what fi_cq_read
 * returned last. */
static inline ssize_t read_one(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	double t0 = now_s();
	ssize_t ret;
	do {
		ret = fi_cq_read(cq, e, 1);
	} while (ret == -FI_EAGAIN && now_s() - t0 < 5);
	return ret;
}

#endif
