/*
 * Scalable endpoints and shared transmit contexts through libfabric's C API on the ringfab
 * provider: node r (emu:igb,
 * whose 82576 steers frames to queues by address) opens a scalable endpoint with two
 * transmit and two named receive contexts, each with its own CQ; node s (emu:e1000e) has a
 * plain endpoint and an AV with rx_ctx_bits. What fi_endpoint(3) says of them: each receive
 * context named by fi_rx_addr gets its own messages on its own CQ, each transmit context
 * completes on its own CQ, the contexts share the scalable endpoint's address, and the
 * scalable endpoint cannot be closed while a context is open. Then two endpoints of node r
 * share one transmit context, each completing on its own CQ, and two share one receive
 * context, whose receives complete on the CQ of the endpoint each message was for. Prints
 * "N passed, N failed".
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
#define CTX 2
#define CTX_BITS 2

static struct fi_info *get_info(const char *domain, uint64_t caps, size_t ctx_cnt)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	int ret;
	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->ep_attr->tx_ctx_cnt = ctx_cnt;
	hints->ep_attr->rx_ctx_cnt = ctx_cnt;
	hints->caps = caps;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	CHECK(ret == 0, "fi_getinfo(%s, %zu contexts): %d", domain, ctx_cnt, ret);
	return ret ? NULL : info;
}

/* fi_rx_size_left, which libfabric 1.17 marks deprecated, on a shared receive context. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static ssize_t rx_size_left(struct fid_ep *ep)
{
	return fi_rx_size_left(ep);
}
#pragma GCC diagnostic pop

int main(void)
{
	struct fi_info *ri, *si, *hints;
	struct fid_fabric *rfab, *sfab;
	struct fid_domain *rdom, *sdom;
	struct fid_av *rav, *sav;
	struct fid_mr *rmr, *smr;
	struct fid_cq *txcq[CTX], *rxcq[CTX], *scq;
	struct fid_ep *sep, *tx[CTX], *rx[CTX], *ep, *extra;
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .rx_ctx_bits = CTX_BITS };
	struct fi_cq_data_entry e;
	char *rbuf = calloc(1, BUF), *sbuf = calloc(1, BUF);
	char rname[8], sname[8];
	size_t len;
	fi_addr_t to_r, to_s;
	int rctx[CTX], sctx, tctx[CTX];
	ssize_t ret;

	/* fi_getinfo(3): the domain says how many contexts a scalable endpoint can have; the
	 * 82574 steers no frames by address, so it offers one named receive context. */
	ri = get_info("emu:igb", FI_MSG | FI_NAMED_RX_CTX, CTX);
	si = get_info("emu:e1000e", FI_MSG, 0);
	if (!ri || !si) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	CHECK(ri->domain_attr->max_ep_tx_ctx >= CTX && ri->domain_attr->max_ep_rx_ctx >= CTX,
	      "igb: max_ep_tx_ctx %zu, max_ep_rx_ctx %zu", ri->domain_attr->max_ep_tx_ctx,
	      ri->domain_attr->max_ep_rx_ctx);
	CHECK(ri->ep_attr->tx_ctx_cnt == CTX && ri->ep_attr->rx_ctx_cnt == CTX &&
		      (ri->caps & FI_NAMED_RX_CTX),
	      "igb: ep_attr %zu/%zu contexts", ri->ep_attr->tx_ctx_cnt, ri->ep_attr->rx_ctx_cnt);
	CHECK(si->domain_attr->max_ep_rx_ctx == 1, "e1000e: max_ep_rx_ctx %zu",
	      si->domain_attr->max_ep_rx_ctx);
	hints = fi_dupinfo(si);
	hints->ep_attr->rx_ctx_cnt = 2;
	{
		struct fi_info *none = NULL;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &none);
		CHECK(ret == -FI_ENODATA, "two receive contexts on the 82574: %zd", ret);
		fi_freeinfo(none);
	}
	fi_freeinfo(hints);

	CHECK(fi_fabric(ri->fabric_attr, &rfab, NULL) == 0, "fi_fabric");
	CHECK(fi_fabric(si->fabric_attr, &sfab, NULL) == 0, "fi_fabric");
	CHECK(fi_domain(rfab, ri, &rdom, NULL) == 0, "fi_domain(igb)");
	CHECK(fi_domain(sfab, si, &sdom, NULL) == 0, "fi_domain(e1000e)");
	CHECK(fi_av_open(rdom, &av_attr, &rav, NULL) == 0, "fi_av_open");
	CHECK(fi_av_open(sdom, &av_attr, &sav, NULL) == 0, "fi_av_open(rx_ctx_bits)");
	CHECK(fi_mr_reg(rdom, rbuf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &rmr, NULL) == 0, "fi_mr_reg");
	CHECK(fi_mr_reg(sdom, sbuf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &smr, NULL) == 0, "fi_mr_reg");

	/* The scalable endpoint and its AV. */
	ret = fi_scalable_ep(rdom, ri, &sep, NULL);
	CHECK(ret == 0, "fi_scalable_ep: %zd", ret);
	if (ret) {
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	ret = fi_scalable_ep_bind(sep, &rav->fid, 0);
	CHECK(ret == 0, "fi_scalable_ep_bind(av): %zd", ret);
	CHECK(fi_enable(sep) == 0, "fi_enable(sep)");
	len = sizeof(rname);
	ret = fi_getname(&sep->fid, rname, &len);
	CHECK(ret == 0 && len == 8 && !memcmp(rname, ri->src_addr, 8), "fi_getname(sep): %zd",
	      ret);
	/* "Scalable endpoints cannot be used directly for communication operations, and
	 * require the application to explicitly create transmit and receive contexts" */
	ret = fi_send(sep, rbuf, 8, fi_mr_desc(rmr), 0, NULL);
	CHECK(ret == -FI_ENOSYS, "fi_send on the scalable endpoint: %zd", ret);

	/* "Each transmit context has its own completion queue." "Each receive context has its
	 * own completion queue." */
	for (int i = 0; i < CTX; i++) {
		ret = fi_tx_context(sep, i, NULL, &tx[i], &tctx[i]);
		CHECK(ret == 0, "fi_tx_context(%d): %zd", i, ret);
		ret = fi_rx_context(sep, i, NULL, &rx[i], &rctx[i]);
		CHECK(ret == 0, "fi_rx_context(%d): %zd", i, ret);
		CHECK(fi_cq_open(rdom, &cq_attr, &txcq[i], NULL) == 0, "fi_cq_open");
		CHECK(fi_cq_open(rdom, &cq_attr, &rxcq[i], NULL) == 0, "fi_cq_open");
		ret = fi_ep_bind(tx[i], &txcq[i]->fid, FI_TRANSMIT);
		CHECK(ret == 0, "fi_ep_bind(tx %d, cq): %zd", i, ret);
		ret = fi_ep_bind(rx[i], &rxcq[i]->fid, FI_RECV);
		CHECK(ret == 0, "fi_ep_bind(rx %d, cq): %zd", i, ret);
		CHECK(fi_enable(tx[i]) == 0, "fi_enable(tx %d)", i);
		CHECK(fi_enable(rx[i]) == 0, "fi_enable(rx %d)", i);
	}
	ret = fi_tx_context(sep, CTX, NULL, &extra, NULL);
	CHECK(ret == -FI_EINVAL, "a transmit context beyond tx_ctx_cnt: %zd", ret);
	ret = fi_rx_context(sep, 0, NULL, &extra, NULL);
	CHECK(ret == -FI_EBUSY, "receive context 0 twice: %zd", ret);
	ret = fi_ep_bind(rx[0], &rav->fid, 0);
	CHECK(ret == -FI_EINVAL, "an AV bound to a context: %zd", ret);
	/* fi_scalable_ep_bind: "Address vectors that are bound to scalable endpoints are
	 * implicitly bound to any transmit or receive contexts created using the scalable
	 * endpoint." — so one cannot be bound once contexts exist. */
	ret = fi_scalable_ep_bind(sep, &rav->fid, 0);
	CHECK(ret == -FI_EOPBADSTATE, "fi_scalable_ep_bind once contexts are open: %zd", ret);

	/* Node s: a plain endpoint. */
	CHECK(fi_cq_open(sdom, &cq_attr, &scq, NULL) == 0, "fi_cq_open");
	CHECK(fi_endpoint(sdom, si, &ep, NULL) == 0, "fi_endpoint");
	CHECK(fi_ep_bind(ep, &sav->fid, 0) == 0, "fi_ep_bind(av)");
	CHECK(fi_ep_bind(ep, &scq->fid, FI_TRANSMIT | FI_RECV) == 0, "fi_ep_bind(cq)");
	CHECK(fi_enable(ep) == 0, "fi_enable");
	len = sizeof(sname);
	CHECK(fi_getname(&ep->fid, sname, &len) == 0, "fi_getname");
	CHECK(fi_av_insert(sav, rname, 1, &to_r, 0, NULL) == 1, "fi_av_insert(sep)");
	CHECK(fi_av_insert(rav, sname, 1, &to_s, 0, NULL) == 1, "fi_av_insert(s)");

	/* "Support for named contexts must be indicated by setting the caps FI_NAMED_RX_CTX
	 * capability when the corresponding endpoint is created. Support for named receive
	 * contexts is coordinated with address vectors. See fi_av(3) and fi_rx_addr(3)." Each
	 * receive context gets what is sent to it, on its own CQ. */
	for (int i = 0; i < CTX; i++) {
		ret = fi_recv(rx[i], rbuf + i * 2048, 2048, fi_mr_desc(rmr), 0, &rctx[i]);
		CHECK(ret == 0, "fi_recv(rx %d): %zd", i, ret);
	}
	for (int i = CTX - 1; i >= 0; i--) {
		snprintf(sbuf + i * 64, 64, "to context %d", i);
		ret = fi_send(ep, sbuf + i * 64, 13, fi_mr_desc(smr), fi_rx_addr(to_r, i, CTX_BITS),
			      &sctx);
		CHECK(ret == 0, "fi_send to context %d: %zd", i, ret);
		ret = read_one(scq, &e);
		CHECK(ret == 1, "send completion: %zd", ret);
	}
	for (int i = 0; i < CTX; i++) {
		char want[16];
		snprintf(want, sizeof(want), "to context %d", i);
		ret = read_one(rxcq[i], &e);
		CHECK(ret == 1 && e.op_context == &rctx[i] && e.len == 13 &&
			      !strcmp(rbuf + i * 2048, want),
		      "receive context %d: %zd, '%.13s'", i, ret, rbuf + i * 2048);
	}

	/* Each transmit context sends, and completes on its own CQ only. */
	for (int i = 0; i < CTX; i++) {
		ret = fi_recv(ep, sbuf + 4096, 2048, fi_mr_desc(smr), 0, &sctx);
		CHECK(ret == 0, "fi_recv: %zd", ret);
		snprintf(rbuf + 4096, 64, "from context %d", i);
		ret = fi_send(tx[i], rbuf + 4096, 15, fi_mr_desc(rmr), to_s, &tctx[i]);
		CHECK(ret == 0, "fi_send(tx %d): %zd", i, ret);
		ret = read_one(txcq[i], &e);
		CHECK(ret == 1 && e.op_context == &tctx[i] && (e.flags & FI_SEND),
		      "transmit context %d's completion: %zd", i, ret);
		ret = fi_cq_read(txcq[1 - i], &e, 1);
		CHECK(ret == -FI_EAGAIN, "nothing on the other context's CQ: %zd", ret);
		ret = read_one(scq, &e);
		CHECK(ret == 1 && e.len == 15 && !strncmp(sbuf + 4096, rbuf + 4096, 15),
		      "received from transmit context %d: %zd", i, ret);
	}

	/* "When closing a scalable endpoint, there must be no opened transmit contexts, or
	 * receive contexts associated with the scalable endpoint. If resources are still
	 * associated with the scalable endpoint when attempting to close, the call will return
	 * -FI_EBUSY." */
	ret = fi_close(&sep->fid);
	CHECK(ret == -FI_EBUSY, "fi_close(sep) with contexts open: %zd", ret);
	for (int i = 0; i < CTX; i++) {
		CHECK(fi_close(&tx[i]->fid) == 0, "fi_close(tx %d)", i);
		CHECK(fi_close(&rx[i]->fid) == 0, "fi_close(rx %d)", i);
		CHECK(fi_close(&txcq[i]->fid) == 0, "fi_close(cq)");
		CHECK(fi_close(&rxcq[i]->fid) == 0, "fi_close(cq)");
	}
	CHECK(fi_close(&sep->fid) == 0, "fi_close(sep)");

	/* fi_endpoint(3), SHARED CONTEXTS: "Applications must allocate and bind shared
	 * transmit contexts to endpoints, but operations are posted directly to the endpoint.
	 * Shared transmit contexts are not associated with completion queues or counters.
	 * Completed operations are posted to the CQs bound to the endpoint." */
	{
		struct fid_stx *stx;
		struct fid_ep *sh[2];
		struct fid_cq *shcq[2];
		struct fi_info *info = fi_dupinfo(ri);
		int shctx[2];
		CHECK(ri->domain_attr->max_ep_stx_ctx >= 1, "max_ep_stx_ctx %zu",
		      ri->domain_attr->max_ep_stx_ctx);
		ret = fi_stx_context(rdom, NULL, &stx, NULL);
		CHECK(ret == 0, "fi_stx_context: %zd", ret);
		info->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
		info->ep_attr->rx_ctx_cnt = 1;
		for (int i = 0; i < 2; i++) {
			/* Receive context i of the NIC: src_addr is its MAC, then i (big-endian). */
			((unsigned char *)info->src_addr)[7] = i;
			ret = fi_endpoint(rdom, info, &sh[i], NULL);
			CHECK(ret == 0, "fi_endpoint(shared tx) %d: %zd", i, ret);
			CHECK(fi_cq_open(rdom, &cq_attr, &shcq[i], NULL) == 0, "fi_cq_open");
			CHECK(fi_ep_bind(sh[i], &rav->fid, 0) == 0, "fi_ep_bind(av)");
			ret = fi_ep_bind(sh[i], &stx->fid, 0);
			CHECK(ret == 0, "fi_ep_bind(stx) %d: %zd", i, ret);
			CHECK(fi_ep_bind(sh[i], &shcq[i]->fid, FI_TRANSMIT | FI_RECV) == 0,
			      "fi_ep_bind(cq)");
			ret = fi_enable(sh[i]);
			CHECK(ret == 0, "fi_enable(shared tx) %d: %zd", i, ret);
		}
		fi_freeinfo(info);
		for (int i = 0; i < 2; i++) {
			ret = fi_recv(ep, sbuf + 4096, 2048, fi_mr_desc(smr), 0, &sctx);
			CHECK(ret == 0, "fi_recv: %zd", ret);
			snprintf(rbuf + 4096, 64, "shared by %d", i);
			ret = fi_send(sh[i], rbuf + 4096, 12, fi_mr_desc(rmr), to_s, &shctx[i]);
			CHECK(ret == 0, "fi_send(shared tx %d): %zd", i, ret);
			ret = read_one(shcq[i], &e);
			CHECK(ret == 1 && e.op_context == &shctx[i] && (e.flags & FI_SEND),
			      "endpoint %d's own completion: %zd", i, ret);
			ret = fi_cq_read(shcq[1 - i], &e, 1);
			CHECK(ret == -FI_EAGAIN, "none on the other endpoint's CQ: %zd", ret);
			ret = read_one(scq, &e);
			CHECK(ret == 1 && !strncmp(sbuf + 4096, rbuf + 4096, 12),
			      "received from shared-context endpoint %d: %zd", i, ret);
		}
		ret = fi_close(&stx->fid);
		CHECK(ret == -FI_EBUSY, "fi_close(stx) with endpoints bound: %zd", ret);
		for (int i = 0; i < 2; i++) {
			CHECK(fi_close(&sh[i]->fid) == 0, "fi_close(ep)");
			CHECK(fi_close(&shcq[i]->fid) == 0, "fi_close(cq)");
		}
		CHECK(fi_close(&stx->fid) == 0, "fi_close(stx)");
	}

	/* fi_endpoint(3), SHARED CONTEXTS: "Users post receive buffers directly to a shared
	 * receive context, with the buffers usable by any endpoint bound to the shared receive
	 * context. Shared receive contexts are not associated with completion queues or
	 * counters. Completed receive operations are posted to the CQs bound to the
	 * endpoint." */
	{
		struct fid_ep *srx, *sh[2];
		struct fid_cq *shcq[2];
		struct fi_info *info = fi_dupinfo(ri);
		fi_addr_t to_sh[2];
		char shname[2][8];
		int rcv[3];
		CHECK(ri->domain_attr->max_ep_srx_ctx >= 1, "max_ep_srx_ctx %zu",
		      ri->domain_attr->max_ep_srx_ctx);
		ret = fi_srx_context(rdom, NULL, &srx, NULL);
		CHECK(ret == 0, "fi_srx_context: %zd", ret);
		info->ep_attr->tx_ctx_cnt = 1;
		info->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
		for (int i = 0; i < 2; i++) {
			((unsigned char *)info->src_addr)[7] = i;
			ret = fi_endpoint(rdom, info, &sh[i], NULL);
			CHECK(ret == 0, "fi_endpoint(shared rx) %d: %zd", i, ret);
			CHECK(fi_cq_open(rdom, &cq_attr, &shcq[i], NULL) == 0, "fi_cq_open");
			CHECK(fi_ep_bind(sh[i], &rav->fid, 0) == 0, "fi_ep_bind(av)");
			ret = fi_ep_bind(sh[i], &srx->fid, 0);
			CHECK(ret == 0, "fi_ep_bind(srx) %d: %zd", i, ret);
			CHECK(fi_ep_bind(sh[i], &shcq[i]->fid, FI_TRANSMIT | FI_RECV) == 0,
			      "fi_ep_bind(cq)");
			ret = fi_enable(sh[i]);
			CHECK(ret == 0, "fi_enable(shared rx) %d: %zd", i, ret);
			len = sizeof(shname[i]);
			CHECK(fi_getname(&sh[i]->fid, shname[i], &len) == 0, "fi_getname");
			CHECK(fi_av_insert(sav, shname[i], 1, &to_sh[i], 0, NULL) == 1,
			      "fi_av_insert");
		}
		fi_freeinfo(info);
		CHECK(rx_size_left(srx) > 0, "fi_rx_size_left(srx)");
		for (int i = 0; i < 2; i++) {
			ret = fi_recv(srx, rbuf + i * 2048, 2048, fi_mr_desc(rmr), 0, &rcv[i]);
			CHECK(ret == 0, "fi_recv(srx): %zd", ret);
		}
		/* The first message takes the first receive, whichever endpoint it is for. */
		for (int i = 1; i >= 0; i--) {
			snprintf(sbuf, 64, "for endpoint %d", i);
			ret = fi_send(ep, sbuf, 15, fi_mr_desc(smr), to_sh[i], &sctx);
			CHECK(ret == 0, "fi_send: %zd", ret);
			ret = read_one(scq, &e);
			CHECK(ret == 1, "send completion: %zd", ret);
			ret = read_one(shcq[i], &e);
			CHECK(ret == 1 && e.op_context == &rcv[1 - i] && e.len == 15 &&
				      !strncmp(e.buf, sbuf, 15),
			      "endpoint %d's CQ has the shared receive: %zd", i, ret);
			ret = fi_cq_read(shcq[1 - i], &e, 1);
			CHECK(ret == -FI_EAGAIN, "and the other endpoint's has none: %zd", ret);
		}
		ret = fi_recv(srx, rbuf, 2048, fi_mr_desc(rmr), 0, &rcv[2]);
		CHECK(ret == 0, "fi_recv(srx): %zd", ret);
		ret = fi_cancel(&srx->fid, &rcv[2]);
		CHECK(ret == 0, "fi_cancel(srx): %zd", ret);
		ret = fi_cancel(&srx->fid, &rcv[2]);
		CHECK(ret == -FI_ENOENT, "fi_cancel(srx) again: %zd", ret);
		ret = fi_close(&srx->fid);
		CHECK(ret == -FI_EBUSY, "fi_close(srx) with endpoints bound: %zd", ret);
		for (int i = 0; i < 2; i++) {
			CHECK(fi_close(&sh[i]->fid) == 0, "fi_close(ep)");
			CHECK(fi_close(&shcq[i]->fid) == 0, "fi_close(cq)");
		}
		CHECK(fi_close(&srx->fid) == 0, "fi_close(srx)");
	}
	CHECK(fi_close(&ep->fid) == 0, "fi_close(ep)");
	CHECK(fi_close(&scq->fid) == 0, "fi_close(cq)");
	CHECK(fi_close(&rmr->fid) == 0 && fi_close(&smr->fid) == 0, "fi_close(mr)");
	CHECK(fi_close(&rav->fid) == 0 && fi_close(&sav->fid) == 0, "fi_close(av)");
	CHECK(fi_close(&rdom->fid) == 0 && fi_close(&sdom->fid) == 0, "fi_close(domain)");
	CHECK(fi_close(&rfab->fid) == 0 && fi_close(&sfab->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(ri);
	fi_freeinfo(si);
	free(rbuf);
	free(sbuf);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
