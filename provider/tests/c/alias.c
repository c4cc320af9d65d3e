/*
 * Endpoint aliases (fi_ep_alias, i.e. fi_control(FI_ALIAS), fi_endpoint(3)) through
 * libfabric's C API on the ringfab provider. Node a (emu:e1000e) binds its CQ with
 * FI_SELECTIVE_COMPLETION, so its own sends and receives complete silently; aliases of its
 * endpoint with FI_COMPLETION among their default flags complete with entries. Node b
 * (emu:igb) is the peer, bound plainly. Also: the alias's flags through FI_GETOPSFLAG and
 * FI_SETOPSFLAG, an alias of an alias, the calls an alias shares with its endpoint, an alias
 * of an endpoint not yet enabled, fi_close's order, and what is refused. Prints "N passed, N
 * failed".
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

#define BUF 8192

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

/* Opens a node on `domain` with its CQ bound with `cq_flags`. */
static int open_node(struct node *n, const char *domain, uint64_t cq_flags)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
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
	ret = fi_endpoint(n->domain, n->info, &n->ep, n);
	CHECK(ret == 0, "fi_endpoint: %d", ret);
	if (ret)
		return ret;
	CHECK(fi_ep_bind(n->ep, &n->av->fid, 0) == 0, "fi_ep_bind(av)");
	ret = fi_ep_bind(n->ep, &n->cq->fid, cq_flags);
	CHECK(ret == 0, "fi_ep_bind(cq, %#llx): %d", (unsigned long long)cq_flags, ret);
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

/* Reads `want` entries into `e` (at most 8), retrying -FI_EAGAIN for up to 5 s; then whether
 * one more is there (`*extra`: what a last read returned, -FI_EAGAIN if none). */
static ssize_t read_n(struct fid_cq *cq, struct fi_cq_data_entry *e, int want, ssize_t *extra)
{
	double t0 = now_s();
	ssize_t got = 0, ret;
	while (got < want && now_s() - t0 < 5) {
		ret = fi_cq_read(cq, e + got, want - got);
		if (ret > 0)
			got += ret;
		else if (ret != -FI_EAGAIN)
			return ret;
	}
	if (extra) {
		struct fi_cq_data_entry more;
		/* A last look after the peer has had time to complete the rest. */
		t0 = now_s();
		do {
			*extra = fi_cq_read(cq, &more, 1);
		} while (*extra == -FI_EAGAIN && now_s() - t0 < 0.2);
	}
	return got;
}

/* The flags fi_control(FI_GETOPSFLAG) reports for direction `dir` of `fid`, or ~0. */
static uint64_t ops_flags(struct fid *fid, uint64_t dir)
{
	uint64_t flags = dir;
	return fi_control(fid, FI_GETOPSFLAG, &flags) == 0 ? flags : ~0ULL;
}

/* fi_tx_size_left, deprecated in libfabric 1.17 but still the call that says how many sends
 * an endpoint takes. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static ssize_t tx_size_left(struct fid_ep *ep)
{
	return fi_tx_size_left(ep);
}
#pragma GCC diagnostic pop

/* What fi_control(FI_ALIAS) refuses; nothing is made (the endpoint's close at the end shows
 * none was counted). */
static void bad_input(struct node *a)
{
	struct fid_ep *alias = NULL;
	struct fi_alias req = { .fid = NULL, .flags = FI_TRANSMIT };
	int ret;

	ret = fi_control(&a->ep->fid, FI_ALIAS, NULL);
	CHECK(ret == -FI_EINVAL, "FI_ALIAS without its argument: %d", ret);
	ret = fi_control(&a->ep->fid, FI_ALIAS, &req);
	CHECK(ret == -FI_EINVAL, "FI_ALIAS with no place for the fid: %d", ret);
	/* fi_endpoint(3): "The flags passed to fi_ep_alias must include FI_TRANSMIT or FI_RECV
	 * (not both) with other operational flags OR'ed in." */
	ret = fi_ep_alias(a->ep, &alias, FI_COMPLETION);
	CHECK(ret == -FI_EINVAL && !alias, "neither FI_TRANSMIT nor FI_RECV: %d", ret);
	ret = fi_ep_alias(a->ep, &alias, FI_TRANSMIT | FI_RECV | FI_COMPLETION);
	CHECK(ret == -FI_EINVAL && !alias, "both FI_TRANSMIT and FI_RECV: %d", ret);
	/* Op flags the direction does not take, as FI_SETOPSFLAG refuses them. */
	ret = fi_ep_alias(a->ep, &alias, FI_TRANSMIT | FI_MULTI_RECV);
	CHECK(ret == -FI_EBADFLAGS && !alias, "a receive flag for transmits: %d", ret);
	ret = fi_ep_alias(a->ep, &alias, FI_TRANSMIT | FI_FENCE);
	CHECK(ret == -FI_EBADFLAGS && !alias, "FI_FENCE on a DGRAM endpoint: %d", ret);
	ret = fi_ep_alias(a->ep, &alias, FI_TRANSMIT | (1ULL << 55));
	CHECK(ret == -FI_EBADFLAGS && !alias, "an unknown flag: %d", ret);
	ret = fi_ep_alias(a->ep, &alias, FI_RECV | FI_MULTI_RECV);
	CHECK(ret == -FI_EBADFLAGS && !alias, "FI_MULTI_RECV without the capability: %d", ret);
	/* Not an endpoint: a CQ makes no alias. */
	req.fid = (struct fid **)&alias;
	ret = fi_control(&a->cq->fid, FI_ALIAS, &req);
	CHECK(ret < 0 && !alias, "FI_ALIAS on a CQ: %d", ret);
}

int main(void)
{
	struct node a = { 0 }, b = { 0 };
	struct fid_ep *tx = NULL, *rx = NULL, *inherit = NULL;
	struct fi_cq_data_entry e[8];
	struct fi_cq_err_entry err;
	fi_addr_t peer, back;
	uint64_t flags;
	ssize_t ret, extra;
	int ctx[8];

	if (open_node(&a, "emu:e1000e", FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) ||
	    open_node(&b, "emu:igb", FI_TRANSMIT | FI_RECV)) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	ret = fi_av_insert(a.av, b.name, 1, &peer, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);
	ret = fi_av_insert(b.av, a.name, 1, &back, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);

	bad_input(&a);

	/* A transmit alias. fi_endpoint(3): "This will override the transmit or receive flags,
	 * respectively, for operations posted through the alias endpoint." and "By default, an
	 * alias EP inherits the same data transfer flags as the parent endpoint." */
	ret = fi_ep_alias(a.ep, &tx, FI_TRANSMIT | FI_COMPLETION);
	CHECK(ret == 0 && tx && tx != a.ep, "fi_ep_alias(FI_TRANSMIT | FI_COMPLETION): %zd", ret);
	if (!tx) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	flags = ops_flags(&tx->fid, FI_TRANSMIT);
	CHECK(flags == FI_COMPLETION, "the alias's transmit flags: %#llx",
	      (unsigned long long)flags);
	flags = ops_flags(&tx->fid, FI_RECV);
	CHECK(flags == ops_flags(&a.ep->fid, FI_RECV), "its receive flags, inherited: %#llx",
	      (unsigned long long)flags);
	flags = ops_flags(&a.ep->fid, FI_TRANSMIT);
	CHECK(flags == 0, "the endpoint's own transmit flags unchanged: %#llx",
	      (unsigned long long)flags);
	flags = FI_TRANSMIT | FI_RECV;
	ret = fi_control(&tx->fid, FI_GETOPSFLAG, &flags);
	CHECK(ret == -FI_EINVAL, "FI_GETOPSFLAG of both directions on an alias: %zd", ret);

	/* fi_endpoint(3), FI_SELECTIVE_COMPLETION: "data transfer operations will not generate
	 * entries for successful completions unless FI_COMPLETION is set as an operational flag
	 * for the given operation." The endpoint's send has no entry; the alias's fi_send,
	 * fi_sendv and fi_senddata do, its fi_sendmsg with flags 0 (the call's flags replace the
	 * defaults) does not, and fi_inject never has one. */
	for (int i = 0; i < 6; i++) {
		ret = fi_recv(b.ep, b.buf + i * 1024, 1024, fi_mr_desc(b.mr), 0, &ctx[i]);
		CHECK(ret == 0, "fi_recv: %zd", ret);
	}
	strcpy(a.buf, "aliased");
	{
		struct iovec iov = { .iov_base = a.buf, .iov_len = 8 };
		void *desc = fi_mr_desc(a.mr);
		struct fi_msg msg = { .msg_iov = &iov, .desc = &desc, .iov_count = 1,
				      .addr = peer, .context = &ctx[4] };
		ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, &ctx[0]);
		CHECK(ret == 0, "fi_send(ep): %zd", ret);
		ret = fi_send(tx, a.buf, 8, fi_mr_desc(a.mr), peer, &ctx[1]);
		CHECK(ret == 0, "fi_send(alias): %zd", ret);
		ret = fi_sendv(tx, &iov, &desc, 1, peer, &ctx[2]);
		CHECK(ret == 0, "fi_sendv(alias): %zd", ret);
		ret = fi_senddata(tx, a.buf, 8, fi_mr_desc(a.mr), 0xa11a5, peer, &ctx[3]);
		CHECK(ret == 0, "fi_senddata(alias): %zd", ret);
		ret = fi_sendmsg(tx, &msg, 0);
		CHECK(ret == 0, "fi_sendmsg(alias, 0): %zd", ret);
		ret = fi_inject(tx, a.buf, 8, peer);
		CHECK(ret == 0, "fi_inject(alias): %zd", ret);
	}
	ret = read_n(b.cq, e, 6, NULL);
	CHECK(ret == 6, "b received all six: %zd", ret);
	CHECK(ret == 6 && !strcmp(b.buf + 5 * 1024, "aliased"), "the payload");
	CHECK(ret == 6 && (e[3].flags & FI_REMOTE_CQ_DATA) && e[3].data == 0xa11a5,
	      "fi_senddata's data through the alias: %#llx", (unsigned long long)e[3].data);
	ret = read_n(a.cq, e, 3, &extra);
	CHECK(ret == 3 && e[0].op_context == &ctx[1] && e[1].op_context == &ctx[2] &&
		      e[2].op_context == &ctx[3] && (e[0].flags & FI_SEND),
	      "entries for the alias's fi_send, fi_sendv, fi_senddata only: %zd", ret);
	CHECK(extra == -FI_EAGAIN, "and none for the endpoint's send or fi_sendmsg: %zd", extra);

	/* An alias of an alias inherits its parent alias's flags: "By default, an alias EP
	 * inherits the same data transfer flags as the parent endpoint." */
	ret = fi_ep_alias(tx, &inherit, FI_RECV);
	CHECK(ret == 0 && inherit, "fi_ep_alias of an alias: %zd", ret);
	flags = inherit ? ops_flags(&inherit->fid, FI_TRANSMIT) : ~0ULL;
	CHECK(flags == FI_COMPLETION, "its transmit flags, the parent alias's: %#llx",
	      (unsigned long long)flags);

	/* fi_endpoint(3): "An application can use fi_control to modify the alias EP operational
	 * flags." The alias's sends are then silent; the endpoint's flags do not change. */
	flags = FI_TRANSMIT;
	ret = fi_control(&tx->fid, FI_SETOPSFLAG, &flags);
	CHECK(ret == 0 && ops_flags(&tx->fid, FI_TRANSMIT) == 0, "FI_SETOPSFLAG on the alias: %zd",
	      ret);
	flags = FI_TRANSMIT | FI_RECV | FI_COMPLETION;
	ret = fi_control(&tx->fid, FI_SETOPSFLAG, &flags);
	CHECK(ret == -FI_EINVAL, "FI_SETOPSFLAG of both directions: %zd", ret);
	flags = FI_TRANSMIT | FI_MULTI_RECV;
	ret = fi_control(&tx->fid, FI_SETOPSFLAG, &flags);
	CHECK(ret == -FI_EBADFLAGS && ops_flags(&tx->fid, FI_TRANSMIT) == 0,
	      "FI_SETOPSFLAG with a flag transmits do not take: %zd", ret);
	ret = fi_control(&tx->fid, FI_SETOPSFLAG, NULL);
	CHECK(ret == -FI_EINVAL, "FI_SETOPSFLAG without its argument: %zd", ret);
	flags = inherit ? ops_flags(&inherit->fid, FI_TRANSMIT) : ~0ULL;
	CHECK(flags == FI_COMPLETION, "the alias of the alias keeps its own: %#llx",
	      (unsigned long long)flags);
	ret = fi_recv(b.ep, b.buf, 1024, fi_mr_desc(b.mr), 0, &ctx[0]);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	ret = fi_send(tx, a.buf, 8, fi_mr_desc(a.mr), peer, &ctx[1]);
	CHECK(ret == 0, "fi_send(alias): %zd", ret);
	ret = read_n(b.cq, e, 1, NULL);
	CHECK(ret == 1, "b received it: %zd", ret);
	ret = read_n(a.cq, e, 0, &extra);
	CHECK(extra == -FI_EAGAIN, "no entry once the alias's flags are changed: %zd", extra);

	/* A receive alias: the endpoint's receive is silent, the alias's has its entry. */
	ret = fi_ep_alias(a.ep, &rx, FI_RECV | FI_COMPLETION);
	CHECK(ret == 0 && rx, "fi_ep_alias(FI_RECV | FI_COMPLETION): %zd", ret);
	if (rx) {
		struct iovec iov = { .iov_base = a.buf + 3072, .iov_len = 1024 };
		void *desc = fi_mr_desc(a.mr);
		flags = ops_flags(&rx->fid, FI_TRANSMIT);
		CHECK(flags == 0, "its transmit flags, the endpoint's: %#llx",
		      (unsigned long long)flags);
		memset(a.buf + 1024, 0, 3072);
		ret = fi_recv(a.ep, a.buf + 1024, 1024, fi_mr_desc(a.mr), 0, &ctx[5]);
		CHECK(ret == 0, "fi_recv(ep): %zd", ret);
		ret = fi_recv(rx, a.buf + 2048, 1024, fi_mr_desc(a.mr), 0, &ctx[6]);
		CHECK(ret == 0, "fi_recv(alias): %zd", ret);
		ret = fi_recvv(rx, &iov, &desc, 1, 0, &ctx[7]);
		CHECK(ret == 0, "fi_recvv(alias): %zd", ret);
		for (int i = 0; i < 3; i++) {
			sprintf(b.buf, "msg %d", i);
			ret = fi_send(b.ep, b.buf, 6, fi_mr_desc(b.mr), back, NULL);
			CHECK(ret == 0, "fi_send(b): %zd", ret);
			CHECK(read_n(b.cq, e, 1, NULL) == 1, "b's send completes");
		}
		ret = read_n(a.cq, e, 2, &extra);
		CHECK(ret == 2 && e[0].op_context == &ctx[6] && e[1].op_context == &ctx[7] &&
			      (e[0].flags & FI_RECV) && e[0].len == 6,
		      "entries for the alias's receives only: %zd", ret);
		CHECK(extra == -FI_EAGAIN, "none for the endpoint's: %zd", extra);
		CHECK(!strcmp(a.buf + 1024, "msg 0") && !strcmp(a.buf + 2048, "msg 1") &&
			      !strcmp(a.buf + 3072, "msg 2"),
		      "all three placed: '%s' '%s' '%s'", a.buf + 1024, a.buf + 2048,
		      a.buf + 3072);
	}

	/* "An alias EP differs from its parent endpoint only by its default data transfer
	 * flags.": its name, cancel and size calls are the endpoint's. */
	if (rx) {
		char name[8];
		size_t len = sizeof(name);
		ret = fi_getname(&rx->fid, name, &len);
		CHECK(ret == 0 && len == 8 && !memcmp(name, a.name, 8), "fi_getname(alias): %zd",
		      ret);
		{
			size_t v1 = 0, v2 = 1, l1 = sizeof(v1), l2 = sizeof(v2);
			ret = fi_getopt(&rx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v1, &l1);
			CHECK(ret == 0, "fi_getopt(alias): %zd", ret);
			fi_getopt(&a.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v2, &l2);
			CHECK(v1 == v2, "the endpoint's option: %zu, %zu", v1, v2);
		}
		ret = tx_size_left(tx);
		CHECK(ret > 0 && ret == tx_size_left(a.ep), "fi_tx_size_left(alias): %zd", ret);
		ret = fi_recv(a.ep, a.buf, 1024, fi_mr_desc(a.mr), 0, &ctx[0]);
		CHECK(ret == 0, "fi_recv(ep): %zd", ret);
		ret = fi_cancel(&rx->fid, &ctx[0]);
		CHECK(ret == 0, "fi_cancel through the alias: %zd", ret);
		ret = read_n(a.cq, e, 1, NULL);
		CHECK(ret == -FI_EAVAIL, "the cancelled receive's error: %zd", ret);
		memset(&err, 0, sizeof(err));
		ret = fi_cq_readerr(a.cq, &err, 0);
		CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &ctx[0],
		      "fi_cq_readerr: %zd, err %d", ret, err.err);
	}

	/* An alias of an endpoint not yet enabled: it sends nothing until the endpoint is
	 * enabled; fi_ep_bind and fi_enable through it bind and enable the endpoint. A second
	 * endpoint of b's, on receive context 1 (the last two bytes of a ringfab address; the
	 * 82576 steers that address to its own queue). */
	{
		struct fi_info *info = fi_dupinfo(b.info);
		struct fid_ep *ep2 = NULL, *early = NULL;
		struct fid_cq *cq2 = NULL;
		struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
		CHECK(info->src_addrlen == 8, "src_addrlen: %zu", info->src_addrlen);
		memcpy(info->src_addr, b.name, 6);
		((unsigned char *)info->src_addr)[6] = 0;
		((unsigned char *)info->src_addr)[7] = 1;
		ret = fi_endpoint(b.domain, info, &ep2, NULL);
		CHECK(ret == 0, "fi_endpoint: %zd", ret);
		fi_freeinfo(info);
		if (ep2) {
			ret = fi_ep_alias(ep2, &early, FI_TRANSMIT | FI_COMPLETION);
			CHECK(ret == 0 && early, "fi_ep_alias before fi_enable: %zd", ret);
		}
		if (early) {
			ret = fi_send(early, b.buf, 8, fi_mr_desc(b.mr), back, NULL);
			CHECK(ret == -FI_EOPBADSTATE, "fi_send before fi_enable: %zd", ret);
			CHECK(fi_cq_open(b.domain, &cq_attr, &cq2, NULL) == 0, "fi_cq_open");
			ret = fi_ep_bind(early, &b.av->fid, 0);
			CHECK(ret == 0, "fi_ep_bind(alias, av): %zd", ret);
			ret = fi_ep_bind(early, &cq2->fid, FI_TRANSMIT | FI_RECV);
			CHECK(ret == 0, "fi_ep_bind(alias, cq): %zd", ret);
			ret = fi_enable(early);
			CHECK(ret == 0, "fi_enable(alias): %zd", ret);
			strcpy(b.buf, "early");
			ret = fi_recv(a.ep, a.buf + 1024, 1024, fi_mr_desc(a.mr), 0, NULL);
			CHECK(ret == 0, "fi_recv(a): %zd", ret);
			ret = fi_send(early, b.buf, 6, fi_mr_desc(b.mr), back, &ctx[0]);
			CHECK(ret == 0, "fi_send once enabled through the alias: %zd", ret);
			ret = read_n(cq2, e, 1, NULL);
			CHECK(ret == 1 && e[0].op_context == &ctx[0], "its entry: %zd", ret);
			{
				double t0 = now_s();
				while (strcmp(a.buf + 1024, "early") && now_s() - t0 < 5)
					fi_cq_read(a.cq, e, 1);
				CHECK(!strcmp(a.buf + 1024, "early"), "a received it: '%s'",
				      a.buf + 1024);
			}
			ret = fi_close(&ep2->fid);
			CHECK(ret == -FI_EBUSY, "fi_close(ep) with an alias: %zd", ret);
			CHECK(fi_close(&early->fid) == 0, "fi_close(alias)");
		}
		if (ep2)
			CHECK(fi_close(&ep2->fid) == 0, "fi_close(ep) after its alias");
		if (cq2)
			CHECK(fi_close(&cq2->fid) == 0, "fi_close(cq)");
	}

	/* fi_endpoint(3): "All allocated aliases must be closed for the underlying endpoint to
	 * be released." The endpoint's close is -FI_EBUSY until the last one is closed, in any
	 * order. */
	ret = fi_close(&a.ep->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(ep) with three aliases: %zd", ret);
	CHECK(fi_close(&tx->fid) == 0, "fi_close(transmit alias)");
	ret = fi_close(&a.ep->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(ep) with two: %zd", ret);
	if (inherit) {
		flags = ops_flags(&inherit->fid, FI_TRANSMIT);
		CHECK(flags == FI_COMPLETION, "the alias of a closed alias still works: %#llx",
		      (unsigned long long)flags);
		CHECK(fi_close(&inherit->fid) == 0, "fi_close(alias of the alias)");
	}
	if (rx) {
		ret = fi_close(&a.ep->fid);
		CHECK(ret == -FI_EBUSY, "fi_close(ep) with one: %zd", ret);
		CHECK(fi_close(&rx->fid) == 0, "fi_close(receive alias)");
	}
	close_node(&a);
	close_node(&b);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
