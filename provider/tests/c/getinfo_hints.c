/*
 * fi_getinfo through libfabric's C API with hints, against the ringfab provider
 * (FI_PROVIDER_PATH names the directory of libringfab-fi.so). Checks what fi_getinfo(3) says
 * a provider does with hints, and prints "N passed, N failed".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include "check.h"

/* Hints for ringfab's DGRAM endpoints, as an application that registers its buffers. */
static struct fi_info *dgram_hints(void)
{
	struct fi_info *hints = fi_allocinfo();
	if (!hints)
		return NULL;
	hints->fabric_attr->prov_name = strdup("ringfab");
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	return hints;
}

static int count(struct fi_info *info)
{
	int n = 0;
	for (; info; info = info->next)
		n++;
	return n;
}

int main(void)
{
	struct fi_info *hints, *info, *cur;
	int ret;

	/* The three emulated NICs by default: one fi_info each, as truthful as core says. */
	hints = dgram_hints();
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0, "fi_getinfo: %d (%s)", ret, fi_strerror(-ret));
	if (ret == 0) {
		CHECK(count(info) == 3, "%d fi_info", count(info));
		for (cur = info; cur; cur = cur->next) {
			CHECK(!strcmp(cur->fabric_attr->prov_name, "ringfab"), "%s",
			      cur->fabric_attr->prov_name);
			CHECK(!strcmp(cur->fabric_attr->name, "ringfab"), "%s", cur->fabric_attr->name);
			CHECK(cur->ep_attr->type == FI_EP_DGRAM, "type %d", cur->ep_attr->type);
			CHECK((cur->caps & (FI_MSG | FI_SEND | FI_RECV)) == (FI_MSG | FI_SEND | FI_RECV),
			      "caps %#llx", (unsigned long long)cur->caps);
			CHECK(!(cur->caps & (FI_TAGGED | FI_RMA | FI_MULTI_RECV)), "caps %#llx",
			      (unsigned long long)cur->caps);
			CHECK(cur->mode == 0, "mode %#llx", (unsigned long long)cur->mode);
			CHECK(cur->domain_attr->mr_mode == FI_MR_LOCAL, "mr_mode %#x",
			      cur->domain_attr->mr_mode);
			CHECK(cur->addr_format == FI_FORMAT_UNSPEC, "addr_format %u", cur->addr_format);
			CHECK(cur->src_addrlen == 8 && cur->src_addr, "src_addrlen %zu", cur->src_addrlen);
			CHECK(cur->tx_attr->iov_limit == 1, "tx iov_limit %zu", cur->tx_attr->iov_limit);
			CHECK(cur->rx_attr->iov_limit == 1, "rx iov_limit %zu", cur->rx_attr->iov_limit);
			CHECK(cur->tx_attr->inject_size == 64, "inject_size %zu",
			      cur->tx_attr->inject_size);
			CHECK(cur->tx_attr->size > 0 && cur->rx_attr->size > 0, "sizes");
			CHECK(cur->ep_attr->max_msg_size > 1000, "max_msg_size %zu",
			      cur->ep_attr->max_msg_size);
		}
		CHECK(!strcmp(info->domain_attr->name, "emu:igb"), "%s", info->domain_attr->name);
		fi_freeinfo(info);
	}

	/* A domain by name. */
	hints->domain_attr->name = strdup("emu:virtio-net");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0 && count(info) == 1, "ret %d", ret);
	if (ret == 0) {
		/* virtio completes by id: no completion order is promised. */
		CHECK(info->tx_attr->comp_order == FI_ORDER_NONE, "comp_order %#llx",
		      (unsigned long long)info->tx_attr->comp_order);
		fi_freeinfo(info);
	}
	free(hints->domain_attr->name);
	hints->domain_attr->name = strdup("emu:igb");

	/* Secondary capabilities asked for are given, and change what is measured. */
	hints->caps = FI_MSG | FI_SOURCE | FI_SOURCE_ERR;
	hints->tx_attr->iov_limit = 2;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0, "source hints: %d", ret);
	if (ret == 0) {
		CHECK((info->caps & (FI_SOURCE | FI_SOURCE_ERR)) == (FI_SOURCE | FI_SOURCE_ERR),
		      "caps %#llx", (unsigned long long)info->caps);
		CHECK(info->rx_attr->caps & FI_SOURCE, "rx caps");
		CHECK(info->tx_attr->iov_limit == 2, "tx iov_limit %zu", info->tx_attr->iov_limit);
		fi_freeinfo(info);
	}
	/* fi_getinfo(3) gives FI_MULTI_RECV when asked for (multi_recv.c uses it). */
	hints->caps = FI_MSG | FI_MULTI_RECV;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0, "multi-recv hints: %d", ret);
	if (ret == 0) {
		CHECK((info->caps & FI_MULTI_RECV) && (info->rx_attr->caps & FI_MULTI_RECV),
		      "caps %#llx", (unsigned long long)info->caps);
		fi_freeinfo(info);
	}
	hints->caps = FI_MSG;
	hints->tx_attr->iov_limit = 0;

	/* What ringfab cannot give: no match (FI_ENODATA), never a crash. */
	hints->caps = FI_MSG | FI_TAGGED;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "FI_TAGGED: %d", ret);
	hints->caps = FI_MSG;

	hints->ep_attr->type = FI_EP_MSG;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "FI_EP_MSG: %d", ret);
	hints->ep_attr->type = FI_EP_DGRAM;

	hints->domain_attr->mr_mode = 0;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "mr_mode 0: %d", ret);
	hints->domain_attr->mr_mode = FI_MR_LOCAL;

	hints->rx_attr->size = 1 << 20;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "rx size: %d", ret);
	hints->rx_attr->size = 0;

	hints->addr_format = FI_SOCKADDR_IN;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA, "FI_SOCKADDR_IN: %d", ret);
	hints->addr_format = FI_FORMAT_UNSPEC;

	/* src_addr picks the NIC that has it. */
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret == 0) {
		struct fi_info *by_addr;
		free(hints->domain_attr->name);
		hints->domain_attr->name = NULL;
		hints->src_addr = malloc(info->src_addrlen);
		memcpy(hints->src_addr, info->src_addr, info->src_addrlen);
		hints->src_addrlen = info->src_addrlen;
		ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &by_addr);
		CHECK(ret == 0 && count(by_addr) == 1, "src_addr: %d", ret);
		if (ret == 0) {
			CHECK(!strcmp(by_addr->domain_attr->name, "emu:igb"), "%s",
			      by_addr->domain_attr->name);
			fi_freeinfo(by_addr);
		}
		fi_freeinfo(info);
	}

	/* A fabric and a domain open and close (the objects on a domain: dgram_objects.c). */
	free(hints->src_addr);
	hints->src_addr = NULL;
	hints->src_addrlen = 0;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret == 0) {
		struct fid_fabric *fabric;
		struct fid_domain *domain;
		ret = fi_fabric(info->fabric_attr, &fabric, NULL);
		CHECK(ret == 0, "fi_fabric: %d", ret);
		if (ret == 0) {
			ret = fi_domain(fabric, info, &domain, NULL);
			CHECK(ret == 0, "fi_domain: %d", ret);
			if (ret == 0) {
				ret = fi_close(&domain->fid);
				CHECK(ret == 0, "fi_close(domain): %d", ret);
			}
			ret = fi_close(&fabric->fid);
			CHECK(ret == 0, "fi_close(fabric): %d", ret);
		}
		fi_freeinfo(info);
	}

	fi_freeinfo(hints);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
