/*
 * The ringfab provider's objects through libfabric's C API: two emulated NICs of this process
 * (FI_RINGFAB_NICS=emu:igb,emu:e1000e) on one wire hub (FI_RINGFAB_HUB), a domain, an event
 * queue, CQs, an AV, a registration and an endpoint on each; then what fi_cq(3),
 * fi_endpoint(3), fi_msg(3), fi_av(3), fi_mr(3) and fi_eq(3) say of them, including bad input.
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
#include <rdma/fi_tagged.h>
#include "check.h"

#define BUF 4096

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	char *buf;
	char name[8];
};

static struct fi_info *hints_for(const char *domain)
{
	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	return hints;
}

static int open_node(struct node *n, const char *domain)
{
	struct fi_info *hints = hints_for(domain);
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->name);
	int ret;

	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &n->info);
	fi_freeinfo(hints);
	CHECK(ret == 0, "fi_getinfo(%s): %d", domain, ret);
	if (ret)
		return ret;
	ret = fi_fabric(n->info->fabric_attr, &n->fabric, NULL);
	CHECK(ret == 0, "fi_fabric: %d", ret);
	ret = fi_eq_open(n->fabric, &eq_attr, &n->eq, NULL);
	CHECK(ret == 0, "fi_eq_open: %d", ret);
	ret = fi_domain(n->fabric, n->info, &n->domain, NULL);
	CHECK(ret == 0, "fi_domain(%s): %d", domain, ret);
	if (ret)
		return ret;
	ret = fi_cq_open(n->domain, &cq_attr, &n->cq, NULL);
	CHECK(ret == 0, "fi_cq_open: %d", ret);
	ret = fi_av_open(n->domain, &av_attr, &n->av, NULL);
	CHECK(ret == 0, "fi_av_open: %d", ret);
	n->buf = calloc(1, BUF);
	ret = fi_mr_reg(n->domain, n->buf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &n->mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	ret = fi_endpoint(n->domain, n->info, &n->ep, n);
	CHECK(ret == 0, "fi_endpoint: %d", ret);
	if (ret)
		return ret;
	ret = fi_ep_bind(n->ep, &n->eq->fid, 0);
	CHECK(ret == 0, "fi_ep_bind(eq): %d", ret);
	ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	CHECK(ret == 0, "fi_ep_bind(av): %d", ret);
	ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV);
	CHECK(ret == 0, "fi_ep_bind(cq): %d", ret);
	ret = fi_send(n->ep, n->buf, 1, fi_mr_desc(n->mr), 0, NULL);
	CHECK(ret == -FI_EOPBADSTATE, "fi_send before fi_enable: %d", ret);
	ret = fi_enable(n->ep);
	CHECK(ret == 0, "fi_enable: %d", ret);
	ret = fi_getname(&n->ep->fid, n->name, &len);
	CHECK(ret == 0 && len == 8, "fi_getname: %d, len %zu", ret, len);
	CHECK(!memcmp(n->name, n->info->src_addr, 8), "fi_getname is fi_getinfo's src_addr");
	return ret;
}

static void close_node(struct node *n)
{
	int ret;
	ret = fi_close(&n->domain->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(domain) with objects open: %d", ret);
	ret = fi_close(&n->cq->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(cq) while bound: %d", ret);
	CHECK(fi_close(&n->ep->fid) == 0, "fi_close(ep)");
	CHECK(fi_close(&n->mr->fid) == 0, "fi_close(mr)");
	CHECK(fi_close(&n->cq->fid) == 0, "fi_close(cq)");
	CHECK(fi_close(&n->av->fid) == 0, "fi_close(av)");
	CHECK(fi_close(&n->domain->fid) == 0, "fi_close(domain)");
	CHECK(fi_close(&n->eq->fid) == 0, "fi_close(eq)");
	CHECK(fi_close(&n->fabric->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(n->info);
	free(n->buf);
}

int main(void)
{
	struct node a = { 0 }, b = { 0 };
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	fi_addr_t peer, back;
	char addr[8], str[64];
	size_t len;
	ssize_t ret;
	int fd, ctx_r, ctx_s;

	if (open_node(&a, "emu:igb") || open_node(&b, "emu:e1000e")) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}

	/* fi_av(3): insert, lookup, straddr. */
	ret = fi_av_insert(a.av, b.name, 1, &peer, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);
	ret = fi_av_insert(b.av, a.name, 1, &back, 0, NULL);
	CHECK(ret == 1, "fi_av_insert: %zd", ret);
	len = sizeof(addr);
	ret = fi_av_lookup(a.av, peer, addr, &len);
	CHECK(ret == 0 && len == 8 && !memcmp(addr, b.name, 8), "fi_av_lookup: %zd", ret);
	len = sizeof(str);
	CHECK(fi_av_straddr(a.av, b.name, str, &len) == str && !strncmp(str, "ringfab://", 10),
	      "fi_av_straddr: %s", str);
	ret = fi_av_lookup(a.av, 42, addr, &len);
	CHECK(ret == -FI_ENOENT, "fi_av_lookup of nothing: %zd", ret);

	/* A send and a receive, the payload checked; the receive's len is the payload's. */
	ret = fi_recv(b.ep, b.buf, 2048, fi_mr_desc(b.mr), 0, &ctx_r);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	strcpy(a.buf + 100, "hello, ringfab");
	ret = fi_send(a.ep, a.buf + 100, 15, fi_mr_desc(a.mr), peer, &ctx_s);
	CHECK(ret == 0, "fi_send: %zd", ret);
	ret = read_one(a.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx_s && (e.flags & FI_SEND), "send completion: %zd",
	      ret);
	ret = read_one(b.cq, &e);
	CHECK(ret == 1 && e.op_context == &ctx_r && (e.flags & FI_RECV) && e.len == 15,
	      "receive completion: %zd, len %zu", ret, e.len);
	CHECK(!strcmp(b.buf, "hello, ringfab"), "payload: '%.15s'", b.buf);

	/* fi_inject and remote CQ data (fi_injectdata): no completion at the sender. */
	ret = fi_recv(b.ep, b.buf, 2048, fi_mr_desc(b.mr), 0, &ctx_r);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	ret = fi_injectdata(a.ep, "injected", 9, 0x1234, peer);
	CHECK(ret == 0, "fi_injectdata: %zd", ret);
	ret = read_one(b.cq, &e);
	CHECK(ret == 1 && e.len == 9 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x1234,
	      "injectdata completion: %zd, flags %#llx, data %#llx", ret,
	      (unsigned long long)e.flags, (unsigned long long)e.data);
	CHECK(!strcmp(b.buf, "injected"), "payload: '%.9s'", b.buf);
	ret = fi_cq_read(a.cq, &e, 1);
	CHECK(ret == -FI_EAGAIN, "no completion for an inject: %zd", ret);

	/* fi_cq(3): a message longer than the buffer is FI_ETRUNC with olen, after -FI_EAVAIL. */
	ret = fi_recv(b.ep, b.buf, 4, fi_mr_desc(b.mr), 0, &ctx_r);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	ret = fi_send(a.ep, a.buf + 100, 15, fi_mr_desc(a.mr), peer, &ctx_s);
	CHECK(ret == 0, "fi_send: %zd", ret);
	ret = read_one(a.cq, &e);
	CHECK(ret == 1, "send completion: %zd", ret);
	ret = read_one(b.cq, &e);
	CHECK(ret == -FI_EAVAIL, "truncated receive: fi_cq_read %zd", ret);
	memset(&err, 0, sizeof(err));
	ret = fi_cq_readerr(b.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ETRUNC && err.olen == 11 && err.len == 4 &&
		      err.op_context == &ctx_r,
	      "fi_cq_readerr: %zd, err %d, olen %zu, len %zu", ret, err.err, err.olen, err.len);
	CHECK(!memcmp(b.buf, "hell", 4), "truncated payload");

	/* fi_endpoint(3): a cancelled receive completes with FI_ECANCELED through readerr. */
	ret = fi_recv(b.ep, b.buf, 2048, fi_mr_desc(b.mr), 0, &ctx_r);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	ret = fi_cancel(&b.ep->fid, &ctx_r);
	CHECK(ret == 0, "fi_cancel: %zd", ret);
	ret = read_one(b.cq, &e);
	CHECK(ret == -FI_EAVAIL, "after cancel: fi_cq_read %zd", ret);
	ret = fi_cq_readerr(b.cq, &err, 0);
	CHECK(ret == 1 && err.err == FI_ECANCELED && err.op_context == &ctx_r,
	      "fi_cq_readerr: %zd, err %d", ret, err.err);
	ret = fi_cancel(&b.ep->fid, &ctx_r);
	CHECK(ret == -FI_ENOENT, "fi_cancel of nothing: %zd", ret);

	/* FI_WAIT_FD: FI_GETWAIT gives a descriptor that poll(2) sees readable. */
	ret = fi_control(&b.cq->fid, FI_GETWAIT, &fd);
	CHECK(ret == 0 && fd >= 0, "FI_GETWAIT: %zd, fd %d", ret, fd);
	ret = fi_recv(b.ep, b.buf, 2048, fi_mr_desc(b.mr), 0, &ctx_r);
	CHECK(ret == 0, "fi_recv: %zd", ret);
	ret = fi_inject(a.ep, "x", 1, peer);
	CHECK(ret == 0, "fi_inject: %zd", ret);
	ret = fi_cq_sread(b.cq, &e, 1, NULL, 5000);
	CHECK(ret == 1 && e.len == 1, "fi_cq_sread: %zd", ret);
	ret = fi_cq_sread(b.cq, &e, 1, NULL, 10);
	CHECK(ret == -FI_EAGAIN, "fi_cq_sread times out: %zd", ret);

	/* fi_getopt/fi_setopt, FI_GETOPSFLAG. */
	{
		size_t v = 0, vlen = sizeof(v);
		uint64_t flags = FI_TRANSMIT;
		ret = fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &(size_t){ 128 },
				sizeof(size_t));
		CHECK(ret == 0, "fi_setopt: %zd", ret);
		ret = fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &vlen);
		CHECK(ret == 0 && v == 128, "fi_getopt: %zd, %zu", ret, v);
		ret = fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, 999, &v, &vlen);
		CHECK(ret == -FI_ENOPROTOOPT, "fi_getopt of an unknown option: %zd", ret);
		ret = fi_control(&b.ep->fid, FI_GETOPSFLAG, &flags);
		CHECK(ret == 0, "FI_GETOPSFLAG: %zd", ret);
	}

	/* fi_eq(3): what the application writes, it reads; nothing else arrives. */
	{
		uint32_t event;
		struct fi_eq_entry in = { .context = &ctx_s, .data = 7 }, out;
		ret = fi_eq_read(a.eq, &event, &out, sizeof(out), 0);
		CHECK(ret == -FI_EAGAIN, "empty fi_eq_read: %zd", ret);
		ret = fi_eq_write(a.eq, FI_NOTIFY, &in, sizeof(in), 0);
		CHECK(ret == sizeof(in), "fi_eq_write: %zd", ret);
		ret = fi_eq_sread(a.eq, &event, &out, sizeof(out), 1000, 0);
		CHECK(ret == sizeof(in) && event == FI_NOTIFY && out.data == 7, "fi_eq_sread: %zd",
		      ret);
	}

	/* Bad input: each returns libfabric's error code. */
	ret = fi_send(a.ep, a.buf, 8, NULL, peer, NULL);
	CHECK(ret == -FI_EINVAL, "fi_send without a descriptor: %zd", ret);
	ret = fi_send(a.ep, str, 8, fi_mr_desc(a.mr), peer, NULL);
	CHECK(ret == -FI_EINVAL, "fi_send of an unregistered buffer: %zd", ret);
	ret = fi_send(a.ep, a.buf, 8, fi_mr_desc(b.mr), peer, NULL);
	CHECK(ret == -FI_EINVAL, "fi_send with another domain's descriptor: %zd", ret);
	ret = fi_send(a.ep, a.buf, 3000, fi_mr_desc(a.mr), peer, NULL);
	CHECK(ret == -FI_EMSGSIZE, "fi_send over max_msg_size: %zd", ret);
	ret = fi_inject(a.ep, a.buf, 65, peer);
	CHECK(ret == -FI_EMSGSIZE, "fi_inject over inject_size: %zd", ret);
	ret = fi_ep_bind(a.ep, &a.mr->fid, 0);
	CHECK(ret == -FI_EINVAL, "fi_ep_bind of a registration: %zd", ret);
	ret = fi_ep_bind(a.ep, &a.domain->fid, 0);
	CHECK(ret == -FI_EINVAL, "fi_ep_bind of a domain: %zd", ret);
	ret = fi_ep_bind(a.ep, &b.av->fid, 0);
	CHECK(ret == -FI_EINVAL, "fi_ep_bind of another domain's AV: %zd", ret);
	ret = fi_cq_readerr(a.cq, NULL, 0);
	CHECK(ret == -FI_EINVAL, "fi_cq_readerr into NULL: %zd", ret);
	ret = fi_av_insert(a.av, NULL, 1, &peer, 0, NULL);
	CHECK(ret == -FI_EINVAL, "fi_av_insert of NULL: %zd", ret);
	ret = fi_mr_reg(a.domain, NULL, 8, FI_SEND, 0, 0, 0, &a.mr, NULL);
	CHECK(ret == -FI_EINVAL, "fi_mr_reg of NULL: %zd", ret);
	ret = fi_tsend(a.ep, a.buf, 8, fi_mr_desc(a.mr), peer, 0, NULL);
	CHECK(ret == -FI_ENOSYS, "fi_tsend: %zd", ret);

	close_node(&a);
	close_node(&b);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
