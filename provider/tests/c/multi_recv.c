/*
 * FI_MULTI_RECV through libfabric's C API on the ringfab provider: node r (emu:igb) asks
 * fi_getinfo for FI_MULTI_RECV and posts multi-receive buffers, node s (emu:e1000e) sends to
 * it. What fi_endpoint(3) and fi_cq(3) say of them: messages packed one after another, the
 * buffer released (FI_MULTI_RECV) when less than FI_OPT_MIN_MULTI_RECV is left, a cancelled
 * buffer, and what is refused. Prints "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "check.h"

#define BUF (16 * 1024)
#define MIN 100

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	char *buf;
	char name[8];
};

static int open_node(struct node *n, const char *domain, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->name);
	int ret;

	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = caps;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info);
	fi_freeinfo(hints);
	CHECK(ret == 0, "fi_getinfo(%s): %d", domain, ret);
	if (ret)
		return ret;
	CHECK(fi_fabric(n->info->fabric_attr, &n->fabric, NULL) == 0, "fi_fabric");
	ret = fi_domain(n->fabric, n->info, &n->domain, NULL);
	CHECK(ret == 0, "fi_domain(%s): %d", domain, ret);
	if (ret)
		return ret;
	CHECK(fi_cq_open(n->domain, &cq_attr, &n->cq, NULL) == 0, "fi_cq_open");
	CHECK(fi_av_open(n->domain, &av_attr, &n->av, NULL) == 0, "fi_av_open");
	n->buf = calloc(1, BUF);
	ret = fi_mr_reg(n->domain, n->buf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &n->mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	ret = fi_endpoint(n->domain, n->info, &n->ep, NULL);
	CHECK(ret == 0, "fi_endpoint: %d", ret);
	if (ret)
		return ret;
	CHECK(fi_ep_bind(n->ep, &n->av->fid, 0) == 0, "fi_ep_bind(av)");
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV) == 0, "fi_ep_bind(cq)");
	/* fi_endpoint(3): "It is recommended that applications that want to override the
	 * default MIN_MULTI_RECV value set this option before enabling the corresponding
	 * endpoint." */
	ret = fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &(size_t){ MIN },
			sizeof(size_t));
	CHECK(ret == 0, "fi_setopt(FI_OPT_MIN_MULTI_RECV): %d", ret);
	CHECK(fi_enable(n->ep) == 0, "fi_enable");
	ret = fi_getname(&n->ep->fid, n->name, &len);
	CHECK(ret == 0 && len == 8, "fi_getname: %d", ret);
	return ret;
}

static void close_node(struct node *n)
{
	CHECK(fi_close(&n->ep->fid) == 0, "fi_close(ep)");
	CHECK(fi_close(&n->mr->fid) == 0, "fi_close(mr)");
	CHECK(fi_close(&n->cq->fid) == 0, "fi_close(cq)");
	CHECK(fi_close(&n->av->fid) == 0, "fi_close(av)");
	CHECK(fi_close(&n->domain->fid) == 0, "fi_close(domain)");
	CHECK(fi_close(&n->fabric->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(n->info);
	free(n->buf);
}

/* Reads one entry, retrying -FI_EAGAIN for up to 5 s. */
/* Posts the multi-receive buffer `len` bytes at `buf` of node r. */
static ssize_t post_multi(struct node *r, char *buf, size_t len, void *ctx)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	void *desc = fi_mr_desc(r->mr);
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1, .context = ctx };
	return fi_recvmsg(r->ep, &msg, FI_MULTI_RECV);
}

/* Sends `len` bytes of `byte` from node s. */
static ssize_t send_fill(struct node *s, fi_addr_t to, size_t len, char byte)
{
	memset(s->buf, byte, len);
	return fi_send(s->ep, s->buf, len, fi_mr_desc(s->mr), to, NULL);
}

/* Whether `len` bytes at `p` are all `byte`. */
static int all(const char *p, size_t len, char byte)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != byte)
			return 0;
	return 1;
}

int main(void)
{
	struct node r = { 0 }, s = { 0 };
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t to_r;
	size_t max, len, off = 0, sizes[4];
	char *mbuf;
	int mctx, ctx;
	ssize_t ret;

	if (open_node(&r, "emu:igb", FI_MSG | FI_MULTI_RECV) ||
	    open_node(&s, "emu:e1000e", FI_MSG)) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	/* fi_getinfo(3) gives FI_MULTI_RECV when asked, and only then. */
	CHECK(r.info->caps & FI_MULTI_RECV, "FI_MULTI_RECV asked for and given");
	CHECK(!(s.info->caps & FI_MULTI_RECV), "FI_MULTI_RECV not asked for, not given");
	ret = fi_av_insert(s.av, r.name, 1, &to_r, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);

	/* A buffer of one largest message and 1124 bytes: two small messages back to back, one
	 * of the largest size, one that leaves less than MIN. */
	max = s.info->ep_attr->max_msg_size;
	if (r.info->ep_attr->max_msg_size < max)
		max = r.info->ep_attr->max_msg_size;
	len = max + 1124;
	mbuf = r.buf;
	sizes[0] = 256;
	sizes[1] = 256;
	sizes[2] = max;
	sizes[3] = len - 512 - max - (MIN - 8);
	ret = post_multi(&r, mbuf, len, &mctx);
	CHECK(ret == 0, "fi_recvmsg(FI_MULTI_RECV): %zd", ret);
	CHECK(send_fill(&s, to_r, sizes[0], 'a') == 0, "fi_send");
	CHECK(send_fill(&s, to_r, sizes[1], 'b') == 0, "fi_send");
	for (int i = 0; i < 4; i++) {
		if (i >= 2)
			CHECK(send_fill(&s, to_r, sizes[i], 'a' + i) == 0, "fi_send %d", i);
		ret = read_one(r.cq, &e);
		/* fi_endpoint(3): "Received messages will be packed into the receive buffer until
		 * the buffer has been consumed." */
		CHECK(ret == 1 && e.op_context == &mctx && (e.flags & FI_RECV) &&
			      e.buf == mbuf + off && e.len == sizes[i] &&
			      all(mbuf + off, sizes[i], 'a' + i),
		      "message %d: %zd, buf +%td, len %zu", i, ret, (char *)e.buf - mbuf, e.len);
		/* fi_cq(3): "This completion flag indicates that the original receive buffer
		 * referenced by the completion has been consumed and was released by the
		 * provider.  Providers may set this flag on the last message that is received
		 * into the multi-recv buffer" — and fi_endpoint(3): "The buffer will be released
		 * by the provider when the available buffer space falls below the specified
		 * minimum (see FI_OPT_MIN_MULTI_RECV)." */
		CHECK(!!(e.flags & FI_MULTI_RECV) == (i == 3), "message %d: FI_MULTI_RECV %d", i,
		      !!(e.flags & FI_MULTI_RECV));
		off += sizes[i];
	}
	CHECK(len - off < MIN, "released with %zu bytes left", len - off);
	ret = fi_cq_read(r.cq, &e, 1);
	CHECK(ret == -FI_EAGAIN, "nothing more from the released buffer: %zd", ret);

	/* Released, it takes nothing more: the next message goes to the next receive. */
	ret = fi_recv(r.ep, r.buf + 8192, 2048, fi_mr_desc(r.mr), 0, &ctx);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	CHECK(send_fill(&s, to_r, 10, 'z') == 0, "fi_send");
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx && e.len == 10 && !(e.flags & FI_MULTI_RECV),
	      "the plain receive after it: %zd", ret);

	/* A cancelled multi-receive buffer: one error entry, FI_ECANCELED, releasing it. */
	ret = post_multi(&r, mbuf, len, &mctx);
	CHECK(ret == 0, "fi_recvmsg(FI_MULTI_RECV): %zd", ret);
	ret = fi_cancel(&r.ep->fid, &mctx);
	CHECK(ret == 0, "fi_cancel: %zd", ret);
	ret = read_one(r.cq, &e);
	CHECK(ret == -FI_EAVAIL, "after cancel: %zd", ret);
	memset(&err, 0, sizeof(err));
	ret = fi_cq_readerr(r.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &mctx &&
		      (err.flags & FI_MULTI_RECV),
	      "fi_cq_readerr: %zd, err %d, flags %#llx", ret, err.err,
	      (unsigned long long)err.flags);
	ret = fi_cq_read(r.cq, &e, 1);
	CHECK(ret == -FI_EAGAIN, "one entry for the cancelled buffer: %zd", ret);
	ret = fi_cancel(&r.ep->fid, &mctx);
	CHECK(ret == -FI_ENOENT, "fi_cancel of a released buffer: %zd", ret);

	/* Refused: a buffer below the minimum, and multi-receive on an endpoint not made for
	 * it. */
	ret = post_multi(&r, mbuf, MIN - 1, &mctx);
	CHECK(ret == -FI_EINVAL, "a buffer below FI_OPT_MIN_MULTI_RECV: %zd", ret);
	ret = post_multi(&s, s.buf, 4096, &mctx);
	CHECK(ret == -FI_EBADFLAGS, "FI_MULTI_RECV without the capability: %zd", ret);

	close_node(&r);
	close_node(&s);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
