/*
 * The ringfab provider's completion objects through libfabric's C API: counters (fi_cntr(3)),
 * selective completion (fi_endpoint(3)), the -FI_EAVAIL ordering of fi_cq(3), and a blocking
 * wait on a CQ's FI_GETWAIT descriptor with poll(2) after fi_trywait, and wait sets (fi_poll(3)).
 * Three emulated NICs of this process (FI_RINGFAB_NICS=emu:igb,emu:e1000e,emu:virtio-net) on
 * one wire hub: node a (e1000e) binds its CQ with FI_SELECTIVE_COMPLETION and counts its sends,
 * node b (igb) binds its CQ plainly and counts its receives, node c (virtio-net) has its CQ in
 * a wait set. Both a and b wait on their CQ's FI_GETWAIT descriptor with poll(2), each twice.
 * Prints "N passed, N failed".
 */
#include <poll.h>
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

#define BUF 4096

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_cntr *cntr;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	struct fid_wait *ws;
	char *buf;
	char name[8];
};

/* Opens a node on `domain`; its CQ bound with `cq_flags`, its counter with `cntr_flags`. With
 * `ws`, the CQ is opened in a wait set opened on the node's fabric, left in `*ws`. */
static int open_node(struct node *n, const char *domain, uint64_t cq_flags, uint64_t cntr_flags,
		     struct fid_wait **ws)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->name);
	int ret;

	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info);
	fi_freeinfo(hints);
	CHECK(ret == 0, "fi_getinfo(%s): %d", domain, ret);
	if (ret)
		return ret;
	CHECK(n->info->domain_attr->cntr_cnt > 0, "cntr_cnt: %zu", n->info->domain_attr->cntr_cnt);
	ret = fi_fabric(n->info->fabric_attr, &n->fabric, NULL);
	CHECK(ret == 0, "fi_fabric: %d", ret);
	if (ws) {
		struct fi_wait_attr wattr = { .wait_obj = FI_WAIT_UNSPEC };
		ret = fi_wait_open(n->fabric, &wattr, ws);
		CHECK(ret == 0, "fi_wait_open: %d", ret);
		if (ret)
			return ret;
		cq_attr.wait_obj = FI_WAIT_SET;
		cq_attr.wait_set = *ws;
		n->ws = *ws;
	}
	ret = fi_domain(n->fabric, n->info, &n->domain, NULL);
	CHECK(ret == 0, "fi_domain(%s): %d", domain, ret);
	if (ret)
		return ret;
	ret = fi_cq_open(n->domain, &cq_attr, &n->cq, NULL);
	CHECK(ret == 0, "fi_cq_open: %d", ret);
	ret = fi_cntr_open(n->domain, &cntr_attr, &n->cntr, NULL);
	CHECK(ret == 0, "fi_cntr_open: %d", ret);
	ret = fi_av_open(n->domain, &av_attr, &n->av, NULL);
	CHECK(ret == 0, "fi_av_open: %d", ret);
	n->buf = calloc(1, BUF);
	ret = fi_mr_reg(n->domain, n->buf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &n->mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	ret = fi_endpoint(n->domain, n->info, &n->ep, n);
	CHECK(ret == 0, "fi_endpoint: %d", ret);
	if (ret)
		return ret;
	ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	CHECK(ret == 0, "fi_ep_bind(av): %d", ret);
	ret = fi_ep_bind(n->ep, &n->cq->fid, cq_flags);
	CHECK(ret == 0, "fi_ep_bind(cq, %#llx): %d", (unsigned long long)cq_flags, ret);
	ret = fi_ep_bind(n->ep, &n->cntr->fid, cntr_flags);
	CHECK(ret == 0, "fi_ep_bind(cntr, %#llx): %d", (unsigned long long)cntr_flags, ret);
	ret = fi_enable(n->ep);
	CHECK(ret == 0, "fi_enable: %d", ret);
	ret = fi_getname(&n->ep->fid, n->name, &len);
	CHECK(ret == 0 && len == 8, "fi_getname: %d, len %zu", ret, len);
	return ret;
}

static void close_node(struct node *n)
{
	int ret = fi_close(&n->cntr->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(cntr) while bound: %d", ret);
	CHECK(fi_close(&n->ep->fid) == 0, "fi_close(ep)");
	CHECK(fi_close(&n->cntr->fid) == 0, "fi_close(cntr)");
	CHECK(fi_close(&n->mr->fid) == 0, "fi_close(mr)");
	CHECK(fi_close(&n->cq->fid) == 0, "fi_close(cq)");
	CHECK(fi_close(&n->av->fid) == 0, "fi_close(av)");
	CHECK(fi_close(&n->domain->fid) == 0, "fi_close(domain)");
	if (n->ws)
		CHECK(fi_close(&n->ws->fid) == 0, "fi_close(wait)");
	CHECK(fi_close(&n->fabric->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(n->info);
	free(n->buf);
}

/* fi_cntr(3) on a counter of its own: open, add, set, the error value, wait and its wait
 * objects, and what is refused. */
static void counter_calls(struct node *n)
{
	struct fid_cntr *c;
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	double t0;
	int ret;

	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	CHECK(ret == 0, "fi_cntr_open: %d", ret);
	/* "fi_cntr_add: This adds the user-specified value to the counter." */
	CHECK(fi_cntr_read(c) == 0 && fi_cntr_add(c, 5) == 0 && fi_cntr_read(c) == 5,
	      "fi_cntr_add: %llu", (unsigned long long)fi_cntr_read(c));
	/* "fi_cntr_set: This sets the counter to the specified value." */
	CHECK(fi_cntr_set(c, 2) == 0 && fi_cntr_read(c) == 2, "fi_cntr_set: %llu",
	      (unsigned long long)fi_cntr_read(c));
	/* "fi_cntr_adderr: This adds the user-specified value to the error value of the
	 * counter." and "fi_cntr_seterr: This sets the error value of the counter to the
	 * specified value." */
	CHECK(fi_cntr_adderr(c, 3) == 0 && fi_cntr_readerr(c) == 3, "fi_cntr_adderr: %llu",
	      (unsigned long long)fi_cntr_readerr(c));
	CHECK(fi_cntr_seterr(c, 1) == 0 && fi_cntr_readerr(c) == 1, "fi_cntr_seterr: %llu",
	      (unsigned long long)fi_cntr_readerr(c));
	/* "Upon successful return from this call, the counter will be greater than or equal to
	 * the input threshold value." */
	ret = fi_cntr_wait(c, 2, 1000);
	CHECK(ret == 0, "fi_cntr_wait of a reached threshold: %d", ret);
	/* "If the call returns due to timeout, -FI_ETIMEDOUT will be returned.  The error value
	 * associated with the counter remains unchanged." */
	t0 = now_s();
	ret = fi_cntr_wait(c, 3, 50);
	CHECK(ret == -FI_ETIMEDOUT && now_s() - t0 >= 0.045, "fi_cntr_wait times out: %d", ret);
	CHECK(fi_cntr_readerr(c) == 1, "error value after a timeout: %llu",
	      (unsigned long long)fi_cntr_readerr(c));
	CHECK(fi_close(&c->fid) == 0, "fi_close(cntr)");

	/* "It is invalid for applications to call this function if the counter has been
	 * configured with a wait object of FI_WAIT_NONE or FI_WAIT_SET." */
	attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	CHECK(ret == 0, "fi_cntr_open(FI_WAIT_NONE): %d", ret);
	ret = fi_cntr_wait(c, 1, 10);
	CHECK(ret == -FI_ENOSYS, "fi_cntr_wait on FI_WAIT_NONE: %d", ret);
	CHECK(fi_close(&c->fid) == 0, "fi_close(cntr)");
	/* "Indicates that the counter will wait without a wait object but instead yield on
	 * every wait.  Allows usage of fi_cntr_wait through a spin." */
	attr.wait_obj = FI_WAIT_YIELD;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	CHECK(ret == 0, "fi_cntr_open(FI_WAIT_YIELD): %d", ret);
	ret = fi_cntr_wait(c, 1, 10);
	CHECK(ret == -FI_ETIMEDOUT, "fi_cntr_wait on FI_WAIT_YIELD: %d", ret);
	CHECK(fi_close(&c->fid) == 0, "fi_close(cntr)");

	/* What the provider cannot do is refused, never half done. */
	attr.wait_obj = FI_WAIT_FD;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	CHECK(ret == -FI_ENOSYS, "fi_cntr_open(FI_WAIT_FD): %d", ret);
	attr.wait_obj = FI_WAIT_UNSPEC;
	attr.flags = 1;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	CHECK(ret == -FI_EBADFLAGS, "fi_cntr_open with flags: %d", ret);
	attr.flags = 0;
	ret = fi_cntr_open(n->domain, &attr, NULL, NULL);
	CHECK(ret == -FI_EINVAL, "fi_cntr_open into NULL: %d", ret);
	ret = fi_ep_bind(n->ep, &n->cntr->fid, FI_SEND);
	CHECK(ret == -FI_EOPBADSTATE, "fi_ep_bind(cntr) once enabled: %d", ret);
	ret = fi_ep_bind(n->ep, &n->cntr->fid, FI_READ);
	CHECK(ret == -FI_EOPNOTSUPP, "fi_ep_bind(cntr, FI_READ) on a DGRAM endpoint: %d", ret);
	ret = fi_ep_bind(n->ep, &n->cntr->fid, 1ULL << 40);
	CHECK(ret == -FI_EBADFLAGS, "fi_ep_bind(cntr) with an unknown flag: %d", ret);
}

/* fi_tx_size_left, which libfabric 1.17 marks deprecated: it is still the call that says how
 * many sends an endpoint takes, which is what the selective-completion check measures. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static ssize_t tx_size_left(struct fid_ep *ep)
{
	return fi_tx_size_left(ep);
}
#pragma GCC diagnostic pop

/* Reads up to `count` entries, retrying -FI_EAGAIN for up to 5 s. */
static ssize_t read_some(struct fid_cq *cq, struct fi_cq_data_entry *e, size_t count)
{
	double t0 = now_s();
	ssize_t ret;
	do {
		ret = fi_cq_read(cq, e, count);
	} while (ret == -FI_EAGAIN && now_s() - t0 < 5);
	return ret;
}

/* fi_poll(3)'s wait sets: node c's CQ opened in a wait set, a message from a. */
static void wait_set(struct node *a)
{
	struct fi_wait_attr wattr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_SET };
	struct fi_cntr_attr cntr_attr = { .wait_obj = FI_WAIT_SET };
	struct node c = { 0 };
	struct fid_wait *ws = NULL, *bad;
	struct fid_cq *other;
	struct fid_cntr *cntr;
	struct fi_cq_data_entry e;
	struct fid *fids[1];
	fi_addr_t peer;
	int ctx;
	double t0;
	int ret;

	/* fi_cq(3): "If specified, the wait_set field must reference an existing wait set
	 * object." */
	ret = fi_cq_open(a->domain, &cq_attr, &other, NULL);
	CHECK(ret == -FI_EINVAL, "fi_cq_open(FI_WAIT_SET) without a set: %d", ret);
	if (open_node(&c, "emu:virtio-net", FI_TRANSMIT | FI_RECV, FI_RECV, &ws))
		return;
	/* "The use of this field is reserved and must be set to 0 by the caller." */
	wattr.flags = 1;
	ret = fi_wait_open(c.fabric, &wattr, &bad);
	CHECK(ret == -FI_EBADFLAGS, "fi_wait_open with flags: %d", ret);
	wattr.flags = 0;
	wattr.wait_obj = FI_WAIT_FD;
	ret = fi_wait_open(c.fabric, &wattr, &bad);
	CHECK(ret == -FI_ENOSYS, "fi_wait_open(FI_WAIT_FD) on emulated NICs: %d", ret);
	cq_attr.wait_set = ws;
	ret = fi_cq_open(a->domain, &cq_attr, &other, NULL);
	CHECK(ret == -FI_EINVAL, "a CQ of another domain in the set: %d", ret);
	cntr_attr.wait_set = ws;
	ret = fi_cntr_open(c.domain, &cntr_attr, &cntr, NULL);
	CHECK(ret == -FI_ENOSYS, "fi_cntr_open(FI_WAIT_SET): %d", ret);
	ret = fi_av_insert(a->av, c.name, 1, &peer, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %d", ret);

	/* "fi_wait: Waits on a wait set until one or more of its underlying wait objects is
	 * signaled." Nothing: the timeout; a message: at once. */
	t0 = now_s();
	ret = fi_wait(ws, 50);
	CHECK(ret == -FI_ETIMEDOUT && now_s() - t0 >= 0.045, "fi_wait times out: %d", ret);
	fids[0] = &ws->fid;
	ret = fi_trywait(c.fabric, fids, 1);
	CHECK(ret == 0, "fi_trywait on a quiet set: %d", ret);
	ret = fi_recv(c.ep, c.buf, 1024, fi_mr_desc(c.mr), 0, &ctx);
	CHECK(ret == 0, "fi_recv: %d", ret);
	strcpy(a->buf, "waited");
	ret = fi_send(a->ep, a->buf, 7, fi_mr_desc(a->mr), peer, NULL);
	CHECK(ret == 0, "fi_send: %d", ret);
	t0 = now_s();
	ret = fi_wait(ws, 5000);
	CHECK(ret == 0 && now_s() - t0 < 4, "fi_wait wakes on a completion: %d", ret);
	/* fi_poll(3): "In the case the wait object to check belongs to a wait set, only the
	 * wait set itself needs to be passed into fi_trywait." */
	ret = fi_trywait(c.fabric, fids, 1);
	CHECK(ret == -FI_EAGAIN, "fi_trywait on a set with an entry queued: %d", ret);
	ret = fi_cq_read(c.cq, &e, 1);
	CHECK(ret == 1 && e.op_context == &ctx && !strcmp(c.buf, "waited"),
	      "the member's entry: %d", ret);

	/* "The wait set must not be bound to any other opened resources prior to being closed,
	 * otherwise the call will return -FI_EBUSY." */
	ret = fi_close(&ws->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(wait) with a member: %d", ret);
	close_node(&c);
}

/* fi_poll(3): "The application must call fi_trywait and obtain a return value of FI_SUCCESS
 * prior to blocking on a native wait object." Then poll(2) on FI_GETWAIT's descriptor of node
 * w's CQ returns when a completion arrives (a message node s injects to `to_w`, w's address
 * in s's AV), and fi_trywait says -FI_EAGAIN while it waits to be read:
 * "fi_trywait() will return FI_SUCCESS if it is safe to block on the wait object(s)
 * corresponding to the fabric descriptor(s), or -FI_EAGAIN if there are events queued on the
 * fabric descriptor or if blocking could hang the application." Twice: once read, fi_trywait
 * arms the descriptor again and the next completion wakes it too. The receives ask for their
 * entry (FI_COMPLETION), so that a node bound with FI_SELECTIVE_COMPLETION waits as well. */
static void fd_wait(struct node *w, struct node *s, fi_addr_t to_w, int *ctx)
{
	struct fid *fids[1] = { &w->cq->fid };
	struct fi_cq_data_entry e[8];
	struct iovec iov = { .iov_base = w->buf, .iov_len = 1024 };
	void *desc = fi_mr_desc(w->mr);
	struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
			      .addr = FI_ADDR_UNSPEC };
	struct pollfd p;
	ssize_t ret;
	int fd, armed = 0;

	ret = fi_control(&w->cq->fid, FI_GETWAIT, &fd);
	CHECK(ret == 0 && fd >= 0, "FI_GETWAIT: %zd", ret);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	/* Arming may wake the descriptor once for an interrupt cause the NIC latched earlier, and
	 * fi_trywait may say -FI_EAGAIN once for completions it took that have no entry (a's
	 * unselected sends); fi_poll(3)'s loop reads (nothing) and tries again. */
	for (int round = 0; round < 3 && !armed; round++) {
		ret = fi_trywait(w->fabric, fids, 1);
		CHECK(ret == 0 || ret == -FI_EAGAIN, "fi_trywait on an empty CQ: %zd", ret);
		armed = ret == 0 && poll(&p, 1, 0) == 0;
		if (!armed) {
			ret = fi_cq_read(w->cq, e, 8);
			CHECK(ret == -FI_EAGAIN, "a wake-up with nothing to read: %zd", ret);
		}
	}
	CHECK(armed, "fi_trywait armed the quiet CQ");
	for (int i = 0; i < 2; i++) {
		msg.context = &ctx[i];
		ret = fi_recvmsg(w->ep, &msg, FI_COMPLETION);
		CHECK(ret == 0, "fi_recvmsg(FI_COMPLETION): %zd", ret);
		ret = fi_trywait(w->fabric, fids, 1);
		CHECK(ret == 0, "fi_trywait on an empty CQ (completion %d): %zd", i, ret);
		ret = poll(&p, 1, 0);
		CHECK(ret == 0, "nothing to poll once armed (completion %d): %zd", i, ret);
		ret = fi_inject(s->ep, s->buf, 8, to_w);
		CHECK(ret == 0, "fi_inject: %zd", ret);
		ret = poll(&p, 1, 5000);
		CHECK(ret == 1 && (p.revents & POLLIN), "poll(2) wakes on completion %d: %zd", i,
		      ret);
		ret = fi_trywait(w->fabric, fids, 1);
		CHECK(ret == -FI_EAGAIN, "fi_trywait with a completion queued: %zd", ret);
		ret = fi_cq_read(w->cq, e, 8);
		CHECK(ret == 1 && e[0].op_context == &ctx[i], "completion %d: %zd", i, ret);
	}
	ret = fi_trywait(w->fabric, fids, 1);
	CHECK(ret == 0, "fi_trywait once read: %zd", ret);
}

int main(void)
{
	struct node a = { 0 }, b = { 0 };
	struct fi_cq_data_entry e[8];
	struct fi_cq_err_entry err;
	fi_addr_t peer, back;
	int ctx[4];
	ssize_t ret;

	if (open_node(&a, "emu:e1000e", FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION, FI_SEND,
		      NULL) ||
	    open_node(&b, "emu:igb", FI_TRANSMIT | FI_RECV, FI_RECV, NULL)) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	ret = fi_av_insert(a.av, b.name, 1, &peer, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);
	ret = fi_av_insert(b.av, a.name, 1, &back, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);

	counter_calls(&a);

	/* Sends and receives count: a's counter its sends (without CQ entries, which a's
	 * selective binding suppresses), b's its receives. */
	for (int i = 0; i < 3; i++) {
		ret = fi_recv(b.ep, b.buf + i * 1024, 1024, fi_mr_desc(b.mr), 0, &ctx[i]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
	}
	strcpy(a.buf, "counted");
	for (int i = 0; i < 3; i++) {
		ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, &ctx[i]);
		CHECK(ret == 0, "fi_send: %zd", ret);
	}
	ret = fi_cntr_wait(a.cntr, 3, 5000);
	CHECK(ret == 0 && fi_cntr_read(a.cntr) == 3, "send counter: %zd, %llu", ret,
	      (unsigned long long)fi_cntr_read(a.cntr));
	ret = fi_cntr_wait(b.cntr, 3, 5000);
	CHECK(ret == 0 && fi_cntr_read(b.cntr) == 3 && fi_cntr_readerr(b.cntr) == 0,
	      "receive counter: %zd, %llu", ret, (unsigned long long)fi_cntr_read(b.cntr));
	ret = fi_cq_read(b.cq, e, 8);
	CHECK(ret == 3 && e[0].op_context == &ctx[0] && e[2].op_context == &ctx[2] &&
		      !strcmp(b.buf + 2048, "counted"),
	      "receive entries: %zd", ret);
	/* fi_endpoint(3): "If FI_SELECTIVE_COMPLETION is specified, data transfer operations
	 * will not generate entries for successful completions unless FI_COMPLETION is set as an
	 * operational flag for the given operation." */
	ret = fi_cq_read(a.cq, e, 8);
	CHECK(ret == -FI_EAGAIN, "no entries for unselected sends: %zd", ret);

	/* fi_cq(3), -FI_EAVAIL ordering: "Attempting to read from a CQ while an item is in the
	 * error queue results in fi_cq_read failing with a return code of -FI_EAVAIL." A good
	 * entry, then an error (a cancelled receive), then a good one: read returns the first,
	 * then -FI_EAVAIL until fi_cq_readerr takes the error, then the third. And fi_cntr(3):
	 * "If an operation associated with the counter encounters an error, it will increment
	 * the error value associated with the counter." */
	for (int i = 0; i < 3; i++) {
		ret = fi_recv(b.ep, b.buf + i * 1024, 1024, fi_mr_desc(b.mr), 0, &ctx[i]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
	}
	ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, NULL);
	CHECK(ret == 0, "fi_send: %zd", ret);
	ret = fi_cntr_wait(b.cntr, 4, 5000);
	CHECK(ret == 0, "first receive counted: %zd", ret);
	ret = fi_cancel(&b.ep->fid, &ctx[1]);
	CHECK(ret == 0, "fi_cancel: %zd", ret);
	/* Whether a frame may still land in the cancelled receive's ring slot (and be dropped)
	 * is the NIC's business: send until the third receive has one. */
	for (int tries = 0; tries < 3 && fi_cntr_read(b.cntr) < 5; tries++) {
		ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, NULL);
		CHECK(ret == 0, "fi_send: %zd", ret);
		ret = fi_cntr_wait(b.cntr, 5, 1000);
	}
	CHECK(ret == 0 && fi_cntr_readerr(b.cntr) == 1, "counts: %zd, %llu errors", ret,
	      (unsigned long long)fi_cntr_readerr(b.cntr));
	ret = fi_cq_read(b.cq, e, 8);
	CHECK(ret == 1 && e[0].op_context == &ctx[0], "the good entry first: %zd", ret);
	ret = fi_cq_read(b.cq, e, 8);
	CHECK(ret == -FI_EAVAIL, "then -FI_EAVAIL: %zd", ret);
	ret = fi_cq_read(b.cq, e, 8);
	CHECK(ret == -FI_EAVAIL, "-FI_EAVAIL until readerr: %zd", ret);
	memset(&err, 0, sizeof(err));
	ret = fi_cq_readerr(b.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &ctx[1],
	      "fi_cq_readerr: %zd, err %d", ret, err.err);
	ret = fi_cq_read(b.cq, e, 8);
	CHECK(ret == 1 && e[0].op_context == &ctx[2], "then the read continues: %zd", ret);

	/* A truncated receive is an error to the counter too (fi_cntr(3), as above): the
	 * provider finds it, not core. */
	{
		double t0 = now_s();
		ret = fi_recv(b.ep, b.buf, 4, fi_mr_desc(b.mr), 0, &ctx[0]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
		ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, NULL);
		CHECK(ret == 0, "fi_send: %zd", ret);
		while (fi_cntr_readerr(b.cntr) < 2 && now_s() - t0 < 5)
			;
		CHECK(fi_cntr_readerr(b.cntr) == 2 && fi_cntr_read(b.cntr) == 5,
		      "truncation counted as an error: %llu errors, %llu",
		      (unsigned long long)fi_cntr_readerr(b.cntr),
		      (unsigned long long)fi_cntr_read(b.cntr));
		ret = fi_cq_read(b.cq, e, 8);
		CHECK(ret == -FI_EAVAIL, "truncated: %zd", ret);
		ret = fi_cq_readerr(b.cq, &err, 0);
		CHECK(ret == 1 && err.err == FI_ETRUNC && err.olen == 4, "fi_cq_readerr: %zd, %d",
		      ret, err.err);
	}

	/* The poll(2) wait on FI_GETWAIT's descriptor, on the 82576 (b, a sending) and on the
	 * 82574 (a, b sending). Then fi_trywait refuses what is not a CQ, counter or wait set. */
	fd_wait(&b, &a, peer, ctx);
	fd_wait(&a, &b, back, ctx);
	{
		struct fid *fids[1] = { &b.domain->fid };
		ret = fi_trywait(b.fabric, fids, 1);
		CHECK(ret == -FI_EINVAL, "fi_trywait of a domain: %zd", ret);
	}

	/* Selective completion over many sends: a's endpoint gets its buffers back without an
	 * entry. fi_endpoint(3): "The fi_tx_size_left call returns a lower bound on the number
	 * of transmit operations that may be posted to the given endpoint without that
	 * operation returning -FI_EAGAIN." */
	{
		ssize_t left = tx_size_left(a.ep), entries = 0;
		int sent = 0;
		uint64_t before = fi_cntr_read(a.cntr);
		double t0 = now_s();
		CHECK(left > 0, "fi_tx_size_left: %zd", left);
		while (sent < 4 * left + 10 && now_s() - t0 < 20) {
			ret = fi_send(a.ep, a.buf, 64, fi_mr_desc(a.mr), peer, NULL);
			if (ret == 0) {
				sent++;
				continue;
			}
			CHECK(ret == -FI_EAGAIN, "fi_send: %zd", ret);
			if (ret != -FI_EAGAIN)
				break;
			ret = fi_cq_read(a.cq, e, 8);
			if (ret != -FI_EAGAIN)
				entries++;
		}
		CHECK(sent == 4 * left + 10, "unselected sends: %d of %zd", sent, 4 * left + 10);
		CHECK(entries == 0, "entries for unselected sends: %zd", entries);
		ret = fi_cntr_wait(a.cntr, before + sent, 5000);
		CHECK(ret == 0, "all counted: %zd", ret);
		ret = tx_size_left(a.ep);
		CHECK(ret == left, "fi_tx_size_left after the sends: %zd, was %zd", ret, left);
	}

	/* FI_COMPLETION selects one: exactly its entry. fi_inject never has one. */
	{
		struct iovec iov = { .iov_base = a.buf, .iov_len = 8 };
		void *desc = fi_mr_desc(a.mr);
		struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				      .addr = peer, .context = &ctx[0] };
		ret = fi_inject(a.ep, a.buf, 8, peer);
		CHECK(ret == 0, "fi_inject: %zd", ret);
		ret = fi_sendmsg(a.ep, &msg, FI_COMPLETION);
		CHECK(ret == 0, "fi_sendmsg(FI_COMPLETION): %zd", ret);
		ret = read_some(a.cq, e, 8);
		CHECK(ret == 1 && e[0].op_context == &ctx[0] && (e[0].flags & FI_SEND),
		      "the selected send's entry: %zd", ret);
		ret = fi_cq_read(a.cq, e, 8);
		CHECK(ret == -FI_EAGAIN, "and no other: %zd", ret);
	}

	/* An unselected receive places its data without an entry; one that fails is still
	 * reported. fi_endpoint(3): "An endpoint must be bound with CQs capable of reporting
	 * completions for any asynchronous operation initiated on the endpoint. This is true
	 * even for endpoints which are configured to suppress successful completions, in order
	 * that operations that complete in error may be reported to the user." */
	{
		double t0 = now_s();
		memset(a.buf + 1024, 0, 16);
		ret = fi_recv(a.ep, a.buf + 1024, 1024, fi_mr_desc(a.mr), 0, &ctx[1]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
		strcpy(b.buf, "silent");
		ret = fi_send(b.ep, b.buf, 7, fi_mr_desc(b.mr), back, &ctx[2]);
		CHECK(ret == 0, "fi_send: %zd", ret);
		do {
			ret = fi_cq_read(a.cq, e, 8);
		} while (ret == -FI_EAGAIN && strcmp(a.buf + 1024, "silent") && now_s() - t0 < 5);
		CHECK(ret == -FI_EAGAIN && !strcmp(a.buf + 1024, "silent"),
		      "unselected receive: %zd, '%.7s'", ret, a.buf + 1024);
		ret = read_some(b.cq, e, 8);
		CHECK(ret == 1 && e[0].op_context == &ctx[2], "b's send entry: %zd", ret);
		ret = fi_recv(a.ep, a.buf + 1024, 1024, fi_mr_desc(a.mr), 0, &ctx[3]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
		ret = fi_cancel(&a.ep->fid, &ctx[3]);
		CHECK(ret == 0, "fi_cancel: %zd", ret);
		ret = read_some(a.cq, e, 8);
		CHECK(ret == -FI_EAVAIL, "an unselected receive's error: %zd", ret);
		ret = fi_cq_readerr(a.cq, &err, 0);
		CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &ctx[3],
		      "fi_cq_readerr: %zd, err %d", ret, err.err);
	}

	wait_set(&a);

	close_node(&a);
	close_node(&b);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
