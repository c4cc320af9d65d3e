/*
 * FI_MSG_PREFIX through libfabric's C API on the ringfab provider: node r (emu:igb) receives,
 * node s (emu:e1000e) sends, both asking fi_getinfo for the prefix mode. What fi_getinfo(3),
 * fi_endpoint(3), fi_msg(3) and fi_cq(3) say of it, and that the application's buffers are
 * handed to the NIC without a copy: the frame the NIC received lands, header and all, where
 * the application's buffer is, and the header core wrote for a send is in the application's
 * own prefix. Prints "N passed, N failed".
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

#define BUF (64 * 1024)
/* A slot of a receive long enough to be lent (the receive queue's buffers are 2 KiB). */
#define SLOT 4096
#define SLOTS 8
/* Where the short receives go in node r's buffer. */
#define SHORT_AT (SLOTS * SLOT + 4096)
/* ringfab's header on Ethernet: destination and source MAC, EtherType 0x88b5, 16 bytes. */
#define HEADER 30

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	unsigned char *buf;
	unsigned char name[8];
};

static struct fi_info *getinfo(const char *domain, uint64_t mode, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int ret;

	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = caps;
	hints->mode = mode;
	hints->tx_attr->iov_limit = 2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	CHECK(ret == 0, "fi_getinfo(%s): %d", domain, ret);
	return ret ? NULL : info;
}

static int open_node(struct node *n, const char *domain)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->name);
	int ret;

	n->info = getinfo(domain, FI_MSG_PREFIX, FI_MSG);
	if (!n->info)
		return -1;
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
	/* Every lent buffer went back, so every core region closed: a region still open keeps
	 * the domain busy (-FI_EBUSY). */
	CHECK(fi_close(&n->domain->fid) == 0, "fi_close(domain)");
	CHECK(fi_close(&n->fabric->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(n->info);
	free(n->buf);
}

/* Reads one entry, retrying -FI_EAGAIN for up to 5 s. */
/* Byte `i` of message `seed`'s payload. */
static unsigned char pattern(int seed, size_t i)
{
	return (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static void fill(unsigned char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, i);
}

static int matches(const unsigned char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, i))
			return 0;
	return 1;
}

static int all(const unsigned char *p, size_t len, unsigned char byte)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != byte)
			return 0;
	return 1;
}

/* Whether the `HEADER` bytes at `h` are ringfab's frame header from node `from` to `to`:
 * the Ethernet addresses are the first 6 bytes of each endpoint's name (its MAC). */
static int is_header(const unsigned char *h, const struct node *from, const struct node *to)
{
	return memcmp(h, to->name, 6) == 0 && memcmp(h + 6, from->name, 6) == 0 &&
	       h[12] == 0x88 && h[13] == 0xb5;
}

int main(void)
{
	struct node r = { 0 }, s = { 0 };
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	struct fi_info *plain, *multi;
	struct fid_mr *mr2;
	unsigned char *rb, *sb, *b2;
	fi_addr_t to_r;
	size_t P, pad, max;
	int rctx, sctx, ctx[SLOTS], round;
	ssize_t ret;

	/* fi_getinfo(3): "On output, providers will clear mode bits that are not necessary to
	 * achieve high-performance.  Mode bits that remain set indicate application
	 * requirements for using the fabric interfaces created using the returned fi_info." */
	plain = getinfo("emu:igb", 0, FI_MSG);
	CHECK(plain && !(plain->mode & FI_MSG_PREFIX), "no prefix mode unless supported");
	/* fi_endpoint(3): "This field will be 0 unless the FI_MSG_PREFIX mode is enabled." */
	CHECK(plain && plain->ep_attr->msg_prefix_size == 0, "msg_prefix_size %zu",
	      plain ? plain->ep_attr->msg_prefix_size : 0);
	fi_freeinfo(plain);
	multi = getinfo("emu:igb", FI_MSG_PREFIX, FI_MSG | FI_MULTI_RECV);
	CHECK(multi && !(multi->mode & FI_MSG_PREFIX),
	      "cleared for multi-receive buffers, which are filled by copying");
	fi_freeinfo(multi);

	if (open_node(&r, "emu:igb") || open_node(&s, "emu:e1000e")) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	rb = r.buf;
	sb = s.buf;
	P = r.info->ep_attr->msg_prefix_size;
	pad = P - HEADER;
	CHECK(r.info->mode & FI_MSG_PREFIX, "FI_MSG_PREFIX kept: mode %#llx",
	      (unsigned long long)r.info->mode);
	/* fi_getinfo(3): "Providers are required to define a msg_prefix_size that is a multiple
	 * of 8 bytes." — ringfab's 30-byte header, rounded up. */
	CHECK(P == 32 && P % 8 == 0, "msg_prefix_size %zu", P);
	CHECK(s.info->ep_attr->msg_prefix_size == P, "the same on the e1000e");
	/* fi_endpoint(3), of tx_attr->mode and rx_attr->mode: "On return from fi_getinfo(3),
	 * the mode will be set only to those constraints specific to transmit operations" (and
	 * receive operations): the prefix is one of each. */
	CHECK((r.info->tx_attr->mode & FI_MSG_PREFIX) && (r.info->rx_attr->mode & FI_MSG_PREFIX),
	      "tx_attr->mode %#llx, rx_attr->mode %#llx",
	      (unsigned long long)r.info->tx_attr->mode, (unsigned long long)r.info->rx_attr->mode);
	max = r.info->ep_attr->max_msg_size;
	ret = fi_av_insert(s.av, r.name, 1, &to_r, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);

	/* A receive long enough to be lent, and a send of one buffer: both in place. */
	memset(rb, 0xaa, SLOT);
	memset(sb, 0xee, P);
	fill(sb + P, 1000, 1);
	ret = fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &rctx);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	/* fi_getinfo(3): "The buffer pointer given to all send and receive operations must point
	 * to the start of the prefix region of the buffer (as opposed to the payload)." */
	ret = fi_send(s.ep, sb, P + 1000, fi_mr_desc(s.mr), to_r, &sctx);
	CHECK(ret == 0, "fi_send: %zd", ret);
	ret = read_one(r.cq, &e);
	/* fi_cq(3): "If an endpoint has been configured with the FI_MSG_PREFIX mode, the len
	 * also reflects the size of the prefix buffer." */
	CHECK(ret == 1 && e.op_context == &rctx && (e.flags & FI_RECV) && e.len == P + 1000,
	      "receive: %zd, len %zu", ret, e.len);
	CHECK(matches(rb + P, 1000, 1), "the payload, byte for byte, behind the prefix");
	/* Zero copy: the NIC wrote the whole frame into the application's buffer — ringfab's
	 * header fills the prefix's last 30 bytes, in front of the payload — while a copy from
	 * the endpoint's own buffers would have placed the payload only. */
	CHECK(is_header(rb + pad, &s, &r), "the frame's header is in the receive's prefix");
	CHECK(all(rb, pad, 0xaa), "the prefix's first %zu bytes untouched", pad);
	CHECK(all(rb + P + 1000, SLOT - P - 1000, 0xaa), "nothing past the message");
	ret = read_one(s.cq, &e);
	CHECK(ret == 1 && e.op_context == &sctx && (e.flags & FI_SEND), "send: %zd", ret);
	/* The send was posted from the application's buffer: core wrote its header there. */
	CHECK(is_header(sb + pad, &s, &r), "the frame's header is in the send's prefix");
	CHECK(matches(sb + P, 1000, 1), "the payload as the application left it");

	/* A receive shorter than the receive queue's buffers falls back to the endpoint's: the
	 * payload is copied in behind the prefix, which the provider does not touch. */
	memset(rb + SHORT_AT, 0xaa, P + 200);
	ret = fi_recv(r.ep, rb + SHORT_AT, P + 100, fi_mr_desc(r.mr), 0, &rctx);
	CHECK(ret == 0, "short fi_recv: %zd", ret);
	fill(sb + P, 100, 2);
	ret = fi_send(s.ep, sb, P + 100, fi_mr_desc(s.mr), to_r, &sctx);
	CHECK(ret == 0 && read_one(s.cq, &e) == 1, "fi_send: %zd", ret);
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.op_context == &rctx && e.len == P + 100, "short receive: %zd, len %zu",
	      ret, e.len);
	CHECK(matches(rb + SHORT_AT + P, 100, 2), "the short receive's payload");
	CHECK(all(rb + SHORT_AT, P, 0xaa), "copied: the short receive's prefix untouched");
	CHECK(all(rb + SHORT_AT + P + 100, 100, 0xaa), "nothing past the buffer");

	/* fi_cq(3), on a message longer than the buffer: FI_ETRUNC, "olen" the bytes that did
	 * not fit; `len` counts the prefix as for a success. */
	ret = fi_recv(r.ep, rb + SHORT_AT, P + 100, fi_mr_desc(r.mr), 0, &rctx);
	CHECK(ret == 0, "short fi_recv: %zd", ret);
	fill(sb + P, 300, 3);
	CHECK(fi_send(s.ep, sb, P + 300, fi_mr_desc(s.mr), to_r, &sctx) == 0, "fi_send");
	CHECK(read_one(s.cq, &e) == 1, "send completion");
	ret = read_one(r.cq, &e);
	CHECK(ret == -FI_EAVAIL, "truncated: %zd", ret);
	memset(&err, 0, sizeof(err));
	ret = fi_cq_readerr(r.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ETRUNC && err.olen == 200 && err.len == P + 100 &&
		      err.op_context == &rctx,
	      "fi_cq_readerr: %zd, err %d, olen %zu, len %zu", ret, err.err, err.olen, err.len);
	CHECK(matches(rb + SHORT_AT + P, 100, 3), "what fit was placed");

	/* A gather send: the prefix in front of the first buffer (fi_msg(3): "The prefix buffer
	 * must occur at the start of the data referenced by the buf parameter, or be referenced
	 * by the first IO vector."), copied into one of the endpoint's buffers. */
	{
		struct iovec iov[2] = { { sb, P + 10 }, { sb + 1024, 20 } };
		void *desc[2] = { fi_mr_desc(s.mr), fi_mr_desc(s.mr) };
		fill(sb + P, 10, 4);
		fill(sb + 1024, 20, 5);
		CHECK(fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &rctx) == 0, "fi_recv");
		ret = fi_sendv(s.ep, iov, desc, 2, to_r, &sctx);
		CHECK(ret == 0 && read_one(s.cq, &e) == 1, "fi_sendv: %zd", ret);
		ret = read_one(r.cq, &e);
		CHECK(ret == 1 && e.len == P + 30 && matches(rb + P, 10, 4) &&
			      matches(rb + P + 10, 20, 5),
		      "the gathered message: %zd, len %zu", ret, e.len);
	}

	/* fi_inject: fi_getinfo(3): "Prefix buffer space must be provided with all sends and
	 * receives, regardless of the size of the transfer or other transfer options." */
	CHECK(fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &rctx) == 0, "fi_recv");
	fill(sb + P, 16, 6);
	ret = fi_inject(s.ep, sb, P + 16, to_r);
	CHECK(ret == 0, "fi_inject: %zd", ret);
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.len == P + 16 && matches(rb + P, 16, 6), "injected: %zd, len %zu",
	      ret, e.len);

	/* "the size of the prefix buffer is not counted toward any message limits": a message
	 * of max_msg_size bytes goes, one more is -FI_EMSGSIZE. */
	CHECK(fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &rctx) == 0, "fi_recv");
	fill(sb + P, max, 7);
	ret = fi_send(s.ep, sb, P + max, fi_mr_desc(s.mr), to_r, &sctx);
	CHECK(ret == 0 && read_one(s.cq, &e) == 1, "a largest message: %zd", ret);
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.len == P + max && matches(rb + P, max, 7), "received: %zd", ret);
	ret = fi_send(s.ep, sb, P + max + 1, fi_mr_desc(s.mr), to_r, &sctx);
	CHECK(ret == -FI_EMSGSIZE, "one byte more: %zd", ret);

	/* Refused: a buffer shorter than the prefix. */
	ret = fi_recv(r.ep, rb, P - 1, fi_mr_desc(r.mr), 0, &rctx);
	CHECK(ret == -FI_EINVAL, "a receive shorter than the prefix: %zd", ret);
	ret = fi_send(s.ep, sb, P - 1, fi_mr_desc(s.mr), to_r, &sctx);
	CHECK(ret == -FI_EINVAL, "a send shorter than the prefix: %zd", ret);
	ret = fi_inject(s.ep, sb, P - 1, to_r);
	CHECK(ret == -FI_EINVAL, "an inject shorter than the prefix: %zd", ret);

	/* One buffer posted twice at once (fi_pingpong does): fi_msg(3) leaves a buffer to the
	 * provider until its operation completes, so the second post breaks the rule, and the
	 * NIC must not be given the same bytes twice. The first is lent; the second falls back
	 * to the endpoint's own buffers: its payload is copied in, its prefix left alone. */
	memset(rb, 0xaa, SLOT);
	CHECK(fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &ctx[0]) == 0, "fi_recv");
	ret = fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &ctx[1]);
	CHECK(ret == 0, "the same buffer again: %zd", ret);
	fill(sb + P, 500, 8);
	CHECK(fi_send(s.ep, sb, P + 500, fi_mr_desc(s.mr), to_r, &sctx) == 0, "fi_send");
	CHECK(read_one(s.cq, &e) == 1, "send completion");
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx[0] && e.len == P + 500 && matches(rb + P, 500, 8) &&
		      is_header(rb + pad, &s, &r),
	      "the first, in place: %zd, len %zu", ret, e.len);
	memset(rb, 0xaa, SLOT);
	fill(sb + P, 600, 9);
	CHECK(fi_send(s.ep, sb, P + 600, fi_mr_desc(s.mr), to_r, &sctx) == 0, "fi_send");
	CHECK(read_one(s.cq, &e) == 1, "send completion");
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx[1] && e.len == P + 600 && matches(rb + P, 600, 9),
	      "the second: %zd, len %zu", ret, e.len);
	CHECK(all(rb, P, 0xaa), "the second was copied: its prefix untouched");

	/* Cancelled receives, one lent and one falling back (again the same bytes): each
	 * reported once, FI_ECANCELED, and the bytes lent again afterwards. */
	CHECK(fi_recv(r.ep, rb, SLOT, fi_mr_desc(r.mr), 0, &ctx[0]) == 0, "fi_recv");
	CHECK(fi_recv(r.ep, rb + SLOT / 2, SLOT, fi_mr_desc(r.mr), 0, &ctx[1]) == 0, "fi_recv");
	for (int i = 0; i < 2; i++) {
		CHECK(fi_cancel(&r.ep->fid, &ctx[i]) == 0, "fi_cancel %d", i);
		ret = read_one(r.cq, &e);
		CHECK(ret == -FI_EAVAIL, "after cancel: %zd", ret);
		memset(&err, 0, sizeof(err));
		ret = fi_cq_readerr(r.cq, &err, 0);
		CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &ctx[i],
		      "fi_cq_readerr %d: %zd, err %d", i, ret, err.err);
	}
	ret = fi_cq_readerr(r.cq, &err, 0);
	CHECK(ret == -FI_EAGAIN, "each reported once: %zd", ret);
	memset(rb, 0xaa, SLOT);
	CHECK(fi_recv(r.ep, rb + SLOT / 2, SLOT, fi_mr_desc(r.mr), 0, &ctx[1]) == 0, "fi_recv");
	fill(sb + P, 50, 10);
	CHECK(fi_send(s.ep, sb, P + 50, fi_mr_desc(s.mr), to_r, &sctx) == 0, "fi_send");
	CHECK(read_one(s.cq, &e) == 1, "send completion");
	ret = read_one(r.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx[1] && matches(rb + SLOT / 2 + P, 50, 10) &&
		      is_header(rb + SLOT / 2 + pad, &s, &r),
	      "after the cancels the bytes are lent again: %zd", ret);

	/* fi_mr(3), fi_close: "Active or queued operations that reference a memory region being
	 * closed may fail or result in accesses to invalid memory.  Applications are responsible
	 * for ensuring that a MR is no longer needed prior to closing it." A registration lent to
	 * a posted receive closes at once; the receive is still there to cancel, reported once,
	 * and core's region goes with it — else the domain would stay busy (close_node checks
	 * that fi_close of the domain succeeds). */
	b2 = calloc(1, SLOT);
	ret = fi_mr_reg(r.domain, b2, SLOT, FI_RECV, 0, 0, 0, &mr2, NULL);
	CHECK(ret == 0, "fi_mr_reg: %zd", ret);
	CHECK(fi_recv(r.ep, b2, SLOT, fi_mr_desc(mr2), 0, &rctx) == 0, "fi_recv");
	ret = fi_close(&mr2->fid);
	CHECK(ret == 0, "fi_close of a registration lent to a receive: %zd", ret);
	CHECK(fi_cancel(&r.ep->fid, &rctx) == 0, "fi_cancel");
	ret = read_one(r.cq, &e);
	CHECK(ret == -FI_EAVAIL, "after cancel: %zd", ret);
	memset(&err, 0, sizeof(err));
	ret = fi_cq_readerr(r.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &rctx,
	      "fi_cq_readerr: %zd, err %d", ret, err.err);
	ret = fi_cq_readerr(r.cq, &err, 0);
	CHECK(ret == -FI_EAGAIN, "reported once: %zd", ret);
	free(b2);

	/* Many messages, SLOTS in flight at once each way, every byte checked; afterwards both
	 * registrations close (close_node): no lent buffer leaked. */
	for (round = 0; round < 50; round++) {
		int bad = 0;
		for (int i = 0; i < SLOTS; i++)
			bad |= fi_recv(r.ep, rb + i * SLOT, SLOT, fi_mr_desc(r.mr), 0, &ctx[i]) != 0;
		for (int i = 0; i < SLOTS; i++) {
			size_t len = 1 + (round * SLOTS + i) * 37 % max;
			fill(sb + i * SLOT + P, len, round * SLOTS + i);
			bad |= fi_send(s.ep, sb + i * SLOT, P + len, fi_mr_desc(s.mr), to_r,
				       &sctx) != 0;
		}
		for (int i = 0; i < SLOTS; i++) {
			size_t len = 1 + (round * SLOTS + i) * 37 % max;
			bad |= read_one(s.cq, &e) != 1;
			bad |= read_one(r.cq, &e) != 1;
			/* In posting order: the NIC's ring (the 82576 completes in order). */
			bad |= e.op_context != &ctx[i] || e.len != P + len ||
			       !matches(rb + i * SLOT + P, len, round * SLOTS + i) ||
			       !is_header(rb + i * SLOT + pad, &s, &r);
		}
		if (bad) {
			CHECK(!bad, "round %d", round);
			break;
		}
	}
	CHECK(round == 50, "%d messages sent and received in place", round * SLOTS);
	ret = fi_cq_read(r.cq, &e, 1);
	CHECK(ret == -FI_EAGAIN, "nothing more: %zd", ret);

	close_node(&r);
	close_node(&s);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
